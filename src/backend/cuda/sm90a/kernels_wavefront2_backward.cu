// The wavefront kernels' second design, backward (issue 33; docs/cuda.md, "The second design's
// backward"). Built for sm_90a only, as the forward (kernels_wavefront2.cu), whose clusters it keeps.
//
// A launch runs the backward of L layers (D directions) over all T steps in reverse time, as clusters
// of C CTAs, one cluster per "row", all resident at once:
//  - a recurrent row (layer l, direction d): CTA r owns units r*U .. r*U + U - 1 of dh and holds those
//    units' rows of the recurrent kernel (all G*H columns) in shared memory for all steps. Step s of
//    the backward (time t): dh_t = (the output gradient from above) + dG_{t+1} W_h^T, the product over
//    the C slices of dG_{t+1} (slice c: the G*U columns CTA c computed) as they stream through a ring of
//    S slots in shared memory; then the cell's backward on dh_t, in registers, gives the CTA's slice of
//    dG_t. It is stored for the weight-gradient GEMMs that follow the launch (dgx, dgh: row-major) and,
//    in wgmma's operand layout, to a ring of kRing2 steps in global memory, from which the CTA's
//    producer warp multicasts it into the row's ring slots.
//  - an input row (layer l <= L - 2 of the launch, D == 1): the same CTAs over layer l + 1's kernel
//    (the rows of layer l's units), multiplying layer l + 1's dG_t (multicast from that row's global
//    ring when its CTA r says step t is done) into layer l's output gradient of step t, handed to layer
//    l's recurrent CTA r through a ring of kRing2 steps in global memory. So layer l's step t runs as
//    soon as layer l + 1's step t is done: the wave of T + L - 1 steps.
// The ring slots in shared memory: slice c of a step's dG (processing-order step index n) is the q-th
// the row consumes, q = n * C + c, and goes to slot q % S. Its slot's full barrier completes when the
// multicast lands; every CTA, done multiplying slice q, arrives on the empty barrier of CTA (q + S) % C,
// the producer of the slot's next slice, which waits for all C arrivals before it multicasts (S <= C,
// so the arrivals of one phase never mix with the next's). Warps 0-3 (one warpgroup) multiply and run
// the cell; warp 4 produces.
// The K index of the product: k = c * KS + g * U + u (KS = 4U) is gate slot g of unit c * U + u, so a
// CTA's slice is one contiguous K range. The slots: LSTM i, f, g, o; GRU z, r, then the candidate's
// gradient on its input side and on its recurrent side (times r): the recurrent rows multiply slots
// 0, 1 and 3, the input rows 0, 1 and 2, by Keras' gates z, r, h (slot_gate).
// The accumulator [64 x U]: element i of a thread is unit unit_of(n) of column n = col_of(i), so a
// thread holds U / 4 consecutive units (loads and stores as vectors). What the cell reads is what the
// forward saved (kernels_wavefront.cu's backward reads the same): LSTM i, f, g, o and c_t; GRU z, r,
// h~, h U_h + b_h and h_{t-1}. Padded steps (t >= lens[b]) have zero pre-activation gradients and
// leave the carried gradient as it is.
// A GRU with reset_after: false (slots z, r, then the candidate's gradient da twice): dh_{t-1} takes
// r * d(r h_{t-1}), and d(r h_{t-1}) = da U_h^T needs the whole step's da. So its recurrent row's ring
// carries half slices, two a step: slots 2, 3 of step t (da, multiplied by U_h into d(r h_{t-1}), which
// gives the r slot), then slots 0, 1 (multiplied by the next step); the input rows read whole slices.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "backend/cuda/api_errors.h"
#include "backend/cuda/sm90a/launch.cuh"
#include "backend/cuda/sm90a/sm90.cuh"
#include "backend/cuda/wavefront_kernels.h"

