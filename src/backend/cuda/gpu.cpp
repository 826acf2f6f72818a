// The GPU context and the availability probe the backend registry asks before choosing a device.
#include "backend/cuda/gpu.h"

#include "backend/cuda/session.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/log.h"
#include "dist/comm.h"

namespace rnntrain::cuda {

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return fmt::format("no GPU is visible (cudaGetDeviceCount: {})", cudaGetErrorString(e));
  }
  if (n == 0) return "no GPU is visible (cudaGetDeviceCount found 0 devices)";
  select_device();
  if (cudnnGetVersion() / 10000 < 9)
    return fmt::format("cuDNN {} is loaded but rnntrain needs cuDNN 9", cudnnGetVersion());
  return "";
}

int64_t free_device_bytes() {
  size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<int64_t>(free);
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

int select_device() {
  static const int device = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      (void)cudaGetLastError();
      return 0;
    }
    const Comm& comm = Comm::world();
    return comm.launched() ? comm.local_rank() % n : 0;
  }();
  CUDA_CHECK(cudaSetDevice(device));
  return device;
}

int visible_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) (void)cudaGetLastError();
  return n;
}

Gpu::Gpu() : device_(select_device()) {
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
  CUBLAS_CHECK(cublasCreate(&cublas_));
  CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  // Strict FP32 (the default math mode never rounds FP32 GEMMs to TF32), so results track the CPU.
  CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  CUDNN_CHECK(cudnnCreate(&cudnn_));
  CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
  profiler_ = std::make_unique<Profiler>(stream_);
}

Profiler::Profiler(cudaStream_t s) : stream_(s) {
  const char* v = std::getenv("RNNTRAIN_PROFILE");
  on_ = v && *v && std::string(v) != "0";
}

void Profiler::record(const std::string& phase) {
  if (!start_) {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventRecord(start_, stream_));
    wall0_ = std::chrono::steady_clock::now();
  }
  if (pool_.size() <= marks_.size()) {
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreate(&e));
    pool_.push_back(e);
  }
  cudaEvent_t e = pool_[marks_.size()];
  CUDA_CHECK(cudaEventRecord(e, stream_));
  marks_.emplace_back(phase, e);
}

void Profiler::end_step() {
  if (!on_ || marks_.empty()) return;
  CUDA_CHECK(cudaEventSynchronize(marks_.back().second));
  cudaEvent_t prev = start_;
  for (auto& [phase, e] : marks_) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, prev, e));
    if (!ms_.count(phase)) order_.push_back(phase);
    ms_[phase] += ms;
    prev = e;
  }
  const auto now = std::chrono::steady_clock::now();
  wall_ms_ += std::chrono::duration<double, std::milli>(now - wall0_).count();
  wall0_ = now;
  CUDA_CHECK(cudaEventRecord(start_, stream_));  // the next step's time starts here (host gaps included)
  marks_.clear();
  ++steps_;
}

Profiler::~Profiler() {
  if (on_ && steps_ > 0) {
    std::string table = fmt::format("profile: {} steps, wall {:.3f} ms/step; GPU time per step by phase:", steps_,
                                    wall_ms_ / static_cast<double>(steps_));
    double total = 0;
    for (const std::string& p : order_) {
      table += fmt::format("\n  {:<40} {:9.3f} ms", p, ms_[p] / static_cast<double>(steps_));
      total += ms_[p];
    }
    table += fmt::format("\n  {:<40} {:9.3f} ms (between the step's first and last marks, host gaps included)", "total",
                         total / static_cast<double>(steps_));
    log_info("{}", table);
  }
  if (start_) CUDA_LOG(cudaEventDestroy(start_));
  for (cudaEvent_t e : pool_) CUDA_LOG(cudaEventDestroy(e));
}

namespace {

// memcpy, split over up to 8 threads for copies of 2 MiB and more: one core copies about 8 GB/s, so
// the 26 MB of inputs and targets of a 4 x LSTM(512) step (B = 64, T = 100) would take ~3 ms on one,
// about as long as the whole step replayed as a CUDA graph.
void parallel_copy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kPart = size_t{1} << 20;
  const size_t threads = std::min<size_t>({8, std::max(1u, std::thread::hardware_concurrency()), bytes / kPart});
  if (threads < 2) {
    if (bytes) std::memcpy(dst, src, bytes);
    return;
  }
  const size_t part = ((bytes + threads - 1) / threads + 63) / 64 * 64;  // parts cover every byte
  auto copy = [&](size_t i) {
    const size_t off = i * part;
    if (off < bytes) std::memcpy(static_cast<char*>(dst) + off, static_cast<const char*>(src) + off, std::min(part, bytes - off));
  };
  std::vector<std::thread> pool;
  for (size_t i = 1; i < threads; ++i) pool.emplace_back(copy, i);
  copy(0);
  for (std::thread& t : pool) t.join();
}

}  // namespace

