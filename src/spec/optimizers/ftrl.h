// Ftrl (keras.optimizers.Ftrl), "Follow The Regularized Leader": with n the accumulator (starting at
// initial_accumulator_value), z the linear slot and c = -learning_rate_power:
// n' = n + g^2; z += g + 2*l2_shrinkage*p - (n'^c - n^c)/lr * p; p = (clip(z, -l1, l1) - z) /
// (n'^c/lr + 2*(l2 + beta/(2 lr))). Included by spec/optimizers.h (which defines what it uses).
#pragma once

namespace rnntrain {

struct Ftrl {
  static constexpr OptimizerKey keys[] = {
      number_key("learning_rate_power", &OptimizerSpec::learning_rate_power, -0.5, KeyRange::NonPositive),
      number_key("initial_accumulator_value", &OptimizerSpec::initial_accumulator_value, 0.1, KeyRange::NonNegative),
      number_key("l1_regularization_strength", &OptimizerSpec::l1, 0.0, KeyRange::NonNegative),
      number_key("l2_regularization_strength", &OptimizerSpec::l2, 0.0, KeyRange::NonNegative),
      number_key("l2_shrinkage_regularization_strength", &OptimizerSpec::l2_shrinkage, 0.0, KeyRange::NonNegative),
      number_key("beta", &OptimizerSpec::beta, 0.0, KeyRange::NonNegative)};
  static constexpr OptimizerInfo info = make_info(OptimizerKind::Ftrl, "ftrl", "Ftrl", keys, 0.001, 0.0);

  static SlotKinds slots(const OptimizerSpec& o) {
    SlotKinds s;
    s.together = 2;  // one add_optimizer_variables call in Keras
    s.add("accumulator", static_cast<float>(o.initial_accumulator_value));
    s.add("linear");
    return s;
  }
  static StepScalars scalars(const OptimizerSpec& o, double lr, int64_t) {  // k[0]: l2 + beta / (2 lr)
    return {static_cast<float>(lr), {static_cast<float>(o.l2 + o.beta / (2.0 * lr))}};
  }

  struct Rule {
    float c, l1, shrink2;  // -learning_rate_power, l1, 2 * l2_shrinkage
    explicit Rule(const OptimizerSpec& o)
        : c(static_cast<float>(-o.learning_rate_power)),
          l1(static_cast<float>(o.l1)),
          shrink2(static_cast<float>(2.0 * o.l2_shrinkage)) {}
    RNNTRAIN_HD void operator()(float& p, float g, float* const* s, int64_t i, const StepScalars& sc) const {
      const float lr = sc.lr, l2_reg = sc.k[0];
      const float n = s[0][i], n2 = n + g * g;
      const float pn2 = powf(n2, c);
      const float z = s[1][i] + ((g + shrink2 * p) - (pn2 - powf(n, c)) / lr * p);
      const float quadratic = pn2 / lr + 2.0f * l2_reg;
      const float clipped = fminf(fmaxf(z, -l1), l1);
      s[0][i] = n2, s[1][i] = z;
      p = (clipped - z) / quadratic;
    }
  };
};

}  // namespace rnntrain
