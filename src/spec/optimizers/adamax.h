// Adamax (keras.optimizers.Adamax): m += (g - m)(1 - beta_1); u = max(beta_2*u, |g|);
// p -= alpha*m / (u + epsilon), alpha = lr / (1 - beta_1^t). Included by spec/optimizers.h.
#pragma once

namespace rnntrain {

struct Adamax {
  static constexpr OptimizerKey keys[] = {number_key("beta_1", &OptimizerSpec::beta_1, 0.9, KeyRange::UnitOpen),
                                          number_key("beta_2", &OptimizerSpec::beta_2, 0.999, KeyRange::UnitOpen),
                                          number_key("epsilon", &OptimizerSpec::epsilon, 1e-7, KeyRange::Positive)};
  static constexpr OptimizerInfo info = make_info(OptimizerKind::Adamax, "adamax", "Adamax", keys, 0.001, 0.0);

  static SlotKinds slots(const OptimizerSpec&) {
    SlotKinds s;
    s.together = 2;  // one add_optimizer_variables call in Keras
    s.add("momentum");
    s.add("norm");
    return s;
  }
  static StepScalars scalars(const OptimizerSpec& o, double lr, int64_t t) {  // k[0]: alpha
    return {static_cast<float>(lr), {static_cast<float>(lr / (1.0 - std::pow(o.beta_1, static_cast<double>(t))))}};
  }

  struct Rule {
    float c1, b2, eps;  // 1 - beta_1 (from double), beta_2
    explicit Rule(const OptimizerSpec& o)
        : c1(static_cast<float>(1.0 - o.beta_1)), b2(static_cast<float>(o.beta_2)), eps(static_cast<float>(o.epsilon)) {}
    RNNTRAIN_HD void operator()(float& p, float g, float* const* s, int64_t i, const StepScalars& sc) const {
      const float alpha = sc.k[0];
      const float m = s[0][i] + (g - s[0][i]) * c1;
      const float b = b2 * s[1][i], a = fabsf(g);
      const float u = b != b ? b : b > a ? b : a;  // max, NaN kept
      s[0][i] = m, s[1][i] = u;
      p -= alpha * m / (u + eps);
    }
  };
};

}  // namespace rnntrain
