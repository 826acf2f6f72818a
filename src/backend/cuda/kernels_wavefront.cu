// The wavefront recurrent kernels (plan.algo: wavefront; wavefront_kernels.h has the arguments and
// docs/cuda.md the design). Each thread block owns a slice of one (layer, direction)'s hidden units
// and keeps that slice's weight columns in shared memory for all T steps. A step waits on per-step
// counters in global memory for what it reads (the row's previous step, the layer below's same time
// step), streams that operand from L2 into shared memory in double-buffered chunks (cp.async), runs
// the products on tensor cores (ldmatrix and mma.sync, FP32 accumulation), applies the cell in FP32 and publishes its
// slice with a release increment of its own counter.
//
// Forward, per block (l, d, units u0..u0+U): z = [h_below(t) | h_own(t-1)] @ [W_x; W_h][:, my cols]
// (+ x @ W precomputed by cuBLAS for the launch's first layer), then the LSTM or GRU (reset_after)
// cell. Backward, per block: dh = dG_above(t) @ W_above^T[:, my units] + dG_own(t+1) @ W_h^T[:, my
// units] (+ dy), then the cell's gradients. Padded steps (t >= lens[b]) output 0, keep the state
// and pass no gradient, as cuDNN's padded IO.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "backend/cuda/api_errors.h"
#include "backend/cuda/kernels_common.cuh"
#include "backend/cuda/wavefront_kernels.h"

