// PTX for the second design's wavefront kernels (sm_90a: wgmma, mbarriers, bulk copies multicast to a
// cluster, cluster barriers), the wgmma operand layouts and vector loads and stores. Shared by
// kernels_wavefront2.cu (forward) and kernels_wavefront2_backward.cu.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/kernels_common.cuh"

namespace rnntrain::cuda::wf::sm90 {

using k::from_f;
using k::to_f;

// ---- PTX: shared-memory addresses, mbarriers, bulk copies, cluster barriers, flags ----------------

__device__ __forceinline__ uint32_t saddr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// A wait of 10 s means a broken schedule: trap (the host sees a launch failure) rather than hang.
__device__ __forceinline__ void check_stuck(unsigned long long t0) {
  if (global_ns() - t0 > 10000000000ull) __trap();
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(saddr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(saddr(bar)), "r"(bytes) : "memory");
}
// Waits for the phase of bar with this parity. Cluster: the phase is completed by other CTAs'
// arrivals, whose writes it acquires at cluster scope.
template <bool Cluster = false>
__device__ __forceinline__ bool mbar_wait_try(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  if constexpr (Cluster)
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(saddr(bar)), "r"(parity)
        : "memory");
  else
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(saddr(bar)), "r"(parity)
                 : "memory");
  return done != 0;
}
template <bool Cluster = false>
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  if (mbar_wait_try<Cluster>(bar, parity)) return;  // the clock is read only when the phase is not complete yet
  const unsigned long long t0 = global_ns();
  while (!mbar_wait_try<Cluster>(bar, parity)) check_stuck(t0);
}
// bytes from global src into the same offset of every cluster CTA's shared memory (dst), completing
// on each one's mbarrier at the offset of bar.
__device__ __forceinline__ void multicast(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;"
      ::"r"(saddr(dst)), "l"(src), "r"(bytes), "r"(saddr(bar)), "h"(mask)
      : "memory");
}
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void fence_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }
__device__ __forceinline__ void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// One thread spins until *f >= target. Flags only grow, so `seen` (the caller's last read of f, 0 at
// first) answers a wait that an earlier read already met without a load: a ring slot's wait, whose
// reader released it steps ago, then costs no round trip to L2 on the step's path. What the caller
// does after either return follows an acquire of a value >= target in program order.
__device__ __forceinline__ void wait_flag(const unsigned* f, unsigned target, unsigned& seen) {
  if (seen >= target) return;
  if ((seen = load_acquire(f)) >= target) return;
  const unsigned long long t0 = global_ns();
  while ((seen = load_acquire(f)) < target) {
    __nanosleep(20);
    check_stuck(t0);
  }
}

// RNNTRAIN_WF2_PHASES (a build for profiling only): WF2_MARK_IF(who, k) adds the SM cycles since the
// last mark to phase k of the threads for which `who` holds (the kernel's phase_cycles, phase_at).
#ifdef RNNTRAIN_WF2_PHASES
#define WF2_MARK_IF(who, k)                      \
  do {                                           \
    const long long now_ = clock64();            \
    if (who) phase_cycles[k] += now_ - phase_at; \
    phase_at = now_;                             \
  } while (0)
#else
#define WF2_MARK_IF(who, k) \
  do {                      \
  } while (0)
#endif

__device__ __forceinline__ float tanh_fast(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float sigm_fast(float x) { return 0.5f * tanh_fast(0.5f * x) + 0.5f; }

// ---- wgmma ---------------------------------------------------------------------------------------

// Shared-memory operand descriptor, no swizzling: lbo = bytes between core matrices (8 rows of 16
// bytes) along K, sbo = along M (N).
__device__ __forceinline__ uint64_t desc(const void* p, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((saddr(p) & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32);
}

// d[64 x N] += A[64 x 16] B[16 x N] (one k step), E the half type. Generated: one per (type, N).
template <typename E, int N>
__device__ __forceinline__ void mma(float (&d)[N / 2], uint64_t da, uint64_t db);
template <>
__device__ __forceinline__ void mma<__nv_bfloat16, 8>(float (&d)[8 / 2], uint64_t da, uint64_t db) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(da), "l"(db));
}
template <>
__device__ __forceinline__ void mma<__half, 8>(float (&d)[8 / 2], uint64_t da, uint64_t db) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(da), "l"(db));
}
template <>
__device__ __forceinline__ void mma<__nv_bfloat16, 16>(float (&d)[16 / 2], uint64_t da, uint64_t db) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, 0, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(da), "l"(db));
}
template <>
__device__ __forceinline__ void mma<__half, 16>(float (&d)[16 / 2], uint64_t da, uint64_t db) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, 0, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(da), "l"(db));
}
template <>
__device__ __forceinline__ void mma<__nv_bfloat16, 32>(float (&d)[32 / 2], uint64_t da, uint64_t db) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 0, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(da), "l"(db));
}
template <>
__device__ __forceinline__ void mma<__half, 32>(float (&d)[32 / 2], uint64_t da, uint64_t db) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 0, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(da), "l"(db));
}
template <>
__device__ __forceinline__ void mma<__nv_bfloat16, 64>(float (&d)[64 / 2], uint64_t da, uint64_t db) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db));
}
template <>
__device__ __forceinline__ void mma<__half, 64>(float (&d)[64 / 2], uint64_t da, uint64_t db) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db));
}
template <>
__device__ __forceinline__ void mma<__nv_bfloat16, 128>(float (&d)[128 / 2], uint64_t da, uint64_t db) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db));
}
template <>
__device__ __forceinline__ void mma<__half, 128>(float (&d)[128 / 2], uint64_t da, uint64_t db) {
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db));
}

