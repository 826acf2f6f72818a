// rnntrain_probes: the building blocks of one recurrent wave step on a Hopper GPU, timed one at a
// time (issue 33 item 1), to choose the second design of the own kernels from measurements:
//  - sharing a step's h (64 x 512 bf16 = 64 KiB, the blog workload's batch and width) among the CTAs
//    that need it, by (a) bulk asynchronous copies pushed into the peers' shared memory, completing
//    on their mbarriers, (a') plain stores into the peers' shared memory and a cluster barrier,
//    (b) bulk copies multicast from L2 to every CTA of a cluster, (c) step-tagged slices in L2 with a
//    flag per producer that every consumer polls, across the whole GPU (no cluster);
//  - one CTA's share of the step's matrix work, [64 x 1024] x [1024 x 32] (h and the layer input
//    against a weight slice kept on chip for all steps), by wgmma with both operands in shared memory
//    and by mma.sync with the weight slice in registers.
// Each probe checks what it moved or computed, then times many steps in one launch (events, the
// median of 5). Not part of rnntrain; results and the design they lead to are in docs/cuda.md.
// Build: sm_90a (wgmma, multicast). Usage: rnntrain_probes [steps]
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace cg = cooperative_groups;

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

namespace {

constexpr int kH = 65536;  // bytes of one step's h: 64 x 512 bf16
constexpr int kThreads = 256;

// ---- PTX helpers -----------------------------------------------------------------------------

__device__ uint32_t smem(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ void mbar_expect(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}
__device__ uint32_t map_to(uint32_t addr, uint32_t rank) {  // the same offset in CTA `rank`'s shared memory
  uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(out) : "r"(addr), "r"(rank));
  return out;
}
__device__ void bulk_push(uint32_t dst_cluster, uint32_t src, uint32_t bytes, uint32_t bar_cluster) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(dst_cluster), "r"(src), "r"(bytes), "r"(bar_cluster) : "memory");
}
__device__ void bulk_multicast(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;"
      ::"r"(dst), "l"(src), "r"(bytes), "r"(bar), "h"(mask) : "memory");
}
__device__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ void fence_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }
__device__ void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

// The step's "cell": each 16-bit value of this CTA's slice of h becomes the previous step's value at
// its place plus one, so after T steps every value is T when every exchange delivered.
__device__ void next_slice(const uint16_t* prev_all, uint16_t* out, int offset, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = static_cast<uint16_t>(prev_all[offset + i] + 1);
}

// ---- (a) bulk copies pushed into the peers' shared memory, (a') plain stores + cluster barrier ------

// Dynamic shared memory: all[2][kH] (the full h, double-buffered), mine[slice], two mbarriers.
__global__ void __launch_bounds__(kThreads) exchange_bulk(int steps, uint16_t* out) {
  extern __shared__ __align__(128) unsigned char sm[];
  cg::cluster_group cluster = cg::this_cluster();
  const uint32_t C = cluster.num_blocks(), rank = cluster.block_rank(), slice = kH / C;
  uint16_t* all = reinterpret_cast<uint16_t*>(sm);
  uint16_t* mine = reinterpret_cast<uint16_t*>(sm + 2 * kH);
  uint64_t* bars = reinterpret_cast<uint64_t*>(sm + 2 * kH + slice);
  for (int i = threadIdx.x; i < kH; i += blockDim.x) all[i] = 0;  // both buffers: 2 x kH bytes
  if (threadIdx.x == 0) {
    mbar_init(smem(&bars[0]), 1), mbar_init(smem(&bars[1]), 1);
    fence_mbar_init();
  }
  cluster.sync();
  for (int t = 0; t < steps; ++t) {
    const int b = t & 1;
    uint16_t* prev = all + (b ^ 1) * (kH / 2);
    uint16_t* now = all + b * (kH / 2);
    next_slice(prev, mine, rank * slice / 2, slice / 2);
    if (threadIdx.x == 0) mbar_expect(smem(&bars[b]), (C - 1) * slice);
    fence_async_shared();
    __syncthreads();
    if (threadIdx.x == 0)
      for (uint32_t p = 0; p < C; ++p)
        if (p != rank)
          bulk_push(map_to(smem(now + rank * slice / 2), p), smem(mine), slice, map_to(smem(&bars[b]), p));
    for (uint32_t i = threadIdx.x; i < slice / 2; i += blockDim.x) now[rank * slice / 2 + i] = mine[i];
    mbar_wait(smem(&bars[b]), (t >> 1) & 1);
    __syncthreads();
  }
  cluster.sync();  // no CTA leaves while a peer may still write into it
  if (rank == 0 && blockIdx.x == 0)
    for (int i = threadIdx.x; i < kH / 2; i += blockDim.x) out[i] = all[((steps - 1) & 1) * (kH / 2) + i];
}

