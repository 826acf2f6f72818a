// Nadam (keras.optimizers.Nadam): Adam with Nesterov momentum and Keras' momentum schedule
// u_t = beta_1 (1 - 0.5 * 0.96^t), Pi_t = u_1 ... u_t: m += (g - m)(1 - beta_1); v += (g^2 - v)(1 -
// beta_2); p -= lr * (u_{t+1} m / (1 - Pi_{t+1}) + (1 - u_t) g / (1 - Pi_t)) / (sqrt(v / (1 -
// beta_2^t)) + epsilon). Keras keeps Pi_t as a variable after the slots; here it comes from t.
// Included by spec/optimizers.h (which defines what it uses).
#pragma once

namespace rnntrain {

struct Nadam {
  static constexpr OptimizerKey keys[] = {number_key("beta_1", &OptimizerSpec::beta_1, 0.9, KeyRange::UnitOpen),
                                          number_key("beta_2", &OptimizerSpec::beta_2, 0.999, KeyRange::UnitOpen),
                                          number_key("epsilon", &OptimizerSpec::epsilon, 1e-7, KeyRange::Positive)};
  static constexpr OptimizerInfo info = make_info(OptimizerKind::Nadam, "nadam", "Nadam", keys, 0.001, 0.0);

  static double u(const OptimizerSpec& o, double t) { return o.beta_1 * (1.0 - 0.5 * std::pow(0.96, t)); }
  // Pi_t, called once a step: 0.96^k is below 1e-17 from k = 950 on, where the factors are beta_1 alone.
  static double u_product(const OptimizerSpec& o, int64_t t) {
    double p = 1.0, d = 0.96;  // d = 0.96^k
    int64_t k = 1;
    for (; k <= t && k < 950; ++k, d *= 0.96) p *= o.beta_1 * (1.0 - 0.5 * d);
    return p * std::pow(o.beta_1, static_cast<double>(t - k + 1));
  }

  static SlotKinds slots(const OptimizerSpec&) {
    SlotKinds s;
    s.together = 2;  // one add_optimizer_variables call in Keras
    s.add("momentum");
    s.add("velocity");
    s.after = {"variable", &u_product};  // Keras' _u_product, unnamed
    return s;
  }
  // k[0] = u_{t+1} / (1 - Pi_{t+1}), k[1] = (1 - u_t) / (1 - Pi_t), k[2] = 1 / (1 - beta_2^t).
  static StepScalars scalars(const OptimizerSpec& o, double lr, int64_t t) {
    const double td = static_cast<double>(t), pi = u_product(o, t), u1 = u(o, td + 1);
    return {static_cast<float>(lr),
            {static_cast<float>(u1 / (1.0 - pi * u1)), static_cast<float>((1.0 - u(o, td)) / (1.0 - pi)),
             static_cast<float>(1.0 / (1.0 - std::pow(o.beta_2, td)))}};
  }

  struct Rule {
    float c1, c2, eps;  // 1 - beta_1, 1 - beta_2 (from double)
    explicit Rule(const OptimizerSpec& o)
        : c1(static_cast<float>(1.0 - o.beta_1)), c2(static_cast<float>(1.0 - o.beta_2)), eps(static_cast<float>(o.epsilon)) {}
    RNNTRAIN_HD void operator()(float& p, float g, float* const* s, int64_t i, const StepScalars& sc) const {
      const float m = s[0][i] + (g - s[0][i]) * c1;
      const float v = s[1][i] + (g * g - s[1][i]) * c2;
      s[0][i] = m, s[1][i] = v;
      const float m_hat = sc.k[0] * m + sc.k[1] * g;
      p -= m_hat * sc.lr / (sqrtf(v * sc.k[2]) + eps);
    }
  };
};

}  // namespace rnntrain
