// Lamb (keras.optimizers.Lamb): Adam's moments, m += (g - m)(1 - beta_1), v += (g^2 - v)(1 - beta_2),
// give the update u = (m / (1 - beta_1^t)) / (sqrt(v / (1 - beta_2^t)) + epsilon); each parameter then
// moves by r*lr*u with Keras' layer-wise trust ratio r = |p| / |u| over the whole parameter (1 when
// either norm is 0), which the optimizers apply after the rule (SlotKinds::trust_ratio).
// Included by spec/optimizers.h (which defines what it uses).
#pragma once

namespace rnntrain {

struct Lamb {
  static constexpr OptimizerKey keys[] = {number_key("beta_1", &OptimizerSpec::beta_1, 0.9, KeyRange::UnitOpen),
                                          number_key("beta_2", &OptimizerSpec::beta_2, 0.999, KeyRange::UnitOpen),
                                          number_key("epsilon", &OptimizerSpec::epsilon, 1e-7, KeyRange::Positive)};
  static constexpr OptimizerInfo info = make_info(OptimizerKind::Lamb, "lamb", "Lamb", keys, 0.001, 0.0);

  static SlotKinds slots(const OptimizerSpec&) {
    SlotKinds s;
    s.together = 2;  // one add_optimizer_variables call in Keras
    s.add("momentum");
    s.add("velocity");
    s.trust_ratio = true;
    return s;
  }
  // k[0] = 1 - beta_1^t, k[1] = 1 - beta_2^t.
  static StepScalars scalars(const OptimizerSpec& o, double lr, int64_t t) {
    const double td = static_cast<double>(t);
    return {static_cast<float>(lr),
            {static_cast<float>(1.0 - std::pow(o.beta_1, td)), static_cast<float>(1.0 - std::pow(o.beta_2, td))}};
  }

  struct Rule {
    float c1, c2, eps;  // 1 - beta_1, 1 - beta_2 (from double)
    explicit Rule(const OptimizerSpec& o)
        : c1(static_cast<float>(1.0 - o.beta_1)), c2(static_cast<float>(1.0 - o.beta_2)),
          eps(static_cast<float>(o.epsilon)) {}
    RNNTRAIN_HD void operator()(float&, float g, float* const* s, int64_t i, const StepScalars& sc) const {
      const float m = s[0][i] + (g - s[0][i]) * c1;
      const float v = s[1][i] + (g * g - s[1][i]) * c2;
      s[0][i] = m, s[1][i] = v;
      s[2][i] = (m / sc.k[0]) / (sqrtf(v / sc.k[1]) + eps);  // the update, scaled per parameter afterwards
    }
  };
};

}  // namespace rnntrain