__global__ void __launch_bounds__(kThreads) exchange_stores(int steps, uint16_t* out) {
  extern __shared__ __align__(128) unsigned char sm[];
  cg::cluster_group cluster = cg::this_cluster();
  const uint32_t C = cluster.num_blocks(), rank = cluster.block_rank(), slice = kH / C;
  uint16_t* all = reinterpret_cast<uint16_t*>(sm);
  uint16_t* mine = reinterpret_cast<uint16_t*>(sm + 2 * kH);
  for (int i = threadIdx.x; i < kH; i += blockDim.x) all[i] = 0;
  cluster.sync();
  for (int t = 0; t < steps; ++t) {
    const int b = t & 1;
    uint16_t* now = all + b * (kH / 2);
    next_slice(all + (b ^ 1) * (kH / 2), mine, rank * slice / 2, slice / 2);
    __syncthreads();
    const uint4* src = reinterpret_cast<const uint4*>(mine);
    for (uint32_t p = 0; p < C; ++p) {
      uint4* dst = reinterpret_cast<uint4*>(cluster.map_shared_rank(now + rank * slice / 2, p));
      for (uint32_t i = threadIdx.x; i < slice / 16; i += blockDim.x) dst[i] = src[i];
    }
    cluster.sync();
  }
  if (rank == 0 && blockIdx.x == 0)
    for (int i = threadIdx.x; i < kH / 2; i += blockDim.x) out[i] = all[((steps - 1) & 1) * (kH / 2) + i];
}

// ---- (b) bulk copies multicast from L2 to every CTA of the cluster -------------------------------

// Each CTA writes its slice to global memory (L2), then multicasts that slice into the same place of
// every CTA's all[b]; each CTA's mbarrier counts the whole h in. g: [clusters][2][kH bytes].
__global__ void __launch_bounds__(kThreads) exchange_multicast(int steps, uint16_t* g, uint16_t* out) {
  extern __shared__ __align__(128) unsigned char sm[];
  cg::cluster_group cluster = cg::this_cluster();
  const uint32_t C = cluster.num_blocks(), rank = cluster.block_rank(), slice = kH / C;
  uint16_t* all = reinterpret_cast<uint16_t*>(sm);
  uint64_t* bars = reinterpret_cast<uint64_t*>(sm + 2 * kH);
  uint16_t* mine = g + static_cast<size_t>(blockIdx.x / C) * kH;  // this cluster's two global buffers
  for (int i = threadIdx.x; i < kH; i += blockDim.x) all[i] = 0;
  if (threadIdx.x == 0) {
    mbar_init(smem(&bars[0]), 1), mbar_init(smem(&bars[1]), 1);
    fence_mbar_init();
  }
  cluster.sync();
  const uint16_t mask = static_cast<uint16_t>((1u << C) - 1);
  for (int t = 0; t < steps; ++t) {
    const int b = t & 1;
    uint16_t* gb = mine + b * (kH / 2) + rank * slice / 2;
    next_slice(all + (b ^ 1) * (kH / 2), gb, rank * slice / 2, slice / 2);
    fence_async_global();
    __syncthreads();
    if (threadIdx.x == 0) {
      mbar_expect(smem(&bars[b]), C * slice);
      bulk_multicast(smem(all + b * (kH / 2) + rank * slice / 2), gb, slice, smem(&bars[b]), mask);
    }
    mbar_wait(smem(&bars[b]), (t >> 1) & 1);
    __syncthreads();
  }
  cluster.sync();
  if (rank == 0 && blockIdx.x == 0)
    for (int i = threadIdx.x; i < kH / 2; i += blockDim.x) out[i] = all[((steps - 1) & 1) * (kH / 2) + i];
}

// ---- (c) step-tagged slices in L2, a flag per producer, across the GPU -------------------------------

// G CTAs, each producing kH / G bytes of h per step: it writes them to h[b] in global memory, raises
// its flag to the step, waits for every flag to reach the step, then loads the whole h from L2.
__global__ void __launch_bounds__(kThreads) exchange_flags(int steps, uint16_t* h, unsigned* flags, uint16_t* out) {
  extern __shared__ __align__(128) unsigned char sm[];
  const uint32_t G = gridDim.x, rank = blockIdx.x, slice = kH / G;
  uint16_t* all = reinterpret_cast<uint16_t*>(sm);  // this CTA's copy of the previous h
  for (int i = threadIdx.x; i < kH / 2; i += blockDim.x) all[i] = 0;
  __syncthreads();
  for (int t = 0; t < steps; ++t) {
    const int b = t & 1;
    uint16_t* hb = h + b * (kH / 2);
    next_slice(all, hb + rank * slice / 2, rank * slice / 2, slice / 2);
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flags + rank), "r"(t + 1) : "memory");
    for (uint32_t j = threadIdx.x; j < G; j += blockDim.x) {
      unsigned v;
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(flags + j) : "memory");
      } while (v < static_cast<unsigned>(t + 1));
    }
    __syncthreads();
    const uint4* src = reinterpret_cast<const uint4*>(hb);
    uint4* dst = reinterpret_cast<uint4*>(all);
    for (int i = threadIdx.x; i < kH / 16; i += blockDim.x) dst[i] = __ldcg(src + i);
    __syncthreads();
  }
  if (rank == 0)
    for (int i = threadIdx.x; i < kH / 2; i += blockDim.x) out[i] = all[i];
}

