// Shape helpers for host tensors.
#include "core/tensor.h"

#include <fmt/format.h>

namespace rnntrain {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d < 0 ? 0 : d;
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
