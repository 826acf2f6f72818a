// Mean absolute error (keras.losses.MeanAbsoluteError): |x - t|. Included by spec/losses.h.
#pragma once

namespace rnntrain {

struct Mae {
  static constexpr LossInfo info = make_info(LossKind::MAE, "mae", "mean_absolute_error", "MeanAbsoluteError",
                                             "mean_absolute_error", Targets::Values, AccuracyOf::None);
  static constexpr bool kRows = false;
  static RNNTRAIN_HD void element(double x, double t, const LossParams&, double& v, double& d) {
    const double e = x - t;
    v = fabs(e), d = e > 0 ? 1.0 : (e < 0 ? -1.0 : 0.0);
  }
};

}  // namespace rnntrain