// ---- (d) one CTA's matrix work: [64 x 1024] x [1024 x 32], weights on chip ----------------------------

constexpr int kM = 64, kK = 1024, kN = 32;

// wgmma's shared-memory operands without swizzling, K-major: 8 x 8 "core matrices" (8 rows of 16
// bytes, 128 contiguous bytes), laid out core(row group r, k chunk c) at (r * (K / 8) + c) * 128.
__host__ __device__ int core_offset(int row, int k, int K = kK) {  // in elements
  return ((row / 8) * (K / 8) + k / 8) * 64 + (row % 8) * 8 + k % 8;
}
__device__ uint64_t wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (static_cast<uint64_t>((addr & 0x3FFFF) >> 4)) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32);
}

// One warpgroup per K share (blockDim / 128 of them split K): 1024 / 16 / shares wgmma m64n32k16 per
// step, partial sums added through shared memory. c: [64 x 32] fp32 of the last step.
template <bool LboAlongK, int SHARES>
__global__ void __launch_bounds__(128 * SHARES) matmul_wgmma(int steps, const __nv_bfloat16* a, const __nv_bfloat16* w,
                                                    float* c) {
  extern __shared__ __align__(128) unsigned char sm[];
  __nv_bfloat16* A = reinterpret_cast<__nv_bfloat16*>(sm);         // [64 x 1024], 128 KiB
  __nv_bfloat16* B = A + kM * kK;                                   // [32 x 1024] (N x K), 64 KiB
  float* part = reinterpret_cast<float*>(B + kN * kK);              // [64 x 32] fp32, 8 KiB
  for (int i = threadIdx.x; i < kM * kK; i += blockDim.x) A[core_offset(i / kK, i % kK)] = a[i];
  for (int i = threadIdx.x; i < kN * kK; i += blockDim.x) B[core_offset(i / kK, i % kK)] = w[i];
  fence_async_shared();
  __syncthreads();
  constexpr int kSteps = kK / 16 / SHARES;
  const int wg = threadIdx.x / 128;
  // Along K the next core matrix is 128 bytes on; along M (N) the next 8 rows are K / 8 * 128 on.
  const uint32_t along_k = 128, along_rows = kK / 8 * 128;
  const uint32_t lbo = LboAlongK ? along_k : along_rows, sbo = LboAlongK ? along_rows : along_k;
  float d[16];
  for (int t = 0; t < steps; ++t) {
    for (float& v : d) v = 0.0f;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      const int k = wg * kSteps + i;
      const uint64_t da = wgmma_desc(smem(A) + k * 256, lbo, sbo), db = wgmma_desc(smem(B) + k * 256, lbo, sbo);
      asm volatile(
          "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
          "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 0, 0; }"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
            "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
          : "l"(da), "l"(db));
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    // The accumulator layout of m64nNk16: warp w of the group holds rows 16w..16w+15; lane l holds
    // rows 16w + l/4 and + 8, columns 8j + 2(l%4) and + 1 for j < N/8.
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
    if (wg == 0)
      for (int j = 0; j < kN / 8; ++j)
        for (int h = 0; h < 2; ++h) {
          const int row = 16 * warp + lane / 4 + 8 * h, col = 8 * j + 2 * (lane % 4);
          part[row * kN + col] = d[4 * j + 2 * h], part[row * kN + col + 1] = d[4 * j + 2 * h + 1];
        }
    __syncthreads();
    for (int s = 1; s < SHARES; ++s) {
      if (wg == s)
        for (int j = 0; j < kN / 8; ++j)
          for (int h = 0; h < 2; ++h) {
            const int row = 16 * warp + lane / 4 + 8 * h, col = 8 * j + 2 * (lane % 4);
            part[row * kN + col] += d[4 * j + 2 * h], part[row * kN + col + 1] += d[4 * j + 2 * h + 1];
          }
      __syncthreads();
    }
    fence_async_shared();  // as a real step, which writes the next h into A here
  }
  if (blockIdx.x == 0)
    for (int i = threadIdx.x; i < kM * kN; i += blockDim.x) c[i] = part[i];
}

