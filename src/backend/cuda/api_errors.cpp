// The failure paths of api_errors.h: one message per failed call with the call text, file:line, the
// library's own error text and, where one applies, what to do next.
#include "backend/cuda/api_errors.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"

namespace rnntrain::cuda {

namespace {

const char* base_name(const char* file) {
  const char* s = file;
  for (const char* p = file; *p; ++p)
    if (*p == '/') s = p + 1;
  return s;
}

}  // namespace

void fail_cuda(cudaError_t e, const char* call, const char* file, int line) {
  std::string hint;
  if (e == cudaErrorMemoryAllocation) hint = "; the GPU is out of memory: lower train.batch_size";
  else if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
    hint = "; no usable NVIDIA GPU or driver: use device: cpu";
  throw RuntimeError(fmt::format("CUDA error {} ({}) in {} at {}:{}{}", cudaGetErrorName(e), cudaGetErrorString(e),
                                 call, base_name(file), line, hint));
}

void fail_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  throw RuntimeError(fmt::format("cuBLAS error {} ({}) in {} at {}:{}", cublasGetStatusName(s), cublasGetStatusString(s),
                                 call, base_name(file), line));
}

void fail_cudnn(cudnnStatus_t s, const char* call, const char* file, int line) {
  std::string hint;
  if (s == CUDNN_STATUS_NOT_SUPPORTED)
    hint = "; cuDNN cannot run this layer configuration with this algorithm and precision: try plan.algo: "
           "standard, plan.precision: fp32 or plan.fuse: never (or device: cpu), and report it";
  throw RuntimeError(
      fmt::format("cuDNN error {} in {} at {}:{}{}", cudnnGetErrorString(s), call, base_name(file), line, hint));
}

void log_cuda_failure(const char* lib, const char* what, const char* call, const char* file, int line) {
  log_warn("{} error {} in {} at {}:{} (while releasing a resource; ignored)", lib, what, call, base_name(file), line);
}

namespace k {
void check_launch(const char* kernel, const char* file, int line) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) fail_cuda(e, kernel, file, line);
}
}  // namespace k

}  // namespace rnntrain::cuda
