// Device allocation with byte counting and an out-of-memory message a user can act on.
#include "backend/cuda/device_buffer.h"

#include <atomic>

#include <fmt/format.h>

#include "backend/cuda/api_errors.h"
#include "core/error.h"
#include "core/log.h"

namespace rnntrain::cuda {

namespace {
std::atomic<size_t> g_bytes{0}, g_peak{0};
std::atomic<uint64_t> g_version{0}, g_allocs{0};

std::string mib(size_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)); }
}  // namespace

void* device_alloc(size_t bytes, const char* what) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear the sticky-free error state of the runtime
    size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    throw RuntimeError(fmt::format("the GPU is out of memory: allocating {} for the {} failed ({} free of {}, {} held "
                                   "by rnntrain); lower train.batch_size (or the sequence length) and try again",
                                   mib(bytes), what, mib(free_b), mib(total_b), mib(g_bytes.load())));
  }
  if (e != cudaSuccess) fail_cuda(e, "cudaMalloc(&p, bytes)", __FILE__, __LINE__);
  ++g_allocs;
  log_debug("cuda: allocated {} for the {}", mib(bytes), what);
  const size_t now = g_bytes += bytes;
  size_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void device_free(void* p, size_t bytes) noexcept {
  if (!p) return;
  CUDA_LOG(cudaFree(p));
  g_bytes -= bytes;
  ++g_version;
}

size_t device_bytes_held() { return g_bytes.load(); }
uint64_t device_version() { return g_version.load(); }
void note_device_state_changed() { ++g_version; }
uint64_t device_allocs() { return g_allocs.load(); }
size_t device_bytes_peak() { return g_peak.load(); }
void reset_device_bytes_peak() { g_peak = g_bytes.load(); }

void copy_to_device(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)));
}

void copy_to_host(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream)));
}

}  // namespace rnntrain::cuda
