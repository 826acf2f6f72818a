// Mean squared logarithmic error (keras.losses.MeanSquaredLogarithmicError):
// (log(max(x, eps) + 1) - log(max(t, eps) + 1))^2, no gradient where x is clipped at eps.
// Included by spec/losses.h.
#pragma once

namespace rnntrain {

struct Msle {
  static constexpr LossInfo info = make_info(LossKind::MSLE, "msle", "mean_squared_logarithmic_error",
                                             "MeanSquaredLogarithmicError", "mean_squared_logarithmic_error",
                                             Targets::Values, AccuracyOf::None);
  static constexpr bool kRows = false;
  static RNNTRAIN_HD void element(double x, double t, const LossParams&, double& v, double& d) {
    const double e = log(fmax(x, kProbLo) + 1.0) - log(fmax(t, kProbLo) + 1.0);
    v = e * e, d = x > kProbLo ? 2.0 * e / (x + 1.0) : 0.0;
  }
};

}  // namespace rnntrain