namespace rnntrain::cuda::wf {

namespace {

using k::from_f;
using k::to_f;

__device__ inline float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ inline unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ inline unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Called by every warp: spins until each of the n (<= 32) counters reaches target, one lane polling
// each, all at once; the closing __syncwarp() hands what the lanes acquired to the whole warp, so no
// block barrier is needed before the warp reads the data. A wait of 10 s means a broken schedule:
// trap (the host sees a launch failure) rather than hang the process.
__device__ void wait_all(const unsigned* const* f, int n, unsigned target) {
  const int lane = threadIdx.x & 31;
  bool ready = lane >= n || load_acquire(f[lane]) >= target;
  if (!__all_sync(0xffffffffu, ready)) {
    const unsigned long long t0 = global_ns();
    while (!__all_sync(0xffffffffu, ready)) {
      __nanosleep(32);
      if (!ready) ready = load_acquire(f[lane]) >= target;
      if (global_ns() - t0 > 10000000000ull) __trap();
    }
  }
  __syncwarp();
}

// After a __syncthreads() that ends the block's writes of a step: one release increment makes them
// visible to whoever acquires the counter (the barrier orders the other threads' writes before it).
__device__ inline void publish(unsigned* f) { asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(f) : "memory"); }

// Asks L2 for the line holding p: for step-independent operands, before a step waits.
__device__ inline void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

__device__ inline void cp16(void* dst, const void* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(src) : "memory");
}
__device__ inline void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ inline void cp_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// ldmatrix: lane l gives the address of row (l % 8) + 8 * ((l / 8) % 2), column 8 * (l / 16) of a
// 16x16 tile (four 8x8 matrices); .trans hands each lane the transposed elements (B operands).
__device__ inline void ldsm_x4(unsigned (&r)[4], const void* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ inline void ldsm_x4_t(unsigned (&r)[4], const void* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
// d += a (16x16, row-major) @ b (16x8); FP32 accumulation.
template <typename E>
__device__ inline void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (std::is_same_v<E, __nv_bfloat16>) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Where column c (0 or 8) of row r of a 16x16 operand tile lies in its slot: the two 16-byte halves
// of rows 4-7 and 12-15 swap places, so the eight rows an ldmatrix phase reads (32 bytes apart) fall
// in distinct banks without padding.
__device__ inline int swz(int r, int c) { return c ^ (r & 4) * 2; }

__host__ __device__ inline size_t align128(size_t n) { return (n + 127) & ~size_t(127); }

// One operand source of a step: rows b0.. of a [., ld] array at that step, K columns, multiplied
// with weight rows wrow..wrow+K, accumulated into side `side` (GRU's input and recurrent sides).
template <typename E>
struct Src {
  const E* p = nullptr;
  int ld = 0, K = 0, wrow = 0, side = 0;
};

// Shared memory of a block: weights [K][ldw] (with ldw = 16, rows swizzled as the operand tiles); then a region that holds each warp's ring of kStages
// operand tiles [16][16] while the products run and the partial sums [ksplit][SIDES][Bp][N + kAccPad] after;
// then the per-unit state [Bs][U]; then the biases [2][4][U] (forward).
template <typename E, int SIDES>
struct Smem {
  E* w;
  E* ring;
  float* acc;
  float* state;
  float* bias;
  int Bp;
  __device__ Smem(unsigned char* base, int K, const Split& sp, int Bs) {
    Bp = (Bs + 15) / 16 * 16;
    w = reinterpret_cast<E*>(base);
    const size_t off = align128(static_cast<size_t>(K) * sp.ldw * sizeof(E));
    ring = reinterpret_cast<E*>(base + off);
    acc = reinterpret_cast<float*>(base + off);
    const size_t rings = static_cast<size_t>(kWarps) * kStages * 256 * sizeof(E);
    const size_t sums = static_cast<size_t>(sp.ksplit) * SIDES * Bp * (sp.N + kAccPad) * sizeof(float);
    state = reinterpret_cast<float*>(base + off + align128(rings > sums ? rings : sums));
    bias = state + static_cast<size_t>(Bs) * sp.U;
  }
};

// The step's products [Bs, N] = sum over sources of operand [Bs, K] @ weights[wrow.., N], in two
// calls: accumulate() adds one set of sources to this warp's registers (a step calls it once for
// what the layer below wrote, while the row's own previous step may still be running, and once for
// that), store_partials() hands the registers to the block. Warp w computes row tile m = w % TM
// against all N / 16 column tiles, over every ksplit-th 16-wide k step of the sources (ksplit =
// kWarps / TM), so each operand element is read once per block. It streams its operand tiles from
// L2 through its own ring of kStages slots (one 16-byte cp.async per lane per tile, kStages - 1
// tiles in flight): no block barrier until the partial sums are stored in sm.acc.
// acc[n][side][h]: the m16n8 accumulator of column tile n's half h (rows lane / 4 and + 8, columns
// 2 * (lane % 4) and + 1).
template <int SIDES>
using Acc = float[kMaxTiles][SIDES][2][4];

template <typename E, int SIDES>
__device__ __forceinline__ void accumulate(Acc<SIDES>& acc, const Src<E>* src, int nsrc, Smem<E, SIDES>& sm,
                                           const Split& sp, int Bs) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int TM = sm.Bp / 16, TN = sp.N / 16, m = warp % TM, kp = warp / TM;
  const int lrow = (lane & 7) + ((lane >> 3) & 1) * 8, lcol = (lane >> 4) * 8;  // ldmatrix addresses
  if (kp >= sp.ksplit) return;
  int total = 0;
  for (int i = 0; i < nsrc; ++i) total += src[i].K >> 4;
  const int mine = total > kp ? (total - kp + sp.ksplit - 1) / sp.ksplit : 0;
  const int r = lane >> 1, c8 = (lane & 1) * 8;  // this lane's 16 bytes of a tile
  const bool row_ok = m * 16 + r < Bs;           // rows past the batch: never read back
  E* const ring = sm.ring + static_cast<size_t>(warp) * kStages * 256;
  // Two cursors over my k steps (every ksplit-th over the sources, from kp): one issues the copies
  // kStages - 1 steps ahead, one multiplies. Crossing into the next source is the rare path.
  struct Cursor {
    int si = -1, ks = 0, end = 0;
    const E* row = nullptr;  // this lane's operand row in the source
    const E* w = nullptr;    // the source's first weight row
    bool side0 = true;
  };
  auto advance = [&](Cursor& c, int by) {
    c.ks += by;
    while (c.ks >= c.end && c.si + 1 < nsrc) {
      c.ks -= c.end, ++c.si;
      const Src<E>& q = src[c.si];
      c.end = q.K >> 4;
      c.row = q.p + static_cast<size_t>(m * 16 + r) * q.ld + c8;
      c.w = sm.w + static_cast<size_t>(q.wrow) * sp.ldw;
      c.side0 = SIDES == 1 || q.side == 0;
    }
  };
  Cursor in, mul;
  advance(in, kp), advance(mul, kp);
  int slot_in = 0, slot_mul = 0;
  auto issue = [&](int i) {
    if (i < mine) {
      if (row_ok) cp16(ring + slot_in * 256 + r * 16 + swz(r, c8), in.row + in.ks * 16);
      advance(in, sp.ksplit);
    }
    cp_commit();  // one group per step, empty or not: wait_group counts them
    slot_in = slot_in + 1 == kStages ? 0 : slot_in + 1;
  };
  for (int i = 0; i < kStages - 1; ++i) issue(i);
  for (int i = 0; i < mine; ++i) {
    issue(i + kStages - 1);
    cp_wait<kStages - 1>();
    __syncwarp();
    unsigned fa[4];
    ldsm_x4(fa, ring + slot_mul * 256 + lrow * 16 + swz(lrow, lcol));
    // All of the k step's weight fragments first, then the products: the loads overlap each other
    // instead of each product waiting for its own.
    const E* w = mul.w + static_cast<size_t>(mul.ks * 16 + lrow) * sp.ldw + (sp.ldw == 16 ? swz(lrow, lcol) : lcol);
    unsigned fb[kMaxTiles][4];
#pragma unroll
    for (int n = 0; n < kMaxTiles; ++n)
      if (n < TN) ldsm_x4_t(fb[n], w + n * 16);
#pragma unroll
    for (int n = 0; n < kMaxTiles; ++n) {
      if (n >= TN) break;
      if (mul.side0) {
        mma16816<E>(acc[n][0][0], fa, fb[n][0], fb[n][1]);
        mma16816<E>(acc[n][0][1], fa, fb[n][2], fb[n][3]);
      } else {
        mma16816<E>(acc[n][SIDES - 1][0], fa, fb[n][0], fb[n][1]);
        mma16816<E>(acc[n][SIDES - 1][1], fa, fb[n][2], fb[n][3]);
      }
    }
    advance(mul, sp.ksplit);
    slot_mul = slot_mul + 1 == kStages ? 0 : slot_mul + 1;
    __syncwarp();  // the slot is refilled kStages steps on
  }
  cp_wait<0>();
  __syncwarp();  // the ring is free for the next call
}

// Stores every warp's registers as partial sums [ksplit][SIDES][Bp][N + kAccPad] over the rings
// (after a barrier: all rings drained), then a barrier: the cell may read them.
template <typename E, int SIDES>
__device__ __forceinline__ void store_partials(const Acc<SIDES>& acc, Smem<E, SIDES>& sm, const Split& sp) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int TM = sm.Bp / 16, TN = sp.N / 16, m = warp % TM, kp = warp / TM;
  __syncthreads();
  if (kp < sp.ksplit) {
#pragma unroll
    for (int n = 0; n < kMaxTiles; ++n) {
      if (n >= TN) break;
#pragma unroll
      for (int s = 0; s < SIDES; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int ld = sp.N + kAccPad;
          float* o = sm.acc + (static_cast<size_t>(kp * SIDES + s) * sm.Bp + m * 16 + lane / 4) * ld + n * 16 + h * 8 +
                     2 * (lane % 4);
          o[0] = acc[n][s][h][0], o[1] = acc[n][s][h][1];
          o[8 * ld] = acc[n][s][h][2], o[8 * ld + 1] = acc[n][s][h][3];
        }
    }
  }
  __syncthreads();
}

