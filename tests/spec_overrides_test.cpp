// Command-line overrides (key.path=value) and the effective-config round trip:
// parse_config(emit_config(c)) must give back an equal Config, field by field.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "spec/parse.h"
#include "optimizer_variants.h"
#include "test_util.h"

namespace rnntrain {
namespace {


const char* kBase = R"(model:
  layers:
    - {type: Input, shape: [null, 8]}
    - {type: LSTM, units: 16, return_sequences: true}
    - {type: Dense, units: 1}
train:
  epochs: 5
  optimizer: adam
)";

std::string error_of(const std::string& text, const std::vector<std::string>& overrides) {
  try {
    parse_config(text, "q.yaml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError for the overrides";
  return "";
}

TEST(Overrides, SetValuesAnywhereInTheTree) {
  const Config c = parse_config(kBase, "q.yaml",
                                {"train.epochs=3", "model.layers.1.units=64", "model.layers[2].activation=sigmoid",
                                 "train.optimizer.learning_rate=3e-4", "train.metrics=[mae, mse]",
                                 "data.train.path=x.h5", "train.early_stopping.patience=4", "device = cpu"});
  EXPECT_EQ(c.train.epochs, 3);
  EXPECT_EQ(c.model.layers[1].units, 64);
  EXPECT_EQ(c.model.layers[2].activation, Activation::Sigmoid);
  EXPECT_EQ(c.train.optimizer.kind, OptimizerKind::Adam) << "optimizer: adam became {type: adam, learning_rate: ...}";
  EXPECT_EQ(c.train.optimizer.learning_rate, 3e-4);
  ASSERT_EQ(c.train.metrics.size(), 2u);
  EXPECT_EQ(c.train.metrics[1].kind, MetricKind::MSE);
  ASSERT_TRUE(c.data.train.has_value()) << "data.train did not exist in the file: the override creates it";
  EXPECT_EQ(c.data.train->path, "x.h5");
  EXPECT_EQ(c.data.train->format, DataFormat::Hdf5);
  ASSERT_TRUE(c.train.early_stopping.has_value());
  EXPECT_EQ(c.train.early_stopping->patience, 4);
  EXPECT_EQ(c.device, Device::Cpu);
}

TEST(Overrides, ReplaceWholeSubtreesAndLaterOnesWin) {
  const Config c = parse_config(kBase, "q.yaml",
                                {"model.layers.1={type: GRU, units: 7, return_sequences: true}", "train.epochs=2",
                                 "train.epochs=9", "train.optimizer={type: sgd, momentum: 0.5}"});
  EXPECT_EQ(c.model.layers[1].kind, LayerKind::GRU);
  EXPECT_EQ(c.model.layers[1].units, 7);
  EXPECT_EQ(c.model.layers[1].name, "gru");
  EXPECT_EQ(c.train.epochs, 9);
  EXPECT_EQ(c.train.optimizer.kind, OptimizerKind::SGD);
  EXPECT_EQ(c.train.optimizer.learning_rate, 0.01) << "the SGD default applies to the replaced optimizer";
  EXPECT_EQ(c.train.optimizer.momentum, 0.5);
}

TEST(Overrides, MalformedPathsAreErrorsNamingTheOverride) {
  struct Case { std::string override_text, says; };
  const std::vector<Case> cases = {
      {"model.layers.7.units=3", "index 7 is out of range: model.layers has 3 entries (0 to 2)"},
      {"model.layers.first.units=3", "model.layers is a list; select an entry by its index"},
      {"train.epochs.max=3", "train.epochs is a single value (5), so it has no 'max' inside it"},
      {"train.epochs", "expected key.path=value"},
      {"=3", "the key path before '=' is empty"},
      {"train..epochs=3", "has an empty part"},
      {"train.metrics=[mae, mse", "the value is not valid YAML"},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of(kBase, {c.override_text});
    EXPECT_EQ(msg.rfind("override '" + c.override_text + "': ", 0), 0u) << msg;
    EXPECT_HAS(msg, c.says);
  }
}

TEST(Overrides, ErrorsInOverriddenValuesNameTheOverride) {
  const std::string bad = error_of(kBase, {"model.layers.1.units=sixty"});
  EXPECT_EQ(bad.rfind("override 'model.layers.1.units=sixty': model.layers[1].units: expected a positive integer", 0), 0u) << bad;
  const std::string unknown = error_of(kBase, {"train.optimiser.learning_rate=0.1"});
  EXPECT_HAS(unknown, "override 'train.optimiser.learning_rate=0.1': train.optimiser: train has no key 'optimiser'");
  EXPECT_HAS(unknown, "did you mean 'optimizer'?");
  const std::string shape = error_of(kBase, {"model.layers.1.return_sequences=false", "model.layers.2={type: LSTM, units: 3}"});
  EXPECT_HAS(shape, "override 'model.layers.2={type: LSTM, units: 3}': model.layers[2]: ");
  EXPECT_HAS(shape, "return_sequences");
  // An error in the file itself still points into the file.
  const std::string file = error_of(std::string(kBase) + "device: gpu\n", {"train.epochs=2"});
  EXPECT_EQ(file.rfind("q.yaml:9:9: device: unknown device 'gpu'", 0), 0u) << file;
}

// ---- round trip -------------------------------------------------------------------------------

const char* kRichFeatures = R"(model:
  init_from: runs/old/best.h5
  layers:
    - {type: Input, shape: [null, 6], name: features}
    - {type: Masking, mask_value: -1.5}
    - type: LSTM
      units: 12
      activation: relu
      recurrent_activation: hard_sigmoid_keras2
      use_bias: false
      return_sequences: true
      go_backwards: true
      unit_forget_bias: false
      dropout: 0.25
      recurrent_dropout: 0.125
      kernel_initializer: {type: random_uniform, minval: -0.2, maxval: 0.3}
      recurrent_initializer: {type: orthogonal, gain: 0.7}
      bias_initializer: {type: constant, value: 0.1}
    - {type: GRU, units: 9, reset_after: false, return_sequences: true, recurrent_activation: hard_sigmoid,
       kernel_initializer: he_normal, recurrent_initializer: glorot_normal, bias_initializer: ones}
    - {type: Dropout, rate: 0.3}
    - type: Bidirectional
      merge_mode: sum
      layer: {type: SimpleRNN, units: 5, return_sequences: true, activation: linear, kernel_initializer: lecun_uniform,
              recurrent_initializer: {type: random_normal, mean: 0.5, stddev: 0.01}, name: inner_rnn}
    - {type: Bidirectional, merge_mode: ave, layer: {type: GRU, units: 4, return_sequences: true, go_backwards: true}}
    - {type: TimeDistributed, layer: {type: Dense, units: 3, activation: relu, use_bias: false, kernel_initializer: he_uniform}}
    - {type: Bidirectional, merge_mode: mul, layer: {type: LSTM, units: 3}}
    - {type: Dense, units: 4, activation: softmax, name: probs, bias_initializer: {type: random_normal, stddev: 0.2}}
data:
  train: {path: data/train.hdf5, inputs: feats, targets: labels, lengths: len}
  validation: {format: csv, path: data/series.csv, window: 12, horizon: 2, stride: 3, features: [a, b], targets: b, scaling: minmax}
  test: {format: synthetic, task: parity, samples: 100, timesteps: 7, seed: 18446744073709551615}
train:
  epochs: 7
  batch_size: 3
  seed: 0
  shuffle: false
  steps_per_epoch: 11
  threads: 2
  optimizer: {type: sgd, learning_rate: 0.3, momentum: 0.9, nesterov: true, weight_decay: 0.001, clipvalue: 0.5}
  loss: {type: huber, delta: 2.5}
  metrics: [mae, accuracy, perplexity]
  schedule: {type: exponential, decay_steps: 100, decay_rate: 0.5, staircase: true}
  early_stopping: {monitor: val_mae, mode: min, patience: 4, min_delta: 0.001, restore_best_weights: true,
                   baseline: 0.75, start_from_epoch: 2}
  checkpoint: {monitor: accuracy, mode: max, every_epoch: false}
plan: {fuse: never, precision: auto, algo: persist_static, autotune: true, cache: /tmp/at.json}
device: cuda
output: {dir: runs/rich}
)";

const char* kRichTokens = R"(model:
  layers:
    - {type: Input, shape: [40]}
    - {type: Embedding, input_dim: 500, output_dim: 16, mask_zero: true,
       embeddings_initializer: {type: random_normal, mean: 0.0, stddev: 0.3}}
    - {type: GRU, units: 8, return_sequences: true}
    - {type: TimeDistributed, layer: {type: Dense, units: 500}}
data:
  train: {format: text, path: corpus.txt, seq_len: 40}
  validation: {format: npy, inputs: vx.npy, targets: vy.npy, lengths: vl.npy}
  test: {path: test.npz, inputs: a, targets: b}
train:
  optimizer: {type: rmsprop, learning_rate: 0.0003, rho: 0.8, momentum: 0.1, epsilon: 1e-6, centered: true, global_clipnorm: 1.0}
  loss: {type: sparse_categorical_crossentropy, from_logits: true, label_smoothing: 0.1}
  metrics: [sparse_categorical_accuracy]
  schedule: {type: cosine, warmup_steps: 10, decay_steps: 1000, alpha: 0.05}
)";

void expect_same_init(const Initializer& a, const Initializer& b, const std::string& what) {
  EXPECT_EQ(a.kind, b.kind) << what;
  EXPECT_EQ(a.a, b.a) << what;
  EXPECT_EQ(a.b, b.b) << what;
}

void expect_same_layer(const LayerSpec& a, const LayerSpec& b) {
  const std::string n = a.name;
  EXPECT_EQ(a.kind, b.kind) << n;
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.shape, b.shape) << n;
  EXPECT_EQ(a.input_dim, b.input_dim) << n;
  EXPECT_EQ(a.output_dim, b.output_dim) << n;
  EXPECT_EQ(a.mask_zero, b.mask_zero) << n;
  expect_same_init(a.embeddings_initializer, b.embeddings_initializer, n + " embeddings_initializer");
  EXPECT_EQ(a.mask_value, b.mask_value) << n;
  EXPECT_EQ(a.units, b.units) << n;
  EXPECT_EQ(a.activation, b.activation) << n;
  EXPECT_EQ(a.recurrent_activation, b.recurrent_activation) << n;
  EXPECT_EQ(a.use_bias, b.use_bias) << n;
  EXPECT_EQ(a.return_sequences, b.return_sequences) << n;
  EXPECT_EQ(a.go_backwards, b.go_backwards) << n;
  EXPECT_EQ(a.reset_after, b.reset_after) << n;
  EXPECT_EQ(a.unit_forget_bias, b.unit_forget_bias) << n;
  EXPECT_EQ(a.dropout, b.dropout) << n;
  EXPECT_EQ(a.recurrent_dropout, b.recurrent_dropout) << n;
  expect_same_init(a.kernel_initializer, b.kernel_initializer, n + " kernel_initializer");
  expect_same_init(a.recurrent_initializer, b.recurrent_initializer, n + " recurrent_initializer");
  expect_same_init(a.bias_initializer, b.bias_initializer, n + " bias_initializer");
  EXPECT_EQ(a.rate, b.rate) << n;
  EXPECT_EQ(a.merge_mode, b.merge_mode) << n;
  ASSERT_EQ(a.inner != nullptr, b.inner != nullptr) << n;
  if (a.inner) expect_same_layer(*a.inner, *b.inner);
}

