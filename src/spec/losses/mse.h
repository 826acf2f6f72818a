// Mean squared error (keras.losses.MeanSquaredError): (x - t)^2. Included by spec/losses.h.
#pragma once

namespace rnntrain {

struct Mse {
  static constexpr LossInfo info = make_info(LossKind::MSE, "mse", "mean_squared_error", "MeanSquaredError",
                                             "mean_squared_error", Targets::Values, AccuracyOf::None);
  static constexpr bool kRows = false;
  static RNNTRAIN_HD void element(double x, double t, const LossParams&, double& v, double& d) {
    const double e = x - t;
    v = e * e, d = 2.0 * e;
  }
};

}  // namespace rnntrain