// Sum of the ksplit partial products of (row bl, column n) on one side.
template <typename E, int SIDES>
__device__ inline float sum_at(const Smem<E, SIDES>& sm, const Split& sp, int side, int bl, int n) {
  float v = 0.0f;
  for (int kp = 0; kp < sp.ksplit; ++kp) v += sm.acc[(static_cast<size_t>(kp * SIDES + side) * sm.Bp + bl) * (sp.N + kAccPad) + n];
  return v;
}

template <typename E, bool GRU>
__global__ void __launch_bounds__(kThreads, 1) forward_k(const Args a) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int SIDES = GRU ? 2 : 1;
  constexpr int G = GRU ? 3 : 4;
  const Split& sp = a.sp;
  const int row = blockIdx.x / sp.S, l = row / a.D, d = row % a.D;
  const int u0 = (blockIdx.x % sp.S) * sp.U, U = min(sp.U, a.H - u0);
  const int Kx = l > 0 ? a.D * a.Hp : 0, Kh = a.Hp, T = a.T, B = a.B, H = a.H;
  Smem<E, SIDES> sm(smem, Kx + Kh, sp, a.Bs);

  // This block's weight columns n = g * U + u (gate g, unit u0 + u): input rows (the layer below's
  // outputs, each direction's block padded to Hp), then recurrent rows.
  const E* wk = static_cast<const E*>(a.wk[row]);
  const E* wr = static_cast<const E*>(a.wr[row]);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int col[2];  // the Keras column of this lane's block columns lane and lane + 32 (-1: zero)
  for (int q = 0; q < 2; ++q) {
    const int n = lane + 32 * q, g = n / sp.U, u = n % sp.U;
    col[q] = n < sp.N && g < G && u < U ? g * H + u0 + u : -1;
  }
  for (int k = warp; k < Kx + Kh; k += kWarps) {  // a warp per row: coalesced reads along it
    const E* src = nullptr;
    if (k < Kx) {
      const int dd = k / a.Hp, j = k - dd * a.Hp;
      if (j < H) src = wk + static_cast<size_t>(dd * H + j) * a.GH;
    } else if (k - Kx < H) {
      src = wr + static_cast<size_t>(k - Kx) * a.GH;
    }
    for (int q = 0; q < 2; ++q) {
      const int n = lane + 32 * q;
      if (n < sp.N)
        sm.w[static_cast<size_t>(k) * sp.ldw + (sp.ldw == 16 ? (n & 7) + swz(k, n & 8) : n)] =
            src && col[q] >= 0 ? src[col[q]] : from_f<E>(0.0f);
    }
  }
  for (int i = threadIdx.x; i < a.Bs * sp.U; i += kThreads) sm.state[i] = 0.0f;
  for (int i = threadIdx.x; i < SIDES * G * U; i += kThreads) {  // [side][gate][unit]
    const int side = i / (G * U), g = i / U % G, u = i % U;
    sm.bias[(side * 4 + g) * sp.U + u] = a.bias[row][side * a.GH + g * H + u0 + u];
  }
  __syncthreads();

  const E* below = l > 0 ? static_cast<const E*>(a.hseq[l - 1]) : nullptr;
  E* hseq = static_cast<E*>(a.hseq[l]);
  E* out = static_cast<E*>(a.out[l]);
  const bool last = l == a.L - 1;
  for (int s = 0; s < T; ++s) {
    const int t = d == 0 ? s : T - 1 - s;
    if (l == 0)  // the input projection does not depend on the wave: on its way while we wait
      for (int i = threadIdx.x; i < a.Bs * G; i += kThreads)
        prefetch_l2(static_cast<const E*>(a.xproj) + ((static_cast<size_t>(d) * T + t) * B + a.b0 + i / G) * a.GH +
                    (i % G) * H + u0);
    // The layer below's step t first: it is usually done before this row's step t - 1 is.
    Acc<SIDES> acc = {};
    const int ldh = a.D * a.Hp;
    if (l > 0) {
      const unsigned* f[2];
      for (int dd = 0; dd < a.D; ++dd) f[dd] = a.flags + ((l - 1) * a.D + dd) * T + (dd == 0 ? t : T - 1 - t);
      wait_all(f, a.D, sp.S);
      const Src<E> x{below + (static_cast<size_t>(t) * B + a.b0) * ldh, ldh, Kx, 0, 0};
      accumulate(acc, &x, 1, sm, sp, a.Bs);
    }
    if (s > 0) {
      const unsigned* f[1] = {a.flags + row * T + s - 1};
      wait_all(f, 1, sp.S);
      const int tp = d == 0 ? t - 1 : t + 1;
      const Src<E> h{hseq + (static_cast<size_t>(tp) * B + a.b0) * ldh + d * a.Hp, ldh, Kh, Kx, SIDES - 1};
      accumulate(acc, &h, 1, sm, sp, a.Bs);
    }
    store_partials(acc, sm, sp);

    for (int i = threadIdx.x; i < a.Bs * U; i += kThreads) {
      const int bl = i / U, u = i % U, b = a.b0 + bl, j = u0 + u;
      const bool valid = t < a.lens[b];
      const size_t bt = static_cast<size_t>(t) * B + b;
      float x[G], r[G];
#pragma unroll
      for (int g = 0; g < G; ++g) {
        x[g] = sum_at(sm, sp, 0, bl, g * sp.U + u) + sm.bias[g * sp.U + u];
        if (l == 0) x[g] += to_f(static_cast<const E*>(a.xproj)[(static_cast<size_t>(d) * T * B + bt) * a.GH + g * H + j]);
        r[g] = GRU ? sum_at(sm, sp, SIDES - 1, bl, g * sp.U + u) + sm.bias[(4 + g) * sp.U + u] : 0.0f;
      }
      float* st = sm.state + bl * sp.U + u;
      float h = 0.0f;
      E* saved_state = a.state[row] ? static_cast<E*>(a.state[row]) + bt * H + j : nullptr;
      if (valid) {
        E* gs = a.gates[row] ? static_cast<E*>(a.gates[row]) + bt * a.GP + j : nullptr;
        float saved;
        if constexpr (GRU) {
          const float z = sigm(x[0] + r[0]), rr = sigm(x[1] + r[1]), hc = tanhf(x[2] + rr * r[2]);
          saved = *st;
          h = z * saved + (1.0f - z) * hc;
          *st = h;
          if (gs) gs[0] = from_f<E>(z), gs[H] = from_f<E>(rr), gs[2 * H] = from_f<E>(hc), gs[3 * H] = from_f<E>(r[2]);
        } else {
          const float ig = sigm(x[0]), fg = sigm(x[1]), gg = tanhf(x[2]), og = sigm(x[3]);
          const float c = fg * *st + ig * gg;
          h = og * tanhf(c);
          *st = saved = c;
          if (gs) gs[0] = from_f<E>(ig), gs[H] = from_f<E>(fg), gs[2 * H] = from_f<E>(gg), gs[3 * H] = from_f<E>(og);
        }
        if (saved_state) *saved_state = from_f<E>(saved);
        if (last && a.hy && t == (d == 0 ? a.lens[b] - 1 : 0)) static_cast<E*>(a.hy)[(static_cast<size_t>(d) * B + b) * H + j] = from_f<E>(h);
      } else if (saved_state) {
        *saved_state = from_f<E>(0.0f);  // read as the previous c by the backward pass
      }
      const E hv = from_f<E>(h);
      hseq[bt * ldh + d * a.Hp + j] = hv;
      if (out != hseq) out[bt * a.D * H + d * H + j] = hv;
    }
    __syncthreads();
    if (threadIdx.x == 0) publish(a.flags + row * T + s);
  }
}

