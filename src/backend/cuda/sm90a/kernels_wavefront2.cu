// The wavefront kernels' second design, forward (issue 33; docs/cuda.md, "The second design"). Built
// for sm_90a only: it runs wgmma and bulk copies multicast to a cluster.
//
// A launch runs L layers (D directions) over all T steps as clusters of C CTAs, one cluster per
// "row", all resident at once:
//  - a recurrent row (layer l, direction d): CTA r owns units r*U .. r*U + U - 1, i.e. 4U weight
//    columns of the recurrent kernel, held in shared memory for all steps. Step s waits for h_{t-1}
//    (multicast into its shared memory by the row's CTAs), runs [64 x Kp] x [Kp x 4U] on wgmma into
//    accumulators that already hold the step's input side, applies the cell to them in registers,
//    writes h_t to global memory (the outputs, and a copy in wgmma's operand layout) and multicasts
//    its slice of that copy to the row's CTAs: the row's next step starts when all C slices are in.
//  - an input row (layer l >= 1 of the launch): the same CTAs over the layer's kernel, multiplying
//    the layer below's h_t (multicast from that row's copy when its CTA r says step t is done) and
//    handing the sums to the recurrent row's CTA r through a ring of kRing2 steps in global memory.
//    So layer l's input side of step t runs while layer l's recurrence is still on step t - 1.
//  - the launch's first layer gets its input side from one cuBLAS GEMM over all steps (xproj).
// Column n of a CTA is unit 4(n / 16) + (n % 8) / 2, gate 2((n / 8) % 2) + n % 2, so the m64nNk16
// accumulator fragment of a thread holds all four gates of its units (rows 16w + lane/4 and + 8).
// LSTM gates i, f, g, o; GRU (reset_after) z, r, the candidate's recurrent side (h U_h + b_h) and its
// input side (x W_h + b_xh). Padded steps (t >= lens[b]) output 0 and keep the state, as the first
// design (kernels_wavefront.cu), whose backward reads what this forward saves.
// A GRU with reset_after: false multiplies r * h_{t-1} by U_h, and r needs h_{t-1} first: its
// recurrent row's step multiplies h_{t-1} by the z and r columns, shares r * h_{t-1} through the same
// operand buffer and barrier as h (one more exchange a step), then multiplies it by the candidate's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "backend/cuda/api_errors.h"
#include "backend/cuda/sm90a/launch.cuh"
#include "backend/cuda/sm90a/sm90.cuh"
#include "backend/cuda/wavefront_kernels.h"

