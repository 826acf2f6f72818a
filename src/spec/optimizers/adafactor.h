// Adafactor (keras.optimizers.Adafactor; Shazeer & Stern 2018), per parameter in Keras layout, with
// rho = min(lr, 1/sqrt(t)), b = 1 - t^beta_2_decay and G = g^2 + epsilon_1: a parameter of 2 or more
// dimensions [R, C] keeps the row means r = b r + (1 - b) mean_C(G) and the column means c = b c + (1 -
// b) mean_R(G), and v = r/mean(r) (x) c; one of fewer keeps v = b v + (1 - b) G (its r and c are
// unused scalars, as Keras creates them). u = g / sqrt(v); p -= max(epsilon_2, rms(p)) rho u /
// max(1, rms(u) / clip_threshold). relative_step changes nothing Keras computes (rho is the same).
// Per tensor (kPerTensor): model/per_tensor_optimizers.cpp, backend/cuda/per_tensor_optimizers.cpp.
// Included by spec/optimizers.h (which defines what it uses).
#pragma once

namespace rnntrain {

struct Adafactor {
  static constexpr bool kPerTensor = true;
  static constexpr OptimizerKey keys[] = {
      number_key("beta_2_decay", &OptimizerSpec::beta_2_decay, -0.8, KeyRange::NonPositive),
      number_key("epsilon_1", &OptimizerSpec::epsilon_1, 1e-30, KeyRange::Positive),
      number_key("epsilon_2", &OptimizerSpec::epsilon_2, 1e-3, KeyRange::Positive),
      number_key("clip_threshold", &OptimizerSpec::clip_threshold, 1.0, KeyRange::Positive),
      flag_key("relative_step", &OptimizerSpec::relative_step, true)};
  static constexpr OptimizerInfo info = make_info(OptimizerKind::Adafactor, "adafactor", "Adafactor", keys, 0.001, 0.0);

  // Keras creates r, c and velocity variable by variable (r and c named after the variable).
  static SlotKinds slots(const OptimizerSpec&) {
    SlotKinds s;
    s.together = 3;
    s.add("r");
    s.add("c");
    s.add("velocity");
    return s;
  }
  // The shape of slot k (0: r, 1: c, 2: velocity) of a parameter of shape p.
  static std::vector<int64_t> slot_shape(int k, const std::vector<int64_t>& p) {
    if (k == 2) return p;
    if (p.size() < 2) return {};
    std::vector<int64_t> s = p;
    s.erase(s.end() - (k == 0 ? 1 : 2));
    return s;
  }
  // k[0] = rho = min(lr, 1/sqrt(t)), k[1] = b = 1 - t^beta_2_decay.
  static StepScalars scalars(const OptimizerSpec& o, double lr, int64_t t) {
    const double td = static_cast<double>(t);
    return {static_cast<float>(lr),
            {static_cast<float>(std::min(lr, 1.0 / std::sqrt(td))), static_cast<float>(1.0 - std::pow(td, o.beta_2_decay))}};
  }
};

}  // namespace rnntrain
