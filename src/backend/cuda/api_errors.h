// Checks for every CUDA runtime, cuBLAS and cuDNN call: CUDA_CHECK(cudaMalloc(...)) throws a
// RuntimeError naming the call text, file:line and the library's error string; kernels are checked after
// a launch (LAUNCH_CHECK in kernels_common.cuh). Destructors use the *_LOG variants, which log
// instead of throwing.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

namespace rnntrain::cuda {

[[noreturn]] void fail_cuda(cudaError_t e, const char* call, const char* file, int line);
[[noreturn]] void fail_cublas(cublasStatus_t s, const char* call, const char* file, int line);
[[noreturn]] void fail_cudnn(cudnnStatus_t s, const char* call, const char* file, int line);
void log_cuda_failure(const char* lib, const char* what, const char* call, const char* file, int line);

}  // namespace rnntrain::cuda

#define CUDA_CHECK(call)                                                                \
  do {                                                                                  \
    const cudaError_t rnntrain_e_ = (call);                                             \
    if (rnntrain_e_ != cudaSuccess) ::rnntrain::cuda::fail_cuda(rnntrain_e_, #call, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK(call)                                                                  \
  do {                                                                                      \
    const cublasStatus_t rnntrain_s_ = (call);                                              \
    if (rnntrain_s_ != CUBLAS_STATUS_SUCCESS) ::rnntrain::cuda::fail_cublas(rnntrain_s_, #call, __FILE__, __LINE__); \
  } while (0)

#define CUDNN_CHECK(call)                                                                 \
  do {                                                                                    \
    const cudnnStatus_t rnntrain_s_ = (call);                                             \
    if (rnntrain_s_ != CUDNN_STATUS_SUCCESS) ::rnntrain::cuda::fail_cudnn(rnntrain_s_, #call, __FILE__, __LINE__); \
  } while (0)

#define CUDA_LOG(call)                                                                                     \
  do {                                                                                                     \
    const cudaError_t rnntrain_e_ = (call);                                                                \
    if (rnntrain_e_ != cudaSuccess)                                                                        \
      ::rnntrain::cuda::log_cuda_failure("CUDA", cudaGetErrorString(rnntrain_e_), #call, __FILE__, __LINE__); \
  } while (0)

#define CUDNN_LOG(call)                                                                                     \
  do {                                                                                                      \
    const cudnnStatus_t rnntrain_s_ = (call);                                                               \
    if (rnntrain_s_ != CUDNN_STATUS_SUCCESS)                                                                \
      ::rnntrain::cuda::log_cuda_failure("cuDNN", cudnnGetErrorString(rnntrain_s_), #call, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_LOG(call)                                                                                     \
  do {                                                                                                       \
    const cublasStatus_t rnntrain_s_ = (call);                                                               \
    if (rnntrain_s_ != CUBLAS_STATUS_SUCCESS)                                                                \
      ::rnntrain::cuda::log_cuda_failure("cuBLAS", cublasGetStatusString(rnntrain_s_), #call, __FILE__, __LINE__); \
  } while (0)