template <typename E, bool GRU>
__global__ void __launch_bounds__(kThreads, 1) backward_k(const Args a) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int G = GRU ? 3 : 4;
  const Split& sp = a.sp;
  const int row = blockIdx.x / sp.S, l = row / a.D, d = row % a.D;
  const int u0 = (blockIdx.x % sp.S) * sp.U, U = min(sp.U, a.H - u0);
  const bool top = l == a.L - 1;
  const int Kx = top ? 0 : a.D * a.GHp, Kh = a.GHp, T = a.T, B = a.B, H = a.H;
  Smem<E, 1> sm(smem, Kx + Kh, sp, a.Bs);

  // Columns are this block's units; rows the pre-activation gradients they are multiplied with:
  // those of the layer above (each direction's block padded to GHp; its kernel's rows d*H + unit),
  // then this row's own (its recurrent kernel's rows = units).
  for (int u = threadIdx.x / 32; u < sp.N; u += kWarps) {  // a warp per unit: coalesced reads along k
    const int lane = threadIdx.x % 32;
    for (int k = lane; k < Kx + Kh; k += 32) {
      E v = from_f<E>(0.0f);
      if (u < U) {
        if (k < Kx) {
          const int dd = k / a.GHp, c = k - dd * a.GHp;
          const E* wk = static_cast<const E*>(a.wk[(l + 1) * a.D + dd]);
          if (c < a.GH) v = wk[static_cast<size_t>(d * H + u0 + u) * a.GH + c];
        } else if (k - Kx < a.GH) {
          v = static_cast<const E*>(a.wr[row])[static_cast<size_t>(u0 + u) * a.GH + (k - Kx)];
        }
      }
      sm.w[static_cast<size_t>(k) * sp.ldw + (sp.ldw == 16 ? (u & 7) + swz(k, u & 8) : u)] = v;
    }
  }
  for (int i = threadIdx.x; i < a.Bs * sp.U; i += kThreads) sm.state[i] = 0.0f;
  __syncthreads();

  E* dgx = static_cast<E*>(a.dgx[row]);
  E* dgh = static_cast<E*>(a.dgh[row]);
  const E* gates = static_cast<const E*>(a.gates[row]);
  const E* state = static_cast<const E*>(a.state[row]);
  const int DH = a.D * H;
  for (int s = 0; s < T; ++s) {
    const int t = d == 0 ? T - 1 - s : s;
    // What the cell reads that the wave does not write: on its way while we wait.
    for (int i = threadIdx.x; i < a.Bs * 7; i += kThreads) {
      const size_t bt = static_cast<size_t>(t) * B + a.b0 + i / 7;
      const int k = i % 7, tp = d == 0 ? t - 1 : t + 1;
      if (k < 4) prefetch_l2(gates + bt * a.GP + k * H + u0);
      else if (k == 4) prefetch_l2(state + bt * H + u0);
      else if (k == 5 && tp >= 0 && tp < T) prefetch_l2(state + (bt + (static_cast<size_t>(tp) - t) * B) * H + u0);
      else if (k == 6 && top && a.dy) prefetch_l2(static_cast<const E*>(a.dy) + bt * DH + d * H + u0);
    }
    // The layer above's step t first: it is usually done before this row's step t + 1 is.
    Acc<1> acc = {};
    if (!top) {
      const unsigned* f[2];
      Src<E> src[2];
      for (int dd = 0; dd < a.D; ++dd) {
        f[dd] = a.flags + ((l + 1) * a.D + dd) * T + (dd == 0 ? T - 1 - t : t);
        src[dd] = {static_cast<const E*>(a.dgx[(l + 1) * a.D + dd]) + (static_cast<size_t>(t) * B + a.b0) * a.GP,
                   a.GP, a.GHp, dd * a.GHp, 0};
      }
      wait_all(f, a.D, sp.S);
      accumulate(acc, src, a.D, sm, sp, a.Bs);
    }
    if (s > 0) {
      const unsigned* f[1] = {a.flags + row * T + s - 1};
      wait_all(f, 1, sp.S);
      const int tn = d == 0 ? t + 1 : t - 1;
      const Src<E> g{dgh + (static_cast<size_t>(tn) * B + a.b0) * a.ldgh, a.ldgh, Kh, Kx, 0};
      accumulate(acc, &g, 1, sm, sp, a.Bs);
    }
    store_partials(acc, sm, sp);

    for (int i = threadIdx.x; i < a.Bs * U; i += kThreads) {
      const int bl = i / U, u = i % U, b = a.b0 + bl, j = u0 + u;
      const size_t bt = static_cast<size_t>(t) * B + b;
      E* gx = dgx + bt * a.GP + j;
      E* gh = dgh + bt * a.ldgh + j;
      if (j == H - 1)  // the padding columns, read times zero weights (this memory held gates)
        for (int c = a.GH; c < a.GHp; ++c) dgx[bt * a.GP + c] = dgh[bt * a.ldgh + c] = from_f<E>(0.0f);
      if (t >= a.lens[b]) {
#pragma unroll
        for (int g = 0; g < G; ++g) gx[g * H] = gh[g * H] = from_f<E>(0.0f);
        continue;
      }
      float dh = sum_at(sm, sp, 0, bl, u);
      if (top) {
        dh += a.dy ? to_f(static_cast<const E*>(a.dy)[bt * DH + d * H + j]) : a.dy32[bt * DH + d * H + j];
        if (a.dhy && t == (d == 0 ? a.lens[b] - 1 : 0))
          dh += to_f(static_cast<const E*>(a.dhy)[(static_cast<size_t>(d) * B + b) * H + j]);
      }
      float* carry = sm.state + bl * sp.U + u;
      const E* gs = gates + bt * a.GP + j;
      if constexpr (GRU) {
        dh += *carry;
        const float z = to_f(gs[0]), r = to_f(gs[H]), hc = to_f(gs[2 * H]), hh = to_f(gs[3 * H]);
        const float hp = to_f(state[bt * H + j]);
        const float dhc = dh * (1.0f - z) * (1.0f - hc * hc);
        const float dz = dh * (hp - hc) * z * (1.0f - z);
        const float dr = dhc * hh * r * (1.0f - r);
        *carry = dh * z;
        gx[0] = gh[0] = from_f<E>(dz);
        gx[H] = gh[H] = from_f<E>(dr);
        gx[2 * H] = from_f<E>(dhc);
        gh[2 * H] = from_f<E>(dhc * r);
      } else {
        const float ig = to_f(gs[0]), fg = to_f(gs[H]), gg = to_f(gs[2 * H]), og = to_f(gs[3 * H]);
        const float c = to_f(state[bt * H + j]);
        const int tp = d == 0 ? t - 1 : t + 1;
        const float cp = (tp >= 0 && tp < T) ? to_f(state[(static_cast<size_t>(tp) * B + b) * H + j]) : 0.0f;
        const float tc = tanhf(c);
        const float dc = *carry + dh * og * (1.0f - tc * tc);
        *carry = dc * fg;
        gx[0] = from_f<E>(dc * gg * ig * (1.0f - ig));
        gx[H] = from_f<E>(dc * cp * fg * (1.0f - fg));
        gx[2 * H] = from_f<E>(dc * ig * (1.0f - gg * gg));
        gx[3 * H] = from_f<E>(dh * tc * og * (1.0f - og));
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) publish(a.flags + row * T + s);
  }
}

