// RMSprop (keras.optimizers.RMSprop): v = rho*v + (1-rho)*g^2; centered: a = rho*a + (1-rho)*g and the
// denominator is v - a^2 + epsilon, else v + epsilon; inc = lr*g / sqrt(denominator); with momentum
// mom = momentum*mom + inc and p -= mom, else p -= inc. Included by spec/optimizers.h.
#pragma once

namespace rnntrain {

struct RMSprop {
  static constexpr OptimizerKey keys[] = {number_key("rho", &OptimizerSpec::rho, 0.9, KeyRange::UnitOpen),
                                          number_key("momentum", &OptimizerSpec::momentum, 0.0, KeyRange::Unit),
                                          number_key("epsilon", &OptimizerSpec::epsilon, 1e-7, KeyRange::Positive),
                                          flag_key("centered", &OptimizerSpec::centered, false)};
  static constexpr OptimizerInfo info = make_info(OptimizerKind::RMSprop, "rmsprop", "RMSprop", keys, 0.001, 0.0);

  static SlotKinds slots(const OptimizerSpec& o) {
    SlotKinds s;
    s.add("velocity");
    if (o.momentum > 0) s.add("momentum");
    if (o.centered) s.add("average_gradient");
    return s;
  }
  static StepScalars scalars(const OptimizerSpec&, double lr, int64_t) { return {static_cast<float>(lr)}; }

  struct Rule {
    float rho, c, eps, mu;
    int mom, avg;  // the slots of momentum and average_gradient, or -1
    explicit Rule(const OptimizerSpec& o)
        : rho(static_cast<float>(o.rho)),
          c(static_cast<float>(1.0 - o.rho)),
          eps(static_cast<float>(o.epsilon)),
          mu(static_cast<float>(o.momentum)),
          mom(o.momentum > 0 ? 1 : -1),
          avg(o.centered ? (o.momentum > 0 ? 2 : 1) : -1) {}
    RNNTRAIN_HD void operator()(float& p, float g, float* const* s, int64_t i, const StepScalars& sc) const {
      const float lr = sc.lr;
      const float v = rho * s[0][i] + c * g * g;
      s[0][i] = v;
      float denom = v + eps;
      if (avg >= 0) {
        const float a = rho * s[avg][i] + c * g;
        s[avg][i] = a;
        denom = v - a * a + eps;
      }
      const float inc = lr * g / sqrtf(denom);
      if (mom >= 0) {
        const float m = mu * s[mom][i] + inc;
        s[mom][i] = m;
        p -= m;
      } else {
        p -= inc;
      }
    }
  };
};

}  // namespace rnntrain
