// TrainSpec <-> Keras training_config / compile_config, and Keras 3's optimizer variable order (see
// keras_train.h). Best effort on reading: Keras has far more options than rnntrain.
#include "io/keras_train.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "core/error.h"
#include "core/log.h"

namespace rnntrain {

namespace {

using nlohmann::json;

std::string lower_alnum(const std::string& s) {
  std::string out;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Json opt_or_null(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

// Always a {class_name, config} map: Keras 3's legacy loader cannot resolve the short names ("mse").
Json loss_json(const LossSpec& l) {
  const LossInfo& info = loss_info(l.kind);
  Json cfg = Json::object();
  cfg["name"] = info.keras_name;
  for (int i = 0; i < info.num_keys; ++i) {
    const LossKey& k = info.keys[i];
    if (!k.keras) continue;
    if (k.number) cfg[k.name] = l.*k.number;
    else cfg[k.name] = l.*k.flag;
  }
  return Json{{"class_name", info.keras_class}, {"config", cfg}};
}

// The loss a Keras name means: a config name, its alias, Keras' class or its config name, compared
// in lower case without underscores ("MeanSquaredError", "mean_squared_error", "mse").
std::optional<LossSpec> loss_from(const json& j, const std::string& file) {
  std::string name;
  json cfg = json::object();
  if (j.is_string()) name = j.get<std::string>();
  else if (j.is_object()) name = j.value("class_name", ""), cfg = j.value("config", json::object());
  else return std::nullopt;
  const std::string k = lower_alnum(name);
  const LossInfo* found = nullptr;
  for (const LossInfo* info : Losses::infos)
    for (const char* n : {info->name, info->alias, info->keras_class, info->keras_name})
      if (n && lower_alnum(n) == k) found = info;
  if (!found) {
    log_warn("{}: loss '{}' has no rnntrain equivalent; the config keeps the default (mse): set train.loss", file, name);
    return std::nullopt;
  }
  LossSpec l = loss_defaults(found->kind);
  for (int i = 0; i < found->num_keys; ++i) {
    const LossKey& key = found->keys[i];
    auto it = cfg.find(key.name);
    if (it != cfg.end() && key.number && it->is_number()) l.*key.number = it->get<double>();
    if (it != cfg.end() && key.flag && it->is_boolean()) l.*key.flag = it->get<bool>();
  }
  return l;
}

std::optional<double> number(const json& c, const char* key) {
  auto it = c.find(key);
  if (it != c.end() && it->is_number()) return it->get<double>();
  return std::nullopt;
}

std::optional<OptimizerSpec> optimizer_from(const json& j, const std::string& file) {
  if (!j.is_object()) return std::nullopt;
  const std::string name = j.value("class_name", "");
  const json c = j.value("config", json::object());
  const std::string k = lower_alnum(name);
  const std::optional<OptimizerKind> kind = optimizer_named(k);
  if (!kind) {
    log_warn("{}: optimizer '{}' has no rnntrain equivalent; the config keeps adam: set train.optimizer", file, name);
    return std::nullopt;
  }
  OptimizerSpec o = optimizer_defaults(*kind);
  auto lr = c.find("learning_rate");
  if (lr == c.end()) lr = c.find("lr");  // Keras 2.2
  if (lr != c.end() && lr->is_number()) o.learning_rate = lr->get<double>();
  else if (lr != c.end() && lr->is_object()) {
    const json sc = lr->value("config", json::object());
    if (auto v = number(sc, "initial_learning_rate")) o.learning_rate = *v;
    log_warn("{}: the learning-rate schedule '{}' is not imported; the config starts from learning_rate {} with a "
             "constant schedule: set train.schedule", file, lr->value("class_name", "?"), o.learning_rate);
  }
  const OptimizerInfo& info = optimizer_info(*kind);
  for (int i = 0; i < info.num_keys; ++i) {
    const OptimizerKey& key = info.keys[i];
    auto it = c.find(key.name);
    if (it != c.end() && key.number && it->is_number()) o.*key.number = it->get<double>();
    if (it != c.end() && key.flag && it->is_boolean()) o.*key.flag = it->get<bool>();
  }
  if (auto v = number(c, "weight_decay")) o.weight_decay = *v;
  o.clipnorm = number(c, "clipnorm");
  o.clipvalue = number(c, "clipvalue");
  o.global_clipnorm = number(c, "global_clipnorm");
  if (auto d = number(c, "decay"); d && *d != 0)
    log_warn("{}: the Keras 2 optimizer 'decay' {} is not imported: set train.schedule", file, *d);
  return o;
}

}  // namespace

const char* keras_optimizer_name(OptimizerKind k) { return optimizer_name(k); }

Json training_config_json(const TrainSpec& t) {
  const OptimizerSpec& o = t.optimizer;
  Json c;
  c["name"] = keras_optimizer_name(o.kind);
  c["learning_rate"] = o.learning_rate;
  c["weight_decay"] = o.weight_decay > 0 ? Json(o.weight_decay) : Json(nullptr);
  c["clipnorm"] = opt_or_null(o.clipnorm);
  c["global_clipnorm"] = opt_or_null(o.global_clipnorm);
  c["clipvalue"] = opt_or_null(o.clipvalue);
  c["use_ema"] = false;
  c["ema_momentum"] = 0.99;
  c["ema_overwrite_frequency"] = nullptr;  // no Keras-3-only keys (loss_scale_factor, ...): tf-keras reads this too
  const OptimizerInfo& info = optimizer_info(o.kind);
  for (int i = 0; i < info.num_keys; ++i) {
    const OptimizerKey& k = info.keys[i];
    if (k.number) c[k.name] = o.*k.number;
    else c[k.name] = o.*k.flag;
  }
  Json j;
  j["loss"] = loss_json(t.loss);
  j["metrics"] = nullptr;
  j["weighted_metrics"] = nullptr;
  j["loss_weights"] = nullptr;
  j["optimizer_config"] = Json{{"class_name", info.keras_class}, {"config", c}};
  return j;
}

static std::optional<TrainSpec> train_from_keras_json_unchecked(const nlohmann::json& j, const std::string& file) {
  if (!j.is_object()) return std::nullopt;
  const json* opt = j.contains("optimizer_config") ? &j["optimizer_config"] : j.contains("optimizer") ? &j["optimizer"] : nullptr;
  if (!opt && !j.contains("loss")) return std::nullopt;
  TrainSpec t;
  if (opt)
    if (auto o = optimizer_from(*opt, file)) t.optimizer = *o;
  if (j.contains("loss"))
    if (auto l = loss_from(j["loss"], file)) t.loss = *l;
  if (j.contains("metrics") && j["metrics"].is_array()) {
    for (const json& m : j["metrics"]) {
      const std::string k = m.is_string() ? lower_alnum(m.get<std::string>()) : "";
      if (k == "accuracy" || k == "acc") t.metrics.push_back({MetricKind::Accuracy, "accuracy"});
      else if (k == "mae" || k == "meanabsoluteerror") t.metrics.push_back({MetricKind::MAE, "mae"});
      else if (k == "mse" || k == "meansquarederror") t.metrics.push_back({MetricKind::MSE, "mse"});
      else log_warn("{}: metric {} is not imported", file, m.dump());
    }
  }
  return t;
}

std::vector<size_t> keras_slot_order(const std::vector<std::string>& slot_names) {
  std::vector<std::string> kinds;
  std::map<std::string, std::vector<size_t>> by_kind;
  for (size_t i = 0; i < slot_names.size(); ++i) {
    const std::string kind = slot_names[i].substr(0, slot_names[i].rfind('/'));
    if (!by_kind.count(kind)) kinds.push_back(kind);
    by_kind[kind].push_back(i);
  }
  std::vector<size_t> out;
  size_t k = 0;
  size_t together = keras_interleaved_slots(kinds);
  for (size_t q = 1; q < together; ++q)
    if (by_kind[kinds[q]].size() != by_kind[kinds[0]].size()) together = 1;  // not one slot per variable each
  if (together > 1) {
    for (size_t p = 0; p < by_kind[kinds[0]].size(); ++p)
      for (size_t q = 0; q < together; ++q) out.push_back(by_kind[kinds[q]][p]);
    k = together;
  }
  for (; k < kinds.size(); ++k)
    for (size_t i : by_kind[kinds[k]]) out.push_back(i);
  return out;
}

// A value of an unexpected JSON type deep inside (a string where Keras writes a number, ...) is
// the file's fault: DataError naming the file, not nlohmann's exception.
std::optional<TrainSpec> train_from_keras_json(const nlohmann::json& j, const std::string& file) {
  try {
    return train_from_keras_json_unchecked(j, file);
  } catch (const nlohmann::json::exception& e) {
    std::string why = e.what();
    if (why.rfind("[json.exception.", 0) == 0 && why.find("] ") != std::string::npos) why.erase(0, why.find("] ") + 2);
    throw DataError(fmt::format("{}: the training_config does not have the layout Keras writes ({}); the file is damaged "
                                "or was not written by Keras", file, why.substr(0, 100)));
  }
}

}  // namespace rnntrain
