// Checked size arithmetic for sizes read from files and configs, and the bound they are held to
// (this machine's memory): nullopt instead of a wrap-around, before anything is allocated. Not a
// memory estimate of a model (train/ does that).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"

namespace rnntrain {

// a * b and a + b, or nullopt when the result does not fit in int64.
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The element count of `shape`, or nullopt when a dimension is negative or the count does not fit
// in int64 (a damaged header). (2^62, 2^62, 0) counts as damaged too.
std::optional<int64_t> checked_numel(const Shape& shape);

// What one in-memory array may take: the machine's physical memory.
uint64_t memory_limit_bytes();
// Host memory this process can still take: MemAvailable, or the cgroup's limit when lower; -1 when
// neither can be read.
int64_t host_available_bytes();

// "1.5 GiB", "120 MiB", "32 bytes" for messages.
std::string bytes_str(double bytes);

}  // namespace rnntrain
