// Keras' confusion-matrix metrics (Precision, Recall, AUC, F1Score, FBetaScore) as histograms of the
// output values: each unmasked value goes into a bin by its prediction, into the positives' or the
// negatives' histogram by its target, per class or all classes in one. True positives at threshold
// i are the positives in bins above i, false negatives those at or below, and so for the negatives
// (model/metrics.cpp reads them). The CPU metrics and the CUDA kernel (kernels_train.cu) share
// confusion_row. Plain C++17: the kernels include it.
#pragma once
#include <cmath>
#include <cstdint>

#include "spec/descriptor.h"

namespace rnntrain {

struct ConfusionRule {
  enum Mode : int {
    Threshold,  // 2 bins: p > threshold (Keras' Precision, Recall; F1Score with a threshold)
    Even,       // num_thresholds + 1 bins, Keras' evenly spaced AUC thresholds from -eps to 1 + eps
    RowMax,     // 2 bins: p is the row's maximum and |p| > 1e-9 (F1Score without a threshold)
  };
  int mode = Threshold;
  float threshold = 0.5f;
  int64_t num_thresholds = 2;
  bool sigmoid = false;    // Even: predictions are logits (AUC from_logits)
  int64_t class_id = -1;   // only this unit of the last axis; -1: every unit
  bool per_class = false;  // a histogram per unit (AUC multi_label, the f-scores); else one for all
  bool soft = false;       // targets count as y positive and 1 - y negative (the f-scores); else y != 0

#if __cplusplus >= 202002L
  bool operator==(const ConfusionRule&) const = default;
#endif
  RNNTRAIN_HD int64_t bins() const { return mode == Even ? num_thresholds + 1 : 2; }

  // The bin of prediction p: the thresholds it exceeds. Even: Keras' bucket ceil(p (T-1)) - 1 of p
  // clipped to [0, 1], in float32 as Keras computes it, plus one (every p exceeds -eps).
  RNNTRAIN_HD int64_t bin(float p, float rowmax) const {
    if (mode == Threshold) return p > threshold ? 1 : 0;
    if (mode == RowMax) return p >= rowmax && fabsf(p) > 1e-9f ? 1 : 0;
    if (sigmoid) p = 1.0f / (1.0f + expf(-p));
    p = p >= 0.0f ? (p <= 1.0f ? p : 1.0f) : 0.0f;  // NaN -> 0
    const float b = ceilf(p * static_cast<float>(num_thresholds - 1)) - 1.0f;
    return (b > 0.0f ? static_cast<int64_t>(b) : 0) + 1;
  }
};

// One position: k predictions p and targets t. Calls add(at, positive, negative) for each counted
// unit, at = its class's histogram offset (class * bins, 0 when not per class) + its bin.
template <class Add>
RNNTRAIN_HD void confusion_row(const ConfusionRule& r, const float* p, const float* t, int64_t k, Add&& add) {
  float rowmax = p[0];
  if (r.mode == ConfusionRule::RowMax)
    for (int64_t j = 1; j < k; ++j) rowmax = p[j] > rowmax ? p[j] : rowmax;
  const int64_t j0 = r.class_id >= 0 ? r.class_id : 0, j1 = r.class_id >= 0 ? r.class_id + 1 : k;
  for (int64_t j = j0; j < j1; ++j) {
    const double y = r.soft ? static_cast<double>(t[j]) : (t[j] != 0.0f ? 1.0 : 0.0);
    add((r.per_class ? j : 0) * r.bins() + r.bin(p[j], rowmax), y, 1.0 - y);
  }
}

}  // namespace rnntrain