// Column sums in a fixed order (no atomics: the same sums every run): block (x, y) sums its rows of
// 32 V columns (V consecutive ones a thread, loaded as one access) into part[y][c], then colsum_add_k
// adds the parts in order. Every column's order is the same for any V.
template <typename E, int V>
__global__ void colsum_k(const E* a, int64_t rows, int64_t cols, int64_t lda, float* part) {
  __shared__ float p[8][32 * V + 1];
  const int64_t c = (blockIdx.x * 32 + threadIdx.x) * V;
  float v[V] = {};
  if (c < cols)
    for (int64_t r = blockIdx.y * 8 + threadIdx.y; r < rows; r += 8 * gridDim.y) {
      const rnntrain::cuda::k::Vec<E, V> x = *reinterpret_cast<const rnntrain::cuda::k::Vec<E, V>*>(a + r * lda + c);
#pragma unroll
      for (int i = 0; i < V; ++i) v[i] += to_f(x.v[i]);
    }
#pragma unroll
  for (int i = 0; i < V; ++i) p[threadIdx.y][threadIdx.x * V + i] = v[i];
  __syncthreads();
  if (threadIdx.y == 0 && c < cols)
#pragma unroll
    for (int i = 0; i < V; ++i) {
      float t = v[i];
      for (int y = 1; y < 8; ++y) t += p[y][threadIdx.x * V + i];
      part[blockIdx.y * cols + c + i] = t;
    }
}

