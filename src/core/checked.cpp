// Checked size arithmetic and the machine's memory (see checked.h).
#include "core/checked.h"

#include <fmt/format.h>
#include <unistd.h>

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

std::string bytes_str(double bytes) {
  static const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024.0) return fmt::format("{:.0f} bytes", bytes);
  int u = -1;
  while (bytes >= 1024.0 && u < 5) bytes /= 1024.0, ++u;
  return fmt::format("{:.3g} {}", bytes, units[u]);
}

}  // namespace rnntrain