void expect_same_source(const std::optional<DataSource>& a, const std::optional<DataSource>& b, const char* what) {
  ASSERT_EQ(a.has_value(), b.has_value()) << what;
  if (!a) return;
  EXPECT_EQ(a->format, b->format) << what;
  EXPECT_EQ(a->path, b->path) << what;
  EXPECT_EQ(a->inputs, b->inputs) << what;
  EXPECT_EQ(a->targets, b->targets) << what;
  EXPECT_EQ(a->lengths, b->lengths) << what;
  EXPECT_EQ(a->sample_weight, b->sample_weight) << what;
  EXPECT_EQ(a->sequence_id, b->sequence_id) << what;
  EXPECT_EQ(a->window, b->window) << what;
  EXPECT_EQ(a->horizon, b->horizon) << what;
  EXPECT_EQ(a->stride, b->stride) << what;
  EXPECT_EQ(a->features, b->features) << what;
  EXPECT_EQ(a->target_columns, b->target_columns) << what;
  EXPECT_EQ(a->scaling, b->scaling) << what;
  EXPECT_EQ(a->seq_len, b->seq_len) << what;
  EXPECT_EQ(a->task, b->task) << what;
  EXPECT_EQ(a->samples, b->samples) << what;
  EXPECT_EQ(a->timesteps, b->timesteps) << what;
  EXPECT_EQ(a->seed, b->seed) << what;
}

