// Categorical cross-entropy (keras.losses.CategoricalCrossentropy) over the last axis, with targets
// smoothed towards 1/K: y_j = t_j (1 - label_smoothing) + label_smoothing / K. Logits:
// sum_j y_j (lse - x_j), d/dx_j = (sum y) softmax_j - y_j. Probabilities: q = p / sum(p) clipped to
// [eps, 1 - eps], -sum_j y_j log(q_j); with w_j = d/dq_j, d/dp_j = (w_j - sum_i w_i q_i) / sum(p).
// Included by spec/losses.h.
#pragma once

namespace rnntrain {

struct CategoricalCrossentropy {
  static constexpr LossKey keys[] = {loss_flag("from_logits", &LossSpec::from_logits, false),
                                     loss_number("label_smoothing", &LossSpec::label_smoothing, 0.0, KeyRange::UnitOpen)};
  static constexpr LossInfo info = make_info(LossKind::CategoricalCrossentropy, "categorical_crossentropy", nullptr,
                                             "CategoricalCrossentropy", "categorical_crossentropy", keys,
                                             Targets::Distributions, AccuracyOf::Categorical);
  static constexpr bool kRows = true;

  // y_j: t[j], or one-hot of `label` when t is null, smoothed.
  static RNNTRAIN_HD double target(const float* t, int64_t label, int64_t j, int64_t K, double ls) {
    const double raw = t ? static_cast<double>(t[j]) : (j == label ? 1.0 : 0.0);
    return ls > 0 ? raw * (1.0 - ls) + ls / static_cast<double>(K) : raw;
  }

  static RNNTRAIN_HD double row(const float* p, const float* t, int64_t label, int64_t K, const LossParams& lp,
                                float* g, double gscale) {
    const double ls = lp.label_smoothing;
    double l = 0.0;
    if (lp.from_logits) {
      double m = p[0];
      for (int64_t j = 1; j < K; ++j) m = p[j] > m ? p[j] : m;  // fmax's NaN rule: the loss is NaN either way
      double z = 0.0;
      for (int64_t j = 0; j < K; ++j) {  // g (never p itself) keeps exp(x_j - m): one exp an element
        const double e = exp(p[j] - m);
        z += e;
        if (g) g[j] = static_cast<float>(e);
      }
      const double lse = m + log(z);
      // A label, unsmoothed: sum_j y_j (lse - x_j) is lse - x_label and sum y is 1, bit for bit where the
      // logits are finite (with a logit of -inf the sum below is NaN, 0 * inf; this is the true loss).
      if (!t && ls == 0) {
        if (g)
          for (int64_t j = 0; j < K; ++j)
            g[j] = static_cast<float>((static_cast<double>(g[j]) / z - (j == label ? 1.0 : 0.0)) * gscale);
        return lse - p[label];
      }
      double ysum = 0.0;
      for (int64_t j = 0; j < K; ++j) {
        const double y = target(t, label, j, K, ls);
        ysum += y;
        l += y * (lse - p[j]);
      }
      if (g)
        for (int64_t j = 0; j < K; ++j)
          g[j] = static_cast<float>((ysum * (static_cast<double>(g[j]) / z) - target(t, label, j, K, ls)) * gscale);
      return l;
    }
    double s = 0.0;
    for (int64_t j = 0; j < K; ++j) s += p[j];
    double gq = 0.0;
    for (int64_t j = 0; j < K; ++j) {
      const double q = p[j] / s, c = fmin(fmax(q, kProbLo), kProbHi), y = target(t, label, j, K, ls);
      l -= y * log(c);
      gq += ((q >= kProbLo && q <= kProbHi) ? -y / c : 0.0) * q;
    }
    if (g)
      for (int64_t j = 0; j < K; ++j) {
        const double q = p[j] / s, c = fmin(fmax(q, kProbLo), kProbHi);
        const double w = (q >= kProbLo && q <= kProbHi) ? -target(t, label, j, K, ls) / c : 0.0;
        g[j] = static_cast<float>((w - gq) / s * gscale);
      }
    return l;
  }
};

}  // namespace rnntrain
