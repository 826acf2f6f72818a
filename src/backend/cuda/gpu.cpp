// The GPU context and the availability probe the backend registry asks before choosing a device.
#include "backend/cuda/gpu.h"

#include "backend/cuda/session.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "core/log.h"

namespace rnntrain::cuda {

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return fmt::format("no GPU is visible (cudaGetDeviceCount: {})", cudaGetErrorString(e));
  }
  if (n == 0) return "no GPU is visible (cudaGetDeviceCount found 0 devices)";
  if (cudnnGetVersion() / 10000 < 9)
    return fmt::format("cuDNN {} is loaded but rnntrain needs cuDNN 9", cudnnGetVersion());
  return "";
}

std::string device_description() {
  int dev = 0, drv = 0, rt = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) return "unknown GPU";
  (void)cudaDriverGetVersion(&drv);
  (void)cudaRuntimeGetVersion(&rt);
  const size_t v = cudnnGetVersion();
  return fmt::format("{} (cc {}.{}, {:.0f} MiB, driver CUDA {}.{}, runtime {}.{}, cuDNN {}.{}.{})", p.name, p.major,
                     p.minor, static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0), drv / 1000, (drv % 1000) / 10,
                     rt / 1000, (rt % 1000) / 10, v / 10000, (v / 100) % 100, v % 100);
}

Gpu::Gpu() {
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUBLAS_CHECK(cublasCreate(&cublas_));
  CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  // Strict FP32 (the default math mode never rounds FP32 GEMMs to TF32), so results track the CPU.
  CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  CUDNN_CHECK(cudnnCreate(&cudnn_));
  CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
}

Gpu::~Gpu() {
  if (stream_) CUDA_LOG(cudaStreamSynchronize(stream_));
  if (cudnn_) CUDNN_LOG(cudnnDestroy(cudnn_));
  if (cublas_) CUBLAS_LOG(cublasDestroy(cublas_));
  if (stream_) CUDA_LOG(cudaStreamDestroy(stream_));
}

void Gpu::set_tf32(bool on) {
  CUBLAS_CHECK(cublasSetMathMode(cublas_, on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
}

void Gpu::sync() const { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

const float* Gpu::ones(int64_t n) {
  if (n > ones_n_) {
    const int64_t want = std::max<int64_t>(n, 4096);
    float* p = ones_.ensure(want);
    std::vector<float> host(static_cast<size_t>(want), 1.0f);
    CUDA_CHECK(cudaMemcpyAsync(p, host.data(), sizeof(float) * want, cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    ones_n_ = want;
  }
  return ones_.get();
}

}  // namespace rnntrain::cuda