// Every field but the source locations (they point into different texts).
void expect_same(const Config& a, const Config& b) {
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.model.init_from, b.model.init_from);
  ASSERT_EQ(a.model.layers.size(), b.model.layers.size());
  for (size_t i = 0; i < a.model.layers.size(); ++i) expect_same_layer(a.model.layers[i], b.model.layers[i]);
  expect_same_source(a.data.train, b.data.train, "data.train");
  expect_same_source(a.data.validation, b.data.validation, "data.validation");
  expect_same_source(a.data.test, b.data.test, "data.test");
  EXPECT_EQ(a.data.validation_split, b.data.validation_split);
  const TrainSpec &t = a.train, &u = b.train;
  EXPECT_EQ(t.epochs, u.epochs);
  EXPECT_EQ(t.batch_size, u.batch_size);
  EXPECT_EQ(t.seed, u.seed);
  EXPECT_EQ(t.shuffle, u.shuffle);
  EXPECT_EQ(t.steps_per_epoch, u.steps_per_epoch);
  EXPECT_EQ(t.threads, u.threads);
  const OptimizerSpec &o = t.optimizer, &p = u.optimizer;
  EXPECT_EQ(o.kind, p.kind);
  EXPECT_EQ(o.learning_rate, p.learning_rate);
  EXPECT_EQ(o.momentum, p.momentum);
  EXPECT_EQ(o.nesterov, p.nesterov);
  EXPECT_EQ(o.beta_1, p.beta_1);
  EXPECT_EQ(o.beta_2, p.beta_2);
  EXPECT_EQ(o.epsilon, p.epsilon);
  EXPECT_EQ(o.amsgrad, p.amsgrad);
  EXPECT_EQ(o.weight_decay, p.weight_decay);
  EXPECT_EQ(o.rho, p.rho);
  EXPECT_EQ(o.centered, p.centered);
  EXPECT_EQ(o.initial_accumulator_value, p.initial_accumulator_value);
  EXPECT_EQ(o.clipnorm, p.clipnorm);
  EXPECT_EQ(o.clipvalue, p.clipvalue);
  EXPECT_EQ(o.global_clipnorm, p.global_clipnorm);
  EXPECT_EQ(t.loss.kind, u.loss.kind);
  EXPECT_EQ(t.loss.from_logits, u.loss.from_logits);
  EXPECT_EQ(t.loss.delta, u.loss.delta);
  EXPECT_EQ(t.loss.label_smoothing, u.loss.label_smoothing);
  ASSERT_EQ(t.metrics.size(), u.metrics.size());
  for (size_t i = 0; i < t.metrics.size(); ++i) {
    EXPECT_EQ(t.metrics[i].kind, u.metrics[i].kind);
    EXPECT_EQ(t.metrics[i].name, u.metrics[i].name);
    EXPECT_EQ(t.metrics[i], u.metrics[i]) << "a setting of metric " << t.metrics[i].name;
  }
  const ScheduleSpec &s = t.schedule, &r = u.schedule;
  EXPECT_EQ(s.kind, r.kind);
  EXPECT_EQ(s.decay_steps, r.decay_steps);
  EXPECT_EQ(s.decay_rate, r.decay_rate);
  EXPECT_EQ(s.staircase, r.staircase);
  EXPECT_EQ(s.warmup_steps, r.warmup_steps);
  EXPECT_EQ(s.alpha, r.alpha);
  EXPECT_EQ(s.step_size, r.step_size);
  EXPECT_EQ(s.gamma, r.gamma);
  EXPECT_EQ(s.monitor, r.monitor);
  EXPECT_EQ(s.factor, r.factor);
  EXPECT_EQ(s.patience, r.patience);
  EXPECT_EQ(s.min_delta, r.min_delta);
  EXPECT_EQ(s.cooldown, r.cooldown);
  EXPECT_EQ(s.min_lr, r.min_lr);
  EXPECT_EQ(s.end_learning_rate, r.end_learning_rate);
  EXPECT_EQ(s.power, r.power);
  EXPECT_EQ(s.cycle, r.cycle);
  EXPECT_EQ(s.boundaries, r.boundaries);
  EXPECT_EQ(s.values, r.values);
  EXPECT_EQ(s.t_mul, r.t_mul);
  EXPECT_EQ(s.m_mul, r.m_mul);
  ASSERT_EQ(t.early_stopping.has_value(), u.early_stopping.has_value());
  if (t.early_stopping) {
    const EarlyStoppingSpec &e = *t.early_stopping, &f = *u.early_stopping;
    EXPECT_EQ(e.monitor, f.monitor);
    EXPECT_EQ(e.mode, f.mode);
    EXPECT_EQ(e.patience, f.patience);
    EXPECT_EQ(e.min_delta, f.min_delta);
    EXPECT_EQ(e.restore_best_weights, f.restore_best_weights);
    EXPECT_EQ(e.baseline, f.baseline);
    EXPECT_EQ(e.start_from_epoch, f.start_from_epoch);
  }
  EXPECT_EQ(t.class_weight, u.class_weight);
  EXPECT_EQ(t.checkpoint.monitor, u.checkpoint.monitor);
  EXPECT_EQ(t.checkpoint.mode, u.checkpoint.mode);
  EXPECT_EQ(t.checkpoint.every_epoch, u.checkpoint.every_epoch);
  EXPECT_EQ(a.plan.fuse, b.plan.fuse);
  EXPECT_EQ(a.plan.precision, b.plan.precision);
  EXPECT_EQ(a.plan.algo, b.plan.algo);
  EXPECT_EQ(a.plan.autotune, b.plan.autotune);
  EXPECT_EQ(a.plan.cache, b.plan.cache);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.output.dir, b.output.dir);
}