namespace rnntrain::cuda::wf {

namespace {

using namespace sm90;

// RNNTRAIN_WF2_PHASES (a build for profiling only): thread 0 of every CTA adds up the SM cycles of
// each phase of its steps; when the launch ends each row prints them per step, for its first CTA and
// the largest over its CTAs (a wait that only some CTAs see is where the row waits for another).
#define WF2_MARK(k) WF2_MARK_IF(tid == 0, k)

#ifdef RNNTRAIN_WF2_PHASES
constexpr int kPhases = 11;  // [0] setup, [1]..[10] the phases of a step
__device__ long long g_phases[2 * kMaxRows][16][kPhases + 6];  // [row][CTA]: phases, ns, T, input, l, d, rows
// Printed by a kernel of its own: a printf in forward2_k would serialize its wgmma (ptxas C7510).
__global__ void print_phases_k(int rows, int C) {
  for (int r = 0; r < rows; ++r) {
    const long long* p = g_phases[r][0];
    const double n = p[kPhases + 1] > 0 ? static_cast<double>(p[kPhases + 1]) : 1.0;
    printf("wf2 %s row %d of %lld (layer %lld dir %lld) T %lld: %.2f us; setup %lld cyc; per step cyc, first CTA / "
           "largest of %d:",
           p[kPhases + 2] ? "input" : "rec", r, p[kPhases + 5], p[kPhases + 3], p[kPhases + 4], p[kPhases + 1],
           p[kPhases] / 1e3, p[0], C);
    for (int k = 1; k < kPhases; ++k) {
      double mx = 0.0;
      for (int c = 0; c < C; ++c) mx = fmax(mx, static_cast<double>(g_phases[r][c][k]));
      printf(" [%d] %.0f/%.0f", k, p[k] / n, mx / n);
    }
    printf("\n");
  }
}
#endif

// d += A [64 x Kp] x W^T [Kp x N]: Kp / 16 wgmma, waited for. every = 2: the N columns are every other
// 8 of W's (from W's first: gates 0, 1 of each unit; from its ninth: gates 2, 3).
template <typename E, int N>
__device__ __forceinline__ void products(float (&d)[N / 2], const E* A, const E* W, int Kp, int every = 1) {
  fence_acc(d);
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  for (int ks = 0; ks < Kp / 16; ++ks)
    mma<E, N>(d, desc(A + ks * 16 * 64, 8 * 128, 128), desc(W + ks * 16 * 8, 128, every * (Kp / 8) * 128));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  fence_acc(d);
}

// Column n of a CTA is gate 2((n / 8) % 2) + n % 2 of unit (U / 4)((n % 8) / 2) + n / 16: the thread
// holding it (lane % 4 = (n % 8) / 2) has all four gates of U / 4 consecutive units, so its loads and
// stores are vectors. Element i of a thread is gate gate_of(col_of(i)) of unit U / 4 * (lane % 4) + i / 8.
__device__ __forceinline__ int gate_of(int n) { return 2 * ((n >> 3) & 1) + (n & 1); }
template <int U>
__device__ __forceinline__ int unit_of(int n) { return (U / 4) * ((n & 7) >> 1) + (n >> 4); }
template <int U>
__device__ __forceinline__ int column(int unit, int gate) {
  return 16 * (unit % (U / 4)) + 8 * (gate >> 1) + 2 * (unit / (U / 4)) + (gate & 1);
}
// Accumulator element of (row half hh, gate g, unit p of the thread's U / 4), and its place when the
// thread's values are kept in that order ("slots": [hh][g][p], vectors along p).
__host__ __device__ constexpr int elem(int hh, int g, int p) { return 8 * p + 4 * (g / 2) + 2 * hh + g % 2; }
// Element i of the accumulator of every other 8 columns (products' every = 2) from column 8 * half: the
// full accumulator's element 8 (i / 4) + 4 half + i % 4 (the same row and unit, gate 2 half + i % 2).
__host__ __device__ constexpr int half_elem(int i, int half) { return 8 * (i / 4) + 4 * half + i % 4; }
template <int U>
__host__ __device__ constexpr int slot(int i) {
  return ((i / 2) % 2 * 4 + 2 * ((i / 4) % 2) + i % 2) * (U / 4) + i / 8;
}

// The Keras column offset of gate g on the input side (the kernel) or the recurrent side; -1 where
// that side has no weight (GRU's candidate: z, r, then h U_h + b_h and x W_h + b_xh).
template <bool GRU>
__device__ __forceinline__ int gate_col(int g, int H, bool input) {
  if (!GRU || g < 2) return g * H;
  return input == (g == 3) ? 2 * H : -1;
}


template <typename E, Cell2 K, int U>
__global__ void __launch_bounds__(128, 1) forward2_k(const Args a) {
  constexpr bool GRU = K != Cell2::Lstm, FIRST = K == Cell2::GruResetFirst;  // FIRST: reset_after: false
  constexpr int N = 4 * U, R = N / 2, P = U / 4;  // weight columns of a CTA; accumulators, units of a thread
  extern __shared__ __align__(128) unsigned char smem[];
  const Cluster& cl = a.cl;
  const int C = cl.C, Kp = cl.Kp, T = a.T, B = a.B, H = a.H;
#ifdef RNNTRAIN_WF2_PHASES
  long long phase_cycles[kPhases] = {}, phase_at = clock64();
  const unsigned long long start_ns = global_ns();
#endif
  const int ci = blockIdx.x / C % cl.rows, rank = blockIdx.x % C, j0 = rank * U, tid = threadIdx.x;
  // The batch slice of 64 rows this CTA's row serves (bs), and that slice's own buffers.
  const int bs = blockIdx.x / C / cl.rows, b0 = a.b0 + 64 * bs, Bs = min(64, a.Bs - 64 * bs);
  float* const xring = a.xring + bs * a.xring_slice;
  const auto hcore = [&](int r) { return static_cast<E*>(a.hcore[r]) + bs * a.core_slice; };
  const int nrec = a.L * a.D;
  const bool input_row = ci >= nrec;
  const int l = input_row ? ci - nrec + 1 : ci / a.D, d = input_row ? 0 : ci % a.D;
  E* W = reinterpret_cast<E*>(smem);  // [N x Kp]
  E* A = W + N * Kp;                   // [64 x Kp]
  float* bias = reinterpret_cast<float*>(A + 64 * Kp);  // [N]: added to the recurrent row's sums
  float* xs_all = bias + N;  // [128][R + 4]: each thread's input side of the next step, in slot order
  uint64_t* bar = reinterpret_cast<uint64_t*>(xs_all + 128 * (R + 4));

  // The weight slice: rows k of the Keras matrix, 8 consecutive units of one gate a load. A thread
  // has kBatch loads in flight before it stores them: one at a time, the setup took 32-42 us.
  const E* w = static_cast<const E*>(input_row ? a.wk[l * a.D] : a.wr[ci]);  // [H, GH] either way
  const int items = Kp * 4 * (U / 8);
  for (int it0 = tid; it0 < items; it0 += 128 * kBatch) {
    uint4 raw[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int it = it0 + 128 * b;
      const int k = it / (4 * (U / 8)), g = it / (U / 8) % 4, u0 = it % (U / 8) * 8;
      const int gc = gate_col<GRU>(g, H, input_row), n = H - j0 - u0;  // n: units of the 8 that exist
      raw[b] = make_uint4(0u, 0u, 0u, 0u);
      if (it >= items || k >= H || gc < 0 || n <= 0) continue;
      const E* src = w + static_cast<size_t>(k) * a.GH + gc + j0 + u0;
      if (n >= 8 && aligned<16>(src)) {
        raw[b] = *reinterpret_cast<const uint4*>(src);
      } else {
        E v[8];
        for (int e = 0; e < 8; ++e) v[e] = e < n ? src[e] : from_f<E>(0.0f);
        memcpy(&raw[b], v, sizeof raw[b]);
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int it = it0 + 128 * b;
      if (it >= items) break;
      const int k = it / (4 * (U / 8)), g = it / (U / 8) % 4, u0 = it % (U / 8) * 8;
      E v[8];
      memcpy(v, &raw[b], sizeof v);
      for (int e = 0; e < 8; ++e) W[w_at(column<U>(u0 + e, g), k, Kp)] = v[e];
    }
  }
  for (int i = tid; i < 64 * Kp / 8; i += 128) reinterpret_cast<uint4*>(A)[i] = make_uint4(0u, 0u, 0u, 0u);
  if (!input_row) {
    for (int n = tid; n < N; n += 128) {
      const float* b = a.bias[ci];  // [GH], GRU [2, GH]: input side, recurrent side
      const int g = gate_of(n), j = j0 + unit_of<U>(n);
      const int cx = gate_col<GRU>(g, H, true), ch = gate_col<GRU>(g, H, false);
      float v = 0.0f;
      if (j < H && cx >= 0) v += b[cx + j];
      if (GRU && !FIRST && j < H && ch >= 0) v += b[a.GH + ch + j];  // reset_after: false has one bias row
      bias[n] = v;
    }
    for (int i = tid; i < 128 * (R + 4); i += 128) xs_all[i] = 0.0f;  // what no copy fills stays 0
  }
  if (tid == 0) {
    mbar_init(bar, 1);
    fence_mbar_init();
  }
  fence_async_shared();
  __syncthreads();
  cluster_arrive();
  cluster_wait();
  WF2_MARK(0);

  const uint16_t mask = static_cast<uint16_t>((1u << C) - 1);
  const uint32_t slice = U * 128;  // bytes of a CTA's units in a step's h (operand layout)
  const size_t step_elems = static_cast<size_t>(64) * Kp;
  unsigned* done_rec = a.done + bs * kDone;  // [kMaxRows][16]
  unsigned* done_in = done_rec + kMaxRows * 16;  // [kMaxRows][16], by layer
  const int q = tid % 4, jb = j0 + P * q;     // the thread's first unit
  float acc[R];

  if (input_row) {
    const E* below = hcore(l - 1);  // D == 1 here
    unsigned seen_below = 0, seen_slot = 0;  // thread 0's last reads of the two flags it waits for
    for (int s = 0; s < T; ++s) {
      if (s > 0) cluster_wait();  // every CTA is done with the previous step's A
      if (tid == 0) {
        wait_flag(done_rec + (l - 1) * 16 + rank, s + 1, seen_below);
        fence_async_global();
        mbar_expect(bar, C * slice);
        multicast(reinterpret_cast<char*>(A) + rank * slice,
                  reinterpret_cast<const char*>(below + s * step_elems) + rank * slice, slice, bar, mask);
      }
#pragma unroll
      for (int i = 0; i < R; ++i) acc[i] = 0.0f;
      WF2_MARK(1);
      mbar_wait(bar, s & 1);
      WF2_MARK(2);
      products<E, N>(acc, A, W, Kp);
      WF2_MARK(3);
      cluster_arrive();
      if (tid == 0 && s >= kRing2) wait_flag(done_rec + l * 16 + rank, s + 1 - kRing2, seen_slot);  // the slot was read
      __syncthreads();
      WF2_MARK(4);
      // The thread's sums in slot order, the layout its recurrent row's CTA copies from: the thread's
      // i-th 4 floats at float4 i * 128 + tid, so a warp's store fills whole lines.
      float y[R];
#pragma unroll
      for (int i = 0; i < R; ++i) y[slot<U>(i)] = acc[i];
      float4* to = reinterpret_cast<float4*>(xring + ((static_cast<size_t>(l - 1) * kRing2 + s % kRing2) * C + rank) * 128 * R) + tid;
#pragma unroll
      for (int i = 0; i < R / 4; ++i) to[i * 128] = make_float4(y[4 * i], y[4 * i + 1], y[4 * i + 2], y[4 * i + 3]);
      __syncthreads();
      WF2_MARK(5);
      if (tid == 0) store_release(done_in + l * 16 + rank, s + 1);
      WF2_MARK(6);
    }
    if (T > 0) cluster_wait();
  } else {
    E* core = hcore(ci);
    E* rcore = core + static_cast<size_t>(T) * step_elems;  // reset_after: false: r * h_{t-1}, two steps
    E* hseq = static_cast<E*>(a.hseq[l]);
    E* out = static_cast<E*>(a.out[l]);
    const int ldh = a.D * a.Hp, nu = H - jb;  // nu: how many of the thread's units exist
    const bool last = l == a.L - 1;
    float* xs = xs_all + tid * (R + 4);  // layer 0: in the half type, P values at the start of each P floats
    float st[P][2] = {};  // LSTM c, GRU h, of units jb + p, rows 16w + lane/4 (+ 8)
    int len[2];           // the lengths of the thread's two rows (T past the slice: never read)
    for (int hh = 0; hh < 2; ++hh) len[hh] = row_of(2 * hh) < Bs ? a.lens[b0 + row_of(2 * hh)] : T;
    unsigned seen_in = 0;  // the thread's last read of its input row's flag
    // The input side of step s into xs, asynchronously: the GEMM's rows (the launch's first layer) or
    // the input row's sums (waited for by every thread).
    auto prefetch = [&](int s) {
      const int t = d == 0 ? s : T - 1 - s;
      if (l == 0) {
        for (int hh = 0; hh < 2; ++hh) {
          const int m = row_of(2 * hh);
          if (m >= Bs) continue;
          const E* row = static_cast<const E*>(a.xproj) + ((static_cast<size_t>(d) * T + t) * B + b0 + m) * a.GH;
          for (int g = 0; g < 4; ++g) {
            const int gc = gate_col<GRU>(g, H, true);
            if (gc >= 0) copy_halves_async<E, P>(reinterpret_cast<E*>(xs + (hh * 4 + g) * P), row + gc + jb, nu);
          }
        }
      } else {
        wait_flag(done_in + l * 16 + rank, s + 1, seen_in);
        WF2_MARK(8);
        const float* from = xring + ((static_cast<size_t>(l - 1) * kRing2 + s % kRing2) * C + rank) * 128 * R + tid * 4;
#pragma unroll
        for (int i = 0; i < R; i += 4) copy_async<16>(xs + i, from + i * 128);
      }
      copy_commit();
    };
    if (T > 0) prefetch(0);
    for (int s = 0; s < T; ++s) {
      const int t = d == 0 ? s : T - 1 - s;
      // The input side (and the biases) first: it does not wait for this row's previous step.
      copy_wait();
      float x[R];
#pragma unroll
      for (int i = 0; i < R; i += 4) {
        const float4 v = *reinterpret_cast<const float4*>(xs + i);
        x[i] = v.x, x[i + 1] = v.y, x[i + 2] = v.z, x[i + 3] = v.w;
      }
      if (l == 0) {  // the P halves of a group are the bits of its first P / 2 floats
        float h[R];
#pragma unroll
        for (int i = 0; i < R; ++i) {
          const uint32_t w = __float_as_uint(x[i / P * P + i % P / 2]);
          h[i] = half_bits<E>(i % 2 ? w >> 16 : w);
        }
#pragma unroll
        for (int i = 0; i < R; ++i) x[i] = h[i];
      }
#pragma unroll
      for (int i = 0; i < R; ++i) acc[i] = x[slot<U>(i)] + bias[col_of(i)];
      WF2_MARK(1);
      float rh[2][P] = {};  // reset_after: false: r * h_{t-1} (0 at the first step)
      if (s > 0 && !FIRST) {
        mbar_wait(bar, (s - 1) & 1);
        WF2_MARK(2);
        products<E, N>(acc, A, W, Kp);
      } else if (s > 0) {
        // The bar's phases alternate: h_{t-1} (parity 0), then r * h_{t-1} (parity 1).
        float zr[R / 2], hc[R / 2];  // gates 0, 1 and gates 2, 3 of the accumulator
#pragma unroll
        for (int i = 0; i < R / 2; ++i) zr[i] = acc[half_elem(i, 0)], hc[i] = acc[half_elem(i, 1)];
        mbar_wait(bar, 0);
        WF2_MARK(2);
        products<E, N / 2>(zr, A, W, Kp, 2);
        E* rcore_t = rcore + (s & 1) * step_elems;
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
#pragma unroll
          for (int p = 0; p < P; ++p) rh[hh][p] = sigm_fast(zr[4 * p + 2 * hh + 1]) * st[p][hh];
          store_halves<E, P>(rcore_t + a_at(row_of(2 * hh), jb), rh[hh], P);
        }
        fence_async_global();
        cluster_arrive();  // every CTA is done with h_{t-1} in A, and has stored its r * h_{t-1}
        cluster_wait();
        if (tid == 0) {
          mbar_expect(bar, C * slice);
          multicast(reinterpret_cast<char*>(A) + rank * slice, reinterpret_cast<const char*>(rcore_t) + rank * slice,
                    slice, bar, mask);
        }
        mbar_wait(bar, 1);
        products<E, N / 2>(hc, A, W + (Kp / 8) * 64, Kp, 2);
#pragma unroll
        for (int i = 0; i < R / 2; ++i) acc[half_elem(i, 0)] = zr[i], acc[half_elem(i, 1)] = hc[i];
      }
      WF2_MARK(3);
      cluster_arrive();  // done with A: the row may multicast h_t into it
      // The cell on the sums, in place (acc then holds what the backward reads: LSTM i, f, g, o; GRU
      // z, r, h~ and the raw h U_h + b_h), and h_t into the operand copy the row shares: that is the
      // critical path. The outputs and the saved state are stored after the copy is on its way.
      E* core_t = core + static_cast<size_t>(t) * step_elems;
      float hn[2][P], prev[2][P];
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const bool valid = t < len[hh];
#pragma unroll
        for (int p = 0; p < P; ++p) {
          const int at = elem(hh, 0, p);  // gates 0, 1 at at, at + 1; gates 2, 3 at at + 4, at + 5
          float h = 0.0f;
          prev[hh][p] = st[p][hh];
          if constexpr (GRU) {
            acc[at] = sigm_fast(acc[at]), acc[at + 1] = sigm_fast(acc[at + 1]);
            acc[at + 5] = tanh_fast(acc[at + 5] + (FIRST ? acc[at + 4] : acc[at + 1] * acc[at + 4]));
            const float hv = acc[at] * st[p][hh] + (1.0f - acc[at]) * acc[at + 5];
            if (valid) h = st[p][hh] = hv;
          } else {
            acc[at] = sigm_fast(acc[at]), acc[at + 1] = sigm_fast(acc[at + 1]);
            acc[at + 4] = tanh_fast(acc[at + 4]), acc[at + 5] = sigm_fast(acc[at + 5]);
            const float c = acc[at + 1] * st[p][hh] + acc[at] * acc[at + 4];
            if (valid) st[p][hh] = c, h = acc[at + 5] * tanh_fast(c);
          }
          hn[hh][p] = h;
        }
        store_halves<E, P>(core_t + a_at(row_of(2 * hh), jb), hn[hh], P);  // P units in one core-matrix row
      }
      WF2_MARK(4);
      fence_async_global();  // the copy of h_t is read by bulk copies (the async proxy)
      __syncthreads();
      WF2_MARK(5);
      cluster_wait();  // every CTA of the row is done with A
      WF2_MARK(6);
      if (tid == 0) {
        if (s + 1 < T) {
          mbar_expect(bar, C * slice);
          multicast(reinterpret_cast<char*>(A) + rank * slice, reinterpret_cast<const char*>(core_t) + rank * slice,
                    slice, bar, mask);
        }
        store_release(done_rec + ci * 16 + rank, s + 1);
      }
      WF2_MARK(7);
      if (s + 1 < T) prefetch(s + 1);
      WF2_MARK(10);
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int m = row_of(2 * hh), b = b0 + m;
        if (m >= Bs || nu <= 0) continue;
        const bool valid = t < len[hh];
        const size_t bt = static_cast<size_t>(t) * B + b;
        float v[P];
        if (valid && a.gates[ci]) {
          E* gs = static_cast<E*>(a.gates[ci]) + bt * a.GP + jb;  // LSTM i, f, g, o; GRU z, r, h~, h U_h + b_h
#pragma unroll
          for (int g = 0; g < 4; ++g) {
            const int from = GRU && g >= 2 ? 5 - g : g;  // GRU: h~ sits in gate 3's place, h U_h in gate 2's
#pragma unroll
            for (int p = 0; p < P; ++p) v[p] = acc[elem(hh, from, p)];
            store_halves<E, P>(gs + g * H, v, nu);
          }
        }
        if (a.state[ci]) {  // LSTM c_t (0 on padded steps: read as the previous c by the backward); GRU h_{t-1}
#pragma unroll
          for (int p = 0; p < P; ++p) v[p] = !valid ? 0.0f : GRU ? prev[hh][p] : st[p][hh];
          store_halves<E, P>(static_cast<E*>(a.state[ci]) + bt * H + jb, v, nu);
        }
        if (FIRST && a.rh[ci]) {  // the weight gradient's operand (wavefront.cpp: gradients)
#pragma unroll
          for (int p = 0; p < P; ++p) v[p] = valid ? rh[hh][p] : 0.0f;
          store_halves<E, P>(static_cast<E*>(a.rh[ci]) + bt * H + jb, v, nu);
        }
        if (valid && last && a.hy && t == (d == 0 ? len[hh] - 1 : 0))
          store_halves<E, P>(static_cast<E*>(a.hy) + (static_cast<size_t>(d) * B + b) * H + jb, hn[hh], nu);
        store_halves<E, P>(hseq + bt * ldh + d * a.Hp + jb, hn[hh], nu);
        if (out != hseq) store_halves<E, P>(out + bt * a.D * H + d * H + jb, hn[hh], nu);
      }
      WF2_MARK(9);
    }
  }
  cluster_arrive();  // no CTA leaves while a peer may still multicast into it
  cluster_wait();
#ifdef RNNTRAIN_WF2_PHASES
  if (tid == 0 && bs == 0) {
    long long* out = g_phases[ci][rank];
    for (int k = 0; k < kPhases; ++k) out[k] = phase_cycles[k];
    out[kPhases] = static_cast<long long>(global_ns() - start_ns), out[kPhases + 1] = T;
    out[kPhases + 2] = input_row, out[kPhases + 3] = l, out[kPhases + 4] = d;
    out[kPhases + 5] = cl.rows;
  }
#endif
}

template <typename E, Cell2 K, int U>
void launch_of(const Args& a, cudaStream_t s) {
  launch_rows<forward2_k<E, K, U>, 128>(a, s);
#ifdef RNNTRAIN_WF2_PHASES
  print_phases_k<<<1, 1, 0, s>>>(a.cl.rows, a.cl.C);
#endif
}

template <typename E, Cell2 K, int U>
struct Of {
  static constexpr Kernels kernels = {&resident_clusters<forward2_k<E, K, U>, 128>, &launch_of<E, K, U>};
};

}  // namespace

bool has_forward2() {
  static const bool ok = [] {
    int dev = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    return major == 9 && minor == 0;
  }();
  return ok;
}

int max_clusters2(const Cluster& cl, Cell2 cell, bool bf16) {
  if (cl.C < 1 || cl.C > 16 || cl.smem > smem_optin()) return 0;
  return pick<Of>(cl, cell, bf16).clusters(cl);
}

void launch_forward2(const Args& a, bool bf16, cudaStream_t s) {
  pick<Of>(a.cl, cell_of(a), bf16).launch(a, s);
}

}  // namespace rnntrain::cuda::wf
