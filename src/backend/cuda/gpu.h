// The per-engine GPU context (one stream, the cuBLAS and cuDNN handles bound to it, a vector of
// ones for column sums) and move-only RAII owners of cuDNN descriptors. Nothing here computes.
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/api_errors.h"
#include "backend/cuda/device_buffer.h"

namespace rnntrain::cuda {

// "NVIDIA H200 (cc 9.0, driver 13.0, runtime 13.0, cuDNN 9.14.0)".
std::string device_description();

// Where a training step's GPU time goes (RNNTRAIN_PROFILE=1): CUDA events between marks, summed per
// phase and printed (with the wall time per step) when the engine closes. Off: marks cost nothing.
class Profiler {
 public:
  explicit Profiler(cudaStream_t s);
  ~Profiler();
  // The GPU time since the previous mark (or the step's start) is charged to `phase`.
  void mark(const std::string& phase) {
    if (on_) record(phase);
  }
  void end_step();  // syncs (only when on) and adds the step's times
  bool on() const { return on_; }

 private:
  void record(const std::string& phase);
  bool on_ = false;
  cudaStream_t stream_;
  std::vector<std::pair<std::string, cudaEvent_t>> marks_;
  std::vector<cudaEvent_t> pool_;
  cudaEvent_t start_ = nullptr;
  std::map<std::string, double> ms_;
  std::vector<std::string> order_;
  int64_t steps_ = 0;
  std::chrono::steady_clock::time_point wall0_;
  double wall_ms_ = 0;
};

// The GPU this process computes on, made current for the calling thread: under a launcher (mpirun,
// srun) its local rank's, one GPU per rank (local rank modulo the visible GPUs); otherwise the first
// visible one (CUDA_VISIBLE_DEVICES chooses). The GPU objects below all live on it; the process-wide
// counters (device_version(), allocations, graph steps) count this one device.
int select_device();
int visible_devices();

class Gpu {
 public:
  Gpu();  // on select_device()
  int device() const { return device_; }
  ~Gpu();
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;

  cudaStream_t stream() const { return stream_; }
  cudaStream_t copy_stream() const { return copy_stream_; }  // host -> device uploads (Uploader)
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  void sync() const;
  // cuBLAS math: strict FP32 (the default) or TF32 tensor-core products.
  void set_tf32(bool on);
  // A device vector of at least n ones (float), for column sums through GEMV.
  const float* ones(int64_t n);
  Profiler& profiler() { return *profiler_; }
  // Scratch memory shared by the stages (each uses it only within one call): slot 0 cuDNN's workspace,
  // 1 and 2 the stacks' backward conversion buffers. Grows as needed; contents do not persist.
  void* scratch(int slot, size_t bytes) { return scratch_[slot].ensure(static_cast<int64_t>(bytes)); }

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr, copy_stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  DeviceBuffer<float> ones_{"vector of ones"};
  int64_t ones_n_ = 0;
  std::unique_ptr<Profiler> profiler_;
  DeviceBuffer<uint8_t> scratch_[3] = {DeviceBuffer<uint8_t>{"cuDNN workspace"}, DeviceBuffer<uint8_t>{"gradient scratch"},
                                       DeviceBuffer<uint8_t>{"gradient scratch"}};
};

// Batches to the device without stalling either side: put() copies host data into a pinned buffer
// and uploads it on the copy stream into one of two device buffers, and makes the compute stream wait
// for the copy. A buffer is rewritten only after the compute work enqueued before the following put()
// (the step that read it) is done, so the upload of step n+1 overlaps the end of step n, and the host
// never waits for the compute stream. Each put() returns memory valid until the put() after next.
class Uploader {
 public:
  explicit Uploader(Gpu& gpu) : gpu_(gpu) {}
  ~Uploader();
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;
  void* put(const void* src, size_t bytes);

 private:
  struct Slot {
    DeviceBuffer<uint8_t> dev{"uploaded batch"};
    void* pinned = nullptr;
    size_t cap = 0;
    cudaEvent_t copied = nullptr, used = nullptr;
    bool active = false;  // copied and used have been recorded
  };
  Gpu& gpu_;
  Slot slots_[2];
  int next_ = 0;
};

// A few bytes the host sets before each training step and kernels read from device memory (the
// learning rate, the dropout seed), so that the kernels of a step are the same every step and a
// CUDA graph can replay them. set() copies the values into a pinned ring slot and enqueues their
// upload on the compute stream; a slot is reused once its upload has run (kRing steps back).
class StepValues {
 public:
  StepValues(Gpu& gpu, size_t bytes, const char* what);
  ~StepValues();
  StepValues(const StepValues&) = delete;
  StepValues& operator=(const StepValues&) = delete;
  void set(const void* values);
  const void* dev() const { return dev_.get(); }

 private:
  static constexpr int kRing = 16;
  Gpu& gpu_;
  size_t bytes_;
  DeviceBuffer<uint8_t> dev_;
  uint8_t* ring_ = nullptr;
  cudaEvent_t copied_[kRing] = {};
  int next_ = 0;
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