void expect_round_trip(const std::string& text, const std::vector<std::string>& overrides = {}) {
  const Config c = parse_config(text, "rich.yaml", overrides);
  const std::string emitted = emit_config(c);
  Config back;
  try {
    back = parse_config(emitted, "rich.yaml");
  } catch (const ConfigError& e) {
    FAIL() << "the emitted config does not parse: " << e.what() << "\n" << emitted;
  }
  SCOPED_TRACE(emitted);
  expect_same(c, back);
  EXPECT_EQ(emit_config(back), emitted) << "emitting is not stable";
}

TEST(RoundTrip, RichConfigsComeBackEqual) {
  expect_round_trip(kRichFeatures);
  expect_round_trip(kRichTokens);
}

TEST(RoundTrip, EveryOptimizerLossAndScheduleComesBackEqual) {
  expect_round_trip(kRichTokens, {"train.optimizer={type: adam, beta_1: 0.8, beta_2: 0.99, epsilon: 1e-8, amsgrad: true, clipnorm: 2}",
                                  "train.loss={type: binary_crossentropy, from_logits: true}",
                                  "train.schedule={type: step, step_size: 3, gamma: 0.5}"});
  expect_round_trip(kRichTokens, {"train.optimizer={type: adamw, weight_decay: 0.01}",
                                  "train.loss={type: categorical_crossentropy, label_smoothing: 0.2}",
                                  "train.schedule={type: reduce_on_plateau, monitor: loss, factor: 0.5, patience: 2, "
                                  "min_delta: 0.01, cooldown: 1, min_lr: 1e-6}",
                                  "data.validation=null", "data.validation_split=0.2"});
  expect_round_trip(kRichTokens, {"train.optimizer={type: adagrad, initial_accumulator_value: 0.2, epsilon: 1e-5}",
                                  "train.loss=mae", "train.schedule=constant", "data=null"});
  for (const char* schedule : {"{type: polynomial, decay_steps: 50, end_learning_rate: 1e-5, power: 0.5, cycle: true}",
                               "{type: inverse_time, decay_steps: 7, decay_rate: 0.3, staircase: true}",
                               "{type: piecewise_constant, boundaries: [10, 300], values: [0.01, 0.005, 1.5e-4]}",
                               "{type: cosine_restarts, decay_steps: 20, t_mul: 1.5, m_mul: 0.8, alpha: 0.01}"})
    expect_round_trip(kRichTokens, {std::string("train.schedule=") + schedule});
}

