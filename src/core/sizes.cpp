// Checked size arithmetic and the machine's memory (see sizes.h).
#include "core/sizes.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

namespace rnntrain {

std::optional<int64_t> checked_numel(const Shape& shape) {
  int64_t n = 1;
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d == 0) zero = true;
    // Multiply the non-zero dimensions: (2^62, 2^62, 0) is as damaged as (2^62, 2^62).
    if (d > 0 && __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return zero ? 0 : n;
}

uint64_t memory_limit_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return uint64_t{1} << 40;  // unknown: 1 TiB
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

namespace {

// The first number in a file ("max" or a missing file: -1).
int64_t read_number(const std::string& path) {
  std::ifstream in(path);
  int64_t v = -1;
  if (!(in >> v)) return -1;
  return v;
}

}  // namespace

int64_t host_available_bytes() {
  int64_t avail = -1;
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    int64_t kb = 0;
    in >> kb;
    if (key == "MemAvailable:") avail = kb * 1024;
    in.ignore(64, '\n');
  }
  const int64_t limit = read_number("/sys/fs/cgroup/memory.max"), used = read_number("/sys/fs/cgroup/memory.current");
  if (limit > 0 && used >= 0 && (avail < 0 || limit - used < avail)) avail = std::max<int64_t>(limit - used, 0);
  return avail;
}

std::string bytes_str(double bytes) {
  static const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024.0) return fmt::format("{:.0f} bytes", bytes);
  int u = -1;
  while (bytes >= 1024.0 && u < 5) bytes /= 1024.0, ++u;
  return fmt::format("{:.3g} {}", bytes, units[u]);
}

}  // namespace rnntrain
