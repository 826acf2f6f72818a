// The per-engine GPU context (one stream, the cuBLAS and cuDNN handles bound to it, a vector of
// ones for column sums) and move-only RAII owners of cuDNN descriptors. Nothing here computes.
#pragma once
#include <string>
#include <utility>

#include "backend/cuda/check.h"
#include "backend/cuda/device_buffer.h"

namespace rnntrain::cuda {

// "NVIDIA H200 (cc 9.0, driver 13.0, runtime 13.0, cuDNN 9.14.0)".
std::string device_description();

class Gpu {
 public:
  Gpu();
  ~Gpu();
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;

  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  void sync() const;
  // cuBLAS math: strict FP32 (the default) or TF32 tensor-core products.
  void set_tf32(bool on);
  // A device vector of at least n ones (float), for column sums through GEMV.
  const float* ones(int64_t n);

 private:
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  DeviceBuffer<float> ones_{"vector of ones"};
  int64_t ones_n_ = 0;
};

// Owns one cuDNN descriptor of type D, created with C and destroyed with X.
template <typename D, cudnnStatus_t (*C)(D*), cudnnStatus_t (*X)(D)>
class Desc {
 public:
  Desc() { CUDNN_CHECK(C(&d_)); }
  ~Desc() {
    if (d_) CUDNN_LOG(X(d_));
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Desc& operator=(Desc&& o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }
  D get() const { return d_; }

 private:
  D d_ = nullptr;
};

using TensorDesc = Desc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using RnnDesc = Desc<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using RnnDataDesc = Desc<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor, cudnnDestroyRNNDataDescriptor>;
using DropoutDesc = Desc<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor, cudnnDestroyDropoutDescriptor>;

}  // namespace rnntrain::cuda
