// The `train:` section: loop settings, optimizer (Keras 3 defaults per kind), loss, metrics,
// learning-rate schedule, early stopping and checkpointing. Not the model or the data.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <iterator>
#include <limits>
#include <vector>

#include "spec/sections.h"

namespace rnntrain::spec {

namespace {

using Keys = std::span<const char* const>;
// Rates, epsilons and clipping bounds are float32 in the updates: larger values would overflow there.
constexpr double kFloatMax = std::numeric_limits<float>::max();

double positive(const Value& v) { return v.as_double(0.0, kFloatMax, true, false); }
double non_negative(const Value& v) { return v.as_double(0.0, kFloatMax, false, false); }
double unit_open(const Value& v) { return v.as_double(0.0, 1.0, false, true); }  // [0, 1)

// A section that is a plain name or a map with `type`: returns the map's `type` or the name itself.
Value type_of(const Value& v, const char* example) {
  if (v.is_scalar()) return v;
  if (!v.is_map()) v.fail(fmt::format("expected a name or a map like {}, got {}", example, v.describe()));
  return v.need("type", fmt::format("; e.g. {}", example));
}

constexpr const char* kClip[] = {"clipnorm", "clipvalue", "global_clipnorm"};

// The keys of an optimizer of kind `info`: type and learning_rate, its own, then weight_decay and clipping.
std::vector<const char*> optimizer_keys(const OptimizerInfo& info) {
  std::vector<const char*> keys{"type", "learning_rate"};
  for (int i = 0; i < info.num_keys; ++i) keys.push_back(info.keys[i].name);
  keys.push_back("weight_decay");
  keys.insert(keys.end(), std::begin(kClip), std::end(kClip));
  return keys;
}

// A descriptor's key (an optimizer's or a loss's) into its number or flag, checked against its range.
void read_key(const Value& x, KeyRange range, double* number, bool* flag) {
  switch (range) {
    case KeyRange::Flag: *flag = x.as_bool(); return;
    case KeyRange::Positive: *number = positive(x); return;
    case KeyRange::NonNegative: *number = non_negative(x); return;
    case KeyRange::NonPositive: *number = x.as_double(-kFloatMax, 0.0, false, false); return;
    case KeyRange::Unit: *number = x.as_double(0.0, 1.0, false, false); return;
    case KeyRange::UnitOpen: *number = unit_open(x); return;
    case KeyRange::Count: *number = static_cast<double>(x.as_int(0, 1000000)); return;
  }
}

OptimizerSpec read_optimizer(const Value& v) {
  const bool typed = !v.is_map() || v.has("type");  // a map without `type` is Adam, the default
  OptimizerSpec o = optimizer_defaults(
      typed ? read_enum(type_of(v, "{type: adam, learning_rate: 0.001}"), optimizer_kinds(), "optimizer")
            : OptimizerKind::Adam);
  if (!v.is_map()) return o;
  const OptimizerInfo& info = optimizer_info(o.kind);
  std::vector<std::vector<const char*>> sibling_keys;
  std::vector<Value::Sibling> others;
  for (const OptimizerInfo* other : Optimizers::infos) sibling_keys.push_back(optimizer_keys(*other));
  for (size_t i = 0; i < sibling_keys.size(); ++i) others.push_back({Optimizers::infos[i]->name, sibling_keys[i]});
  v.check_keys(optimizer_keys(info), info.name, others);
  if (auto x = v.get("learning_rate")) o.learning_rate = positive(*x);
  for (int i = 0; i < info.num_keys; ++i)
    if (auto x = v.get(info.keys[i].name))
      read_key(*x, info.keys[i].range, info.keys[i].number ? &(o.*info.keys[i].number) : nullptr,
               info.keys[i].flag ? &(o.*info.keys[i].flag) : nullptr);
  if (auto x = v.get("weight_decay")) o.weight_decay = non_negative(*x);
  std::optional<double>* clips[] = {&o.clipnorm, &o.clipvalue, &o.global_clipnorm};
  const char* first = nullptr;
  for (int i = 0; i < 3; ++i)
    if (auto x = v.get(kClip[i])) {
      if (first) x->fail(fmt::format("{} is already set; Keras allows only one of clipnorm, clipvalue, global_clipnorm", first));
      *clips[i] = positive(*x);
      first = kClip[i];
    }
  return o;
}

std::vector<const char*> loss_keys(const LossInfo& info) {
  std::vector<const char*> keys{"type"};
  for (int i = 0; i < info.num_keys; ++i) keys.push_back(info.keys[i].name);
  return keys;
}

LossSpec read_loss(const Value& v) {
  const Value tv = type_of(v, "{type: sparse_categorical_crossentropy, from_logits: true}");
  LossSpec l = loss_defaults(read_enum(tv, loss_kinds(), "loss"));
  if (!v.is_map()) return l;
  const LossInfo& info = loss_info(l.kind);
  std::vector<std::vector<const char*>> sibling_keys;
  std::vector<Value::Sibling> others;
  for (const LossInfo* other : Losses::infos) sibling_keys.push_back(loss_keys(*other));
  for (size_t i = 0; i < sibling_keys.size(); ++i) others.push_back({Losses::infos[i]->name, sibling_keys[i]});
  v.check_keys(loss_keys(info), tv.as_string(), others);
  for (int i = 0; i < info.num_keys; ++i)
    if (auto x = v.get(info.keys[i].name))
      read_key(*x, info.keys[i].range, info.keys[i].number ? &(l.*info.keys[i].number) : nullptr,
               info.keys[i].flag ? &(l.*info.keys[i].flag) : nullptr);
  return l;
}

// The keys a metric of `kind` takes, besides type and name.
std::vector<const char*> metric_keys(MetricKind kind) {
  std::vector<const char*> out;
  for (const char* const* k = metric_info(kind).keys; *k; ++k) out.push_back(*k);
  return out;
}

// A metric: its name, or a map {type: auc, curve: PR, name: pr_auc} with the keys of Keras' class.
MetricSpec read_metric(const Value& v) {
  const Value tv = type_of(v, "{type: auc, curve: PR, name: pr_auc}");
  MetricSpec m{read_enum(tv, metric_kinds(), "metric"), ""};
  m.name = enum_name(metric_kinds(), m.kind);
  if (!v.is_map()) return m;
  std::vector<const char*> keys = metric_keys(m.kind);  // a metric with settings may be named (two AUCs)
  keys.insert(keys.begin(), keys.empty() ? std::initializer_list<const char*>{"type"} : std::initializer_list<const char*>{"type", "name"});
  std::vector<std::vector<const char*>> sibling_keys;
  std::vector<Value::Sibling> others;
  for (const Choice<MetricKind>& c : metric_kinds()) sibling_keys.push_back(metric_keys(c.value));
  for (size_t i = 0; i < sibling_keys.size(); ++i) others.push_back({metric_kinds()[i].name, sibling_keys[i]});
  v.check_keys(keys, tv.as_string(), others);
  if (auto x = v.get("name")) {
    m.name = x->as_string();
    if (!std::all_of(m.name.begin(), m.name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }))
      x->fail(fmt::format("metric name '{}': use letters, digits and _ (it names a history column)", m.name));
  }
  if (auto x = v.get("k")) m.k = x->as_int(1, 1000000);
  if (auto x = v.get("thresholds")) m.threshold = x->as_double(0.0, 1.0, false, false);
  if (auto x = v.get("threshold")) m.threshold = x->as_double(0.0, 1.0, true, false);  // Keras: 0 < t <= 1
  if (auto x = v.get("class_id")) m.class_id = x->as_int(0, 1000000000);
  if (auto x = v.get("num_thresholds")) m.num_thresholds = x->as_int(2, 100000);
  if (auto x = v.get("curve")) m.curve = read_enum(*x, auc_curves(), "curve");
  if (auto x = v.get("summation_method")) m.summation = read_enum(*x, auc_summations(), "summation_method");
  if (auto x = v.get("multi_label")) m.multi_label = x->as_bool();
  if (auto x = v.get("from_logits")) m.from_logits = x->as_bool();
  if (auto x = v.get("average")) m.average = read_enum(*x, f_averages(), "average");
  if (auto x = v.get("beta")) m.beta = positive(*x);
  if (auto x = v.get("class_aggregation")) m.aggregation = read_enum(*x, r2_aggregations(), "class_aggregation");
  if (auto x = v.get("num_regressors")) m.num_regressors = x->as_int(0, 1000000000);
  return m;
}

std::vector<MetricSpec> read_metrics(const Value& v) {
  v.require_seq(" of metric names or maps, e.g. metrics: [accuracy, {type: auc, curve: PR, name: pr_auc}]");
  std::vector<MetricSpec> out;
  for (const Value& item : v.items()) {
    const MetricSpec m = read_metric(item);
    for (const MetricSpec& o : out)
      if (o.name == m.name)
        item.fail(fmt::format("a metric named '{}' is listed twice; give one another `name`", m.name));
    if (m.name == "loss" || m.name == "epoch" || m.name == "learning_rate" || m.name.starts_with("val_"))
      item.fail(fmt::format("'{}' cannot name a metric: epoch, loss, learning_rate and val_* are the history's own "
                            "columns; give it another `name`", m.name));
    out.push_back(m);
  }
  return out;
}

// A monitored quantity must be a logged one: loss, a metric, or either with "val_".
void check_monitor(const Value& v, const std::string& monitor, const std::vector<MetricSpec>& metrics) {
  std::vector<std::string> names = {"loss", "val_loss"};
  for (const MetricSpec& m : metrics) names.push_back(m.name), names.push_back("val_" + m.name);
  if (std::find(names.begin(), names.end(), monitor) != names.end()) return;
  const std::string guess = closest(monitor, names);
  v.fail(fmt::format("'{}' is not logged during training;{} choices: {} (add a metric to train.metrics to monitor it)",
                     monitor, guess.empty() ? "" : fmt::format(" did you mean '{}'?", guess), join(names)));
}

constexpr const char* kConstantKeys[] = {"type"};
constexpr const char* kExponentialKeys[] = {"type", "decay_steps", "decay_rate", "staircase"};
constexpr const char* kCosineKeys[] = {"type", "warmup_steps", "decay_steps", "alpha"};
constexpr const char* kStepKeys[] = {"type", "step_size", "gamma"};
constexpr const char* kPlateauKeys[] = {"type", "monitor", "mode", "factor", "patience", "min_delta", "cooldown", "min_lr"};
constexpr const char* kPolynomialKeys[] = {"type", "decay_steps", "end_learning_rate", "power", "cycle"};
constexpr const char* kInverseTimeKeys[] = {"type", "decay_steps", "decay_rate", "staircase"};
constexpr const char* kPiecewiseKeys[] = {"type", "boundaries", "values"};
constexpr const char* kRestartsKeys[] = {"type", "decay_steps", "t_mul", "m_mul", "alpha"};

Keys schedule_keys(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::Constant: return kConstantKeys;
    case ScheduleKind::Exponential: return kExponentialKeys;
    case ScheduleKind::Cosine: return kCosineKeys;
    case ScheduleKind::Step: return kStepKeys;
    case ScheduleKind::ReduceOnPlateau: return kPlateauKeys;
    case ScheduleKind::Polynomial: return kPolynomialKeys;
    case ScheduleKind::InverseTime: return kInverseTimeKeys;
    case ScheduleKind::PiecewiseConstant: return kPiecewiseKeys;
    case ScheduleKind::CosineRestarts: return kRestartsKeys;
  }
  return kConstantKeys;
}

