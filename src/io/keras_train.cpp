// TrainSpec <-> Keras training_config / compile_config, and Keras 3's optimizer variable order (see
// keras_train.h). Best effort on reading: Keras has far more options than rnntrain.
#include "io/keras_train.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "core/error.h"
#include "core/log.h"
#include "io/keras_weights.h"
#include "spec/cells.h"
#include "spec/parse.h"

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

// Keras' class_name/config form, with module and registered_name as Keras 3 writes it.
Json keras_object(const char* module, const char* class_name, Json config, KerasJsonStyle style) {
  if (style == KerasJsonStyle::Legacy) return Json{{"class_name", class_name}, {"config", std::move(config)}};
  return Json{{"module", module}, {"class_name", class_name}, {"config", std::move(config)},
              {"registered_name", nullptr}};
}

// Always a class_name/config object: Keras 3's legacy loader cannot resolve the short names ("mse").
Json loss_json(const LossSpec& l, KerasJsonStyle style) {
  const LossInfo& info = loss_info(l.kind);
  Json cfg = Json::object();
  cfg["name"] = info.keras_name;
  for (int i = 0; i < info.num_keys; ++i) {
    const LossKey& k = info.keys[i];
    if (!k.keras) continue;
    if (k.number) cfg[k.name] = l.*k.number;
    else cfg[k.name] = l.*k.flag;
  }
  return keras_object("keras.losses", info.keras_class, std::move(cfg), style);
}

// Warns about each key of a Keras config that is set (not null, not false) and not in `known`:
// "<file>: <owner>: '<key>' <value> is not imported: <instead>".
void warn_unknown(const json& cfg, const std::vector<const char*>& known, const std::string& file,
                  const std::string& owner, const std::string& instead) {
  for (const auto& item : cfg.items()) {
    const std::string& key = item.key();
    const json& v = item.value();
    if (v.is_null() || (v.is_boolean() && !v.get<bool>())) continue;
    if (std::any_of(known.begin(), known.end(), [&](const char* k) { return key == k; })) continue;
    log_warn("{}: {}: '{}' {} is not imported: {}", file, owner, key.substr(0, 60), v.dump().substr(0, 80), instead);
  }
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
  std::vector<const char*> known{"name", "dtype"};
  for (int i = 0; i < found->num_keys; ++i) {
    const LossKey& key = found->keys[i];
    if (key.keras) known.push_back(key.name);
    auto it = cfg.find(key.name);
    if (it != cfg.end() && key.number && it->is_number()) l.*key.number = it->get<double>();
    if (it != cfg.end() && key.flag && it->is_boolean()) l.*key.flag = it->get<bool>();
  }
  const json reduction = cfg.contains("reduction") ? cfg["reduction"] : json();
  if (!reduction.is_null() && reduction != "sum_over_batch_size" && reduction != "auto")
    log_warn("{}: the loss's reduction {} is not imported: rnntrain averages the loss over the batch's unmasked "
             "positions (Keras' sum_over_batch_size)", file, reduction.dump().substr(0, 40));
  known.push_back("reduction");
  if (cfg.contains("axis") && cfg["axis"] == -1) known.push_back("axis");  // the last axis, as rnntrain
  warn_unknown(cfg, known, file, fmt::format("the loss {}", found->keras_class),
               fmt::format("rnntrain's {} has no such setting and trains as if it were at Keras' default", found->name));
  return l;
}

std::optional<double> number(const json& c, const char* key) {
  auto it = c.find(key);
  if (it != c.end() && it->is_number()) return it->get<double>();
  return std::nullopt;
}