void* Uploader::put(const void* src, size_t bytes) {
  Slot& other = slots_[next_ ^ 1];
  if (other.active) CUDA_CHECK(cudaEventRecord(other.used, gpu_.stream()));  // the step that read it, and all before
  Slot& s = slots_[next_];
  next_ ^= 1;
  if (!s.copied) {
    CUDA_CHECK(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&s.used, cudaEventDisableTiming));
  }
  if (s.active) CUDA_CHECK(cudaEventSynchronize(s.copied));  // the pinned buffer is free again
  if (bytes > s.cap) {
    if (s.active) CUDA_CHECK(cudaEventSynchronize(s.used));  // the device buffer is about to be freed
    if (s.pinned) CUDA_CHECK(cudaFreeHost(s.pinned));
    s.pinned = nullptr;
    CUDA_CHECK(cudaMallocHost(&s.pinned, bytes));
    s.cap = bytes;
  }
  uint8_t* dev = s.dev.ensure(static_cast<int64_t>(bytes));
  parallel_copy(s.pinned, src, bytes);
  if (s.active) CUDA_CHECK(cudaStreamWaitEvent(gpu_.copy_stream(), s.used, 0));
  CUDA_CHECK(cudaMemcpyAsync(dev, s.pinned, bytes, cudaMemcpyHostToDevice, gpu_.copy_stream()));
  CUDA_CHECK(cudaEventRecord(s.copied, gpu_.copy_stream()));
  CUDA_CHECK(cudaStreamWaitEvent(gpu_.stream(), s.copied, 0));
  s.active = true;
  return dev;
}

StepValues::StepValues(Gpu& gpu, size_t bytes, const char* what) : gpu_(gpu), bytes_(bytes), dev_(what) {
  dev_.ensure(static_cast<int64_t>(bytes));
  CUDA_CHECK(cudaMallocHost(&ring_, bytes * kRing));
}

StepValues::~StepValues() {
  for (cudaEvent_t e : copied_) {
    if (!e) continue;
    CUDA_LOG(cudaEventSynchronize(e));
    CUDA_LOG(cudaEventDestroy(e));
  }
  if (ring_) CUDA_LOG(cudaFreeHost(ring_));
}

void StepValues::set(const void* values) {
  const int i = next_;
  next_ = (i + 1) % kRing;
  if (copied_[i]) CUDA_CHECK(cudaEventSynchronize(copied_[i]));  // done long ago, as a rule
  else CUDA_CHECK(cudaEventCreateWithFlags(&copied_[i], cudaEventDisableTiming));
  uint8_t* slot = ring_ + i * bytes_;
  std::memcpy(slot, values, bytes_);
  CUDA_CHECK(cudaMemcpyAsync(dev_.get(), slot, bytes_, cudaMemcpyHostToDevice, gpu_.stream()));
  CUDA_CHECK(cudaEventRecord(copied_[i], gpu_.stream()));
}

Uploader::~Uploader() {
  for (Slot& s : slots_) {
    if (s.copied) CUDA_LOG(cudaEventSynchronize(s.copied));
    if (s.copied) CUDA_LOG(cudaEventDestroy(s.copied));
    if (s.used) CUDA_LOG(cudaEventDestroy(s.used));
    if (s.pinned) CUDA_LOG(cudaFreeHost(s.pinned));
  }
}

Gpu::~Gpu() {
  profiler_.reset();
  if (stream_) CUDA_LOG(cudaStreamSynchronize(stream_));
  if (cudnn_) CUDNN_LOG(cudnnDestroy(cudnn_));
  if (cublas_) CUBLAS_LOG(cublasDestroy(cublas_));
  if (copy_stream_) CUDA_LOG(cudaStreamSynchronize(copy_stream_));
  if (copy_stream_) CUDA_LOG(cudaStreamDestroy(copy_stream_));
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
