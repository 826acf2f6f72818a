// Muon (keras.optimizers.Muon; Jordan et al. 2024, with Moonlight's RMS scaling): a 2-D weight [R, C]
// (not an embedding when exclude_embeddings) keeps a momentum m = momentum m + g and moves by
// lr * sqrt(max(R, C)) * rms_rate * NS(nesterov ? g + momentum m : m), NS the quintic Newton-Schulz
// iteration (ns_steps times X = a X + (b A + c A^2) X, A = X X^T, from X / (|X|_F + 1e-7), over the
// smaller side); every other weight takes AdamW at lr * adam_lr_ratio (slots momentum and velocity).
// Weight decay: lr * weight_decay on Muon's weights, lr * adam_weight_decay on AdamW's. Per tensor
// (kPerTensor): model/per_tensor_optimizers.cpp, backend/cuda/per_tensor_optimizers.cpp. Keras' exclude_layers
// (regular expressions over weight paths) is not a setting here. Included by spec/optimizers.h.
#pragma once

namespace rnntrain {

struct Muon {
  static constexpr bool kPerTensor = true;
  static constexpr OptimizerKey keys[] = {
      number_key("adam_beta_1", &OptimizerSpec::beta_1, 0.9, KeyRange::UnitOpen),
      number_key("adam_beta_2", &OptimizerSpec::beta_2, 0.999, KeyRange::UnitOpen),
      number_key("adam_weight_decay", &OptimizerSpec::adam_weight_decay, 0.004, KeyRange::NonNegative),
      number_key("epsilon", &OptimizerSpec::epsilon, 1e-7, KeyRange::Positive),
      number_key("muon_a", &OptimizerSpec::muon_a, 3.4445, KeyRange::Positive),
      number_key("muon_b", &OptimizerSpec::muon_b, -4.775, KeyRange::NonPositive),
      number_key("muon_c", &OptimizerSpec::muon_c, 2.0315, KeyRange::Positive),
      number_key("adam_lr_ratio", &OptimizerSpec::adam_lr_ratio, 1.0, KeyRange::Positive),
      number_key("momentum", &OptimizerSpec::momentum, 0.95, KeyRange::UnitOpen),
      number_key("ns_steps", &OptimizerSpec::ns_steps, 5.0, KeyRange::Count),
      flag_key("nesterov", &OptimizerSpec::nesterov, true),
      flag_key("exclude_embeddings", &OptimizerSpec::exclude_embeddings, true),
      number_key("rms_rate", &OptimizerSpec::rms_rate, 0.2, KeyRange::Positive)};
  static constexpr OptimizerInfo info = make_info(OptimizerKind::Muon, "muon", "Muon", keys, 0.001, 0.004);

  // Keras creates momentum for every weight and, right after it, velocity for the AdamW ones.
  static SlotKinds slots(const OptimizerSpec&) {
    SlotKinds s;
    s.together = 2;
    s.add("momentum");
    s.add("velocity");
    return s;
  }
  // Whether a weight of this shape and Keras path ("sequential/embedding/embeddings") takes AdamW.
  static bool adamw(const std::vector<int64_t>& shape, const std::string& path, const OptimizerSpec& o) {
    if (shape.size() != 2) return true;
    if (!o.exclude_embeddings) return false;
    std::string lower = path;
    for (char& ch : lower) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    return lower.find("embedding") != std::string::npos;
  }
  // k[0] = AdamW's alpha = lr * adam_lr_ratio * sqrt(1 - beta_2^t) / (1 - beta_1^t).
  static StepScalars scalars(const OptimizerSpec& o, double lr, int64_t t) {
    const double td = static_cast<double>(t);
    return {static_cast<float>(lr), {static_cast<float>(lr * o.adam_lr_ratio * std::sqrt(1.0 - std::pow(o.beta_2, td)) /
                                                        (1.0 - std::pow(o.beta_1, td)))}};
  }
};

}  // namespace rnntrain