// Keras' schedules of the optimizer's step and rnntrain's of the same numbers: each config key
// Keras' class has besides initial_learning_rate (which is train.optimizer.learning_rate) and the
// field it sets. CosineDecay's warmup and PiecewiseConstantDecay's lists are handled where read and
// written.
struct KerasScheduleKey {
  const char* name;
  double ScheduleSpec::*number = nullptr;
  int64_t ScheduleSpec::*count = nullptr;
  bool ScheduleSpec::*flag = nullptr;
};
struct KerasSchedule {
  ScheduleKind kind;
  const char* keras_class;
  const char* name;  // Keras' default `name`
  std::vector<KerasScheduleKey> keys;
};
const KerasSchedule kKerasSchedules[] = {
    {ScheduleKind::Exponential, "ExponentialDecay", "ExponentialDecay",
     {{.name = "decay_steps", .count = &ScheduleSpec::decay_steps},
      {.name = "decay_rate", .number = &ScheduleSpec::decay_rate},
      {.name = "staircase", .flag = &ScheduleSpec::staircase}}},
    {ScheduleKind::Cosine, "CosineDecay", "CosineDecay",
     {{.name = "decay_steps", .count = &ScheduleSpec::decay_steps}, {.name = "alpha", .number = &ScheduleSpec::alpha}}},
    {ScheduleKind::Polynomial, "PolynomialDecay", "PolynomialDecay",
     {{.name = "decay_steps", .count = &ScheduleSpec::decay_steps},
      {.name = "end_learning_rate", .number = &ScheduleSpec::end_learning_rate},
      {.name = "power", .number = &ScheduleSpec::power},
      {.name = "cycle", .flag = &ScheduleSpec::cycle}}},
    {ScheduleKind::InverseTime, "InverseTimeDecay", "InverseTimeDecay",
     {{.name = "decay_steps", .count = &ScheduleSpec::decay_steps},
      {.name = "decay_rate", .number = &ScheduleSpec::decay_rate},
      {.name = "staircase", .flag = &ScheduleSpec::staircase}}},
    {ScheduleKind::PiecewiseConstant, "PiecewiseConstantDecay", "PiecewiseConstant", {}},
    {ScheduleKind::CosineRestarts, "CosineDecayRestarts", "SGDRDecay",
     {{.name = "first_decay_steps", .count = &ScheduleSpec::decay_steps},
      {.name = "t_mul", .number = &ScheduleSpec::t_mul},
      {.name = "m_mul", .number = &ScheduleSpec::m_mul},
      {.name = "alpha", .number = &ScheduleSpec::alpha}}},
};

// The optimizer's learning_rate: the schedule for those Keras runs per optimizer step, else the rate
// now. A schedule in Keras 3's form in either dialect: Keras 3's legacy loader needs the module.
Json learning_rate_json(const KerasTraining& t) {
  const ScheduleSpec& s = t.train.schedule;
  const double lr = t.train.optimizer.learning_rate;
  for (const KerasSchedule& k : kKerasSchedules) {
    if (k.kind != s.kind) continue;
    Json c;
    if (s.kind == ScheduleKind::PiecewiseConstant) c["boundaries"] = s.boundaries, c["values"] = s.values;
    else c["initial_learning_rate"] = lr;
    for (const KerasScheduleKey& key : k.keys) {
      if (key.number) c[key.name] = s.*key.number;
      else if (key.count) c[key.name] = s.*key.count;
      else c[key.name] = s.*key.flag;
    }
    c["name"] = k.name;
    if (s.kind == ScheduleKind::Cosine) {  // rnntrain warms up from 0 to the rate: Keras' warmup_target
      const bool warm = s.warmup_steps > 0;
      c["initial_learning_rate"] = warm ? 0.0 : lr;
      c["warmup_target"] = warm ? Json(lr) : Json(nullptr);
      c["warmup_steps"] = s.warmup_steps;
    }
    return keras_object("keras.optimizers.schedules", k.keras_class, std::move(c), KerasJsonStyle::Keras3);
  }
  return t.learning_rate;
}

Json optimizer_json(const KerasTraining& t, KerasJsonStyle style) {
  const OptimizerSpec& o = t.train.optimizer;
  Json c;
  c["name"] = keras_optimizer_name(o.kind);
  c["learning_rate"] = learning_rate_json(t);
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
    if (k.number && k.range == KeyRange::Count) c[k.name] = static_cast<int64_t>(o.*k.number);
    else if (k.number) c[k.name] = o.*k.number;
    else c[k.name] = o.*k.flag;
  }
  return keras_object("keras.optimizers", info.keras_class, std::move(c), style);
}

