// Adam and AdamW (keras.optimizers.Adam, AdamW): m += (g - m)(1 - beta_1); v += (g^2 - v)(1 - beta_2);
// with amsgrad v_hat = max(v_hat, v) is used for v; p -= alpha*m / (sqrt(v) + epsilon), alpha =
// lr*sqrt(1 - beta_2^t) / (1 - beta_1^t). AdamW is Adam with a weight decay of 0.004 by default.
// Included by spec/optimizers.h (which defines what it uses).
#pragma once

namespace rnntrain {

struct Adam {
  static constexpr OptimizerKey keys[] = {number_key("beta_1", &OptimizerSpec::beta_1, 0.9, KeyRange::UnitOpen),
                                          number_key("beta_2", &OptimizerSpec::beta_2, 0.999, KeyRange::UnitOpen),
                                          number_key("epsilon", &OptimizerSpec::epsilon, 1e-7, KeyRange::Positive),
                                          flag_key("amsgrad", &OptimizerSpec::amsgrad, false)};
  static constexpr OptimizerInfo info = make_info(OptimizerKind::Adam, "adam", "Adam", keys, 0.001, 0.0);

  static SlotKinds slots(const OptimizerSpec& o) {
    SlotKinds s;
    s.together = 2;  // one add_optimizer_variables call in Keras; velocity_hat comes from another
    s.add("momentum");
    s.add("velocity");
    if (o.amsgrad) s.add("velocity_hat");
    return s;
  }
  static StepScalars scalars(const OptimizerSpec& o, double lr, int64_t t) {  // k[0]: alpha
    const double td = static_cast<double>(t);
    return {static_cast<float>(lr), {static_cast<float>(lr * std::sqrt(1.0 - std::pow(o.beta_2, td)) /
                                                        (1.0 - std::pow(o.beta_1, td)))}};
  }

  struct Rule {
    float c1, c2, eps;  // 1 - beta_1, 1 - beta_2 (from double)
    bool amsgrad;
    explicit Rule(const OptimizerSpec& o)
        : c1(static_cast<float>(1.0 - o.beta_1)),
          c2(static_cast<float>(1.0 - o.beta_2)),
          eps(static_cast<float>(o.epsilon)),
          amsgrad(o.amsgrad) {}
    RNNTRAIN_HD void operator()(float& p, float g, float* const* s, int64_t i, const StepScalars& sc) const {
      const float alpha = sc.k[0];
      const float m = s[0][i] + (g - s[0][i]) * c1;
      const float v = s[1][i] + (g * g - s[1][i]) * c2;
      s[0][i] = m, s[1][i] = v;
      float vj = v;
      if (amsgrad) vj = s[2][i] = fmaxf(s[2][i], v);
      p -= m * alpha / (sqrtf(vj) + eps);
    }
  };
};

struct AdamW : Adam {
  static constexpr OptimizerInfo info = make_info(OptimizerKind::AdamW, "adamw", "AdamW", Adam::keys, 0.001, 0.004);
};

}  // namespace rnntrain
