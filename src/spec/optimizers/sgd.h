// SGD (keras.optimizers.SGD): m = momentum*m - lr*g; p += m, or with nesterov p += momentum*m - lr*g;
// without momentum p -= lr*g. Included by spec/optimizers.h (which defines what it uses).
#pragma once

namespace rnntrain {

struct Sgd {
  static constexpr OptimizerKey keys[] = {number_key("momentum", &OptimizerSpec::momentum, 0.0, KeyRange::Unit),
                                          flag_key("nesterov", &OptimizerSpec::nesterov, false)};
  static constexpr OptimizerInfo info = make_info(OptimizerKind::SGD, "sgd", "SGD", keys, 0.01, 0.0);

  static SlotKinds slots(const OptimizerSpec& o) {
    SlotKinds s;
    if (o.momentum != 0) s.add("momentum");
    return s;
  }
  static StepScalars scalars(const OptimizerSpec&, double lr, int64_t) { return {static_cast<float>(lr)}; }

  struct Rule {
    bool momentum;
    float mu;
    bool nesterov;
    explicit Rule(const OptimizerSpec& o)
        : momentum(o.momentum != 0), mu(static_cast<float>(o.momentum)), nesterov(o.nesterov) {}
    RNNTRAIN_HD void operator()(float& p, float g, float* const* s, int64_t i, const StepScalars& sc) const {
      const float lr = sc.lr;
      if (!momentum) {
        p -= lr * g;
        return;
      }
      const float m = mu * s[0][i] - lr * g;
      s[0][i] = m;
      p += nesterov ? mu * m - lr * g : m;
    }
  };
};

}  // namespace rnntrain
