// Adadelta (keras.optimizers.Adadelta): a = rho*a + (1 - rho)*g^2;
// delta = -sqrt(d + epsilon)*g / sqrt(a + epsilon); d = rho*d + (1 - rho)*delta^2; p += lr*delta.
// Included by spec/optimizers.h.
#pragma once

namespace rnntrain {

struct Adadelta {
  static constexpr OptimizerKey keys[] = {number_key("rho", &OptimizerSpec::rho, 0.95, KeyRange::UnitOpen),
                                          number_key("epsilon", &OptimizerSpec::epsilon, 1e-7, KeyRange::Positive)};
  static constexpr OptimizerInfo info = make_info(OptimizerKind::Adadelta, "adadelta", "Adadelta", keys, 0.001, 0.0);

  static SlotKinds slots(const OptimizerSpec&) {
    SlotKinds s;
    s.together = 2;  // one add_optimizer_variables call in Keras
    s.add("accumulated_grad");
    s.add("accumulated_delta_var");
    return s;
  }
  static StepScalars scalars(const OptimizerSpec&, double lr, int64_t) { return {static_cast<float>(lr)}; }

  struct Rule {
    float rho, c, eps;  // rho, 1 - rho (from double)
    explicit Rule(const OptimizerSpec& o)
        : rho(static_cast<float>(o.rho)), c(static_cast<float>(1.0 - o.rho)), eps(static_cast<float>(o.epsilon)) {}
    RNNTRAIN_HD void operator()(float& p, float g, float* const* s, int64_t i, const StepScalars& sc) const {
      const float lr = sc.lr;
      const float a = rho * s[0][i] + c * (g * g);
      const float delta = -(sqrtf(s[1][i] + eps) * g) / sqrtf(a + eps);
      s[0][i] = a;
      s[1][i] = rho * s[1][i] + c * (delta * delta);
      p += lr * delta;
    }
  };
};

}  // namespace rnntrain
