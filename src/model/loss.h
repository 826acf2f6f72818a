// Keras losses with the "sum over batch size" reduction: per-sample (or per-timestep) losses are
// averaged over the unmasked samples. Forward and gradient in one call.
#pragma once
#include "core/chunks.h"
#include "core/tensor.h"
#include "spec/config.h"

namespace rnntrain {

struct LossValue {
  double sum = 0.0;    // sum of per-sample (per-timestep) losses over unmasked entries
  double count = 0.0;  // number of unmasked entries; the loss is sum / count
  // Training steps: false when the step's update left a parameter inf or NaN.
  bool params_finite = true;
  double penalty = 0.0;  // the weight regularizers' penalty (model/params.h), before the step's update
  // The loss as Keras reports it: the mean, 0 when every entry is masked (Keras' divide_no_nan), plus
  // the regularizers' penalty.
  double mean() const { return (count > 0 ? sum / count : 0.0) + penalty; }
};

// pred: [B, K] or [B, T, K]. target: same shape, or for sparse_categorical_crossentropy labels
// [B] / [B, T] (or with a trailing 1). mask: null or [B, T] of 0/1 (only with a time axis).
// If dpred is not null it receives d(sum/count)/d(pred), shaped like pred (zero where masked).
// weight: null, or Batch::w (per sample, or per position): each position's loss and gradient times
// its weight, the count unweighted (Keras' sum_over_batch_size with sample_weight).
// Bad targets (a shape that does not fit pred, a sparse label outside [0, K)) throw DataError.
// The positions run in chunks of kLossChunk, their sums added in order; through `chunks` (core/chunks.h)
// where the loss has at least kLossWide values, else here.
inline constexpr int64_t kLossChunk = 64, kLossWide = 16384;
LossValue compute_loss(const LossSpec& spec, const Tensor& pred, const Tensor& target, const Tensor* mask,
                       Tensor* dpred, const Tensor* weight = nullptr, const ChunkRunner* chunks = nullptr);

// Positions per weight of Batch::w for n output positions (1: per position, T: per sample of a
// sequence output); DataError when w does not fit.
int64_t positions_per_weight(const Tensor& w, int64_t n);

}  // namespace rnntrain