__global__ void colsum_add_k(const float* part, int parts, int64_t cols, float* out) {
  GRID_LOOP(c, cols) {
    float v = 0.0f;
#pragma unroll 8
    for (int i = 0; i < parts; ++i) v += part[i * cols + c];
    out[c] += v;
  }
}

template <auto Kernel>
void launch(const Args& a, cudaStream_t s) {
  static const bool attr_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_optin())));
    return true;
  }();
  (void)attr_set;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(a.sp.S * a.L * a.D));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = a.sp.smem;
  cfg.stream = s;
  // Every block of a launch waits on others: they must all be resident at once, which a
  // cooperative launch guarantees (or refuses).
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, Kernel, a));
}

}  // namespace

void launch_forward(const Args& a, bool bf16, cudaStream_t s) {
  if (bf16) {
    if (a.gru) launch<forward_k<__nv_bfloat16, true>>(a, s);
    else launch<forward_k<__nv_bfloat16, false>>(a, s);
  } else {
    if (a.gru) launch<forward_k<__half, true>>(a, s);
    else launch<forward_k<__half, false>>(a, s);
  }
}

void launch_backward(const Args& a, bool bf16, cudaStream_t s) {
  if (bf16) {
    if (a.gru) launch<backward_k<__nv_bfloat16, true>>(a, s);
    else launch<backward_k<__nv_bfloat16, false>>(a, s);
  } else {
    if (a.gru) launch<backward_k<__half, true>>(a, s);
    else launch<backward_k<__half, false>>(a, s);
  }
}