Json metric_json(const MetricSpec& m, KerasJsonStyle style) {
  const char* cls = metric_info(m.kind).keras_class;  // the metrics written as class_name/config objects
  if (!cls) return m.name;
  Json c = {{"name", m.name}, {"dtype", "float32"}};
  switch (m.kind) {
    case MetricKind::Precision:
    case MetricKind::Recall:
      c["thresholds"] = opt_or_null(m.threshold), c["top_k"] = nullptr;
      c["class_id"] = m.class_id >= 0 ? Json(m.class_id) : Json(nullptr);
      break;
    case MetricKind::AUC:
      c["num_thresholds"] = m.num_thresholds, c["curve"] = m.curve == AucCurve::ROC ? "ROC" : "PR";
      c["summation_method"] = m.summation == AucSummation::Interpolation ? "interpolation"
                              : m.summation == AucSummation::Minoring    ? "minoring"
                                                                         : "majoring";
      c["multi_label"] = m.multi_label, c["num_labels"] = nullptr, c["label_weights"] = nullptr;
      c["from_logits"] = m.from_logits;
      break;
    case MetricKind::F1Score:
    case MetricKind::FBetaScore:
      c["average"] = m.average == FAverage::Micro ? "micro" : m.average == FAverage::Macro ? "macro" : "weighted";
      c["threshold"] = opt_or_null(m.threshold);
      if (m.kind == MetricKind::FBetaScore) c["beta"] = m.beta;  // F1Score's config has none
      break;
    case MetricKind::R2Score:
      c["class_aggregation"] = m.aggregation == R2Aggregation::Uniform ? "uniform_average" : "variance_weighted_average";
      c["num_regressors"] = m.num_regressors;
      break;
    case MetricKind::TopKCategoricalAccuracy:
    case MetricKind::SparseTopKCategoricalAccuracy: c["k"] = m.k; break;
    default: break;  // name and dtype only
  }
  return keras_object("keras.metrics", cls, std::move(c), style);
}

// The metrics as Keras names them: as configs do, but for perplexity, which Keras does not have;
// those with settings as objects.
Json metrics_json(const std::vector<MetricSpec>& metrics, KerasJsonStyle style) {
  Json out = Json::array();
  for (const MetricSpec& m : metrics)
    if (m.kind != MetricKind::Perplexity) out.push_back(metric_json(m, style));
  return out.empty() ? Json(nullptr) : out;
}

