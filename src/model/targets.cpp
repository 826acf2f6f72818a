// Shape checks of (pred, target, mask) for losses and metrics, with messages that show the expected
// and found shapes and say what to change. No arithmetic on the values here.
#include "model/targets.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace rnntrain {

namespace {

Shape without_last(const Shape& s) { return Shape(s.begin(), s.end() - 1); }

Shape with_trailing_one(Shape s) {
  s.push_back(1);
  return s;
}

void check_pred(const char* who, const Tensor& pred) {
  if (pred.rank() < 2 || pred.dim(-1) <= 0)
    throw RuntimeError(fmt::format("{}: predictions have shape {}; expected [batch, classes] or "
                                   "[batch, steps, classes] (an internal error: please report it)",
                                   who, shape_str(pred.shape)));
}

void check_mask(const char* who, const Tensor& pred, const Tensor* mask) {
  if (mask == nullptr) return;
  const Shape want = without_last(pred.shape);
  if (mask->shape != want)
    throw DataError(fmt::format("{}: the mask has shape {} but the predictions have shape {}; expected a "
                                "mask of shape {} (one 0/1 per sample and step); check the sequence lengths",
                                who, shape_str(mask->shape), shape_str(pred.shape), shape_str(want)));
}

}  // namespace

TargetView check_dense_targets(const char* who, const Tensor& pred, const Tensor& target, const Tensor* mask) {
  check_pred(who, pred);
  const bool same = target.shape == pred.shape;
  const bool squeezed = pred.dim(-1) == 1 && target.shape == without_last(pred.shape);
  if (!same && !squeezed) {
    std::string hint;
    if (target.shape == without_last(pred.shape) || target.shape == with_trailing_one(without_last(pred.shape)))
      hint = fmt::format("; the targets look like class indices: use the loss sparse_categorical_crossentropy, "
                         "or one-hot targets of shape {}",
                         shape_str(pred.shape));
    else
      hint = fmt::format("; check the targets in the data file and the units of the last layer ({})", pred.dim(-1));
    throw DataError(fmt::format("{}: targets have shape {} but the predictions have shape {}; expected targets of "
                                "shape {}{}",
                                who, shape_str(target.shape), shape_str(pred.shape), shape_str(pred.shape), hint));
  }
  check_mask(who, pred, mask);
  return {shape_numel(without_last(pred.shape)), pred.dim(-1)};
}

TargetView check_sparse_targets(const char* who, const Tensor& pred, const Tensor& target, const Tensor* mask) {
  check_pred(who, pred);
  const Shape want = without_last(pred.shape);
  if (target.shape != want && target.shape != with_trailing_one(want)) {
    std::string hint = target.shape == pred.shape
                           ? "; the targets look one-hot: use the loss categorical_crossentropy, or class indices"
                           : "; check the targets in the data file (one class index per sample or per step)";
    throw DataError(fmt::format("{}: targets have shape {} but the predictions have shape {}; expected class indices "
                                "of shape {} or {}{}",
                                who, shape_str(target.shape), shape_str(pred.shape), shape_str(want),
                                shape_str(with_trailing_one(want)), hint));
  }
  check_mask(who, pred, mask);
  return {shape_numel(want), pred.dim(-1)};
}

int64_t checked_label(const char* who, const Tensor& pred, const Tensor& target, int64_t i, int64_t k) {
  const float v = target[i];
  const bool integral = std::isfinite(v) && std::floor(v) == v;
  if (integral && v >= 0.0f && v < static_cast<float>(k)) return static_cast<int64_t>(v);
  std::string where;
  if (pred.rank() == 3)
    where = fmt::format("sample {}, step {}", i / pred.dim(1), i % pred.dim(1));
  else
    where = fmt::format("sample {}", i);
  throw DataError(fmt::format("{}: label {} at {} is not a class index in [0, {}); the last layer has {} units, so "
                              "labels must be integers 0..{}; check the targets or the units of the last layer",
                              who, v, where, k, k, k - 1));
}

}  // namespace rnntrain
