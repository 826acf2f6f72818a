// What the descriptor tables (spec/optimizers.h, spec/losses.h, spec/cells.h, spec/metrics.h,
// spec/data_formats.h) share: the host/device
// marker for functions the CUDA kernels call too, the ranges of numeric settings, and the dispatch
// from a kind to its descriptor type. Plain C++17: the CUDA kernels include it.
#pragma once

#if defined(__CUDACC__)
#define RNNTRAIN_HD __host__ __device__
#else
#define RNNTRAIN_HD
#endif

namespace rnntrain {

// The range a setting's value must lie in (the updates run in float32: at most FLT_MAX).
enum class KeyRange {
  Positive, NonNegative, NonPositive, Unit /* [0, 1] */, UnitOpen /* [0, 1) */, Flag,
  Count /* a whole number >= 0, written as an integer (Keras calls range() on it) */
};

// Whether a table indexed by an enum has one row per value, in the enum's order (rows[i].kind is
// value i): what lets metric_info and data_format_info index it directly.
template <class Row, int N>
constexpr bool rows_in_kind_order(const Row (&rows)[N], int kinds) {
  for (int i = 0; i < N; ++i)
    if (static_cast<int>(rows[i].kind) != i) return false;
  return N == kinds;
}

// Calls f(D{}) with the first of the descriptors D... whose info.kind is k (the last one if none is).
template <class F, class Kind, class D, class... Rest>
decltype(auto) with_descriptor(Kind k, F& f) {
  if constexpr (sizeof...(Rest) == 0) {
    return f(D{});
  } else {
    if (D::info.kind == k) return f(D{});
    return with_descriptor<F, Kind, Rest...>(k, f);
  }
}

}  // namespace rnntrain
