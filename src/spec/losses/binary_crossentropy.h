// Binary cross-entropy (keras.losses.BinaryCrossentropy), per output, with targets smoothed towards
// 0.5: y = t (1 - label_smoothing) + 0.5 label_smoothing. Logits: max(x, 0) - x y + log(1 + exp(-|x|)),
// d/dx = sigmoid(x) - y. Probabilities: clipped to [eps, 1 - eps], -(y log c + (1 - y) log(1 - c)), no
// gradient where clipped. Included by spec/losses.h.
#pragma once

namespace rnntrain {

struct BinaryCrossentropy {
  static constexpr LossKey keys[] = {loss_flag("from_logits", &LossSpec::from_logits, false),
                                     loss_number("label_smoothing", &LossSpec::label_smoothing, 0.0, KeyRange::UnitOpen)};
  static constexpr LossInfo info = make_info(LossKind::BinaryCrossentropy, "binary_crossentropy", nullptr,
                                             "BinaryCrossentropy", "binary_crossentropy", keys,
                                             Targets::Probabilities, AccuracyOf::Binary);
  static constexpr bool kRows = false;
  static RNNTRAIN_HD void element(double x, double t, const LossParams& p, double& v, double& d) {
    const double y = t * (1.0 - p.label_smoothing) + 0.5 * p.label_smoothing;
    if (p.from_logits) {
      v = fmax(x, 0.0) - x * y + log1p(exp(-fabs(x)));
      const double s = x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
      d = s - y;
    } else {
      const double c = fmin(fmax(x, kProbLo), kProbHi);
      v = -(y * log(c) + (1.0 - y) * log(1.0 - c));
      d = (x >= kProbLo && x <= kProbHi) ? -(y / c - (1.0 - y) / (1.0 - c)) : 0.0;
    }
  }
};

}  // namespace rnntrain