namespace rnntrain::cuda::wf {

namespace {

using namespace sm90;

// RNNTRAIN_WF2_PHASES (profiling only): thread 0 and the producer's first thread add up the SM cycles
// of each phase of their steps, printed per row when the launch ends (by a kernel of its own).
#define WF2B_MARK(k) WF2_MARK_IF(tid == 0 || tid == kProducer, k)
#ifdef RNNTRAIN_WF2_PHASES
__device__ long long g_phases_b[2 * kMaxRows][2][12];  // [row][thread 0, producer][phase; 9: ns, 10: T, 11: full waits]
__global__ void print_phases_b_k(int rows, int nrec) {
  for (int r = 0; r < rows; ++r) {
    const long long* p = g_phases_b[r][0];
    const long long* w = g_phases_b[r][1];
    const double n = p[10] > 0 ? static_cast<double>(p[10]) : 1.0;
    printf("wf2b %s row %d of %d T %lld: %.2f us; setup %lld cyc; per step cyc: [1] %.0f [2] %.0f (full waits %.0f) "
           "[3] %.0f [4] %.0f; producer [1] %.0f [2] %.0f [3] %.0f\n",
           r >= nrec ? "input" : "rec", r, rows, p[10], p[9] / 1e3, p[0], p[1] / n, p[2] / n, p[11] / n, p[3] / n,
           p[4] / n, w[1] / n, w[2] / n, w[3] / n);
  }
}
#endif

constexpr int kProducer = 128;             // the first thread of the producer warp
constexpr int kThreads2 = kProducer + 32;  // a warpgroup and the producer warp

// Column n of the accumulator is unit (U / 4)((n % 8) / 2) + 2(n / 8) + n % 2; element (row half hh,
// unit p of the thread's U / 4) is element 4(p / 2) + 2hh + p % 2.
template <int U>
__device__ __forceinline__ int unit_of(int n) { return (U / 4) * ((n & 7) >> 1) + 2 * (n >> 3) + (n & 1); }
__host__ __device__ constexpr int elem(int hh, int p) { return 4 * (p / 2) + 2 * hh + p % 2; }
// The Keras gate whose weights multiply gate slot g, -1 for none.
template <bool GRU>
__device__ __forceinline__ int slot_gate(int g, bool input_row) {
  if (!GRU || g < 2) return g;
  return input_row ? (g == 2 ? 2 : -1) : (g == 3 ? 2 : -1);
}

// Named barriers: 1, the warpgroup tells the producer a slice is stored; 2, the warpgroup alone.
__device__ __forceinline__ void bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }

// Waits until at most n (0-3) committed wgmma groups are pending.
__device__ __forceinline__ void wait_groups(int n) {
  if (n == 0) asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  else if (n == 1) asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
  else if (n == 2) asm volatile("wgmma.wait_group.sync.aligned 2;" ::: "memory");
  else asm volatile("wgmma.wait_group.sync.aligned 3;" ::: "memory");
}

// An arrival on the mbarrier at bar's offset in the shared memory of cluster CTA cta.
__device__ __forceinline__ void mbar_arrive_at(uint64_t* bar, uint32_t cta) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(saddr(bar)), "r"(cta));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

// The bits of n (at most P) consecutive values (half type, or float) into v, 0 past n: no instruction
// waits for them until from_bits reads them.
template <typename T, int P>
__device__ __forceinline__ void load_bits(uint32_t (&v)[P], const T* src, int n) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4);
  using Raw = std::conditional_t<sizeof(T) == 2, unsigned short, uint32_t>;
  const Raw* raw = reinterpret_cast<const Raw*>(src);