TEST(RoundTrip, MetricsWithSettingsComeBackEqual) {
  expect_round_trip(kRichTokens, {"train.loss=categorical_crossentropy",
                                  "train.metrics=[accuracy, {type: precision, thresholds: 0.25, class_id: 1, name: p1}, "
                                  "recall, {type: auc, curve: PR, summation_method: majoring, num_thresholds: 33, "
                                  "multi_label: true, from_logits: true}, {type: f1_score, average: micro}, "
                                  "{type: fbeta_score, beta: 2, threshold: 0.6, average: weighted}, "
                                  "{type: sparse_top_k_categorical_accuracy, k: 3}]",
                                  "train.class_weight={0: 0.25, 3: 2}"});
}

TEST(RoundTrip, LabelledSequenceCsvSourcesComeBackEqual) {
  expect_round_trip(kRichTokens, {"data.train={format: csv_sequences, path: s.csv, id: sid, features: [a, b], "
                                  "targets: label, scaling: standard}",
                                  "data.validation={format: csv_sequences, path: w.csv, targets: [y]}"});
}

TEST(RoundTrip, EveryOptimizerDescriptorAndKeyComesBackEqual) {
  for (const auto& [name, o] : rnntrain::testing::optimizer_variants()) {
    SCOPED_TRACE(name);
    const OptimizerInfo& info = optimizer_info(o.kind);
    std::string text = fmt::format("train.optimizer={{type: {}, learning_rate: {}, weight_decay: {}", info.name,
                                   o.learning_rate, o.weight_decay);
    for (int i = 0; i < info.num_keys; ++i) {
      const OptimizerKey& k = info.keys[i];
      text += k.flag ? fmt::format(", {}: {}", k.name, o.*k.flag) : fmt::format(", {}: {}", k.name, o.*k.number);
    }
    const Config c = parse_config(kRichTokens, "rich.yaml", {text + "}"});
    EXPECT_EQ(c.train.optimizer.kind, o.kind);
    for (int i = 0; i < info.num_keys; ++i) {
      const OptimizerKey& k = info.keys[i];
      if (k.flag) EXPECT_EQ(c.train.optimizer.*k.flag, o.*k.flag) << k.name;
      else EXPECT_EQ(c.train.optimizer.*k.number, o.*k.number) << k.name;
      EXPECT_HAS(emit_config(c), fmt::format("{}: ", k.name));
    }
    expect_round_trip(kRichTokens, {text + "}"});
  }
}

