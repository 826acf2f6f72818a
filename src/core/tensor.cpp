// Shape helpers for host tensors.
#include "core/tensor.h"

#include <fmt/format.h>

#include "core/error.h"

namespace rnntrain {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d < 0 ? 0 : d, &n))
      throw DataError(fmt::format("shape {} has more elements than 64 bits can count; the file or config that gave "
                                  "it is damaged", shape_str(s)));
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += s[i] < 0 ? "None" : fmt::format("{}", s[i]);
  }
  if (s.size() == 1) out += ",";
  return out + ")";
}

}  // namespace rnntrain