// The settings of a Keras metric object into `m`; "" when rnntrain takes it as it is, else why not.
std::string metric_settings_from(const json& c, MetricSpec& m, const std::string& file) {
  const auto num = [&](const char* key) { return number(c, key); };
  const auto has = [&](const char* key) { return c.contains(key) && !c[key].is_null(); };
  if (c.contains("name") && c["name"].is_string()) {
    const std::string name = c["name"].get<std::string>();
    if (!name.empty() && name.size() <= 64 && name != "loss" && name != "epoch" && name != "learning_rate" &&
        !name.starts_with("val_") &&
        std::all_of(name.begin(), name.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; }))
      m.name = name;
  }
  if (auto k = num("k")) {
    if (*k < 1 || *k > 1e6) return "its k is not a count of classes";
    m.k = static_cast<int64_t>(*k);
  }
  if (m.kind == MetricKind::Precision || m.kind == MetricKind::Recall) {
    if (has("top_k")) return "top_k is not supported (rnntrain counts by thresholds; use class_id)";
    json t = c.value("thresholds", json(nullptr));
    if (t.is_array() && t.size() == 1) t = t[0];
    if (t.is_array()) return "it has several thresholds (rnntrain reports one value per metric: list one per threshold)";
    if (t.is_number()) m.threshold = t.get<double>();
    if (auto id = num("class_id")) {
      if (!(*id >= 0 && *id <= 1e9)) return "its class_id is not a class";
      m.class_id = static_cast<int64_t>(*id);
    }
  }
  if (m.kind == MetricKind::AUC) {
    if (has("thresholds")) return "its thresholds are listed (rnntrain spaces num_thresholds evenly)";
    if (has("label_weights")) return "label_weights are not supported";
    if (auto n = num("num_thresholds")) {
      if (*n < 2 || *n > 100000) return "num_thresholds is not in [2, 100000]";
      m.num_thresholds = static_cast<int64_t>(*n);
    }
    const auto text = [&](const char* key, const char* fallback) {  // a string setting; "?" when it is none
      const json v = c.value(key, json(fallback));
      return v.is_string() ? v.get<std::string>() : std::string("?");
    };
    const std::string curve = text("curve", "ROC"), sum = text("summation_method", "interpolation");
    if (curve != "ROC" && curve != "PR") return "curve " + curve.substr(0, 20) + " is not supported (ROC, PR)";
    m.curve = curve == "ROC" ? AucCurve::ROC : AucCurve::PR;
    if (sum == "interpolation") m.summation = AucSummation::Interpolation;
    else if (sum == "minoring") m.summation = AucSummation::Minoring;
    else if (sum == "majoring") m.summation = AucSummation::Majoring;
    else return "summation_method " + sum.substr(0, 30) + " is not supported";
    const auto flag = [&](const char* key) { return c.contains(key) && c[key].is_boolean() && c[key].get<bool>(); };
    m.multi_label = flag("multi_label"), m.from_logits = flag("from_logits");
  }
  if (m.kind == MetricKind::F1Score || m.kind == MetricKind::FBetaScore) {
    const json avg = c.value("average", json(nullptr));
    if (avg == "micro") m.average = FAverage::Micro;
    else if (avg == "weighted") m.average = FAverage::Weighted;
    else if (avg != "macro") {
      log_warn("{}: metric {}: average {} reports a value per class in Keras; rnntrain logs one number, their mean "
               "(average: macro)", file, m.name, avg.dump().substr(0, 20));
    }
    if (auto b = num("beta")) m.beta = *b;
    if (auto t = num("threshold")) m.threshold = *t;
  }
  if (m.kind == MetricKind::R2Score) {
    const json agg = c.value("class_aggregation", json("uniform_average"));
    if (agg == "variance_weighted_average") m.aggregation = R2Aggregation::VarianceWeighted;
    else if (agg != "uniform_average")
      log_warn("{}: metric {}: class_aggregation {} reports a value per output in Keras; rnntrain logs one number, "
               "their mean (uniform_average)", file, m.name, agg.dump().substr(0, 30));
    if (auto n = num("num_regressors")) {
      if (!(*n >= 0 && *n <= 1e9)) return "its num_regressors is not a count";
      m.num_regressors = static_cast<int64_t>(*n);
    }
  }
  if (m.threshold && !(*m.threshold >= 0.0 && *m.threshold <= 1.0)) return "its threshold is not in [0, 1]";
  if (!(m.beta > 0.0 && m.beta < 1e30)) return "its beta is not positive";
  return "";
}