#pragma unroll
  for (int p = 0; p < P; ++p) v[p] = p < n ? raw[p] : 0u;
}
template <typename E>
__device__ __forceinline__ float from_bits(uint32_t v, bool half) {
  return half ? half_bits<E>(v) : __uint_as_float(v);
}
// n (at most P, which is even) consecutive values of the half type into v, two to a word, 0 past n: one
// vector where whole and aligned. As load_bits, nothing waits for them until half_at reads one.
template <typename E, int P>
__device__ __forceinline__ void load_halves(uint32_t (&v)[P / 2], const E* src, int n) {
  if (n >= P && aligned<2 * P>(src)) {
    if constexpr (P == 8) {
      const uint4 x = *reinterpret_cast<const uint4*>(src);
      v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    } else if constexpr (P == 4) {
      const uint2 x = *reinterpret_cast<const uint2*>(src);
      v[0] = x.x, v[1] = x.y;
    } else {
      v[0] = *reinterpret_cast<const uint32_t*>(src);
    }
    return;
  }
  const unsigned short* raw = reinterpret_cast<const unsigned short*>(src);
#pragma unroll
  for (int p = 0; p < P / 2; ++p)
    v[p] = (2 * p < n ? uint32_t{raw[2 * p]} : 0u) | (2 * p + 1 < n ? uint32_t{raw[2 * p + 1]} << 16 : 0u);
}
template <typename E, int W>
__device__ __forceinline__ float half_at(const uint32_t (&v)[W], int p) {
  return half_bits<E>(p % 2 ? v[p / 2] >> 16 : v[p / 2]);
}
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// The ring of slices a row consumes: S slots of [64 x KW] after the weights, then S full barriers and
// the CTA's empty barrier. KW: the slices' width, KS (whole) or KS / 2 (halves: a GRU's recurrent row
// with reset_after: false).
template <typename E, int U, int KS, int KW = KS>
struct Ring {
  E* slots;
  uint64_t* full;
  uint64_t* empty;
  int S, C;
  int depth;  // wgmma groups (slices) left in flight when a slice's slot is released: < S
  static constexpr uint32_t kBytes = 64 * KW * sizeof(E);
  // The consumer's place: the slot of the next slice q it multiplies (q % S), that slot's phase parity
  // ((q / S) & 1), and the CTA whose empty barrier the next slice q' it is done with releases
  // ((q' + S) % C: start at S % C). Kept as counters: multiply() runs for consecutive steps n, and a
  // division by S or C costs a dependent chain of about 30 instructions a slice.
  int slot = 0, release = 0;
  uint32_t parity = 0;