void add_colsum(const void* a, bool bf16, int64_t rows, int64_t cols, int64_t lda, float* part, float* out,
                cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  const dim3 block(32, 8);
  const unsigned parts = static_cast<unsigned>(std::min<int64_t>((rows + 7) / 8, kColsumParts));
  const bool vec = cols % 4 == 0 && lda % 4 == 0 && reinterpret_cast<uintptr_t>(a) % 8 == 0;
  const dim3 grid(static_cast<unsigned>((cols + (vec ? 127 : 31)) / (vec ? 128 : 32)), parts);
  if (bf16 && vec) colsum_k<__nv_bfloat16, 4><<<grid, block, 0, s>>>(static_cast<const __nv_bfloat16*>(a), rows, cols, lda, part);
  else if (bf16) colsum_k<__nv_bfloat16, 1><<<grid, block, 0, s>>>(static_cast<const __nv_bfloat16*>(a), rows, cols, lda, part);
  else if (vec) colsum_k<__half, 4><<<grid, block, 0, s>>>(static_cast<const __half*>(a), rows, cols, lda, part);
  else colsum_k<__half, 1><<<grid, block, 0, s>>>(static_cast<const __half*>(a), rows, cols, lda, part);
  LAUNCH_CHECK("wavefront colsum");
  colsum_add_k<<<rnntrain::cuda::k::blocks_for(cols), rnntrain::cuda::k::kThreads, 0, s>>>(part, static_cast<int>(grid.y), cols, out);
  LAUNCH_CHECK("wavefront colsum_add");
}

int sm_count() {
  static int n = [] {
    int dev = 0, v = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    return v;
  }();
  return n;
}

size_t smem_optin() {
  static size_t n = [] {
    int dev = 0, v = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    return static_cast<size_t>(v);
  }();
  return n;
}

}  // namespace rnntrain::cuda::wf