__device__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 4 x SHARES warps: warp w keeps columns 8(w % 4) .. +7 of the weight slice for its K share in
// registers for all steps (2 x 64 / SHARES registers a lane) and runs the 4 row tiles of A, read
// from shared memory (row-major, rows padded by 8 elements) with ldmatrix.
constexpr int kLda = kK + 8;
template <int SHARES>
__global__ void __launch_bounds__(128 * SHARES) matmul_mma(int steps, const __nv_bfloat16* a, const __nv_bfloat16* w,
                                                            float* c) {
  extern __shared__ __align__(128) unsigned char sm[];
  __nv_bfloat16* A = reinterpret_cast<__nv_bfloat16*>(sm);  // [64 x kLda]
  float* part = reinterpret_cast<float*>(A + kM * kLda);     // [64 x 32]
  for (int i = threadIdx.x; i < kM * kK; i += blockDim.x) A[(i / kK) * kLda + i % kK] = a[i];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n0 = 8 * (warp % 4), share = warp / 4;
  constexpr int kSteps = kK / 16 / SHARES;
  unsigned b[kSteps][2];  // the B fragment of m16n8k16 (col-major B = rows of w): k pairs of column n0 + lane/4
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int k = (share * kSteps + s) * 16 + 2 * (lane % 4), n = n0 + lane / 4;
    __nv_bfloat162 lo = {w[n * kK + k], w[n * kK + k + 1]}, hi = {w[n * kK + k + 8], w[n * kK + k + 9]};
    b[s][0] = *reinterpret_cast<unsigned*>(&lo), b[s][1] = *reinterpret_cast<unsigned*>(&hi);
  }
  __syncthreads();
  for (int t = 0; t < steps; ++t) {
    float d[4][4] = {};
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const int k = (share * kSteps + s) * 16;
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        unsigned fa[4];
        const __nv_bfloat16* p = A + (16 * m + lane % 16) * kLda + k + 8 * (lane / 16);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(fa[0]), "=r"(fa[1]), "=r"(fa[2]), "=r"(fa[3]) : "r"(smem(p)));
        mma16816(d[m], fa, b[s][0], b[s][1]);
      }
    }
    for (int s = 0; s < SHARES; ++s) {
      if (share == s)
        for (int m = 0; m < 4; ++m)
          for (int h = 0; h < 2; ++h) {
            const int row = 16 * m + lane / 4 + 8 * h, col = n0 + 2 * (lane % 4);
            if (s == 0) part[row * kN + col] = d[m][2 * h], part[row * kN + col + 1] = d[m][2 * h + 1];
            else part[row * kN + col] += d[m][2 * h], part[row * kN + col + 1] += d[m][2 * h + 1];
          }
      __syncthreads();
    }
  }
  if (blockIdx.x == 0)
    for (int i = threadIdx.x; i < kM * kN; i += blockDim.x) c[i] = part[i];
}

// ---- (e) a K-split pair: half of a layer step's product each, partial sums through DSMEM, the cell --

// A cluster of 2 CTAs owns 32 LSTM units (128 gate columns: unit u's gates i, f, g, o at columns
// 4u .. 4u + 3) of a layer with K = 1024 ([h below | own h]). CTA r keeps the weight rows of its K
// half ([128 x 512], 128 KiB) and that half of the operand ([64 x 512], 64 KiB) in shared memory,
// runs 32 wgmma.m64n128k16, then sends the sums of the other CTA's 16 units (64 columns, 16 KiB) into
// its shared memory and adds the ones it receives, and runs the cell on its own 16 units (c in
// shared memory), writing h (bf16) to global memory, where the next step's exchange would take it.
constexpr int kPairK = 512, kPairN = 128;
#define D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
// CTA `rank`'s K half of the pair's operands into shared memory, in wgmma's core layout: A [64 x 512]
// of a [64 x 1024], B [128 x 512] of w [128 x 1024].
__device__ void load_pair_half(__nv_bfloat16* A, __nv_bfloat16* B, const __nv_bfloat16* a, const __nv_bfloat16* w,
                               int rank) {
  for (int i = threadIdx.x; i < kM * kPairK; i += blockDim.x)
    A[core_offset(i / kPairK, i % kPairK, kPairK)] = a[(i / kPairK) * kK + rank * kPairK + i % kPairK];
  for (int i = threadIdx.x; i < kPairN * kPairK; i += blockDim.x)
    B[core_offset(i / kPairK, i % kPairK, kPairK)] = w[(i / kPairK) * kK + rank * kPairK + i % kPairK];
}

// d = A [64 x 512] x B^T [512 x 128]: 32 wgmma.m64n128k16, waited for.
__device__ __forceinline__ void pair_products(float (&d)[64], const __nv_bfloat16* A, const __nv_bfloat16* B) {
  constexpr uint32_t lbo = 128, sbo = kPairK / 8 * 128;
  for (float& v : d) v = 0.0f;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
  for (int k = 0; k < kPairK / 16; ++k) {
    const uint64_t da = wgmma_desc(smem(A) + k * 256, lbo, sbo), db = wgmma_desc(smem(B) + k * 256, lbo, sbo);
    asm volatile(
        "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,"
        "%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,"
        "%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0; }"
        : D8(0), D8(8), D8(16), D8(24), D8(32), D8(40), D8(48), D8(56)
        : "l"(da), "l"(db));
  }
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}

