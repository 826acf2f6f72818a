// Owned device memory: a move-only, grow-only typed buffer whose bytes are counted process-wide, so
// errors and logs can say how much rnntrain holds. Running out of memory throws a RuntimeError naming
// the requested size and suggesting a smaller batch. Not a tensor: shapes live with the caller.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace rnntrain::cuda {

// Raw allocation (bytes); `what` names the buffer in the out-of-memory message.
void* device_alloc(size_t bytes, const char* what);
void device_free(void* p, size_t bytes) noexcept;
size_t device_bytes_held();  // by every live DeviceBuffer
// The version of the device state a captured CUDA graph depends on without writing it itself. It
// goes up when a buffer is freed (a buffer that grows frees its old one: addresses change) and when a
// stage rewrites data it uploads only when it changes (note_device_state_changed(): cuDNN's sequence
// lengths). A graph stays valid while this is unchanged.
uint64_t device_version();
void note_device_state_changed();
uint64_t device_allocs();  // allocations made so far
// The most held at once since the start or the last reset (cuDNN's and cuBLAS' own handles and
// workspaces are not counted; what rnntrain allocates, cuDNN workspaces included, is).
size_t device_bytes_peak();
void reset_device_bytes_peak();

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const char* what = "buffer") : what_(what) {}
  ~DeviceBuffer() { device_free(ptr_, cap_ * sizeof(T)); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), cap_(o.cap_), what_(o.what_) { o.ptr_ = nullptr, o.cap_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      device_free(ptr_, cap_ * sizeof(T));
      ptr_ = o.ptr_, cap_ = o.cap_, what_ = o.what_;
      o.ptr_ = nullptr, o.cap_ = 0;
    }
    return *this;
  }

  // At least n elements; contents are lost when it grows (they are scratch or rewritten by the caller).
  T* ensure(int64_t n) {
    if (n > static_cast<int64_t>(cap_)) {
      device_free(ptr_, cap_ * sizeof(T));
      ptr_ = nullptr, cap_ = 0;
      ptr_ = static_cast<T*>(device_alloc(static_cast<size_t>(n) * sizeof(T), what_));
      cap_ = static_cast<size_t>(n);
    }
    return ptr_;
  }
  T* get() const { return ptr_; }
  size_t capacity() const { return cap_; }

 private:
  T* ptr_ = nullptr;
  size_t cap_ = 0;
  const char* what_;
};

// Host <-> device copies of `bytes` on a stream (a cudaStream_t). From pageable host memory the
// upload has read the source when it returns; the download has finished when it returns.
void copy_to_device(void* dst, const void* src, size_t bytes, void* stream);
void copy_to_host(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace rnntrain::cuda
