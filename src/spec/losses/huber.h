// Huber (keras.losses.Huber): 0.5 e^2 where |e| <= delta, else delta |e| - 0.5 delta^2 (e = x - t).
// Included by spec/losses.h.
#pragma once

namespace rnntrain {

struct Huber {
  static constexpr LossKey keys[] = {loss_number("delta", &LossSpec::delta, 1.0, KeyRange::Positive)};
  static constexpr LossInfo info =
      make_info(LossKind::Huber, "huber", nullptr, "Huber", "huber_loss", keys, Targets::Values, AccuracyOf::None);
  static constexpr bool kRows = false;
  static RNNTRAIN_HD void element(double x, double t, const LossParams& p, double& v, double& d) {
    const double e = x - t, sign = e > 0 ? 1.0 : (e < 0 ? -1.0 : 0.0);
    if (fabs(e) <= p.delta) v = 0.5 * e * e, d = e;
    else v = p.delta * fabs(e) - 0.5 * p.delta * p.delta, d = p.delta * sign;
  }
};

}  // namespace rnntrain