// STAGES: 1 the products alone, 2 and the partial sums' exchange, 3 and the cell (the whole step).
template <int STAGES>
__global__ void __launch_bounds__(128) pair_step(int steps, const __nv_bfloat16* a, const __nv_bfloat16* w,
                                                 __nv_bfloat16* h_out, float* c_out) {
  extern __shared__ __align__(128) unsigned char sm[];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  __nv_bfloat16* A = reinterpret_cast<__nv_bfloat16*>(sm);           // [64 x 512] core layout, 64 KiB
  __nv_bfloat16* B = A + kM * kPairK;                                 // [128 x 512] core layout, 128 KiB
  float* recv = reinterpret_cast<float*>(B + kPairN * kPairK);        // [64 x 64]: the peer's sums of my units
  float* cell = recv + kM * 64;                                       // [64 x 16]: c of my 16 units
  load_pair_half(A, B, a, w, rank);
  for (int i = threadIdx.x; i < kM * 16; i += blockDim.x) cell[i] = 0.0f;
  fence_async_shared();
  cluster.sync();
  float* peer_recv = cluster.map_shared_rank(recv, rank ^ 1);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float d[64];
  for (int t = 0; t < steps; ++t) {
    pair_products(d, A, B);
    if constexpr (STAGES == 1) {  // keep the products: one value a thread
      if (threadIdx.x == 0) recv[0] = d[0] + d[63];
    } else {
      // Columns 64r .. 64r + 63 are my units' gates; the other half goes to the peer (8-byte stores).
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int row = 16 * warp + lane / 4 + 8 * hh, col = 8 * j + 2 * (lane % 4);
          if (col / 64 != rank)
            *reinterpret_cast<float2*>(peer_recv + row * 64 + col % 64) =
                make_float2(d[4 * j + 2 * hh], d[4 * j + 2 * hh + 1]);
        }
      cluster.sync();  // the peer's sums of my units are here
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int row = 16 * warp + lane / 4 + 8 * hh, col = 8 * j + 2 * (lane % 4);
          if (col / 64 == rank) {
            recv[row * 64 + col % 64] += d[4 * j + 2 * hh];
            recv[row * 64 + col % 64 + 1] += d[4 * j + 2 * hh + 1];
          }
        }
      __syncthreads();
      if constexpr (STAGES == 3)
        for (int i = threadIdx.x; i < kM * 16; i += blockDim.x) {  // the cell of (row, unit)
          const int row = i / 16, u = i % 16;
          const float* g = recv + row * 64 + 4 * u;
          const float ig = 1.0f / (1.0f + __expf(-g[0])), fg = 1.0f / (1.0f + __expf(-g[1]));
          const float gg = tanhf(g[2]), og = 1.0f / (1.0f + __expf(-g[3]));
          const float c = fg * cell[i] + ig * gg;
          cell[i] = c;
          h_out[row * 32 + rank * 16 + u] = __float2bfloat16(og * tanhf(c));
        }
      cluster.sync();  // recv is free again: both CTAs read it
    }
  }
  for (int i = threadIdx.x; i < kM * 16; i += blockDim.x) c_out[(i / 16) * 32 + rank * 16 + i % 16] = cell[i];
}

// (e') the same step with the cell in registers: gate columns are arranged so that a thread's
// accumulator fragment holds all four gates of its units (unit u = 4(j/2) + q of column pairs
// 8j + 2q, +1 (i, f) and 8(j+1) + 2q, +1 (g, o), j even), so the sums never leave the registers but
// for the other CTA's half: 32 contiguous floats a thread, stored as 8 float4 into the peer's
// (double-buffered) shared memory; one cluster barrier a step; c stays in registers, tanh.approx.
__device__ float tanh_fast(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// The step after the products for CTA R of the pair (compile-time R: the fragment's indices must be
// constants, or it leaves the registers).
template <int R>
__device__ void pair_tail(float (&d)[64], float (&c)[4][2], float* peer, const float* recv, int t,
                          __nv_bfloat16* h_out) {
  constexpr int theirs = 32 * (R ^ 1), mine = 32 * R;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, q = lane % 4;
  // The peer finishes the units of d[theirs .. + 31]: 8 float4 into its buffer of this step.
  float4* to = reinterpret_cast<float4*>(peer + (t & 1) * 128 * 32 + threadIdx.x * 32);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    to[i] = make_float4(d[theirs + 4 * i], d[theirs + 4 * i + 1], d[theirs + 4 * i + 2], d[theirs + 4 * i + 3]);
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  const float4* from = reinterpret_cast<const float4*>(recv + (t & 1) * 128 * 32 + threadIdx.x * 32);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float4 v = from[i];
    d[mine + 4 * i] += v.x, d[mine + 4 * i + 1] += v.y, d[mine + 4 * i + 2] += v.z, d[mine + 4 * i + 3] += v.w;
  }
#pragma unroll
  for (int p = 0; p < 4; ++p)  // column pairs j = 8R + 2p, +1: unit 16R + 4p + q
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int at = mine + 8 * p + 2 * hh;  // i, f at j; g, o at j + 1
      const float ig = 0.5f * tanh_fast(0.5f * d[at]) + 0.5f, fg = 0.5f * tanh_fast(0.5f * d[at + 1]) + 0.5f;
      const float gg = tanh_fast(d[at + 4]), og = 0.5f * tanh_fast(0.5f * d[at + 5]) + 0.5f;
      c[p][hh] = fg * c[p][hh] + ig * gg;
      h_out[(16 * warp + lane / 4 + 8 * hh) * 32 + 16 * R + 4 * p + q] = __float2bfloat16(og * tanh_fast(c[p][hh]));
    }
}

