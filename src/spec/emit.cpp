// emit_config: the effective config as YAML with every key explicit, in a fixed order, so that
// parse_config reads it back to an equal Config. Written next to every run; not a pretty-printer
// of the user's file (comments and the user's order are not kept).
#include <fmt/format.h>

#include "spec/parse.h"
#include "spec/cells.h"
#include "spec/sections.h"

namespace rnntrain {

namespace {

using YAML::Emitter;

// Shortest text that reads back to the same double; "1.0" rather than "1" for readability.
std::string num(double x) {
  std::string s = fmt::format("{}", x);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

Emitter& key(Emitter& e, const char* k) { return e << YAML::Key << k << YAML::Value; }
void put_str(Emitter& e, const char* k, const std::string& s) { key(e, k) << YAML::DoubleQuoted << s; }
void put_num(Emitter& e, const char* k, double x) { key(e, k) << num(x); }
void put_int(Emitter& e, const char* k, int64_t x) { key(e, k) << x; }
void put_bool(Emitter& e, const char* k, bool b) { key(e, k) << b; }
void put_name(Emitter& e, const char* k, const char* name) { key(e, k) << name; }
void put_opt(Emitter& e, const char* k, const std::optional<double>& x) {
  if (x) put_num(e, k, *x);
  else key(e, k) << YAML::Null;
}

// Only the regularizers a layer has: {l1: ..., l2: ...} with the factors that are set.
void put_reg(Emitter& e, const char* k, const Regularizer& r) {
  if (!r.active()) return;
  key(e, k) << YAML::Flow << YAML::BeginMap;
  if (r.l1 != 0.0) put_num(e, "l1", r.l1);
  if (r.l2 != 0.0) put_num(e, "l2", r.l2);
  e << YAML::EndMap;
}

// Only the constraints a layer has, with every setting of their kind.
void put_constraint(Emitter& e, const char* k, const Constraint& c) {
  if (!c.active()) return;
  key(e, k) << YAML::Flow << YAML::BeginMap;
  put_name(e, "type", spec::enum_name(spec::constraint_kinds(), c.kind));
  if (c.kind == ConstraintKind::MaxNorm || c.kind == ConstraintKind::MinMaxNorm) put_num(e, "max_value", c.max_value);
  if (c.kind == ConstraintKind::MinMaxNorm) put_num(e, "min_value", c.min_value), put_num(e, "rate", c.rate);
  if (c.kind != ConstraintKind::NonNeg) {
    key(e, "axis") << YAML::Flow << YAML::BeginSeq;
    for (int a : c.axis) e << a;
    e << YAML::EndSeq;
  }
  e << YAML::EndMap;
}

// A cell's or Dense's regularizers and constraints, those it has (recurrent: the recurrent kernel's too).
void put_weight_settings(Emitter& e, const LayerSpec& l, bool recurrent) {
  put_reg(e, "kernel_regularizer", l.kernel_regularizer);
  if (recurrent) put_reg(e, "recurrent_regularizer", l.recurrent_regularizer);
  put_reg(e, "bias_regularizer", l.bias_regularizer);
  put_reg(e, "activity_regularizer", l.activity_regularizer);
  put_constraint(e, "kernel_constraint", l.kernel_constraint);
  if (recurrent) put_constraint(e, "recurrent_constraint", l.recurrent_constraint);
  put_constraint(e, "bias_constraint", l.bias_constraint);
}

void put_init(Emitter& e, const char* k, const Initializer& init) {
  const char* name = spec::enum_name(spec::init_kinds(), init.kind);
  switch (init.kind) {
    case InitKind::RandomUniform:
      key(e, k) << YAML::Flow << YAML::BeginMap;
      put_name(e, "type", name), put_num(e, "minval", init.a), put_num(e, "maxval", init.b);
      e << YAML::EndMap;
      break;
    case InitKind::RandomNormal:
      key(e, k) << YAML::Flow << YAML::BeginMap;
      put_name(e, "type", name), put_num(e, "mean", init.a), put_num(e, "stddev", init.b);
      e << YAML::EndMap;
      break;
    case InitKind::Orthogonal:
    case InitKind::Constant:
      key(e, k) << YAML::Flow << YAML::BeginMap;
      put_name(e, "type", name), put_num(e, init.kind == InitKind::Orthogonal ? "gain" : "value", init.a);
      e << YAML::EndMap;
      break;
    default:
      put_name(e, k, name);
  }
}

// Dense's and Conv1D's: the activation, use_bias, and the kernel's and bias' settings.
void put_kernel_and_bias(Emitter& e, const LayerSpec& l) {
  put_name(e, "activation", activation_name(l.activation));
  put_bool(e, "use_bias", l.use_bias);
  put_init(e, "kernel_initializer", l.kernel_initializer);
  put_init(e, "bias_initializer", l.bias_initializer);
  put_weight_settings(e, l, false);
}

void put_layer(Emitter& e, const LayerSpec& l) {
  e << YAML::BeginMap;
  put_name(e, "type", layer_kind_name(l.kind));
  put_str(e, "name", l.name);
  const char* act = activation_name(l.activation);
  switch (l.kind) {
    case LayerKind::Input:
      key(e, "shape") << YAML::Flow << YAML::BeginSeq;
      for (int64_t d : l.shape) {
        if (d < 0) e << YAML::Null;
        else e << d;
      }
      e << YAML::EndSeq;
      break;
    case LayerKind::Embedding:
      put_int(e, "input_dim", l.input_dim), put_int(e, "output_dim", l.output_dim);
      put_bool(e, "mask_zero", l.mask_zero);
      put_init(e, "embeddings_initializer", l.embeddings_initializer);
      put_reg(e, "embeddings_regularizer", l.embeddings_regularizer);
      put_reg(e, "activity_regularizer", l.activity_regularizer);
      put_constraint(e, "embeddings_constraint", l.embeddings_constraint);
      break;
    case LayerKind::Masking:
      put_num(e, "mask_value", l.mask_value);
      break;
    default:  // the recurrent cells (spec/cells.h)
      put_int(e, "units", l.units);
      put_name(e, "activation", act);
      if (cell_traits(l.kind).recurrent_activation)
        put_name(e, "recurrent_activation", activation_name(l.recurrent_activation));
      put_bool(e, "use_bias", l.use_bias);
      put_bool(e, "return_sequences", l.return_sequences);
      put_bool(e, "go_backwards", l.go_backwards);
      for (const CellFlag& f : cell_traits(l.kind).flags) put_bool(e, f.name, l.*f.field);
      put_num(e, "dropout", l.dropout), put_num(e, "recurrent_dropout", l.recurrent_dropout);
      put_init(e, "kernel_initializer", l.kernel_initializer);
      put_init(e, "recurrent_initializer", l.recurrent_initializer);
      put_init(e, "bias_initializer", l.bias_initializer);
      put_weight_settings(e, l, true);
      break;
    case LayerKind::Dense:
      put_int(e, "units", l.units);
      put_kernel_and_bias(e, l);
      break;
    case LayerKind::Dropout:
    case LayerKind::SpatialDropout1D:
      put_num(e, "rate", l.rate);
      break;
    case LayerKind::Conv1D:
      put_int(e, "filters", l.filters), put_int(e, "kernel_size", l.kernel_size), put_int(e, "strides", l.strides);
      put_name(e, "padding", spec::enum_name(spec::paddings(), l.padding));
      put_int(e, "dilation_rate", l.dilation_rate);
      put_kernel_and_bias(e, l);
      break;
    case LayerKind::MaxPooling1D:
    case LayerKind::AveragePooling1D:
      put_int(e, "pool_size", l.pool_size), put_int(e, "strides", l.strides);
      put_name(e, "padding", spec::enum_name(spec::paddings(), l.padding));
      break;
    case LayerKind::GlobalAveragePooling1D:
    case LayerKind::GlobalMaxPooling1D:
      put_bool(e, "keepdims", l.keepdims);
      break;
    case LayerKind::LayerNormalization:
      put_num(e, "epsilon", l.epsilon);
      put_bool(e, "center", l.center), put_bool(e, "scale", l.scale);
      put_init(e, "beta_initializer", l.beta_initializer);
      put_init(e, "gamma_initializer", l.gamma_initializer);
      put_reg(e, "beta_regularizer", l.beta_regularizer);
      put_reg(e, "gamma_regularizer", l.gamma_regularizer);
      put_constraint(e, "beta_constraint", l.beta_constraint);
      put_constraint(e, "gamma_constraint", l.gamma_constraint);
      break;
    case LayerKind::Flatten:
      break;
    case LayerKind::Activation:
      put_name(e, "activation", act);
      break;
    case LayerKind::Bidirectional:
    case LayerKind::TimeDistributed:
      if (l.kind == LayerKind::Bidirectional) put_name(e, "merge_mode", spec::enum_name(spec::merge_modes(), l.merge_mode));
      key(e, "layer");
      if (l.inner) put_layer(e, *l.inner);
      else e << YAML::Null;
      break;
  }
  e << YAML::EndMap;
}

void put_columns(Emitter& e, const char* k, const std::vector<std::string>& cols) {
  key(e, k) << YAML::Flow << YAML::BeginSeq;
  for (const std::string& c : cols) e << YAML::DoubleQuoted << c;
  e << YAML::EndSeq;
}

void put_source(Emitter& e, const char* k, const std::optional<DataSource>& src) {
  if (!src) {
    key(e, k) << YAML::Null;
    return;
  }
  const DataSource& s = *src;
  key(e, k) << YAML::BeginMap;
  put_name(e, "format", spec::enum_name(spec::data_formats(), s.format));
  switch (s.format) {
    case DataFormat::Hdf5:
    case DataFormat::Npz:
      put_str(e, "path", s.path);
      [[fallthrough]];
    case DataFormat::Npy:
      put_str(e, "inputs", s.inputs), put_str(e, "targets", s.targets), put_str(e, "lengths", s.lengths);
      put_str(e, "sample_weight", s.sample_weight);
      break;
    case DataFormat::CsvSequences:
      put_str(e, "path", s.path);
      if (!s.sequence_id.empty()) put_str(e, "id", s.sequence_id);
      if (!s.features.empty()) put_columns(e, "features", s.features);
      if (!s.target_columns.empty()) put_columns(e, "targets", s.target_columns);
      put_name(e, "scaling", spec::enum_name(spec::scalings(), s.scaling));
      break;
    case DataFormat::Csv:
      put_str(e, "path", s.path);
      put_int(e, "window", s.window), put_int(e, "horizon", s.horizon), put_int(e, "stride", s.stride);
      put_columns(e, "features", s.features), put_columns(e, "targets", s.target_columns);
      put_name(e, "scaling", spec::enum_name(spec::scalings(), s.scaling));
      break;
    case DataFormat::Text:
      put_str(e, "path", s.path), put_int(e, "seq_len", s.seq_len);
      break;
    case DataFormat::Synthetic:
      put_str(e, "task", s.task);
      put_int(e, "samples", s.samples), put_int(e, "timesteps", s.timesteps);
      key(e, "seed") << s.seed;
      break;
  }
  e << YAML::EndMap;
}

void put_optimizer(Emitter& e, const OptimizerSpec& o) {
  key(e, "optimizer") << YAML::BeginMap;
  const OptimizerInfo& info = optimizer_info(o.kind);
  put_name(e, "type", info.name);
  put_num(e, "learning_rate", o.learning_rate);
  for (int i = 0; i < info.num_keys; ++i) {
    const OptimizerKey& k = info.keys[i];
    if (k.number) put_num(e, k.name, o.*k.number);
    else put_bool(e, k.name, o.*k.flag);
  }
  put_num(e, "weight_decay", o.weight_decay);
  put_opt(e, "clipnorm", o.clipnorm), put_opt(e, "clipvalue", o.clipvalue), put_opt(e, "global_clipnorm", o.global_clipnorm);
  e << YAML::EndMap;
}

void put_loss(Emitter& e, const LossSpec& l) {
  key(e, "loss") << YAML::BeginMap;
  const LossInfo& info = loss_info(l.kind);
  put_name(e, "type", info.name);
  for (int i = 0; i < info.num_keys; ++i) {
    const LossKey& k = info.keys[i];
    if (k.number) put_num(e, k.name, l.*k.number);
    else put_bool(e, k.name, l.*k.flag);
  }
  e << YAML::EndMap;
}

void put_schedule(Emitter& e, const ScheduleSpec& s) {
  key(e, "schedule") << YAML::BeginMap;
  put_name(e, "type", spec::enum_name(spec::schedule_kinds(), s.kind));
  switch (s.kind) {
    case ScheduleKind::Constant: break;
    case ScheduleKind::Exponential:
      put_int(e, "decay_steps", s.decay_steps), put_num(e, "decay_rate", s.decay_rate), put_bool(e, "staircase", s.staircase);
      break;
    case ScheduleKind::Cosine:
      put_int(e, "warmup_steps", s.warmup_steps), put_int(e, "decay_steps", s.decay_steps), put_num(e, "alpha", s.alpha);
      break;
    case ScheduleKind::Step:
      put_int(e, "step_size", s.step_size), put_num(e, "gamma", s.gamma);
      break;
    case ScheduleKind::ReduceOnPlateau:
      put_str(e, "monitor", s.monitor), put_name(e, "mode", spec::enum_name(spec::monitor_modes(), s.mode));
      put_num(e, "factor", s.factor), put_int(e, "patience", s.patience);
      put_num(e, "min_delta", s.min_delta), put_int(e, "cooldown", s.cooldown), put_num(e, "min_lr", s.min_lr);
      break;
    case ScheduleKind::Polynomial:
      put_int(e, "decay_steps", s.decay_steps), put_num(e, "end_learning_rate", s.end_learning_rate);
      put_num(e, "power", s.power), put_bool(e, "cycle", s.cycle);
      break;
    case ScheduleKind::InverseTime:
      put_int(e, "decay_steps", s.decay_steps), put_num(e, "decay_rate", s.decay_rate), put_bool(e, "staircase", s.staircase);
      break;
    case ScheduleKind::PiecewiseConstant:
      key(e, "boundaries") << YAML::Flow << YAML::BeginSeq;
      for (int64_t b : s.boundaries) e << b;
      e << YAML::EndSeq;
      key(e, "values") << YAML::Flow << YAML::BeginSeq;
      for (double v : s.values) e << num(v);
      e << YAML::EndSeq;
      break;
    case ScheduleKind::CosineRestarts:
      put_int(e, "decay_steps", s.decay_steps), put_num(e, "t_mul", s.t_mul), put_num(e, "m_mul", s.m_mul);
      put_num(e, "alpha", s.alpha);
      break;
  }
  e << YAML::EndMap;
}

// A metric as its name, or as a map of the keys that differ from its defaults.
void put_metric(Emitter& e, const MetricSpec& m) {
  MetricSpec plain{m.kind, spec::enum_name(spec::metric_kinds(), m.kind)};
  if (m == plain) {
    e << m.name;
    return;
  }
  e << YAML::BeginMap;
  put_name(e, "type", plain.name.c_str());
  if (m.name != plain.name) put_str(e, "name", m.name);
  if (m.k != plain.k) put_int(e, "k", m.k);
  if (m.threshold)
    put_num(e, m.kind == MetricKind::Precision || m.kind == MetricKind::Recall ? "thresholds" : "threshold", *m.threshold);
  if (m.class_id != plain.class_id) put_int(e, "class_id", m.class_id);
  if (m.num_thresholds != plain.num_thresholds) put_int(e, "num_thresholds", m.num_thresholds);
  if (m.curve != plain.curve) put_name(e, "curve", spec::enum_name(spec::auc_curves(), m.curve));
  if (m.summation != plain.summation) put_name(e, "summation_method", spec::enum_name(spec::auc_summations(), m.summation));
  if (m.multi_label) put_bool(e, "multi_label", true);
  if (m.from_logits) put_bool(e, "from_logits", true);
  if (m.average != plain.average) put_name(e, "average", spec::enum_name(spec::f_averages(), m.average));
  if (m.beta != plain.beta) put_num(e, "beta", m.beta);
  if (m.aggregation != plain.aggregation)
    put_name(e, "class_aggregation", spec::enum_name(spec::r2_aggregations(), m.aggregation));
  if (m.num_regressors != plain.num_regressors) put_int(e, "num_regressors", m.num_regressors);
  e << YAML::EndMap;
}

void put_train(Emitter& e, const TrainSpec& t) {
  key(e, "train") << YAML::BeginMap;
  put_int(e, "epochs", t.epochs), put_int(e, "batch_size", t.batch_size);
  key(e, "seed") << t.seed;
  put_bool(e, "shuffle", t.shuffle);
  put_bool(e, "bucketing", t.bucketing), put_int(e, "bucket_window", t.bucket_window);
  put_int(e, "steps_per_epoch", t.steps_per_epoch), put_int(e, "threads", t.threads);
  put_optimizer(e, t.optimizer);
  put_loss(e, t.loss);
  key(e, "metrics") << YAML::Flow << YAML::BeginSeq;
  for (const MetricSpec& m : t.metrics) put_metric(e, m);
  e << YAML::EndSeq;
  if (!t.class_weight.empty()) {
    key(e, "class_weight") << YAML::Flow << YAML::BeginMap;
    for (const auto& [c, w] : t.class_weight) e << YAML::Key << c << YAML::Value << num(w);
    e << YAML::EndMap;
  }
  put_schedule(e, t.schedule);
  if (const auto& es = t.early_stopping) {
    key(e, "early_stopping") << YAML::BeginMap;
    put_str(e, "monitor", es->monitor), put_name(e, "mode", spec::enum_name(spec::monitor_modes(), es->mode));
    put_int(e, "patience", es->patience), put_num(e, "min_delta", es->min_delta);
    put_bool(e, "restore_best_weights", es->restore_best_weights);
    put_opt(e, "baseline", es->baseline), put_int(e, "start_from_epoch", es->start_from_epoch);
    e << YAML::EndMap;
  } else {
    key(e, "early_stopping") << YAML::Null;
  }
  key(e, "checkpoint") << YAML::BeginMap;
  put_str(e, "monitor", t.checkpoint.monitor);
  put_name(e, "mode", spec::enum_name(spec::monitor_modes(), t.checkpoint.mode));
  put_bool(e, "every_epoch", t.checkpoint.every_epoch);
  e << YAML::EndMap << YAML::EndMap;
}

}  // namespace

std::string emit_config(const Config& c) {
  Emitter e;
  e.SetNullFormat(YAML::LowerNull);
  e << YAML::Comment(fmt::format("effective config of {} (every key explicit)", c.path.empty() ? "<config>" : c.path));
  e << YAML::BeginMap;
  key(e, "model") << YAML::BeginMap;
  if (c.model.init_from) put_str(e, "init_from", *c.model.init_from);
  else key(e, "init_from") << YAML::Null;
  key(e, "layers") << YAML::BeginSeq;
  for (const LayerSpec& l : c.model.layers) put_layer(e, l);
  e << YAML::EndSeq << YAML::EndMap;

  key(e, "data") << YAML::BeginMap;
  put_source(e, "train", c.data.train);
  put_source(e, "validation", c.data.validation);
  put_num(e, "validation_split", c.data.validation_split);
  put_source(e, "test", c.data.test);
  e << YAML::EndMap;

  put_train(e, c.train);
  key(e, "plan") << YAML::BeginMap;
  put_name(e, "fuse", spec::enum_name(spec::fuse_modes(), c.plan.fuse));
  put_name(e, "precision", spec::enum_name(spec::precisions(), c.plan.precision));
  put_name(e, "algo", spec::enum_name(spec::rnn_algos(), c.plan.algo));
  put_bool(e, "autotune", c.plan.autotune);
  if (!c.plan.cache.empty()) put_str(e, "cache", c.plan.cache);
  put_bool(e, "graphs", c.plan.graphs);
  put_name(e, "cpu", spec::enum_name(spec::cpu_rnns(), c.plan.cpu));
  e << YAML::EndMap;
  put_name(e, "device", spec::enum_name(spec::devices(), c.device));
  key(e, "output") << YAML::BeginMap;
  put_str(e, "dir", c.output.dir);
  if (c.output.tensorboard < 0) put_name(e, "tensorboard", "off");
  else if (c.output.tensorboard > 0) put_int(e, "tensorboard", c.output.tensorboard);
  e << YAML::EndMap << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace rnntrain
