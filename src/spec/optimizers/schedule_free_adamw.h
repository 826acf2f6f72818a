// ScheduleFreeAdamW (keras.optimizers.ScheduleFreeAdamW; Defazio et al. 2024): no schedule; the
// parameter y is an interpolation of the iterate z (Keras' slot `momentum`, a copy of the parameter
// before the first step) and the running average x of the iterates. With lr' = lr * min(t / warmup_steps,
// 1): v += (g^2 - v)(1 - beta_2); z -= lr' g / (sqrt(v / (1 - beta_2^t)) + epsilon); x_old = (y - (1 -
// beta_1) z_old) / beta_1; x = (1 - 1/t) x_old + z / t; y = (1 - beta_1) z + beta_1 x.
// Included by spec/optimizers.h (which defines what it uses).
#pragma once

namespace rnntrain {

struct ScheduleFreeAdamW {
  static constexpr OptimizerKey keys[] = {
      number_key("beta_1", &OptimizerSpec::beta_1, 0.9, KeyRange::UnitOpen),
      number_key("beta_2", &OptimizerSpec::beta_2, 0.999, KeyRange::UnitOpen),
      number_key("epsilon", &OptimizerSpec::epsilon, 1e-8, KeyRange::Positive),
      number_key("warmup_steps", &OptimizerSpec::warmup_steps, 0.0, KeyRange::Count)};
  static constexpr OptimizerInfo info = make_info(OptimizerKind::ScheduleFreeAdamW, "schedule_free_adamw",
                                                  "ScheduleFreeAdamW", keys, 0.0025, 0.0, "schedule_free_adam_w");

  static SlotKinds slots(const OptimizerSpec&) {
    SlotKinds s;
    s.together = 2;  // one add_optimizer_variables call in Keras
    s.add_copy("momentum");
    s.add("velocity");
    return s;
  }
  // lr: the warmed-up rate; k[0] = 1 - beta_2^t, k[1] = 1/t.
  static StepScalars scalars(const OptimizerSpec& o, double lr, int64_t t) {
    const double td = static_cast<double>(t);
    const double warm = o.warmup_steps > 0 ? std::min(td / o.warmup_steps, 1.0) : 1.0;
    return {static_cast<float>(lr * warm),
            {static_cast<float>(1.0 - std::pow(o.beta_2, td)), static_cast<float>(1.0 / td)}};
  }

  struct Rule {
    float b1, c1, c2, eps;  // beta_1, 1 - beta_1, 1 - beta_2 (from double)
    explicit Rule(const OptimizerSpec& o)
        : b1(static_cast<float>(o.beta_1)), c1(static_cast<float>(1.0 - o.beta_1)),
          c2(static_cast<float>(1.0 - o.beta_2)), eps(static_cast<float>(o.epsilon)) {}
    RNNTRAIN_HD void operator()(float& p, float g, float* const* s, int64_t i, const StepScalars& sc) const {
      const float z_old = s[0][i];
      const float v = s[1][i] + (g * g - s[1][i]) * c2;
      const float z = z_old - sc.lr * g / (sqrtf(v / sc.k[0]) + eps);
      s[0][i] = z, s[1][i] = v;
      const float w = sc.k[1];
      const float x = (1.0f - w) * ((p - c1 * z_old) / b1) + w * z;
      p = c1 * z + b1 * x;
    }
  };
};

}  // namespace rnntrain
