// Typed comparison of models and the autotune key (spec/compare.h).
#include "spec/compare.h"

#include <fmt/format.h>

#include "spec/sections.h"

namespace rnntrain {

namespace {

std::string init_str(const Initializer& i) {
  return fmt::format("{}({}, {})", spec::enum_name(spec::init_kinds(), i.kind), i.a, i.b);
}

std::string reg_str(const Regularizer& r) { return r.active() ? fmt::format("l1={} l2={}", r.l1, r.l2) : "none"; }

std::string constraint_str(const Constraint& c) {
  if (!c.active()) return "none";
  std::string axes;
  for (int a : c.axis) axes += fmt::format("{}{}", axes.empty() ? "" : ",", a);
  return fmt::format("{}({}, {}, {}, axis {})", spec::enum_name(spec::constraint_kinds(), c.kind), c.min_value,
                     c.max_value, c.rate, axes);
}

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", s[i] < 0 ? "null" : std::to_string(s[i]));
  return out + "]";
}

void add_settings(const LayerSpec& l, const std::string& prefix, std::vector<Setting>& out) {
  const auto put = [&](const char* key, std::string value) { out.push_back({prefix + key, std::move(value)}); };
  const auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  put("type", layer_kind_name(l.kind));
  put("name", l.name);
  put("shape", shape_text(l.shape));
  put("input_dim", std::to_string(l.input_dim));
  put("output_dim", std::to_string(l.output_dim));
  put("mask_zero", flag(l.mask_zero));
  put("embeddings_initializer", init_str(l.embeddings_initializer));
  put("mask_value", fmt::format("{}", l.mask_value));
  put("units", std::to_string(l.units));
  put("activation", activation_name(l.activation));
  put("recurrent_activation", activation_name(l.recurrent_activation));
  put("use_bias", flag(l.use_bias));
  put("return_sequences", flag(l.return_sequences));
  put("go_backwards", flag(l.go_backwards));
  put("reset_after", flag(l.reset_after));
  put("unit_forget_bias", flag(l.unit_forget_bias));
  put("dropout", fmt::format("{}", l.dropout));
  put("recurrent_dropout", fmt::format("{}", l.recurrent_dropout));
  put("kernel_initializer", init_str(l.kernel_initializer));
  put("recurrent_initializer", init_str(l.recurrent_initializer));
  put("bias_initializer", init_str(l.bias_initializer));
  put("embeddings_regularizer", reg_str(l.embeddings_regularizer));
  put("kernel_regularizer", reg_str(l.kernel_regularizer));
  put("recurrent_regularizer", reg_str(l.recurrent_regularizer));
  put("bias_regularizer", reg_str(l.bias_regularizer));
  put("activity_regularizer", reg_str(l.activity_regularizer));
  put("embeddings_constraint", constraint_str(l.embeddings_constraint));
  put("kernel_constraint", constraint_str(l.kernel_constraint));
  put("recurrent_constraint", constraint_str(l.recurrent_constraint));
  put("bias_constraint", constraint_str(l.bias_constraint));
  put("rate", fmt::format("{}", l.rate));
  put("filters", std::to_string(l.filters));
  put("kernel_size", std::to_string(l.kernel_size));
  put("pool_size", std::to_string(l.pool_size));
  put("strides", std::to_string(l.strides));
  put("dilation_rate", std::to_string(l.dilation_rate));
  put("padding", spec::enum_name(spec::paddings(), l.padding));
  put("keepdims", flag(l.keepdims));
  put("epsilon", fmt::format("{}", l.epsilon));
  put("center", flag(l.center));
  put("scale", flag(l.scale));
  put("gamma_initializer", init_str(l.gamma_initializer));
  put("beta_initializer", init_str(l.beta_initializer));
  put("gamma_regularizer", reg_str(l.gamma_regularizer));
  put("beta_regularizer", reg_str(l.beta_regularizer));
  put("gamma_constraint", constraint_str(l.gamma_constraint));
  put("beta_constraint", constraint_str(l.beta_constraint));
  put("merge_mode", merge_mode_name(l.merge_mode));
  if (l.inner) add_settings(*l.inner, prefix + "layer.", out);  // wrappers hold one layer: depth 1
}

}  // namespace

std::vector<Setting> layer_settings(const LayerSpec& l) {
  std::vector<Setting> out;
  add_settings(l, "", out);
  return out;
}

std::string model_difference(const ModelSpec& then, const ModelSpec& now) {
  const size_t n = std::min(then.layers.size(), now.layers.size());
  for (size_t i = 0; i < n; ++i) {
    const std::vector<Setting> a = layer_settings(then.layers[i]), b = layer_settings(now.layers[i]);
    for (size_t k = 0; k < a.size() || k < b.size(); ++k) {
      if (k < a.size() && k < b.size() && a[k] == b[k]) continue;
      const std::string key = k < b.size() ? b[k].key : a[k].key;
      return fmt::format("layer {} ('{}'): {} is {}, was {}", i, now.layers[i].name, key,
                         k < b.size() ? b[k].value : "not set", k < a.size() ? a[k].value : "not set");
    }
  }
  if (then.layers.size() != now.layers.size())
    return fmt::format("{} layers, was {}", now.layers.size(), then.layers.size());
  return "";
}

std::string AutotuneKey::text() const {
  std::string t;
  for (size_t i = 0; i < model.layers.size(); ++i)
    for (const Setting& s : layer_settings(model.layers[i])) t += fmt::format("layer{}.{}={}\n", i, s.key, s.value);
  const OptimizerInfo& o = optimizer_info(optimizer.kind);
  t += fmt::format("optimizer={}\nlearning_rate={}\nweight_decay={}\n", o.name, optimizer.learning_rate,
                   optimizer.weight_decay);
  for (int i = 0; i < o.num_keys; ++i) {
    const OptimizerKey& k = o.keys[i];
    t += k.flag ? fmt::format("{}={}\n", k.name, optimizer.*k.flag) : fmt::format("{}={}\n", k.name, optimizer.*k.number);
  }
  const auto clip = [](const std::optional<double>& v) { return v ? fmt::format("{}", *v) : std::string("null"); };
  t += fmt::format("clipnorm={}\nclipvalue={}\nglobal_clipnorm={}\n", clip(optimizer.clipnorm),
                   clip(optimizer.clipvalue), clip(optimizer.global_clipnorm));
  const LossInfo& l = loss_info(loss.kind);
  t += fmt::format("loss={}\n", l.name);
  for (int i = 0; i < l.num_keys; ++i) {
    const LossKey& k = l.keys[i];
    t += k.flag ? fmt::format("{}={}\n", k.name, loss.*k.flag) : fmt::format("{}={}\n", k.name, loss.*k.number);
  }
  t += fmt::format("fuse={}\nprecision={}\nalgo={}\ngraphs={}\n", fuse_mode_name(plan.fuse),
                   precision_name(plan.precision), rnn_algo_name(plan.algo), plan.graphs);
  t += fmt::format("batch={}\ntimesteps={}\ngpu={}\n", batch, timesteps, gpu);
  if (inference) t += "workload=inference\n";  // training keys as before: older caches stay valid
  return t;
}

std::string AutotuneKey::hash() const {
  uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (unsigned char c : text()) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

}  // namespace rnntrain