  // acc += the C slices of the next step the row consumes (the first at the first call) times the
  // CTA's weights W [U x C*KS], from column k0 of each CTA's KS (a half slice: 0 or KS / 2).
  __device__ __forceinline__ void multiply(float (&acc)[U / 2], const E* W, long long* waited, int k0 = 0) {
    const int tid = threadIdx.x;
    const uint32_t sbo = C * KS / 8 * 128;
    fence_acc(acc);
    for (int c = 0; c < C; ++c) {
      const int k = slot;
      if (tid == 0) mbar_expect(full + k, kBytes);
#ifdef RNNTRAIN_WF2_PHASES
      const long long t0 = clock64();
      mbar_wait(full + k, parity);
      if (tid == 0) *waited += clock64() - t0;
#else
      (void)waited;
      mbar_wait(full + k, parity);
#endif
      if (++slot == S) slot = 0, parity ^= 1u;
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
      const E* A = slots + static_cast<size_t>(k) * 64 * KW;
#pragma unroll
      for (int ks = 0; ks < KW / 16; ++ks)
        mma<E, U>(acc, desc(A + ks * 16 * 64, 8 * 128, 128), desc(W + (c * KS + k0 + ks * 16) * 8, 128, sbo));
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      // Slice q - depth is read: its slot may refill. Up to depth + 1 slices in flight; depth < S, or
      // the slice waited for next could need a slot this CTA has not released.
      if (c >= depth) {
        wait_groups(depth);
        if (tid == 0) mbar_arrive_at(empty, release);
        if (++release == C) release = 0;
      }
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    for (int i = min(depth, C); i > 0; --i) {  // the step's last slices
      if (tid == 0) mbar_arrive_at(empty, release);
      if (++release == C) release = 0;
    }
    fence_acc(acc);
  }

  // The producer: the CTA's slice of the n-th step (src in global memory) into its slot of every CTA.
  __device__ __forceinline__ void produce(const E* src, int n, int rank) const {
    const int q = n * C + rank, first = rank >= S ? 0 : 1;  // the first of its slices to reuse a slot
    if (n >= first) mbar_wait<true>(empty, (n - first) & 1);
    const int k = q % S;
    multicast(slots + static_cast<size_t>(k) * 64 * KW, src, kBytes, full + k, static_cast<uint16_t>((1u << C) - 1));
  }
};

template <typename E, Cell2 K, int U>
__global__ void __launch_bounds__(kThreads2, 1) backward2_k(const Args a) {
  constexpr bool GRU = K != Cell2::Lstm, FIRST = K == Cell2::GruResetFirst;  // FIRST: reset_after: false
  constexpr int G = GRU ? 3 : 4, KS = 4 * U, R = U / 2, P = U / 4;  // G: Keras' gates
  extern __shared__ __align__(128) unsigned char smem[];
  const int C = a.cl.C, T = a.T, B = a.B, H = a.H, Kt = C * KS;
  const int ci = blockIdx.x / C % a.cl.rows, rank = blockIdx.x % C, j0 = rank * U, tid = threadIdx.x;
  // The batch slice of 64 rows this CTA's row serves (bs), and that slice's own buffers.
  const int bs = blockIdx.x / C / a.cl.rows, b0 = a.b0 + 64 * bs, Bs = min(64, a.Bs - 64 * bs);
  const int nrec = a.L * a.D;
  const bool input_row = ci >= nrec;
  const int l = input_row ? ci - nrec : ci / a.D, d = input_row ? 0 : ci % a.D;
#ifdef RNNTRAIN_WF2_PHASES
  long long phase_cycles[12] = {}, phase_at = clock64();
  const unsigned long long start_ns = global_ns();
#endif
  long long* waited = nullptr;
#ifdef RNNTRAIN_WF2_PHASES
  waited = &phase_cycles[11];
#endif
  E* W = reinterpret_cast<E*>(smem);  // [U x Kt]
  // The row's ring: whole slices, or (FIRST's recurrent rows) halves, twice as many slots (at most C)
  // in the same bytes.
  Ring<E, U, KS> ring;
  Ring<E, U, KS, KS / 2> halves;
  const bool by_halves = FIRST && !input_row;
  auto place = [&](auto& r, int S) {
    r.slots = W + U * Kt;
    r.S = S, r.C = C, r.depth = min(a.cl.depth, S - 1), r.release = S % C;
    r.full = reinterpret_cast<uint64_t*>(W + U * Kt + static_cast<size_t>(a.cl.S) * 64 * KS);
    r.empty = r.full + S;
  };
  place(ring, a.cl.S);
  place(halves, min(2 * a.cl.S, C));
  const int S = by_halves ? halves.S : ring.S;

  // The weights: row n is unit j0 + unit_of(n) of the recurrent kernel (an input row: layer l + 1's
  // kernel, whose rows are layer l's units); 8 consecutive Keras columns a load, kBatch of them in
  // flight before they are stored (8 k of one core-matrix row: at offset at, -1 for none).
  const E* w = static_cast<const E*>(input_row ? a.wk[(l + 1) * a.D] : a.wr[ci]);  // [H, GH]
  for (int i = tid; i < U * Kt / 8; i += kThreads2) reinterpret_cast<uint4*>(W)[i] = make_uint4(0u, 0u, 0u, 0u);
  __syncthreads();
  const int items = U * C * 4 * (U / 8);
  for (int it0 = tid; it0 < items; it0 += kThreads2 * kBatch) {
    uint4 raw[kBatch];
    int at[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int it = it0 + kThreads2 * b;
      const int n = it / (C * 4 * (U / 8)), c = it / (4 * (U / 8)) % C, g = it / (U / 8) % 4, u0 = it % (U / 8) * 8;
      const int j = j0 + unit_of<U>(n), left = H - c * U - u0, kg = slot_gate<GRU>(g, input_row);  // FIRST: GRU's
      at[b] = -1;
      if (it >= items || j >= H || left <= 0 || kg < 0) continue;  // left: columns of the 8 that exist
      at[b] = w_at(n, c * KS + g * U + u0, Kt);
      const E* src = w + static_cast<size_t>(j) * a.GH + kg * H + c * U + u0;
      if (left >= 8 && aligned<16>(src)) {
        raw[b] = *reinterpret_cast<const uint4*>(src);
      } else {
        E v[8];
        for (int e = 0; e < 8; ++e) v[e] = e < left ? src[e] : from_f<E>(0.0f);
        memcpy(&raw[b], v, sizeof raw[b]);
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
      if (at[b] >= 0) *reinterpret_cast<uint4*>(W + at[b]) = raw[b];
  }
  if (tid == 0) {
    for (int k = 0; k < S; ++k) mbar_init(ring.full + k, 1);
    mbar_init(ring.full + S, C);  // the empty barrier
    fence_mbar_init();
  }
  fence_async_shared();
  __syncthreads();
  cluster_arrive();
  cluster_wait();
  WF2B_MARK(0);

  const size_t slice = static_cast<size_t>(64) * KS, ring_step = C * slice;  // elements
  unsigned* done_rec = a.done + bs * kDone;     // [kMaxRows][16]: steps done by each CTA of a recurrent row
  unsigned* done_in = done_rec + kMaxRows * 16;  // [kMaxRows][16], by layer: of an input row
  const size_t xring_step = static_cast<size_t>(C) * 128 * R;  // floats of one step of an input row's sums
  float* xring = input_row || l < a.L - 1 ? a.xring + bs * a.xring_slice + static_cast<size_t>(l) * kRing2 * xring_step : nullptr;

  if (tid >= kProducer) {  // the producer warp
    const E* src = static_cast<const E*>(a.gcore[input_row ? (l + 1) * a.D : ci]) + bs * a.core_slice + rank * slice;
    unsigned seen = 0;  // the last read of the flag of the row above (input rows)
    for (int s = 0; s < T; ++s) {
      const E* from = src + (s % kRing2) * ring_step;
      if (!input_row) bar_sync(1, kThreads2);  // the warpgroup stored the slice of step s (FIRST: slots 2, 3)
      WF2B_MARK(1);
      if (tid == kProducer) {
        if (input_row) {
          wait_flag(done_rec + (l + 1) * 16 + rank, s + 1, seen);
          fence_async_global();
          ring.produce(from, s, rank);
        } else if (FIRST) {
          halves.produce(from + slice / 2, 2 * s, rank);
        } else {
          if (s + 1 < T) ring.produce(from, s, rank);
          store_release(done_rec + ci * 16 + rank, s + 1);
        }
      }
      if (FIRST && !input_row) {
        bar_sync(1, kThreads2);  // slots 0, 1
        if (tid == kProducer) {
          if (s + 1 < T) halves.produce(from, 2 * s + 1, rank);
          store_release(done_rec + ci * 16 + rank, s + 1);
        }
      }
      __syncwarp();
      WF2B_MARK(2);
    }
  } else if (input_row) {
    unsigned seen_slot = 0;  // the thread's last read of its recurrent row's flag
    for (int s = 0; s < T; ++s) {
      float acc[R];
#pragma unroll
      for (int i = 0; i < R; ++i) acc[i] = 0.0f;
      ring.multiply(acc, W, waited);  // step s
      WF2B_MARK(2);
      if (s >= kRing2) wait_flag(done_rec + l * 16 + rank, s + 1 - kRing2, seen_slot);  // the slot was read
      WF2B_MARK(3);
      // The thread's i-th 4 floats at float4 i * 128 + tid, so a warp's store fills whole lines.
      float4* to = reinterpret_cast<float4*>(xring + (s % kRing2) * xring_step + rank * 128 * R) + tid;
#pragma unroll
      for (int i = 0; i < R; i += 4) to[i / 4 * 128] = make_float4(acc[i], acc[i + 1], acc[i + 2], acc[i + 3]);
      bar_sync(2, kProducer);
      if (tid == 0) store_release(done_in + l * 16 + rank, s + 1);
      WF2B_MARK(4);
    }
  } else {
    const bool top = l == a.L - 1;
    const int q = tid % 4, jb = j0 + P * q, nu = H - jb, DH = a.D * H;  // nu: how many of the thread's units exist
    E* dgx = static_cast<E*>(a.dgx[ci]);
    const E* gates = static_cast<const E*>(a.gates[ci]);
    const E* state = static_cast<const E*>(a.state[ci]);
    E* gcore = static_cast<E*>(a.gcore[ci]) + bs * a.core_slice + rank * slice;
    float carry[2][P] = {};  // LSTM dc, GRU dh carried to the step before, of units jb + p
    int len[2];              // the lengths of the thread's two rows (0 past the slice: every step padded)
    for (int hh = 0; hh < 2; ++hh) len[hh] = row_of(2 * hh) < Bs ? a.lens[b0 + row_of(2 * hh)] : 0;
    unsigned seen_in = 0, seen_slot = 0;  // the thread's last reads of the two input rows' flags
    for (int s = 0; s < T; ++s) {
      const int t = d == 0 ? T - 1 - s : s, tp = d == 0 ? t - 1 : t + 1;  // tp: the step before t
      // The output gradient of step t and what the cell reads: loads on their way during the products.
      // The bits of the output gradient: at the top half (a.dy) or float (dy32); above it the input row's
      // sums, in registers of their own (writing the top's would wait for the gates' loads).
      uint32_t dy[2][P];
      float dy_in[2][P];
      uint32_t gs[2][4][P / 2], st[2][P / 2], sp[2][P / 2];  // gates, state, the step before's state
      // How many of the thread's units each row has at step t, then at the top the output gradient: its
      // zeros past n are register writes that would wait for every load in flight before them (one
      // scoreboard holds them all). Then the forward's gates and states, and above the top the wait for
      // the input row's sums.
      int n[2];
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) n[hh] = t < len[hh] ? nu : 0;
      if (top) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const size_t bt = static_cast<size_t>(t) * B + b0 + row_of(2 * hh);
          if (a.dy) load_bits<E, P>(dy[hh], static_cast<const E*>(a.dy) + bt * DH + d * H + jb, n[hh]);
          else load_bits<float, P>(dy[hh], a.dy32 + bt * DH + d * H + jb, n[hh]);
        }
      }
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int b = b0 + row_of(2 * hh);
        const size_t bt = static_cast<size_t>(t) * B + b;
#pragma unroll
        for (int g = 0; g < 4; ++g) load_halves<E, P>(gs[hh][g], gates + bt * a.GP + g * H + jb, n[hh]);
        load_halves<E, P>(st[hh], state + bt * H + jb, n[hh]);
        if (!GRU) load_halves<E, P>(sp[hh], state + (static_cast<size_t>(tp) * B + b) * H + jb, tp >= 0 && tp < T ? n[hh] : 0);
      }
      if (!top) {
        wait_flag(done_in + l * 16 + rank, s + 1, seen_in);
        const float* from = xring + (s % kRing2) * xring_step + rank * 128 * R + tid * 4;
#pragma unroll
        for (int hh = 0; hh < 2; ++hh)
#pragma unroll
          for (int p = 0; p < P; ++p) dy_in[hh][p] = from[elem(hh, p) / 4 * 512 + elem(hh, p) % 4];
      }
      // The next step's into L2 meanwhile.
      if (s + 1 < T) {
        const int tn = d == 0 ? t - 1 : t + 1;
        for (int hh = 0; hh < 2 && nu > 0; ++hh) {
          if (tn >= len[hh]) continue;
          const size_t bt = static_cast<size_t>(tn) * B + b0 + row_of(2 * hh);
          for (int g = 0; g < 4; ++g) prefetch_l2(gates + bt * a.GP + g * H + jb);
          prefetch_l2(state + bt * H + jb);
          if (top && a.dy) prefetch_l2(static_cast<const E*>(a.dy) + bt * DH + d * H + jb);
          if (top && !a.dy) prefetch_l2(a.dy32 + bt * DH + d * H + jb);
        }
      }
      float acc[R];
#pragma unroll
      for (int i = 0; i < R; ++i) acc[i] = 0.0f;
      WF2B_MARK(1);
      if (s > 0 && FIRST) halves.multiply(acc, W, waited);  // slots 0, 1 of step s - 1
      else if (s > 0) ring.multiply(acc, W, waited);  // the dG of step s - 1
      WF2B_MARK(2);
      // The global ring's slot of step s was multicast by the input row below (step s - kRing2).
      if (l > 0 && s >= kRing2) wait_flag(done_in + (l - 1) * 16 + rank, s + 1 - kRing2, seen_slot);
      WF2B_MARK(3);

      // The cell's backward: the pre-activation gradients of the thread's units (0 on padded steps).
      E* core_t = gcore + (s % kRing2) * ring_step;
      uint32_t dg[2][4][P / 2];  // the same for the GEMMs' copy, stored once the slice is on its way
      float dhs[2][P];           // FIRST: dh_t, for the carry once d(r h_{t-1}) is in
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int m = row_of(2 * hh), b = b0 + m;
        const bool valid = t < len[hh];
        float v[4][P];  // the gate slots
        float dhy[P] = {};  // the final state's gradient, at the sequence's last step
        if (top && a.dhy && valid && t == (d == 0 ? len[hh] - 1 : 0)) {
          uint32_t raw[P];
          load_bits<E, P>(raw, static_cast<const E*>(a.dhy) + (static_cast<size_t>(d) * B + b) * H + jb, nu);
#pragma unroll
          for (int p = 0; p < P; ++p) dhy[p] = from_bits<E>(raw[p], true);
        }
#pragma unroll
        for (int p = 0; p < P; ++p) {
          float dh = acc[elem(hh, p)] + (top ? from_bits<E>(dy[hh][p], a.dy) : dy_in[hh][p]) + dhy[p];
          for (int g = 0; g < 4; ++g) v[g][p] = 0.0f;
          if (!valid) continue;
          if constexpr (GRU) {
            dh += carry[hh][p];
            const float z = half_at<E>(gs[hh][0], p), r = half_at<E>(gs[hh][1], p), hc = half_at<E>(gs[hh][2], p);
            const float hu = half_at<E>(gs[hh][3], p), hp = half_at<E>(st[hh], p);
            const float dhc = dh * (1.0f - z) * (1.0f - hc * hc);
            v[0][p] = dh * (hp - hc) * z * (1.0f - z);
            if constexpr (FIRST) {  // slot 1 and the carry once d(r h_{t-1}) is in
              v[2][p] = v[3][p] = dhc, dhs[hh][p] = dh;
              continue;
            }
            v[1][p] = dhc * hu * r * (1.0f - r);
            v[2][p] = dhc, v[3][p] = dhc * r;
            carry[hh][p] = dh * z;
          } else {
            const float ig = half_at<E>(gs[hh][0], p), fg = half_at<E>(gs[hh][1], p);
            const float gg = half_at<E>(gs[hh][2], p), og = half_at<E>(gs[hh][3], p);
            const float tc = tanh_fast(half_at<E>(st[hh], p));  // as the forward's h = o * tanh(c)
            const float dc = carry[hh][p] + dh * og * (1.0f - tc * tc);
            carry[hh][p] = dc * fg;
            v[0][p] = dc * gg * ig * (1.0f - ig);
            v[1][p] = dc * half_at<E>(sp[hh], p) * fg * (1.0f - fg);
            v[2][p] = dc * ig * (1.0f - gg * gg);
            v[3][p] = dh * tc * og * (1.0f - og);
          }
        }
        // The slice for the rows (every row and unit: zero where there is none); the GEMMs' copy in dgx
        // once the slice is released.
#pragma unroll
        for (int g = 0; g < 4; ++g) {
          pack_halves<E, P>(dg[hh][g], v[g]);
          if (!FIRST || g >= 2) store_packed<E, P>(core_t + a_at(m, g * U + P * q), dg[hh][g], P);
        }
      }
      fence_async_global();  // the slice is read by bulk copies (the async proxy)
      bar_arrive(1, kThreads2);
      if constexpr (FIRST) {
        // d(r h_{t-1}) of the thread's units: the step's da (every CTA's slots 2, 3) times U_h^T.
        float drh[R];
#pragma unroll
        for (int i = 0; i < R; ++i) drh[i] = 0.0f;
        halves.multiply(drh, W, waited, KS / 2);
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int m = row_of(2 * hh);
          float v1[P];
#pragma unroll
          for (int p = 0; p < P; ++p) {
            v1[p] = 0.0f;
            if (t >= len[hh]) continue;
            const float z = half_at<E>(gs[hh][0], p), r = half_at<E>(gs[hh][1], p), d = drh[elem(hh, p)];
            v1[p] = d * half_at<E>(st[hh], p) * r * (1.0f - r);
            carry[hh][p] = dhs[hh][p] * z + d * r;
          }
          pack_halves<E, P>(dg[hh][1], v1);
#pragma unroll
          for (int g = 0; g < 2; ++g) store_packed<E, P>(core_t + a_at(m, g * U + P * q), dg[hh][g], P);
        }
        fence_async_global();
        bar_arrive(1, kThreads2);
      }
      // The GEMMs' copy: the input side's gates and, for a GRU, the candidate's recurrent side after
      // them (its z and r are the input side's). Only the GEMMs after the loop read it.
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int m = row_of(2 * hh);
        if (m >= Bs || nu <= 0) continue;
        const size_t bt = static_cast<size_t>(t) * B + b0 + m;