__global__ void __launch_bounds__(128) pair_step_regs(int steps, const __nv_bfloat16* a, const __nv_bfloat16* w,
                                                      __nv_bfloat16* h_out, float* c_out) {
  extern __shared__ __align__(128) unsigned char sm[];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  __nv_bfloat16* A = reinterpret_cast<__nv_bfloat16*>(sm);
  __nv_bfloat16* B = A + kM * kPairK;
  float* recv = reinterpret_cast<float*>(B + kPairN * kPairK);  // [2][128 threads x 32]
  load_pair_half(A, B, a, w, rank);
  fence_async_shared();
  cluster.sync();
  float* peer = cluster.map_shared_rank(recv, rank ^ 1);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, q = lane % 4;
  float d[64], c[4][2] = {};  // c of units 16r + 4p + q, rows 16 warp + lane / 4 (+ 8)
  for (int t = 0; t < steps; ++t) {
    pair_products(d, A, B);
    if (rank == 0) pair_tail<0>(d, c, peer, recv, t, h_out);
    else pair_tail<1>(d, c, peer, recv, t, h_out);
  }
  cluster.sync();
#pragma unroll
  for (int p = 0; p < 4; ++p)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh)
      c_out[(16 * warp + lane / 4 + 8 * hh) * 32 + 16 * rank + 4 * p + q] = c[p][hh];
}
#undef D8

// ---- host -----------------------------------------------------------------------------------------

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
  }
  template <class F>
  double median_ms(F&& launch) {  // 5 timed launches after one warm-up
    launch();
    CHECK(cudaDeviceSynchronize());
    std::vector<double> ms;
    for (int r = 0; r < 5; ++r) {
      CHECK(cudaEventRecord(a));
      launch();
      CHECK(cudaEventRecord(b));
      CHECK(cudaEventSynchronize(b));
      float x = 0;
      CHECK(cudaEventElapsedTime(&x, a, b));
      ms.push_back(x);
    }
    CHECK(cudaGetLastError());
    std::sort(ms.begin(), ms.end());
    return ms[2];
  }
};

// Every value of the delivered h equals the step count (the exchanges carried every slice, each step).
bool all_equal(const uint16_t* dev, uint16_t want) {
  std::vector<uint16_t> h(kH / 2);
  CHECK(cudaMemcpy(h.data(), dev, kH, cudaMemcpyDeviceToHost));
  return std::all_of(h.begin(), h.end(), [&](uint16_t v) { return v == want; });
}