TEST(RoundTrip, EveryLossDescriptorAndKeyComesBackEqual) {
  for (const auto& [name, l] : rnntrain::testing::loss_variants()) {
    SCOPED_TRACE(name);
    const LossInfo& info = loss_info(l.kind);
    std::string text = fmt::format("train.loss={{type: {}", info.name);
    for (int i = 0; i < info.num_keys; ++i) {
      const LossKey& k = info.keys[i];
      text += k.flag ? fmt::format(", {}: {}", k.name, l.*k.flag) : fmt::format(", {}: {}", k.name, l.*k.number);
    }
    const Config c = parse_config(kRichTokens, "rich.yaml", {text + "}"});
    EXPECT_EQ(c.train.loss, l);
    expect_round_trip(kRichTokens, {text + "}"});
    if (info.alias)
      EXPECT_EQ(parse_config(kRichTokens, "rich.yaml", {std::string("train.loss=") + info.alias}).train.loss.kind, l.kind);
  }
}

// Every cell (spec/cells.h), its flags and activations, alone and inside a Bidirectional: parsed,
// emitted with exactly the keys the cell has, and parsed back equal.
TEST(RoundTrip, EveryCellAndFlagComesBackEqual) {
  for (const auto& [name, layer] : rnntrain::testing::cell_variants()) {
    SCOPED_TRACE(name);
    for (const std::string& entry : {layer, "{type: Bidirectional, layer: " + layer + "}"}) {
      const std::string text = "model:\n  layers:\n    - {type: Input, shape: [null, 4]}\n    - " + entry + "\n";
      const Config c = parse_config(text, "cell.yaml");
      const LayerSpec& l = c.model.layers[1].inner ? *c.model.layers[1].inner : c.model.layers[1];
      const CellTraits& cell = cell_traits(l.kind);
      EXPECT_EQ(layer.find(std::string("type: ") + cell.keras_class + ","), 1u);
      const std::string emitted = emit_config(c);
      EXPECT_EQ(emitted.find("recurrent_activation:") != std::string::npos, cell.recurrent_activation) << emitted;
      for (const CellFlag& f : cell.flags) EXPECT_HAS(emitted, fmt::format("{}: {}", f.name, l.*f.field));
      for (const CellTraits& other : cells())
        for (const CellFlag& f : other.flags)
          if (other.kind != cell.kind) EXPECT_EQ(emitted.find(f.name), std::string::npos) << f.name << " in\n" << emitted;
      expect_round_trip(text);
    }
  }
}

TEST(RoundTrip, EveryKeyIsWritten) {
  const std::string out = emit_config(parse_config(kBase, "q.yaml"));
  for (const char* key : {"init_from: null", "name: \"lstm\"", "activation: tanh", "recurrent_activation: sigmoid",
                          "use_bias: true", "go_backwards: false", "unit_forget_bias: true", "recurrent_dropout: 0.0",
                          "kernel_initializer: glorot_uniform", "recurrent_initializer: {type: orthogonal, gain: 1.0}",
                          "bias_initializer: zeros", "activation: linear", "train: null", "validation_split: 0.0",
                          "seed: 42", "steps_per_epoch: 0", "learning_rate: 0.001", "epsilon: 1e-07",
                          "clipnorm: null", "type: mse", "metrics: []", "type: constant", "early_stopping: null",
                          "every_epoch: true", "fuse: auto", "precision: fp32", "algo: standard", "autotune: false",
                          "device: auto", "dir: \"runs/run\""})
    EXPECT_HAS(out, key);
}

}  // namespace
}  // namespace rnntrain