// Element offsets in the two operand layouts (8 x 8 core matrices of 128 bytes):
//  - A, [64 x Kp] (h): k-chunk outer, core (row group m/8, chunk k/8) at (k/8 * 8 + m/8) * 64, so the
//    units of one CTA (whole chunks) are one contiguous slice, one bulk copy;
//  - W, [N x Kp] (weights, column n of the CTA's slice as row n): core (n/8, k/8) at (n/8 * Kp/8 + k/8) * 64.
__device__ __forceinline__ int a_at(int m, int k) { return ((k >> 3) * 8 + (m >> 3)) * 64 + (m & 7) * 8 + (k & 7); }
__device__ __forceinline__ int w_at(int n, int k, int Kp) { return ((n >> 3) * (Kp >> 3) + (k >> 3)) * 64 + (n & 7) * 8 + (k & 7); }

// Pins the accumulators in place around a run of wgmma: without it the compiler moves them between
// the asynchronous instructions and serializes every one (ptxas C7515), as CUTLASS's
// warpgroup_fence_operand does.
template <int R>
__device__ __forceinline__ void fence_acc(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Accumulator element i of a thread: column n and row m.
__device__ __forceinline__ int col_of(int i) { return 8 * (i / 4) + 2 * (threadIdx.x % 4) + (i % 2); }
__device__ __forceinline__ int row_of(int i) { return 16 * (threadIdx.x / 32) + (threadIdx.x % 32) / 4 + 8 * ((i / 2) % 2); }

// Loads a thread of the kernels' setup (the weights into shared memory) keeps in flight.
constexpr int kBatch = 8;

template <int BYTES>
__device__ __forceinline__ bool aligned(const void* p) { return (reinterpret_cast<uintptr_t>(p) & (BYTES - 1)) == 0; }

// Asynchronous copies into the thread's own shared memory (cp.async; waited for by the same thread).
template <int BYTES>
__device__ __forceinline__ void copy_async(void* dst, const void* src) {
  if constexpr (BYTES == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(saddr(dst)), "l"(src) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(saddr(dst)), "l"(src), "n"(BYTES) : "memory");
}
// n (at most P, which is even) consecutive values of the half type: one copy where whole and aligned,
// else loaded and stored by the thread (0 past n).
template <typename E, int P>
__device__ __forceinline__ void copy_halves_async(E* dst, const E* src, int n) {
  if (n >= P && aligned<2 * P>(src)) {
    copy_async<2 * P>(dst, src);
    return;
  }
  for (int p = 0; p < P; ++p) dst[p] = p < n ? src[p] : from_f<E>(0.0f);
}
// The value of the half type whose bits are v's low 16.
template <typename E>
__device__ __forceinline__ float half_bits(uint32_t v) {
  if constexpr (std::is_same_v<E, __half>) return __half2float(__ushort_as_half(static_cast<unsigned short>(v)));
  else return __uint_as_float(v << 16);
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void copy_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// P values in the half type, two to a word (the lower half first).
template <typename E, int P>
__device__ __forceinline__ void pack_halves(uint32_t (&w)[P / 2], const float (&v)[P]) {
  union {
    E e[2];
    uint32_t u;
  } pair;
#pragma unroll
  for (int p = 0; p < P / 2; ++p) {
    pair.e[0] = from_f<E>(v[2 * p]), pair.e[1] = from_f<E>(v[2 * p + 1]);
    w[p] = pair.u;
  }
}
// The first n (at most P) of P packed values to global memory: a vector where whole and aligned.
template <typename E, int P>
__device__ __forceinline__ void store_packed(E* dst, const uint32_t (&w)[P / 2], int n) {
  if (n >= P && aligned<2 * P>(dst)) {
    if constexpr (P == 8) *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
    else if constexpr (P == 4) *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
    else *reinterpret_cast<uint32_t*>(dst) = w[0];
    return;
  }
  unsigned short* raw = reinterpret_cast<unsigned short*>(dst);
  for (int p = 0; p < n && p < P; ++p) raw[p] = static_cast<unsigned short>(p % 2 ? w[p / 2] >> 16 : w[p / 2]);
}
// n (at most P) consecutive values to global memory, in the half type: a vector where whole and aligned.
template <typename E, int P>
__device__ __forceinline__ void store_halves(E* dst, const float (&v)[P], int n) {
  if (n >= P && aligned<2 * P>(dst)) {
    union {
      E e[P];
      uint32_t u[P / 2];
    } pack;
#pragma unroll
    for (int p = 0; p < P; ++p) pack.e[p] = from_f<E>(v[p]);
    if constexpr (P == 8) *reinterpret_cast<uint4*>(dst) = make_uint4(pack.u[0], pack.u[1], pack.u[2], pack.u[3]);
    else if constexpr (P == 4) *reinterpret_cast<uint2*>(dst) = make_uint2(pack.u[0], pack.u[1]);
    else *reinterpret_cast<uint32_t*>(dst) = pack.u[0];
    return;
  }
  for (int p = 0; p < n && p < P; ++p) dst[p] = from_f<E>(v[p]);
}

}  // namespace rnntrain::cuda::wf::sm90
