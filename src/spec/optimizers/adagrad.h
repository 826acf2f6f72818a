// Adagrad (keras.optimizers.Adagrad): acc += g^2, acc starting at initial_accumulator_value;
// p -= lr*g / sqrt(acc + epsilon). Included by spec/optimizers.h (which defines what it uses).
#pragma once

namespace rnntrain {

struct Adagrad {
  static constexpr OptimizerKey keys[] = {
      number_key("initial_accumulator_value", &OptimizerSpec::initial_accumulator_value, 0.1, KeyRange::NonNegative),
      number_key("epsilon", &OptimizerSpec::epsilon, 1e-7, KeyRange::Positive)};
  static constexpr OptimizerInfo info = make_info(OptimizerKind::Adagrad, "adagrad", "Adagrad", keys, 0.001, 0.0);

  static SlotKinds slots(const OptimizerSpec& o) {
    SlotKinds s;
    s.add("accumulator", static_cast<float>(o.initial_accumulator_value));
    return s;
  }
  static StepScalars scalars(const OptimizerSpec&, double lr, int64_t) { return {static_cast<float>(lr)}; }

  struct Rule {
    float eps;
    explicit Rule(const OptimizerSpec& o) : eps(static_cast<float>(o.epsilon)) {}
    RNNTRAIN_HD void operator()(float& p, float g, float* const* s, int64_t i, const StepScalars& sc) const {
      const float lr = sc.lr;
      const float acc = s[0][i] + g * g;
      s[0][i] = acc;
      p -= lr * g / sqrtf(acc + eps);
    }
  };
};

}  // namespace rnntrain