// piecewise_constant's boundaries (increasing optimizer steps) and values (one more, each a rate).
void read_pieces(const Value& v, ScheduleSpec& s) {
  const Value b = v.need("boundaries", "; e.g. {type: piecewise_constant, boundaries: [1000, 5000], values: [1e-3, "
                                       "5e-4, 1e-4]}");
  b.require_seq(" of optimizer steps, e.g. [1000, 5000]");
  for (const Value& x : b.items()) {
    s.boundaries.push_back(x.as_int(s.boundaries.empty() ? 0 : s.boundaries.back() + 1, kMaxCount));
  }
  if (s.boundaries.empty()) b.fail("needs at least one step, e.g. [1000]");
  const Value vals = v.need("values", "; one learning rate more than boundaries");
  vals.require_seq(" of learning rates, one more than boundaries");
  for (const Value& x : vals.items()) s.values.push_back(positive(x));
  if (s.values.size() != s.boundaries.size() + 1)
    vals.fail(fmt::format("holds {} learning rates; with {} boundaries it needs {} (the rate up to the first boundary, "
                          "between each two, and after the last)", s.values.size(), s.boundaries.size(),
                          s.boundaries.size() + 1));
}

ScheduleSpec read_schedule(const Value& v, const std::vector<MetricSpec>& metrics) {
  const Value tv = type_of(v, "{type: cosine, decay_steps: 1000}");
  ScheduleSpec s;
  s.kind = read_enum(tv, schedule_kinds(), "schedule");
  const Keys keys = schedule_keys(s.kind);
  const bool decays = std::find(keys.begin(), keys.end(), std::string_view("decay_steps")) != keys.end();
  if (!v.is_map()) {
    if (decays) v.fail(fmt::format("the {} schedule needs decay_steps; write {{type: {}, decay_steps: 1000}}", v.as_string(), v.as_string()));
    if (s.kind == ScheduleKind::PiecewiseConstant)
      v.fail("the piecewise_constant schedule needs boundaries and values; write {type: piecewise_constant, "
             "boundaries: [1000], values: [1e-3, 1e-4]}");
    return s;
  }
  std::vector<Value::Sibling> others;
  for (const spec::Choice<ScheduleKind>& c : schedule_kinds()) others.push_back({c.name, schedule_keys(c.value)});
  const std::string name = tv.as_string();
  v.check_keys(keys, name, others);
  if (decays) s.decay_steps = v.need("decay_steps", fmt::format("; the {} schedule needs decay_steps, e.g. 1000", name)).as_int(1, kMaxCount);
  if (s.kind == ScheduleKind::PiecewiseConstant) read_pieces(v, s);
  if (auto x = v.get("decay_rate")) s.decay_rate = positive(*x);
  if (auto x = v.get("staircase")) s.staircase = x->as_bool();
  if (auto x = v.get("warmup_steps")) s.warmup_steps = x->as_int(0, kMaxCount);
  if (auto x = v.get("alpha")) s.alpha = x->as_double(0.0, 1.0, false, false);
  if (auto x = v.get("end_learning_rate")) s.end_learning_rate = non_negative(*x);
  if (auto x = v.get("power")) s.power = positive(*x);
  if (auto x = v.get("cycle")) s.cycle = x->as_bool();
  if (auto x = v.get("t_mul")) s.t_mul = positive(*x);
  if (auto x = v.get("m_mul")) s.m_mul = positive(*x);
  if (auto x = v.get("step_size")) s.step_size = x->as_int(1, kMaxCount);
  if (auto x = v.get("gamma")) s.gamma = positive(*x);
  if (auto x = v.get("monitor")) check_monitor(*x, s.monitor = x->as_string(), metrics);
  if (auto x = v.get("mode")) s.mode = read_enum(*x, monitor_modes(), "mode");
  if (auto x = v.get("factor")) s.factor = x->as_double(0.0, 1.0, true, true);
  if (auto x = v.get("patience")) s.patience = x->as_int(0, kMaxCount);
  if (auto x = v.get("min_delta")) s.min_delta = non_negative(*x);
  if (auto x = v.get("cooldown")) s.cooldown = x->as_int(0, kMaxCount);
  if (auto x = v.get("min_lr")) s.min_lr = non_negative(*x);
  return s;
}

