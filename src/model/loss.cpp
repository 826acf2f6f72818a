// Keras 3 losses (mse, mae, huber, binary/categorical/sparse categorical crossentropy) with their
// gradients. Per position: Keras' reduction over the last axis; then the mean over unmasked positions
// ("sum_over_batch_size" with Keras 3's mask normalisation). Not the metrics (model/metrics.cpp).
#include "model/loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/targets.h"

namespace rnntrain {

namespace {

// Keras' backend.epsilon() and the clip bounds as float32, as Keras computes them.
const double kEpsLo = static_cast<float>(1e-7);
const double kEpsHi = static_cast<float>(1.0 - 1e-7);

double clip_prob(double p) { return std::min(std::max(p, kEpsLo), kEpsHi); }
bool in_clip_range(double p) { return p >= kEpsLo && p <= kEpsHi; }
double sign(double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }

// One position: p, t: [K] (t null for sparse, then `label` is the class). Returns the loss of the
// position and, if g is not null, writes d(loss)/d(p) into g: [K]. `work` is scratch of size K.
struct PositionLoss {
  const LossSpec& spec;
  int64_t k;
  double gscale;  // 1 / (number of unmasked positions): the gradient is of the mean
  std::vector<double>& work;

  double regression(const float* p, const float* t, float* g) const {
    double sum = 0.0;
    const double inv_k = 1.0 / static_cast<double>(k);
    const double delta = spec.delta;
    for (int64_t j = 0; j < k; ++j) {
      const double e = static_cast<double>(p[j]) - t[j];
      double l = 0.0, d = 0.0;
      switch (spec.kind) {
        case LossKind::MSE: l = e * e, d = 2.0 * e; break;
        case LossKind::MAE: l = std::abs(e), d = sign(e); break;
        default:  // Huber
          if (std::abs(e) <= delta) l = 0.5 * e * e, d = e;
          else l = delta * std::abs(e) - 0.5 * delta * delta, d = delta * sign(e);
      }
      sum += l;
      if (g) g[j] = static_cast<float>(d * inv_k * gscale);
    }
    return sum * inv_k;
  }

  double binary(const float* p, const float* t, float* g) const {
    double sum = 0.0;
    const double inv_k = 1.0 / static_cast<double>(k);
    const double ls = spec.label_smoothing;
    for (int64_t j = 0; j < k; ++j) {
      const double y = t[j] * (1.0 - ls) + 0.5 * ls;
      const double x = p[j];
      double l = 0.0, d = 0.0;
      if (spec.from_logits) {
        // max(x, 0) - x*y + log(1 + exp(-|x|)); d/dx = sigmoid(x) - y.
        l = std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::abs(x)));
        const double s = x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
        d = s - y;
      } else {
        const double c = clip_prob(x);
        l = -(y * std::log(c) + (1.0 - y) * std::log(1.0 - c));
        d = in_clip_range(x) ? -(y / c - (1.0 - y) / (1.0 - c)) : 0.0;
      }
      sum += l;
      if (g) g[j] = static_cast<float>(d * inv_k * gscale);
    }
    return sum * inv_k;
  }

  // Categorical: y_j = t_j (dense) or one-hot(label), smoothed towards 1/K.
  double smoothed_target(const float* t, int64_t label, int64_t j) const {
    const double raw = t ? static_cast<double>(t[j]) : (j == label ? 1.0 : 0.0);
    const double ls = spec.label_smoothing;
    return ls > 0 ? raw * (1.0 - ls) + ls / static_cast<double>(k) : raw;
  }

  double categorical(const float* p, const float* t, int64_t label, float* g) const {
    double loss = 0.0;
    if (spec.from_logits) {
      // loss = sum_j y_j * (lse - x_j); d/dx_j = (sum y) * softmax_j - y_j, softmax_j = exp(x_j - m) / z.
      double m = p[0];
      for (int64_t j = 1; j < k; ++j) m = std::max(m, static_cast<double>(p[j]));
      double z = 0.0;
      for (int64_t j = 0; j < k; ++j) {
        work[j] = std::exp(p[j] - m);  // kept for the gradient: one exp per entry
        z += work[j];
      }
      const double lse = m + std::log(z);
      double ysum = 0.0;
      for (int64_t j = 0; j < k; ++j) {
        const double y = smoothed_target(t, label, j);
        ysum += y;
        loss += y * (lse - p[j]);
      }
      if (g)
        for (int64_t j = 0; j < k; ++j)
          g[j] = static_cast<float>((ysum * (work[j] / z) - smoothed_target(t, label, j)) * gscale);
      return loss;
    }
    // Probabilities: q = p / sum(p), clipped to [eps, 1-eps]; loss = -sum_j y_j log(clip(q_j)).
    // With g_j = d(loss)/d(q_j): d(loss)/d(p_j) = (g_j - sum_i g_i q_i) / sum(p).
    double s = 0.0;
    for (int64_t j = 0; j < k; ++j) s += p[j];
    double gq = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      const double q = p[j] / s;
      const double c = clip_prob(q);
      const double y = smoothed_target(t, label, j);
      loss -= y * std::log(c);
      work[j] = in_clip_range(q) ? -y / c : 0.0;
      gq += work[j] * q;
    }
    if (g)
      for (int64_t j = 0; j < k; ++j) g[j] = static_cast<float>((work[j] - gq) / s * gscale);
    return loss;
  }
};

}  // namespace

LossValue compute_loss(const LossSpec& spec, const Tensor& pred, const Tensor& target, const Tensor* mask,
                       Tensor* dpred) {
  const char* who = loss_name(spec.kind);
  const bool sparse = spec.kind == LossKind::SparseCategoricalCrossentropy;
  const TargetView v = sparse ? check_sparse_targets(who, pred, target, mask)
                              : check_dense_targets(who, pred, target, mask);
  if (dpred) {
    dpred->shape = pred.shape;
    dpred->data.assign(pred.data.size(), 0.0f);
  }
  // The mean over unmasked positions. No valid position (everything masked) gives a zero loss and
  // gradient, as Keras' divide_no_nan.
  double count = 0.0;
  for (int64_t i = 0; i < v.n; ++i) count += mask_weight(mask, i);
  std::vector<double> work(static_cast<size_t>(v.k));
  PositionLoss pos{spec, v.k, count > 0 ? 1.0 / count : 0.0, work};

  // pred: [N, K]; target: [N, K] or labels [N]; mask: [N]. Masked positions keep a zero gradient.
  LossValue out;
  for (int64_t i = 0; i < v.n; ++i) {
    if (mask_weight(mask, i) == 0.0) continue;
    const float* p = pred.ptr() + i * v.k;
    const float* t = sparse ? nullptr : target.ptr() + i * v.k;
    float* g = dpred ? dpred->ptr() + i * v.k : nullptr;
    double l = 0.0;
    switch (spec.kind) {
      case LossKind::MSE:
      case LossKind::MAE:
      case LossKind::Huber: l = pos.regression(p, t, g); break;
      case LossKind::BinaryCrossentropy: l = pos.binary(p, t, g); break;
      case LossKind::CategoricalCrossentropy: l = pos.categorical(p, t, -1, g); break;
      case LossKind::SparseCategoricalCrossentropy:
        l = pos.categorical(p, nullptr, checked_label(who, pred, target, i, v.k), g);
        break;
    }
    out.sum += l;
  }
  out.count = count;
  return out;
}

}  // namespace rnntrain