#pragma unroll
        for (int g = 0; g < G; ++g) store_packed<E, P>(dgx + bt * a.GP + g * H + jb, dg[hh][g], nu);
        if (GRU) store_packed<E, P>(dgx + bt * a.GP + 3 * H + jb, dg[hh][3], nu);
      }
      WF2B_MARK(4);
    }
  }
  cluster_arrive();  // no CTA leaves while a peer may still multicast into it or arrive on its barriers
  cluster_wait();
#ifdef RNNTRAIN_WF2_PHASES
  if ((tid == 0 || tid == kProducer) && rank == 0 && bs == 0) {
    long long* out = g_phases_b[ci][tid == 0 ? 0 : 1];
    for (int k = 0; k < 12; ++k) out[k] = phase_cycles[k];
    out[9] = static_cast<long long>(global_ns() - start_ns), out[10] = T;
  }
#endif
}

template <typename E, Cell2 K, int U>
void launch_of(const Args& a, cudaStream_t s) {
  launch_rows<backward2_k<E, K, U>, kThreads2>(a, s);
#ifdef RNNTRAIN_WF2_PHASES
  print_phases_b_k<<<1, 1, 0, s>>>(a.cl.rows, a.L * a.D);
#endif
}

template <typename E, Cell2 K, int U>
struct Of {
  static constexpr Kernels kernels = {&resident_clusters<backward2_k<E, K, U>, kThreads2>, &launch_of<E, K, U>};
};

}  // namespace

int max_clusters2_backward(const Cluster& cl, Cell2 cell, bool bf16) {
  if (cl.C < 1 || cl.C > 16 || cl.S < 1 || cl.S > cl.C || cl.smem > smem_optin()) return 0;
  return pick<Of>(cl, cell, bf16).clusters(cl);
}

void launch_backward2(const Args& a, bool bf16, cudaStream_t s) {
  pick<Of>(a.cl, cell_of(a), bf16).launch(a, s);
}

}  // namespace rnntrain::cuda::wf
