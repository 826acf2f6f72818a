// Lion (keras.optimizers.Lion): p -= lr * sign(beta_1*m + (1 - beta_1)*g); then m = beta_2*m + (1 - beta_2)*g.
// Included by spec/optimizers.h (which defines what it uses).
#pragma once

namespace rnntrain {

struct Lion {
  static constexpr OptimizerKey keys[] = {number_key("beta_1", &OptimizerSpec::beta_1, 0.9, KeyRange::UnitOpen),
                                          number_key("beta_2", &OptimizerSpec::beta_2, 0.99, KeyRange::UnitOpen)};
  static constexpr OptimizerInfo info = make_info(OptimizerKind::Lion, "lion", "Lion", keys, 0.001, 0.0);

  static SlotKinds slots(const OptimizerSpec&) {
    SlotKinds s;
    s.add("momentum");
    return s;
  }
  static StepScalars scalars(const OptimizerSpec&, double lr, int64_t) { return {static_cast<float>(lr)}; }

  struct Rule {
    float b1, c1, b2, c2;  // beta and 1 - beta (from double)
    explicit Rule(const OptimizerSpec& o)
        : b1(static_cast<float>(o.beta_1)),
          c1(static_cast<float>(1.0 - o.beta_1)),
          b2(static_cast<float>(o.beta_2)),
          c2(static_cast<float>(1.0 - o.beta_2)) {}
    RNNTRAIN_HD void operator()(float& p, float g, float* const* s, int64_t i, const StepScalars& sc) const {
      const float lr = sc.lr;
      const float m = s[0][i];
      const float c = m * b1 + g * c1;
      p -= lr * (c > 0.0f ? 1.0f : c < 0.0f ? -1.0f : c);  // sign, NaN kept
      s[0][i] = m * b2 + g * c2;
    }
  };
};

}  // namespace rnntrain