void launch_cluster(const void* kernel, int clusters, int C, size_t shared, void** args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(clusters * C), cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = shared;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = C, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
  cfg.attrs = &attr, cfg.numAttrs = 1;
  CHECK(cudaLaunchKernelExC(&cfg, kernel, args));
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it is measured, should a probe hang
  const int steps = argc > 1 ? std::atoi(argv[1]) : 2000;
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int khz = 0;
  CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  std::printf("# rnntrain_probes on %s (%d SMs, %d MHz, L2 %d MiB), %d steps per launch, median of 5\n", prop.name,
              prop.multiProcessorCount, khz / 1000, prop.l2CacheSize >> 20, steps);
  Timer timer;
  uint16_t* out;
  uint16_t* g;
  unsigned* flags;
  CHECK(cudaMalloc(&out, kH));
  CHECK(cudaMalloc(&g, static_cast<size_t>(prop.multiProcessorCount) * kH));
  CHECK(cudaMalloc(&flags, 4 * 1024));
  const uint16_t want = static_cast<uint16_t>(steps);

  std::printf("\n%-34s %8s %9s %10s %8s %s\n", "exchange of a step's h (64 KiB)", "CTAs", "clusters", "us/step", "GB/s",
              "check");
  const struct {
    const char* name;
    const void* kernel;
    int extra;  // shared memory beyond the two h buffers
  } kinds[] = {{"(a) bulk push + mbarrier", reinterpret_cast<const void*>(exchange_bulk), 0},
               {"(a') st.shared::cluster + barrier", reinterpret_cast<const void*>(exchange_stores), 0},
               {"(b) bulk multicast from L2", reinterpret_cast<const void*>(exchange_multicast), 0}};
  for (const auto& k : kinds) {
    CHECK(cudaFuncSetAttribute(k.kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    for (int C : {2, 4, 8, 16}) {
      const bool multicast = k.kernel == reinterpret_cast<const void*>(exchange_multicast);
      const size_t shared = 2 * kH + (multicast ? 0 : kH / C) + 64;
      CHECK(cudaFuncSetAttribute(k.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
      int most = 0;  // clusters that can run at once: the loaded case
      {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(C), cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = shared;
        cudaLaunchAttribute attr;
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = C, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
        cfg.attrs = &attr, cfg.numAttrs = 1;
        CHECK(cudaOccupancyMaxActiveClusters(&most, k.kernel, &cfg));
      }
      for (int clusters : {1, std::max(most, 1)}) {
        int s = steps;
        void* args2[] = {&s, &out};
        void* args3[] = {&s, &g, &out};
        const double ms = timer.median_ms([&] { launch_cluster(k.kernel, clusters, C, shared, multicast ? args3 : args2); });
        const double us = ms * 1e3 / steps;
        std::printf("%-34s %8d %9d %10.2f %8.0f %s\n", k.name, C, clusters, us, kH * (C - 1.0) / C / (us * 1e3),
                    all_equal(out, want) ? "ok" : "WRONG");
      }
    }
  }
  CHECK(cudaFuncSetAttribute(exchange_flags, cudaFuncAttributeMaxDynamicSharedMemorySize, kH + 64));
  for (int G : {8, 16, 32, 64, 128}) {
    if (G > prop.multiProcessorCount) continue;
    int s = steps;
    const double ms = timer.median_ms([&] {
      CHECK(cudaMemset(flags, 0, 4 * 1024));
      exchange_flags<<<G, kThreads, kH + 64>>>(s, g, flags, out);
    });
    const double us = ms * 1e3 / steps;
    std::printf("%-34s %8d %9s %10.2f %8.0f %s\n", "(c) L2 slices + per-producer flags", G, "-", us, kH / (us * 1e3),
                all_equal(out, want) ? "ok" : "WRONG");
  }

  // (d) matrix work, checked against the host product.
  std::vector<__nv_bfloat16> ha(kM * kK), hw(kN * kK);
  std::vector<double> ref(kM * kN, 0.0);
  unsigned seed = 12345;
  auto rnd = [&] { return ((seed = seed * 1664525u + 1013904223u) >> 9) / static_cast<float>(1 << 23) - 0.5f; };
  for (auto& v : ha) v = __float2bfloat16(rnd());
  for (auto& v : hw) v = __float2bfloat16(rnd());
  for (int i = 0; i < kM; ++i)
    for (int j = 0; j < kN; ++j)
      for (int k = 0; k < kK; ++k)
        ref[i * kN + j] += static_cast<double>(__bfloat162float(ha[i * kK + k])) * __bfloat162float(hw[j * kK + k]);
  __nv_bfloat16 *da, *dw;
  float* dc;
  CHECK(cudaMalloc(&da, ha.size() * 2));
  CHECK(cudaMalloc(&dw, hw.size() * 2));
  CHECK(cudaMalloc(&dc, kM * kN * 4));
  CHECK(cudaMemcpy(da, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dw, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
  auto error = [&] {
    std::vector<float> got(kM * kN);
    CHECK(cudaMemcpy(got.data(), dc, got.size() * 4, cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i) num += (got[i] - ref[i]) * (got[i] - ref[i]), den += ref[i] * ref[i];
    return std::sqrt(num / den);
  };
  const double flop = 2.0 * kM * kK * kN;
  std::printf("\n%-44s %6s %10s %12s %10s\n", "[64 x 1024] x [1024 x 32] per CTA-step", "CTAs", "us/step",
              "TFLOP/s/SM", "rel. error");
  struct Mat {
    const char* name;
    const void* kernel;
    int threads;
    size_t shared;
  } mats[] = {
      {"wgmma, A and B in smem, 1 warpgroup (lbo=K)", reinterpret_cast<const void*>(matmul_wgmma<true, 1>), 128,
       (kM + kN) * kK * 2 + kM * kN * 4},
      {"wgmma, A and B in smem, 1 warpgroup (lbo=M)", reinterpret_cast<const void*>(matmul_wgmma<false, 1>), 128,
       (kM + kN) * kK * 2 + kM * kN * 4},
      {"wgmma, 2 warpgroups splitting K (lbo=K)", reinterpret_cast<const void*>(matmul_wgmma<true, 2>), 256,
       (kM + kN) * kK * 2 + kM * kN * 4},
      {"wgmma, 2 warpgroups splitting K (lbo=M)", reinterpret_cast<const void*>(matmul_wgmma<false, 2>), 256,
       (kM + kN) * kK * 2 + kM * kN * 4},
      {"mma.sync, B in registers, 4 warps", reinterpret_cast<const void*>(matmul_mma<1>), 128,
       kM * kLda * 2 + kM * kN * 4},
      {"mma.sync, B in registers, 8 warps (K split)", reinterpret_cast<const void*>(matmul_mma<2>), 256,
       kM * kLda * 2 + kM * kN * 4},
  };
  for (const Mat& m : mats) {
    CHECK(cudaFuncSetAttribute(m.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(m.shared)));
    for (int ctas : {1, prop.multiProcessorCount}) {
      int s = steps;
      void* args[] = {&s, &da, &dw, &dc};
      CHECK(cudaMemset(dc, 0, kM * kN * 4));
      const double ms = timer.median_ms([&] {
        CHECK(cudaLaunchKernel(m.kernel, dim3(ctas), dim3(m.threads), args, m.shared, 0));
      });
      const double us = ms * 1e3 / steps;
      std::printf("%-44s %6d %10.2f %12.3f %10.2e\n", m.name, ctas, us, flop / (us * 1e-6) / 1e12, error());
    }
  }

  // (e) the pair, checked against the host: steps of the same product into the cell (the probe keeps
  // its operand fixed, so the host reference runs the cell on the one product `steps` times).
  {
    std::vector<__nv_bfloat16> pw(kPairN * kK);
    for (auto& v : pw) v = __float2bfloat16(rnd() * 0.1f);
    std::vector<double> gates(kM * kPairN, 0.0);
    for (int i = 0; i < kM; ++i)
      for (int j = 0; j < kPairN; ++j)
        for (int k = 0; k < kK; ++k)
          gates[i * kPairN + j] += static_cast<double>(__bfloat162float(ha[i * kK + k])) * __bfloat162float(pw[j * kK + k]);
    __nv_bfloat16 *dpw, *dh;
    float* dcell;
    CHECK(cudaMalloc(&dpw, pw.size() * 2));
    CHECK(cudaMalloc(&dh, kM * 32 * 2 * static_cast<size_t>(prop.multiProcessorCount)));
    CHECK(cudaMalloc(&dcell, kM * 32 * 4));
    CHECK(cudaMemcpy(dpw, pw.data(), pw.size() * 2, cudaMemcpyHostToDevice));
    const size_t shared = (kM + kPairN) * kPairK * 2 + kM * 64 * 4 + kM * 16 * 4;
    const void* stages[] = {reinterpret_cast<const void*>(pair_step<1>), reinterpret_cast<const void*>(pair_step<2>),
                            reinterpret_cast<const void*>(pair_step<3>)};
    const char* stage_names[] = {"wgmma m64n128k16 x 32 alone", "+ partial sums through DSMEM",
                                 "+ the cell (the whole step)"};
    for (const void* k : stages)
      CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
    std::printf("\n%-44s %6s %10s %10s\n", "K-split pair: 32 LSTM units of a K=1024 layer", "pairs", "us/step", "rel. error");
    for (int stage = 0; stage < 3; ++stage) {
      for (int pairs : {1, prop.multiProcessorCount / 2}) {
        int s = steps;
        void* args[] = {&s, &da, &dpw, &dh, &dcell};
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(2 * pairs), cfg.blockDim = dim3(128), cfg.dynamicSmemBytes = shared;
        cudaLaunchAttribute attr;
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = 2, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
        cfg.attrs = &attr, cfg.numAttrs = 1;
        const double ms = timer.median_ms([&] { CHECK(cudaLaunchKernelExC(&cfg, stages[stage], args)); });
        // The host's cell over the same gates, `s` times; compare c.
        std::vector<float> got(kM * 32);
        CHECK(cudaMemcpy(got.data(), dcell, got.size() * 4, cudaMemcpyDeviceToHost));
        double num = 0, den = 0;
        for (int i = 0; i < kM; ++i)
          for (int u = 0; u < 32; ++u) {
            const double* g = &gates[i * kPairN + 4 * u];
            auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
            double c = 0;
            for (int t = 0; t < s; ++t) c = sig(g[1]) * c + sig(g[0]) * std::tanh(g[2]);
            num += (got[i * 32 + u] - c) * (got[i * 32 + u] - c), den += c * c;
          }
        if (stage == 2)
          std::printf("%-44s %6d %10.2f %10.2e\n", stage_names[stage], pairs, ms * 1e3 / s, std::sqrt(num / den));
        else
          std::printf("%-44s %6d %10.2f %10s\n", stage_names[stage], pairs, ms * 1e3 / s, "-");
      }
    }
    // (e'): the register cell, its gate columns arranged as the kernel says.
    {
      auto col_of = [](int u, int gate) { return 8 * (2 * (u / 4) + gate / 2) + 2 * (u % 4) + gate % 2; };
      const size_t shared2 = (kM + kPairN) * kPairK * 2 + 2 * 128 * 32 * 4;
      CHECK(cudaFuncSetAttribute(pair_step_regs, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared2)));
      for (int pairs : {1, prop.multiProcessorCount / 2}) {
        int s = steps;
        void* args[] = {&s, &da, &dpw, &dh, &dcell};
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(2 * pairs), cfg.blockDim = dim3(128), cfg.dynamicSmemBytes = shared2;
        cudaLaunchAttribute attr;
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = 2, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
        cfg.attrs = &attr, cfg.numAttrs = 1;
        const double ms = timer.median_ms(
            [&] { CHECK(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(pair_step_regs), args)); });
        std::vector<float> got(kM * 32);
        CHECK(cudaMemcpy(got.data(), dcell, got.size() * 4, cudaMemcpyDeviceToHost));
        double num = 0, den = 0;
        auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
        for (int i = 0; i < kM; ++i)
          for (int u = 0; u < 32; ++u) {
            auto g = [&](int gate) { return gates[i * kPairN + col_of(u, gate)]; };
            double cc = 0;
            for (int t = 0; t < s; ++t) cc = sig(g(1)) * cc + sig(g(0)) * std::tanh(g(2));
            num += (got[i * 32 + u] - cc) * (got[i * 32 + u] - cc), den += cc * cc;
          }
        std::printf("%-44s %6d %10.2f %10.2e\n", "the cell in registers, float4 sums (whole)", pairs, ms * 1e3 / s,
                    std::sqrt(num / den));
      }
    }
  }
  return 0;
}