EarlyStoppingSpec read_early_stopping(const Value& v, const std::vector<MetricSpec>& metrics) {
  v.require_map(" like {monitor: val_loss, patience: 3}");
  constexpr const char* keys[] = {"monitor", "mode", "patience", "min_delta", "restore_best_weights", "baseline", "start_from_epoch"};
  v.check_keys(keys, "early_stopping");
  EarlyStoppingSpec e;
  if (auto x = v.get("monitor")) check_monitor(*x, e.monitor = x->as_string(), metrics);
  if (auto x = v.get("mode")) e.mode = read_enum(*x, monitor_modes(), "mode");
  if (auto x = v.get("patience")) e.patience = x->as_int(0, kMaxCount);
  if (auto x = v.get("min_delta")) e.min_delta = non_negative(*x);
  if (auto x = v.get("restore_best_weights")) e.restore_best_weights = x->as_bool();
  if (auto x = v.get("baseline")) e.baseline = x->as_finite();
  if (auto x = v.get("start_from_epoch")) e.start_from_epoch = x->as_int(0, kMaxCount);
  return e;
}

CheckpointSpec read_checkpoint(const Value& v, const std::vector<MetricSpec>& metrics) {
  v.require_map(" like {monitor: val_loss, mode: auto}");
  constexpr const char* keys[] = {"monitor", "mode", "every_epoch"};
  v.check_keys(keys, "checkpoint");
  CheckpointSpec c;
  if (auto x = v.get("monitor")) check_monitor(*x, c.monitor = x->as_string(), metrics);
  if (auto x = v.get("mode")) c.mode = read_enum(*x, monitor_modes(), "mode");
  if (auto x = v.get("every_epoch")) c.every_epoch = x->as_bool();
  return c;
}

}  // namespace

