// A batch as the data pipeline hands it to a backend.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace rnntrain {

struct Batch {
  Tensor x;                      // [B, T, F] features, or [B, T] token ids (as floats)
  Tensor y;                      // targets: [B, K], [B, T, K], or sparse labels [B] / [B, T]
  std::vector<int32_t> lengths;  // optional, size B: steps >= lengths[b] are padding (masked)
  // Optional loss weights: per sample [B] or per output position [B, T] (sample_weight, class_weight);
  // a masked position's weight does not count.
  Tensor w;
  int64_t size() const { return x.shape.empty() ? 0 : x.shape[0]; }
};

}  // namespace rnntrain
