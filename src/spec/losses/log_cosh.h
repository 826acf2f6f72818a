// Log-cosh (keras.losses.LogCosh): e + softplus(-2 e) - log 2 = log(cosh(e)), e = x - t, written as
// Keras writes it so that large errors do not overflow; d/dx = tanh(e). Included by spec/losses.h.
#pragma once

namespace rnntrain {

struct LogCosh {
  static constexpr LossInfo info =
      make_info(LossKind::LogCosh, "log_cosh", "logcosh", "LogCosh", "log_cosh", Targets::Values, AccuracyOf::None);
  static constexpr bool kRows = false;
  static RNNTRAIN_HD void element(double x, double t, const LossParams&, double& v, double& d) {
    const double e = x - t, z = -2.0 * e;
    v = fmax(e + fmax(z, 0.0) + log1p(exp(-fabs(z))) - 0.6931471805599453, 0.0);  // not -1e-16 near e = 0
    d = tanh(e);
  }
};

}  // namespace rnntrain
