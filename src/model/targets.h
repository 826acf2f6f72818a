// How targets and masks line up with predictions, shared by losses and metrics: shape checks with
// messages for the user, and sparse-label checks. Not a loss: no arithmetic on the values.
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "spec/config.h"

namespace rnntrain {

// pred viewed as N positions of K values: pred [B, K] -> N = B, pred [B, T, K] -> N = B*T.
struct TargetView {
  int64_t n = 0, k = 0;
};

// Dense targets: the same shape as pred, or pred's shape without a trailing 1 ([B] for [B, 1]).
// mask: null, or pred's shape without the last axis ([B, T] for [B, T, K]).
// Throws DataError naming `who`, the expected and the found shapes.
TargetView check_dense_targets(const char* who, const Tensor& pred, const Tensor& target, const Tensor* mask);

// Sparse labels: pred's shape without the last axis ([B] / [B, T]), or with a trailing 1.
TargetView check_sparse_targets(const char* who, const Tensor& pred, const Tensor& target, const Tensor* mask);

// Label of position i as a class index; throws DataError unless it is an integer in [0, k).
// `pred` gives the shape for the message (sample and step of position i).
int64_t checked_label(const char* who, const Tensor& pred, const Tensor& target, int64_t i, int64_t k);

// Mask weight of position i: 1 where unmasked (mask null or mask[i] != 0), else 0.
inline double mask_weight(const Tensor* mask, int64_t i) { return mask == nullptr || (*mask)[i] != 0.0f ? 1.0 : 0.0; }

}  // namespace rnntrain
