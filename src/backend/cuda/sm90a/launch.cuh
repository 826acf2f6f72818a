// Launching the second design's kernels (host code, included by both kernel files): clusters of cl.C
// CTAs of Threads threads each, the shared memory cl.smem, all clusters resident at once.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "backend/cuda/api_errors.h"
#include "backend/cuda/wavefront_kernels.h"

namespace rnntrain::cuda::wf::sm90 {

// The launch of `clusters` clusters (attr: room for its one attribute, the cluster shape).
template <auto Kernel, int Threads>
cudaLaunchConfig_t cluster_config(const Cluster& cl, cudaLaunchAttribute* attr, unsigned clusters, cudaStream_t s) {
  static const bool attr_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_optin())));
    CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    return true;
  }();
  (void)attr_set;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(cl.C) * clusters);
  cfg.blockDim = dim3(Threads);
  cfg.dynamicSmemBytes = cl.smem;
  cfg.stream = s;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(cl.C);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// How many clusters of cl can be resident at once (0: none).
template <auto Kernel, int Threads>
int resident_clusters(const Cluster& cl) {
  cudaLaunchAttribute attr[1];
  const cudaLaunchConfig_t cfg = cluster_config<Kernel, Threads>(cl, attr, 1, nullptr);
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, Kernel, &cfg) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

// a.cl.rows clusters for each of a.cl.slices batch slices.
template <auto Kernel, int Threads>
void launch_rows(const Args& a, cudaStream_t s) {
  cudaLaunchAttribute attr[1];
  const auto clusters = static_cast<unsigned>(a.cl.rows * a.cl.slices);
  const cudaLaunchConfig_t cfg = cluster_config<Kernel, Threads>(a.cl, attr, clusters, s);
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, Kernel, a));
}

// A kernel's instantiations: Of<E, cell, U>::kernels for both half types, every cell and U = 8, 16, 32,
// and the one for a launch.
struct Kernels {
  int (*clusters)(const Cluster&);
  void (*launch)(const Args&, cudaStream_t);
};
template <template <typename, Cell2, int> class Of, typename E, Cell2 K>
constexpr Kernels by_u(int U) {
  return U == 8 ? Of<E, K, 8>::kernels : U == 16 ? Of<E, K, 16>::kernels : Of<E, K, 32>::kernels;
}
template <template <typename, Cell2, int> class Of, typename E>
constexpr Kernels by_cell(Cell2 cell, int U) {
  return cell == Cell2::Lstm  ? by_u<Of, E, Cell2::Lstm>(U)
         : cell == Cell2::Gru ? by_u<Of, E, Cell2::Gru>(U)
                              : by_u<Of, E, Cell2::GruResetFirst>(U);
}
inline Cell2 cell_of(const Args& a) { return !a.gru ? Cell2::Lstm : a.reset_after ? Cell2::Gru : Cell2::GruResetFirst; }
template <template <typename, Cell2, int> class Of>
Kernels pick(const Cluster& cl, Cell2 cell, bool bf16) {
  return bf16 ? by_cell<Of, __nv_bfloat16>(cell, cl.U) : by_cell<Of, __half>(cell, cl.U);
}

}  // namespace rnntrain::cuda::wf::sm90