// Keras' class_weight: {class index: weight}.
std::map<int64_t, double> read_class_weight(const Value& v) {
  v.require_map(" of class index to weight, e.g. class_weight: {0: 1.0, 1: 5.0}");
  std::map<int64_t, double> out;
  for (const auto& kv : v.node()) {
    const std::string key = kv.first.Scalar();
    const Value w = *v.get(key);
    char* end = nullptr;
    errno = 0;
    const long long c = std::strtoll(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || errno != 0 || c < 0 || c > 1000000000)
      w.fail(fmt::format("'{}' is not a class index: class_weight maps classes 0, 1, ... to weights", key));
    out[c] = w.as_double(0.0, kFloatMax, false, false);
  }
  return out;
}

TrainSpec read_train(const Value& v) {
  v.require_map(" like {epochs: 10, batch_size: 32}");
  constexpr const char* keys[] = {"epochs",    "batch_size", "seed",     "shuffle",        "bucketing",
                                  "bucket_window", "steps_per_epoch", "threads", "optimizer",    "loss",
                                  "metrics",   "schedule",   "early_stopping", "checkpoint", "class_weight"};
  v.check_keys(keys, "train");
  TrainSpec t;
  if (auto x = v.get("epochs")) t.epochs = x->as_int(1, kMaxCount);
  if (auto x = v.get("batch_size")) t.batch_size = x->as_int(1, kMaxDim);
  if (auto x = v.get("seed")) t.seed = x->as_uint64();
  if (auto x = v.get("shuffle")) t.shuffle = x->as_bool();
  if (auto x = v.get("bucketing")) t.bucketing = x->as_bool();
  if (auto x = v.get("bucket_window")) t.bucket_window = x->as_int(1, kMaxCount);
  if (auto x = v.get("steps_per_epoch")) t.steps_per_epoch = x->as_int(0, kMaxCount);
  if (auto x = v.get("threads")) t.threads = x->as_int(0, 4096);
  if (auto x = v.get("optimizer")) t.optimizer = read_optimizer(*x);
  if (auto x = v.get("loss")) t.loss = read_loss(*x);
  if (auto x = v.get("metrics")) t.metrics = read_metrics(*x);
  if (auto x = v.get("schedule")) t.schedule = read_schedule(*x, t.metrics);
  if (auto x = v.get("early_stopping")) t.early_stopping = read_early_stopping(*x, t.metrics);
  if (auto x = v.get("checkpoint")) t.checkpoint = read_checkpoint(*x, t.metrics);
  if (auto x = v.get("class_weight")) t.class_weight = read_class_weight(*x);
  return t;
}

}  // namespace rnntrain::spec