// The metrics Keras has too, as configs name them.
std::string keras_metric_names() {
  std::string out;
  for (const std::string& n : metric_names())
    if (n != "perplexity") out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Keras' metrics by name or class ("acc", "MeanAbsoluteError", an AUC object); the others are logged
// and left out.
void metrics_from(const json& list, const std::string& file, const LossSpec& loss, std::vector<MetricSpec>& out) {
  for (const json& m : list) {
    const std::string name = m.is_string() ? m.get<std::string>() : m.is_object() ? m.value("class_name", "") : "";
    std::optional<MetricSpec> spec = metric_named(name);
    std::string why = !spec || spec->kind == MetricKind::Perplexity ? "rnntrain has " + keras_metric_names() : "";
    if (why.empty() && m.is_object() && m.contains("config") && m["config"].is_object())
      why = metric_settings_from(m["config"], *spec, file);
    // (why is empty only for a metric rnntrain has.) Those Keras writes as objects, but for the
    // top-k accuracies, compare every output unit with a target of the same shape.
    if (why.empty() && metric_info(spec->kind).keras_class && metric_info(spec->kind).family != MetricFamily::Accuracy &&
        loss_info(loss.kind).targets == Targets::Labels)
      why = fmt::format("it compares every output unit with a target of the same shape, and the loss {} takes class "
                        "labels", loss_name(loss.kind));
    if (!why.empty()) {
      log_warn("{}: metric {} is not imported: {}; training is unchanged: metrics are only reported", file,
               name.empty() ? m.dump().substr(0, 80) : name.substr(0, 80), why);
      continue;
    }
    if (std::none_of(out.begin(), out.end(), [&](const MetricSpec& o) { return o.name == spec->name; }))
      out.push_back(*spec);
  }
}

// A Keras schedule as rnntrain's (kKerasSchedules; CosineDecay warming up from 0, or not at all);
// false when it has no equivalent. Values out of range are kept for the config check to refuse
// with its message.
bool schedule_from(const json& j, double& lr, ScheduleSpec& s, const std::string& file) {
  const std::string name = j.value("class_name", "");
  const json c = j.value("config", json::object());
  const auto num = [&](const char* key, double fallback) { return number(c, key).value_or(fallback); };
  // A step count; -1 (which the config check then refuses, naming the key) when out of range.
  const auto steps = [](double v) { return v >= 0 && v <= 1e15 ? static_cast<int64_t>(v) : int64_t{-1}; };
  const auto found = std::find_if(std::begin(kKerasSchedules), std::end(kKerasSchedules),
                                  [&](const KerasSchedule& k) { return name == k.keras_class; });
  if (found == std::end(kKerasSchedules)) return false;
  s.kind = found->kind;
  lr = num("initial_learning_rate", lr);
  for (const KerasScheduleKey& key : found->keys) {
    if (key.number) s.*key.number = num(key.name, s.*key.number);
    else if (key.count) s.*key.count = steps(num(key.name, 0));
    else s.*key.flag = c.value(key.name, s.*key.flag);
  }
  if (s.kind == ScheduleKind::Cosine) {
    const std::optional<double> target = number(c, "warmup_target");
    s.warmup_steps = target ? steps(num("warmup_steps", 0)) : 0;
    if (target && lr != 0.0)
      log_warn("{}: CosineDecay warms up from initial_learning_rate {}; rnntrain's cosine schedule warms up from 0 "
               "(to warmup_target {}): the first {} steps differ", file, lr, *target, s.warmup_steps);
    if (target) lr = *target;
  }
  if (s.kind == ScheduleKind::PiecewiseConstant) {  // too many pieces: the config check refuses the count
    for (const json& b : c.value("boundaries", json::array()))
      if (s.boundaries.size() < 100000) s.boundaries.push_back(b.is_number() ? steps(b.get<double>()) : -1);
    for (const json& v : c.value("values", json::array()))
      if (s.values.size() < 100001) s.values.push_back(v.is_number() ? v.get<double>() : -1.0);
    if (!s.values.empty()) lr = s.values[0];
  }
  return true;
}

// The optimizer (into t.optimizer) and its schedule (into t.schedule); t is left as it is when
// Keras' optimizer has no equivalent.
void optimizer_from(const json& j, const std::string& file, TrainSpec& t) {
  if (!j.is_object()) return;
  const std::string name = j.value("class_name", "");
  const json c = j.value("config", json::object());
  const std::string k = lower_alnum(name);
  const std::optional<OptimizerKind> kind = optimizer_named(k);
  if (!kind) {
    log_warn("{}: optimizer '{}' has no rnntrain equivalent; the config keeps adam: set train.optimizer", file, name);
    return;
  }
  OptimizerSpec o = optimizer_defaults(*kind);
  auto lr = c.find("learning_rate");
  if (lr == c.end()) lr = c.find("lr");  // Keras 2.2
  if (lr != c.end() && lr->is_number()) o.learning_rate = lr->get<double>();
  else if (lr != c.end() && lr->is_object() && !schedule_from(*lr, o.learning_rate, t.schedule, file)) {
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
    log_warn("{}: the Keras 2 optimizer 'decay' {} is not imported: rnntrain keeps the learning rate (set "
             "train.schedule, e.g. inverse_time, for a decaying one)", file, *d);
  const std::string owner = fmt::format("the optimizer {}", info.keras_class);
  if (c.value("use_ema", false) == true)
    log_warn("{}: {}: use_ema true is not imported: rnntrain keeps no moving average of the weights and evaluates "
             "and saves the weights themselves", file, owner);
  if (auto v = number(c, "gradient_accumulation_steps"); v && *v > 1)
    log_warn("{}: {}: gradient_accumulation_steps {} is not imported: rnntrain updates after every batch (raise "
             "train.batch_size by that factor for the same effective batch)", file, owner, *v);
  if (auto v = number(c, "loss_scale_factor"); v && *v != 1)
    log_warn("{}: {}: loss_scale_factor {} is not imported: rnntrain scales the loss itself only in fp16 (dynamic "
             "scaling), which does not change the update", file, owner, *v);
  std::vector<const char*> known{"name", "learning_rate", "lr", "weight_decay", "clipnorm", "clipvalue",
                                 "global_clipnorm", "decay", "use_ema", "ema_momentum", "ema_overwrite_frequency",
                                 "gradient_accumulation_steps", "loss_scale_factor", "jit_compile",
                                 "is_legacy_optimizer"};
  for (int i = 0; i < info.num_keys; ++i) known.push_back(info.keys[i].name);
  if (*kind == OptimizerKind::Muon) {
    known.push_back("exclude_layers");
    if (auto it = c.find("exclude_layers"); it != c.end() && !(it->is_array() && it->empty()) && !it->is_null())
      log_warn("{}: {}: exclude_layers {} is not imported: rnntrain's Muon takes AdamW for the weights that are not "
               "2-D and for embeddings only; the others get Muon's update", file, owner, it->dump());
  }
  warn_unknown(c, known, file, owner, fmt::format("rnntrain's {} has no such setting", info.name));
  t.optimizer = o;
}

// Keras 3's variable path of each parameter with '/' as '_', as Keras names optimizer slots:
// "sequential_lstm_lstm_cell_kernel".
std::vector<std::string> param_paths(const ModelSpec& model, const Params& params) {
  std::vector<std::string> out = keras_variable_paths(model, params);
  for (std::string& s : out) std::replace(s.begin(), s.end(), '/', '_');
  return out;
}

// Calls f(name, param, value) for each optimizer variable in Keras 3's order: "iteration" (an int64),
// "learning_rate" (unless a schedule gives it), then each slot ("momentum", its parameter's index,
// the tensor) in Keras' creation order, then the scalar some kinds keep after them (SlotKinds::after).
// param is -1 for the first two and -2 for the last, which is outside the optimizer's name scope.
template <class F>
void for_each_variable(const KerasTraining& t, F f) {
  f("iteration", -1, t.iterations);
  const bool scheduled = std::any_of(std::begin(kKerasSchedules), std::end(kKerasSchedules),
                                     [&](const KerasSchedule& k) { return k.kind == t.train.schedule.kind; });
  if (!scheduled) {  // Keras' optimizer has a learning_rate variable unless a schedule gives the rate
    Tensor lr(Shape{});
    lr.data = {static_cast<float>(t.learning_rate)};
    f("learning_rate", -1, lr);
  }
  std::vector<std::string> slot_names;
  for (const auto& s : t.slots) slot_names.push_back(s.first);
  for (size_t i : keras_slot_order(slot_names)) {
    const std::string& n = t.slots[i].first;  // "momentum/3"
    const size_t slash = n.rfind('/');
    f(n.substr(0, slash), std::stoi(n.substr(slash + 1)), *t.slots[i].second);
  }
  if (const SlotKinds::After after = optimizer_slot_kinds(t.train.optimizer).after; after.name) {
    Tensor v(Shape{});
    v.data = {static_cast<float>(after.value(t.train.optimizer, t.iterations))};
    f(after.name, -2, v);
  }
}

void write_variable(const h5::Group& g, const std::string& name, int64_t v) { g.write_int64(name, {v}, true); }
void write_variable(const h5::Group& g, const std::string& name, const Tensor& v) { g.write(name, v); }

}  // namespace

const char* keras_optimizer_name(OptimizerKind k) { return optimizer_info(k).keras_name; }

Json training_config_json(const KerasTraining& t) {
  Json j;
  j["loss"] = loss_json(t.train.loss, KerasJsonStyle::Legacy);
  j["metrics"] = metrics_json(t.train.metrics, KerasJsonStyle::Legacy);
  j["weighted_metrics"] = nullptr;
  j["loss_weights"] = nullptr;
  j["optimizer_config"] = optimizer_json(t, KerasJsonStyle::Legacy);
  return j;
}

bool legacy_h5_compiles(OptimizerKind k) { return k != OptimizerKind::Lamb; }

Json compile_config_json(const KerasTraining& t) {
  Json j;
  j["optimizer"] = optimizer_json(t, KerasJsonStyle::Keras3);
  j["loss"] = loss_json(t.train.loss, KerasJsonStyle::Keras3);
  j["loss_weights"] = nullptr;
  j["metrics"] = metrics_json(t.train.metrics, KerasJsonStyle::Keras3);
  j["weighted_metrics"] = nullptr;
  j["run_eagerly"] = false;
  j["steps_per_execution"] = 1;
  j["jit_compile"] = "auto";  // as compile() defaults: each backend decides (XLA on JAX), not disabled
  return j;
}

void write_legacy_optimizer(const h5::Group& g, const ModelSpec& model, const Params& params, const KerasTraining& t) {
  h5::Group og = g.create_group("optimizer_weights");
  const std::string scope = keras_optimizer_name(t.train.optimizer.kind);
  const std::vector<std::string> paths = param_paths(model, params);
  std::vector<std::string> names;
  for_each_variable(t, [&](const std::string& var, int param, const auto& value) {
    if (param == -2) names.push_back(var);
    else if (param < 0) names.push_back(scope + "/" + var);
    else names.push_back(fmt::format("{}/{}_{}", scope, param < static_cast<int>(paths.size()) ? paths[param]
                                                                                              : std::to_string(param), var));
    write_variable(og, names.back(), value);
  });
  write_name_list(og, "weight_names", names);
}

void write_keras3_optimizer(const h5::Group& root, const KerasTraining& t) {
  h5::Group vars = root.create_group("optimizer/vars");
  vars.set_attr("name", std::string(keras_optimizer_name(t.train.optimizer.kind)));
  int i = 0;
  for_each_variable(t, [&](const std::string&, int, const auto& value) {
    write_variable(vars, std::to_string(i++), value);
  });
}

static std::optional<TrainSpec> train_from_keras_json_unchecked(const nlohmann::json& j, const std::string& file) {
  if (!j.is_object()) return std::nullopt;
  const json* opt = j.contains("optimizer_config") ? &j["optimizer_config"] : j.contains("optimizer") ? &j["optimizer"] : nullptr;
  if (!opt && !j.contains("loss")) return std::nullopt;
  TrainSpec t;
  if (opt) optimizer_from(*opt, file, t);
  if (j.contains("loss"))
    if (auto l = loss_from(j["loss"], file)) t.loss = *l;
  if (j.contains("metrics") && j["metrics"].is_array()) metrics_from(j["metrics"], file, t.loss, t.metrics);
  for (const char* key : {"loss_weights", "weighted_metrics"})
    if (j.contains(key) && !j[key].is_null())
      log_warn("{}: {} {} is not imported: rnntrain weighs the one output's loss by 1 and reports unweighted metrics",
               file, key, j[key].dump().substr(0, 80));
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
  bool listed_by_variable = false;  // a kind seen again after another: the per-tensor kinds list Keras' order
  for (size_t i = 1; i < slot_names.size(); ++i) {
    const std::string kind = slot_names[i].substr(0, slot_names[i].rfind('/'));
    listed_by_variable |= kind != slot_names[i - 1].substr(0, slot_names[i - 1].rfind('/')) &&
                          by_kind[kind].front() != i;
  }
  if (listed_by_variable) {
    for (size_t i = 0; i < slot_names.size(); ++i) out.push_back(i);
    return out;
  }
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
