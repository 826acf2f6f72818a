// The config language as users meet it: Keras defaults, and one test per class of error, each
// checking that the message starts with file:line:col and names the key path and the fix.
// Overrides and round trips are in spec_overrides_test.cpp, hostile inputs in spec_robust_test.cpp.
#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "spec/parse.h"
#include "test_util.h"

namespace rnntrain {
namespace {

const char* kHead = R"(model:
  layers:
    - {type: Input, shape: [null, 8]}
)";

// "line:col" (1-based) of the first occurrence of `needle` in `text`.
std::string where(const std::string& text, const std::string& needle) {
  const size_t pos = text.find(needle);
  if (pos == std::string::npos) return "<needle not in text>";
  int line = 1, col = 1;
  for (size_t i = 0; i < pos; ++i) {
    if (text[i] == '\n') ++line, col = 1;
    else ++col;
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

// Parses `text` and returns the ConfigError message ("" and a failure when it parses).
std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(text, "q.yaml", overrides);
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a ConfigError, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected a ConfigError for:\n" << text;
  return "";
}

#define EXPECT_STARTS(msg, part) EXPECT_EQ((msg).rfind(part, 0), 0u) << "expected to start with \"" << (part) << "\": " << (msg)

TEST(Defaults, LayersTakeKerasDefaults) {
  const Config c = parse_config(std::string(kHead) + R"(    - {type: LSTM, units: 4, return_sequences: true}
    - {type: GRU, units: 4, return_sequences: true}
    - {type: SimpleRNN, units: 4}
    - {type: Dense, units: 2}
)", "configs/q.yaml");
  EXPECT_EQ(c.path, "configs/q.yaml");
  ASSERT_EQ(c.model.layers.size(), 5u);
  for (int i : {1, 2, 3}) {
    const LayerSpec& l = c.model.layers[i];
    EXPECT_EQ(l.activation, Activation::Tanh) << l.name;
    EXPECT_EQ(l.recurrent_activation, Activation::Sigmoid) << l.name;
    EXPECT_TRUE(l.use_bias) << l.name;
    EXPECT_FALSE(l.go_backwards) << l.name;
    EXPECT_EQ(l.dropout, 0.0) << l.name;
    EXPECT_EQ(l.recurrent_dropout, 0.0) << l.name;
    EXPECT_EQ(l.kernel_initializer.kind, InitKind::GlorotUniform) << l.name;
    EXPECT_EQ(l.recurrent_initializer.kind, InitKind::Orthogonal) << l.name;
    EXPECT_EQ(l.recurrent_initializer.a, 1.0) << l.name << ": orthogonal gain";
    EXPECT_EQ(l.bias_initializer.kind, InitKind::Zeros) << l.name;
  }
  EXPECT_TRUE(c.model.layers[1].unit_forget_bias);
  EXPECT_TRUE(c.model.layers[2].reset_after);  // Keras 3 GRU
  EXPECT_FALSE(c.model.layers[3].return_sequences);
  EXPECT_EQ(c.model.layers[4].activation, Activation::Linear);  // Dense
  EXPECT_FALSE(c.model.init_from.has_value());
}

TEST(Defaults, SectionsTakeKerasDefaults) {
  const Config c = parse_config(std::string(kHead) + "    - {type: Dense, units: 1}\n", "q.yaml");
  EXPECT_EQ(c.train.epochs, 1);
  EXPECT_EQ(c.train.batch_size, 32);
  EXPECT_EQ(c.train.seed, 42u);
  EXPECT_TRUE(c.train.shuffle);
  EXPECT_EQ(c.train.steps_per_epoch, 0);
  EXPECT_EQ(c.train.optimizer.kind, OptimizerKind::Adam);
  EXPECT_EQ(c.train.optimizer.learning_rate, 0.001);
  EXPECT_EQ(c.train.optimizer.epsilon, 1e-7);
  EXPECT_EQ(c.train.loss.kind, LossKind::MSE);
  EXPECT_TRUE(c.train.metrics.empty());
  EXPECT_EQ(c.train.schedule.kind, ScheduleKind::Constant);
  EXPECT_FALSE(c.train.early_stopping.has_value());
  EXPECT_EQ(c.train.checkpoint.monitor, "val_loss");
  EXPECT_FALSE(c.data.train.has_value()) << "data.train is optional at parse time (eval/predict configs)";
  EXPECT_EQ(c.data.validation_split, 0.0);
  EXPECT_EQ(c.device, Device::Auto);
  EXPECT_EQ(c.plan.fuse, FuseMode::Auto);
  EXPECT_EQ(c.plan.precision, Precision::Fp32) << "strict FP32 unless the config asks";
  EXPECT_EQ(c.plan.algo, RnnAlgo::Standard);
  EXPECT_FALSE(c.plan.autotune);
  EXPECT_EQ(c.output.dir, "runs/run");
}

TEST(Defaults, OptimizersTakeKeras3Defaults) {
  auto opt = [](const std::string& o) {
    return parse_config(std::string(kHead) + "    - {type: Dense, units: 1}\ntrain: {optimizer: " + o + "}\n", "q.yaml").train.optimizer;
  };
  EXPECT_EQ(opt("sgd").learning_rate, 0.01);
  EXPECT_EQ(opt("sgd").momentum, 0.0);
  EXPECT_EQ(opt("adamw").weight_decay, 0.004);
  EXPECT_EQ(opt("adamw").learning_rate, 0.001);
  EXPECT_EQ(opt("adam").weight_decay, 0.0);
  EXPECT_EQ(opt("rmsprop").rho, 0.9);
  EXPECT_EQ(opt("rmsprop").epsilon, 1e-7);
  EXPECT_EQ(opt("adagrad").initial_accumulator_value, 0.1);
  EXPECT_EQ(opt("adagrad").epsilon, 1e-7);
  EXPECT_EQ(opt("{type: sgd, momentum: 0.9, nesterov: true}").momentum, 0.9);
  EXPECT_EQ(opt("{learning_rate: 0.5}").kind, OptimizerKind::Adam) << "a map without type is the default optimizer";
  EXPECT_FALSE(opt("adam").clipnorm.has_value());
  EXPECT_EQ(*opt("{type: adam, global_clipnorm: 1.5}").global_clipnorm, 1.5);
}

TEST(Defaults, InitializersTakeKerasParameters) {
  const Config c = parse_config(std::string(kHead) + R"(    - type: LSTM
      units: 4
      kernel_initializer: random_uniform
      recurrent_initializer: {type: orthogonal, gain: 2.0}
      bias_initializer: {type: constant, value: 0.5}
    - {type: Dense, units: 1, kernel_initializer: {type: random_normal, stddev: 0.1}}
)", "q.yaml");
  const LayerSpec& l = c.model.layers[1];
  EXPECT_EQ(l.kernel_initializer.kind, InitKind::RandomUniform);
  EXPECT_EQ(l.kernel_initializer.a, -0.05);
  EXPECT_EQ(l.kernel_initializer.b, 0.05);
  EXPECT_EQ(l.recurrent_initializer.a, 2.0);
  EXPECT_EQ(l.bias_initializer.kind, InitKind::Constant);
  EXPECT_EQ(l.bias_initializer.a, 0.5);
  const Initializer& n = c.model.layers[2].kernel_initializer;
  EXPECT_EQ(n.kind, InitKind::RandomNormal);
  EXPECT_EQ(n.a, 0.0) << "mean";
  EXPECT_EQ(n.b, 0.1) << "stddev";
}

TEST(Defaults, MetricNamesAreCanonicalAndLossAliasesResolve) {
  const Config c = parse_config(std::string(kHead) + "    - {type: Dense, units: 1}\n" +
                                    "train: {loss: mean_absolute_error, metrics: [mean_absolute_error, acc, mse]}\n",
                                "q.yaml");
  EXPECT_EQ(c.train.loss.kind, LossKind::MAE);
  ASSERT_EQ(c.train.metrics.size(), 3u);
  EXPECT_EQ(c.train.metrics[0].name, "mae");
  EXPECT_EQ(c.train.metrics[0].kind, MetricKind::MAE);
  EXPECT_EQ(c.train.metrics[1].name, "accuracy");
  EXPECT_EQ(c.train.metrics[1].kind, MetricKind::Accuracy);
  EXPECT_EQ(c.train.metrics[2].name, "mse");
}

// What Keras and `rnntrain import` accept, configs accept: Keras' class names and short names for
// optimizers, losses, metrics, schedules, layers, initializers; written back in the config's spelling.
TEST(Defaults, KerasClassNamesAreAcceptedEverywhereAKerasNameIs) {
  const std::string text = R"(model:
  layers:
    - {type: InputLayer, shape: [null, 8]}
    - {type: lstm, units: 4, return_sequences: true, kernel_initializer: GlorotUniform, recurrent_initializer: Orthogonal}
    - {type: SimpleRNN, units: 3}
    - {type: Dense, units: 1, activation: sigmoid}
train:
  optimizer: {type: Adam, learning_rate: 0.01}
  loss: BinaryCrossentropy
  metrics: [AUC, BinaryAccuracy, {type: Precision, thresholds: 0.3, name: p30}, RootMeanSquaredError, R2Score]
  schedule: {type: ExponentialDecay, decay_steps: 100}
  early_stopping: {monitor: val_auc, patience: 2}
)";
  const Config c = parse_config(text, "q.yaml");
  EXPECT_EQ(c.model.layers[1].kind, LayerKind::LSTM);
  EXPECT_EQ(c.model.layers[1].kernel_initializer.kind, InitKind::GlorotUniform);
  EXPECT_EQ(c.train.optimizer.kind, OptimizerKind::Adam);
  EXPECT_EQ(c.train.loss.kind, LossKind::BinaryCrossentropy);
  ASSERT_EQ(c.train.metrics.size(), 5u);
  EXPECT_EQ(c.train.metrics[0].name, "auc");
  EXPECT_EQ(c.train.metrics[1].name, "binary_accuracy");
  EXPECT_EQ(c.train.metrics[2].name, "p30");
  EXPECT_EQ(c.train.metrics[3].name, "root_mean_squared_error");
  EXPECT_EQ(c.train.metrics[4].kind, MetricKind::R2Score);
  EXPECT_EQ(c.train.schedule.kind, ScheduleKind::Exponential);
  const std::string back = emit_config(c);
  for (const char* spelt : {"type: adam", "type: binary_crossentropy", "auc", "type: exponential", "type: LSTM",
                            "glorot_uniform"})
    EXPECT_NE(back.find(spelt), std::string::npos) << spelt << " not in\n" << back;
  for (const auto& [loss, kind] : std::vector<std::pair<std::string, LossKind>>{
           {"bce", LossKind::BinaryCrossentropy}, {"MSE", LossKind::MSE}, {"MeanSquaredLogarithmicError", LossKind::MSLE},
           {"LogCosh", LossKind::LogCosh}, {"SparseCategoricalCrossentropy", LossKind::SparseCategoricalCrossentropy}})
    EXPECT_EQ(parse_config(text, "q.yaml", {"train.loss=" + loss}).train.loss.kind, kind) << loss;
  EXPECT_EQ(parse_config(text, "q.yaml", {"train.optimizer.type=RMSprop"}).train.optimizer.kind, OptimizerKind::RMSprop);
  EXPECT_NE(error_of(text, {"train.loss=BinaryCrossEntropie"}).find("did you mean"), std::string::npos);
}

TEST(Defaults, MetricsTakeKerasSettingsAndANameInAMap) {
  const Config c = parse_config(std::string(kHead) + "    - {type: Dense, units: 3}\n" +
                                    "train: {metrics: [auc, {type: auc, curve: pr, name: pr_auc}, f1_score,\n"
                                    "  {type: precision, thresholds: 0.2, class_id: 2}, {type: top_k_categorical_accuracy, k: 2}]}\n",
                                "q.yaml");
  ASSERT_EQ(c.train.metrics.size(), 5u);
  EXPECT_EQ(c.train.metrics[0].name, "auc");
  EXPECT_EQ(c.train.metrics[0].curve, AucCurve::ROC);
  EXPECT_EQ(c.train.metrics[0].num_thresholds, 200);  // Keras' defaults
  EXPECT_EQ(c.train.metrics[1].name, "pr_auc");
  EXPECT_EQ(c.train.metrics[1].curve, AucCurve::PR);
  EXPECT_EQ(c.train.metrics[2].average, FAverage::Macro);
  EXPECT_FALSE(c.train.metrics[2].threshold);
  EXPECT_EQ(c.train.metrics[3].threshold, 0.2);
  EXPECT_EQ(c.train.metrics[3].class_id, 2);
  EXPECT_EQ(c.train.metrics[4].k, 2);
  const Config w = parse_config(std::string(kHead) + "    - {type: Dense, units: 3}\n" +
                                    "train: {class_weight: {0: 0.5, 2: 4}}\ndata: {train: {inputs: x.npy, "
                                    "targets: y.npy, sample_weight: w.npy}}\n",
                                "q.yaml");
  EXPECT_EQ(w.train.class_weight, (std::map<int64_t, double>{{0, 0.5}, {2, 4.0}}));
  EXPECT_EQ(w.data.train->sample_weight, "w.npy");
}

// Every row of the data formats' table (spec/data_formats.h): its suffixes, in any case, imply it
// unless an earlier row lists them too (csv before csv_sequences), and a key only another format
// has is refused with that format named.
TEST(Defaults, EveryDataFormatOfTheTableIsReadBySuffixAndKeys) {
  for (const DataFormatInfo& f : kDataFormats) {
    for (const char* const* s = f.suffixes; *s; ++s) {
      std::string upper = std::string("runs.v2/train") + *s;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      const auto from = data_format_from_path(upper);
      ASSERT_TRUE(from) << upper;
      EXPECT_TRUE(data_format_takes(f.kind, upper)) << upper;
      const bool earlier = *from != f.kind;
      if (earlier) EXPECT_LT(static_cast<int>(*from), static_cast<int>(f.kind)) << upper;
    }
    EXPECT_FALSE(data_format_takes(f.kind, std::string("train") + (f.kind == DataFormat::Text ? ".csv" : ".txt")));
    const char* foreign = f.kind == DataFormat::Synthetic ? "seq_len" : "task";
    const std::string err = error_of(std::string(kHead) + "    - {type: Dense, units: 1}\ndata: {train: {format: " +
                                     f.name + ", " + foreign + ": 3}}\n");
    EXPECT_NE(err.find(std::string("has no key '") + foreign + "'"), std::string::npos) << f.name << ": " << err;
    EXPECT_NE(err.find(f.kind == DataFormat::Synthetic ? "text data" : "synthetic data"), std::string::npos)
        << f.name << ": " << err;
  }
  EXPECT_FALSE(data_format_from_path("train.parquet"));
  EXPECT_FALSE(data_format_from_path("h5"));
}

// Every row of the metrics' table (spec/metrics.h) is a config spelling: its name, each alias and its
// Keras class read as its kind and name the history column by the metric's name; a key of its own is
// accepted in a map and a key of another metric's is refused with the owner named.
TEST(Defaults, EveryMetricOfTheTableReadsByNameAliasAndKerasClass) {
  const std::string head = std::string(kHead) + "    - {type: Dense, units: 3}\n";
  for (const MetricInfo& m : kMetricInfos) {
    std::vector<std::string> spellings = {m.name};
    for (const char* const* a = m.aliases; *a; ++a) spellings.push_back(*a);
    if (m.keras_class) spellings.push_back(m.keras_class);
    for (const std::string& s : spellings) {
      const Config c = parse_config(head + "train: {metrics: [" + s + "]}\n", "q.yaml");
      ASSERT_EQ(c.train.metrics.size(), 1u) << s;
      EXPECT_EQ(c.train.metrics[0].kind, m.kind) << s;
      EXPECT_EQ(c.train.metrics[0].name, m.name) << s;
    }
    for (const char* const* k = m.keys; *k; ++k) {
      const std::map<std::string, std::string> valid = {
          {"curve", "PR"}, {"summation_method", "minoring"}, {"average", "micro"}, {"multi_label", "true"},
          {"from_logits", "true"}, {"class_aggregation", "uniform_average"}, {"thresholds", "0.3"},
          {"threshold", "0.3"}, {"beta", "2"}, {"k", "2"}, {"class_id", "1"}, {"num_thresholds", "50"},
          {"num_regressors", "1"}};
      ASSERT_TRUE(valid.count(*k)) << "the test has no valid value for key " << *k;
      EXPECT_NO_THROW(parse_config(head + "train: {metrics: [{type: " + m.name + ", " + *k + ": " + valid.at(*k) + "}]}\n",
                                   "q.yaml"))
          << m.name << " " << *k;
    }
    if (!*m.keys) {
      const std::string err = error_of(head + "train: {metrics: [{type: " + m.name + ", num_thresholds: 10}]}\n");
      EXPECT_NE(err.find("num_thresholds"), std::string::npos) << m.name << ": " << err;
      EXPECT_NE(err.find("auc"), std::string::npos) << m.name << ": " << err;
    }
  }
}

TEST(Errors, MetricSettingsAreCheckedByKind) {
  const std::string h = std::string(kHead) + "    - {type: Dense, units: 3}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train: {metrics: [auc, auc]}\n", "a metric named 'auc' is listed twice; give one another `name`"},
      {"train: {metrics: [{type: precision, k: 2}]}\n", "top_k_categorical_accuracy"},
      {"train: {metrics: [{type: auc, curve: ROCC}]}\n", "ROC"},
      {"train: {metrics: [{type: auc, num_thresholds: 1}]}\n", "num_thresholds"},
      {"train: {metrics: [{type: f1_score, threshold: 0}]}\n", "threshold"},
      {"train: {metrics: [{type: mae, name: err}]}\n", "name"},
      {"train: {metrics: [{type: auc, name: val_auc}]}\n", "history's own columns"},
      {"train: {metrics: [{type: auc, name: 'a,b'}]}\n", "letters, digits and _"},
  };
  const std::vector<std::pair<std::string, std::string>> weights = {
      {"train: {class_weight: {a: 1}}\n", "'a' is not a class index"},
      {"train: {class_weight: {1: -2}}\n", "train.class_weight.1"},
      {"train: {class_weight: [1, 2]}\n", "class index to weight"},
      {"data: {train: {format: csv, path: a.csv, window: 2, sample_weight: w.npy}}\n", "sample_weight"},
  };
  for (const auto& [text, says] : weights) {
    SCOPED_TRACE(text);
    EXPECT_HAS(error_of(h + text), says);
  }
  for (const auto& [text, says] : cases) {
    SCOPED_TRACE(text);
    const std::string msg = error_of(h + text);
    EXPECT_STARTS(msg, "q.yaml:");
    EXPECT_HAS(msg, "train.metrics[");
    EXPECT_HAS(msg, says);
  }
}

TEST(Defaults, DataFormatComesFromTheSuffixAndPathsStayAsWritten) {
  const Config c = parse_config(std::string(kHead) + "    - {type: Dense, units: 1}\n" + R"(data:
  train: {path: data/train.H5, lengths: len}
  validation: {path: ../val.npz}
  test: {inputs: x.npy, targets: y.npy}
)", "cfg/q.yaml");
  ASSERT_TRUE(c.data.train && c.data.validation && c.data.test);
  EXPECT_EQ(c.data.train->format, DataFormat::Hdf5);
  EXPECT_EQ(c.data.train->path, "data/train.H5");
  EXPECT_EQ(c.data.train->inputs, "x");
  EXPECT_EQ(c.data.train->targets, "y");
  EXPECT_EQ(c.data.train->lengths, "len");
  EXPECT_EQ(c.data.validation->format, DataFormat::Npz);
  EXPECT_EQ(c.data.validation->path, "../val.npz");
  EXPECT_EQ(c.data.test->format, DataFormat::Npy);
  EXPECT_EQ(c.data.test->inputs, "x.npy");
  EXPECT_EQ(c.data.test->targets, "y.npy");
}

TEST(Defaults, OptionalDataKeysStayEmptyForTheLoaders) {
  const Config c = parse_config(std::string(kHead) + "    - {type: Dense, units: 1}\n" + R"(data:
  train: {path: series.csv, window: 5, targets: [temp]}
  validation: {path: only_inputs.npy}
  test: {format: synthetic, task: classify}
)", "q.yaml");
  EXPECT_TRUE(c.data.train->features.empty()) << "csv without features: the loader picks them";
  EXPECT_EQ(c.data.train->target_columns, std::vector<std::string>{"temp"});
  EXPECT_EQ(c.data.train->horizon, 1);
  EXPECT_EQ(c.data.train->stride, 1);
  EXPECT_EQ(c.data.train->scaling, Scaling::None);
  EXPECT_EQ(c.data.validation->format, DataFormat::Npy);
  EXPECT_EQ(c.data.validation->inputs, "only_inputs.npy") << "npy path: is the inputs file";
  EXPECT_EQ(c.data.validation->targets, "") << "predict-only npy data has no targets";
  EXPECT_EQ(c.data.test->task, "classify") << "task names are the generator's to check";
  EXPECT_EQ(c.data.test->samples, 0) << "0 = the generator's default";
  EXPECT_EQ(c.data.test->timesteps, 0);
}

TEST(Defaults, LayersGetKerasStyleNames) {
  const Config c = parse_config(std::string(kHead) + R"(    - {type: LSTM, units: 4, return_sequences: true}
    - {type: Bidirectional, layer: {type: LSTM, units: 4, return_sequences: true}}
    - {type: LSTM, units: 4, return_sequences: true, name: lstm_2}
    - {type: Bidirectional, layer: {type: GRU, units: 4, return_sequences: true, name: fwd}}
    - {type: TimeDistributed, layer: {type: Dense, units: 3}}
    - {type: SimpleRNN, units: 4}
    - {type: Dropout, rate: 0.5}
    - {type: Dense, units: 2}
)", "q.yaml");
  std::vector<std::string> got;
  for (const LayerSpec& l : c.model.layers) {
    if (l.inner) got.push_back(l.inner->name);
    got.push_back(l.name);
  }
  // The wrapped layer is built before its wrapper (Keras order); user names are skipped.
  const std::vector<std::string> want = {"input_layer", "lstm", "lstm_1", "bidirectional", "lstm_2", "fwd",
                                         "bidirectional_1", "dense", "time_distributed", "simple_rnn", "dropout",
                                         "dense_1"};
  EXPECT_EQ(got, want);
}

TEST(Errors, WrongTypeNamesFileLineColumnAndKeyPath) {
  const std::string text = std::string(kHead) + "    - {type: LSTM, units: sixty}\n";
  const std::string msg = error_of(text);
  EXPECT_STARTS(msg, "q.yaml:" + where(text, "sixty") + ": model.layers[1].units: expected a positive integer, got \"sixty\"");
}

TEST(Errors, WrongTypesOfEveryKind) {
  struct Case { std::string text, at, path, says; };
  const std::string dense = "    - {type: Dense, units: 1}\n";
  const std::vector<Case> cases = {
      {"model:\n  layers: {a: 1}\n", "{a: 1}", "model.layers", "expected a list"},
      {std::string(kHead) + "    - {type: Dense, units: \"64\"}\n", "\"64\"", "model.layers[1].units", "got \"64\""},
      {std::string(kHead) + "    - {type: Dense, units: [64]}\n", "[64]", "model.layers[1].units", "got a list"},
      {std::string(kHead) + "    - {type: Dense, units: 1, use_bias: maybe}\n", "maybe", "model.layers[1].use_bias", "expected true or false"},
      {std::string(kHead) + dense + "train: 3\n", "3", "train", "expected a map"},
      {std::string(kHead) + dense + "train: {optimizer: {type: adam, learning_rate: fast}}\n", "fast", "train.optimizer.learning_rate", "expected a positive number"},
      {std::string(kHead) + dense + "train: {metrics: accuracy}\n", "accuracy", "train.metrics", "expected a list of metric names"},
      {std::string(kHead) + dense + "data: {train: {path: [a, b]}}\n", "[a, b]", "data.train.path", "expected a string"},
      {std::string(kHead) + dense + "data: {train: {format: csv, path: a.csv, window: 3, features: {a: 1}, targets: [a]}}\n", "{a: 1}", "data.train.features", "expected a list"},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of(c.text);
    EXPECT_STARTS(msg, "q.yaml:" + where(c.text, c.at) + ": " + c.path + ": ");
    EXPECT_HAS(msg, c.says);
  }
}

TEST(Errors, UnknownKeySuggestsTheClosestKey) {
  const std::string text = std::string(kHead) + "    - {type: LSTM, units: 64, recurent_dropout: 0.1}\n";
  const std::string msg = error_of(text);
  EXPECT_STARTS(msg, "q.yaml:" + where(text, "recurent") + ": model.layers[1].recurent_dropout: ");
  EXPECT_HAS(msg, "did you mean 'recurrent_dropout'?");
}

TEST(Errors, KeyOfAnotherLayerTypeSaysSo) {
  const std::string msg = error_of(std::string(kHead) + "    - {type: LSTM, units: 64, rate: 0.1}\n");
  EXPECT_HAS(msg, "model.layers[1].rate: LSTM has no key 'rate'");
  EXPECT_HAS(msg, "Dropout");
  const std::string gru = error_of(std::string(kHead) + "    - {type: GRU, units: 64, unit_forget_bias: true}\n");
  EXPECT_HAS(gru, "GRU has no key 'unit_forget_bias' (it is a key of LSTM)");
  const std::string bidi = error_of(std::string(kHead) + "    - {type: Bidirectional, return_sequences: true, layer: {type: LSTM, units: 3}}\n");
  EXPECT_HAS(bidi, "Bidirectional has no key 'return_sequences'");
  EXPECT_HAS(bidi, "inside layer:");
}

TEST(Errors, UnknownKeysAreCaughtAtEveryLevel) {
  struct Case { std::string tail, path, guess; };
  const std::string dense = "    - {type: Dense, units: 1}\n";
  const std::vector<Case> cases = {
      {"trian: {epochs: 1}\n", "trian", "train"},
      {"train: {epoch: 3}\n", "train.epoch", "epochs"},
      {"train: {optimizer: {type: adam, lr: 0.1}}\n", "train.optimizer.lr", "learning_rate"},
      {"train: {optimizer: {type: sgd, momentun: 0.9}}\n", "train.optimizer.momentun", "momentum"},
      {"train: {loss: {type: binary_crossentropy, from_logit: true}}\n", "train.loss.from_logit", "from_logits"},
      {"train: {schedule: {type: cosine, decay_step: 10}}\n", "train.schedule.decay_step", "decay_steps"},
      {"train: {early_stopping: {patiense: 3}}\n", "train.early_stopping.patiense", "patience"},
      {"train: {checkpoint: {monitr: loss}}\n", "train.checkpoint.monitr", "monitor"},
      {"data: {train: {path: a.h5, input: x}}\n", "data.train.input", "inputs"},
      {"data: {trian: {path: a.h5}}\n", "data.trian", "train"},
      {"plan: {fusion: auto}\n", "plan.fusion", "fuse"},
      {"output: {dirr: x}\n", "output.dirr", "dir"},
  };
  for (const Case& c : cases) {
    const std::string text = std::string(kHead) + dense + c.tail;
    const std::string key = c.path.substr(c.path.find_last_of('.') + 1);
    const std::string msg = error_of(text);
    EXPECT_STARTS(msg, "q.yaml:" + where(text, key + ":") + ": " + c.path + ": ");
    EXPECT_HAS(msg, "did you mean '" + c.guess + "'?");
  }
  const std::string init = error_of(std::string(kHead) +
                                    "    - {type: Dense, units: 1, kernel_initializer: {type: random_uniform, minvall: 0}}\n");
  EXPECT_HAS(init, "model.layers[1].kernel_initializer.minvall");
  EXPECT_HAS(init, "did you mean 'minval'?");
}

TEST(Errors, UnknownEnumValuesListTheChoices) {
  struct Case { std::string text, path, guess, choice; };
  const std::string dense = "    - {type: Dense, units: 1}\n";
  const std::string h = kHead;
  const std::vector<Case> cases = {
      {h + "    - {type: LSTMM, units: 4}\n", "model.layers[1].type", "LSTM", "TimeDistributed"},
      {h + "    - {type: Dense, units: 4, activation: sigmod}\n", "model.layers[1].activation", "sigmoid", "hard_sigmoid_keras2"},
      {h + "    - {type: Dense, units: 4, kernel_initializer: glorot_unifrom}\n", "model.layers[1].kernel_initializer", "glorot_uniform", "lecun_uniform"},
      {h + "    - {type: Bidirectional, merge_mode: concatenate, layer: {type: LSTM, units: 2}}\n", "model.layers[1].merge_mode", "", "ave"},
      {h + dense + "train: {loss: mean_squared_eror}\n", "train.loss", "mean_squared_error", "sparse_categorical_crossentropy"},
      {h + dense + "train: {optimizer: adma}\n", "train.optimizer", "adam", "rmsprop"},
      {h + dense + "train: {metrics: [acuracy]}\n", "train.metrics[0]", "accuracy", "perplexity"},
      {h + dense + "train: {schedule: {type: cosin, decay_steps: 5}}\n", "train.schedule.type", "cosine", "reduce_on_plateau"},
      {h + dense + "train: {early_stopping: {mode: maximum}}\n", "train.early_stopping.mode", "", "max"},
      {h + dense + "device: cdua\n", "device", "cuda", "cpu"},
      {h + dense + "plan: {fuse: alway}\n", "plan.fuse", "always", "never"},
      {h + dense + "plan: {precision: fp61}\n", "plan.precision", "fp16", "bf16"},
      {h + dense + "plan: {algo: persistent}\n", "plan.algo", "", "persist_static"},
      {h + dense + "data: {train: {format: hdf, path: x}}\n", "data.train.format", "hdf5", "synthetic"},
      {h + dense + "data: {train: {path: a.csv, window: 2, features: [a], targets: [a], scaling: standart}}\n", "data.train.scaling", "standard", "minmax"},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of(c.text);
    EXPECT_HAS(msg, ": " + c.path + ": unknown ");
    if (!c.guess.empty()) {
      EXPECT_HAS(msg, "did you mean '" + c.guess + "'?");
    }
    EXPECT_HAS(msg, "choices: ");
    EXPECT_HAS(msg, c.choice);
  }
}

TEST(Errors, OutOfRangeValuesSayTheRange) {
  struct Case { std::string tail, path, says; };
  const std::string h = kHead, dense = "    - {type: Dense, units: 1}\n";
  const std::vector<Case> cases = {
      {"    - {type: Dense, units: 0}\n", "model.layers[1].units", "expected a positive integer, got 0"},
      {"    - {type: Dense, units: 99999999999}\n", "model.layers[1].units", "no larger than"},
      {"    - {type: LSTM, units: 3, dropout: 1.0}\n", "model.layers[1].dropout", "expected a number in [0, 1), got 1.0"},
      {"    - {type: LSTM, units: 3, recurrent_dropout: -0.1}\n", "model.layers[1].recurrent_dropout", "[0, 1)"},
      {"    - {type: Dropout, rate: 1}\n", "model.layers[1].rate", "[0, 1)"},
      {"    - {type: Dense, units: 2, kernel_initializer: {type: random_uniform, minval: 1, maxval: -1}}\n", "model.layers[1].kernel_initializer", "swap"},
      {dense + "train: {epochs: 0}\n", "train.epochs", "expected a positive integer"},
      {dense + "train: {batch_size: -3}\n", "train.batch_size", "expected a positive integer, got -3"},
      {dense + "train: {optimizer: {type: adam, learning_rate: 0}}\n", "train.optimizer.learning_rate", "expected a positive number up to 3.4e38 (float32's largest), got 0"},
      {dense + "train: {optimizer: {type: adam, beta_1: 1.0}}\n", "train.optimizer.beta_1", "[0, 1)"},
      {dense + "train: {optimizer: {type: adam, learning_rate: .inf}}\n", "train.optimizer.learning_rate", "positive number"},
      {dense + "train: {optimizer: {type: adam, clipnorm: -1}}\n", "train.optimizer.clipnorm", "positive number"},
      {dense + "data: {validation_split: 1.0}\n", "data.validation_split", "[0, 1)"},
      {dense + "data: {train: {format: text, path: a.txt, seq_len: 0}}\n", "data.train.seq_len", "positive integer"},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of(h + c.tail);
    EXPECT_HAS(msg, ": " + c.path + ": ");
    EXPECT_HAS(msg, c.says);
  }
}

TEST(Errors, StructureRulesNameTheFix) {
  struct Case { std::string text, says; };
  const std::string h = kHead, dense = "    - {type: Dense, units: 1}\n";
  const std::vector<Case> cases = {
      {"model:\n  layers:\n    - {type: LSTM, units: 3}\n" + dense, "model.layers[0]: the first layer must be {type: Input"},
      {h + dense + "    - {type: Input, shape: [3]}\n", "model.layers[2]: Input can only be the first layer"},
      {h, "model.layers: the model has only an Input layer"},
      {"model:\n  layers: []\n", "model.layers: the model has no layers"},
      {"data: {}\n", "missing key 'model'"},
      {"model: {init_from: x.h5}\n", "model: missing key 'layers'"},
      {h + "    - {units: 3}\n", "model.layers[1]: missing key 'type'"},
      {h + "    - {type: Bidirectional}\n", "model.layers[1]: missing key 'layer'; Bidirectional needs the layer it wraps"},
      {h + "    - {type: Bidirectional, layer: {type: Dense, units: 3}}\n", "model.layers[1].layer.type: Bidirectional wraps an LSTM, GRU or SimpleRNN, got Dense"},
      {h + "    - {type: TimeDistributed, layer: {type: LSTM, units: 3}}\n", "model.layers[1].layer.type: TimeDistributed wraps a Dense or a Dropout layer, got LSTM"},
      {"model:\n  layers:\n    - {type: Input, shape: [5]}\n    - {type: Embedding, input_dim: 10}\n", "model.layers[1]: missing key 'output_dim'"},
      {h + "    - {type: Dense, units: 3, name: out}\n" + "    - {type: Dense, units: 3, name: out}\n", "model.layers[2].name: the name 'out' is already used by model.layers[1]"},
      {h + "    - {type: Dense, units: 3, name: a/b}\n", "may not contain '/'"},
      {h + "    - {type: LSTM, units: 3, activation: softmax}\n", "softmax is only available on Dense, Conv1D and Activation layers"},
      {h + "    - {type: GRU, units: 3, recurrent_activation: gelu}\n", "gelu is only available on Dense, Conv1D and Activation layers"},
      {h + "    - {type: Conv1D, filters: 3}\n", "model.layers[1]: missing key 'kernel_size'; Conv1D needs kernel_size"},
      {h + "    - {type: Conv1D, filters: 3, kernel_size: 2, groups: 3}\n", "model.layers[1].groups: rnntrain's Conv1D has groups: 1"},
      {h + "    - {type: Conv1D, filters: 3, kernel_size: 2, strides: 2, dilation_rate: 2}\n", "model.layers[1].dilation_rate: strides > 1 with dilation_rate > 1"},
      {h + "    - {type: Conv1D, filters: 3, kernel_size: [2, 2]}\n", "model.layers[1].kernel_size: expected one integer (a 1D window)"},
      {h + "    - {type: Conv1D, filters: 3, kernel_size: 0}\n", "model.layers[1].kernel_size"},
      {h + "    - {type: MaxPooling1D, padding: causal}\n", "model.layers[1].padding: causal padding is Conv1D's"},
      {h + "    - {type: AveragePooling1D}\n", "model.layers[1]: missing key 'pool_size'; AveragePooling1D needs pool_size"},
      {h + "    - {type: LayerNormalization, axis: 1}\n", "model.layers[1].axis"},
      {h + "    - {type: LayerNormalization, epsilon: -1}\n", "model.layers[1].epsilon"},
      {h + "    - {type: Activation}\n", "model.layers[1]: missing key 'activation'"},
      {h + "    - {type: TimeDistributed, layer: {type: Conv1D, filters: 2, kernel_size: 1}}\n", "TimeDistributed wraps a Dense or a Dropout layer, got Conv1D"},
      {"model:\n  layers:\n    - {type: Input, shape: [4, 2]}\n    - {type: Conv1D, filters: 3, kernel_size: 9}\n",
       "layer 'conv1d' (Conv1D): its window spans 9 steps, more than the 4 the input has"},
      {"model:\n  layers:\n    - {type: Input, shape: [null, 2]}\n    - {type: Flatten}\n", "needs a fixed number of timesteps"},
      {h + "    - {type: Dense, units: 3, activation: gelu_tanh}\n", "did you mean"},
      {h + "    - {type: Dense, units: 3, units: 4}\n", "model.layers[1].units: duplicate key 'units'"},
      {h + dense + "train: {optimizer: {type: adam, clipnorm: 1, global_clipnorm: 1}}\n", "train.optimizer.global_clipnorm: clipnorm is already set"},
      {h + dense + "data: {validation: {path: v.h5}, validation_split: 0.2}\n", "not both"},
      {h + dense + "data: {train: {path: x.npy, inputs: y.npy}}\n", "data.train.path: npy data takes inputs: (or path:), not both"},
      {h + dense + "data: {train: {format: synthetic, samples: 10}}\n", "data.train: missing key 'task'"},
      {h + dense + "data: {train: {format: csv, path: a.csv, features: [a], targets: [a]}}\n", "data.train: missing key 'window'"},
      {h + dense + "train: {schedule: cosine}\n", "needs decay_steps"},
      {h + dense + "train: {schedule: piecewise_constant}\n", "needs boundaries and values"},
      {h + dense + "train: {schedule: {type: piecewise_constant, boundaries: [10, 5], values: [1, 2, 3]}}\n",
       "train.schedule.boundaries[1]"},
      {h + dense + "train: {schedule: {type: piecewise_constant, boundaries: [10], values: [0.1]}}\n",
       "holds 1 learning rates; with 1 boundaries it needs 2"},
      {h + dense + "train: {schedule: {type: polynomial, decay_steps: 5, t_mul: 2}}\n", "cosine_restarts"},
      {h + dense + "train: {early_stopping: {monitor: val_acc}, metrics: [accuracy]}\n", "did you mean 'val_accuracy'?"},
      {"model:\n  layers:\n    - {type: Input, shape: [null, null]}\n" + dense, "only timesteps (the first entry) may be null"},
      {h + dense + "plan: {precision: auto}\n", "plan.precision: auto means measured: set plan.autotune: true"},
      {h + dense + "plan: {algo: auto, autotune: false}\n", "plan.algo: auto means measured: set plan.autotune: true"},
  };
  for (const Case& c : cases) EXPECT_HAS(error_of(c.text), c.says);
}

TEST(Errors, ShapeMismatchesSurfaceAtParseTime) {
  const std::string text = std::string(kHead) + "    - {type: LSTM, units: 8}\n    - {type: LSTM, units: 8}\n";
  const std::string msg = error_of(text);
  EXPECT_STARTS(msg, "q.yaml:5:7: model.layers[2]: ");
  EXPECT_HAS(msg, "return_sequences");
  EXPECT_HAS(msg, "'lstm'");
}

TEST(Errors, YamlSyntaxErrorsHaveLineAndColumn) {
  const std::string msg = error_of(std::string(kHead) + "    - {type: Dense, units: 3\ntrain: {epochs: 2}\n");
  EXPECT_STARTS(msg, "q.yaml:5:");
  EXPECT_HAS(msg, "not valid YAML");
  const std::string two = error_of(std::string(kHead) + "    - {type: Dense, units: 3}\n---\nmodel: {}\n");
  EXPECT_STARTS(two, "q.yaml:5:1: ");  // the second document's "---"
  EXPECT_HAS(two, "more than one YAML document");
}

TEST(Errors, LoadConfigNamesAMissingFile) {
  try {
    load_config("/nonexistent/dir/q.yaml");
    FAIL() << "no error for a missing file";
  } catch (const ConfigError& e) {
    EXPECT_HAS(std::string(e.what()), "/nonexistent/dir/q.yaml: cannot open the config file");
  }
}

// swish is Keras' alias of silu: read as silu, written back as silu (Keras 3 writes it so too).
TEST(ParseModel, SwishIsReadAndWrittenAsSilu) {
  const Config cfg = parse_config(
      "model:\n  layers:\n    - {type: Input, shape: [4, 2]}\n    - {type: Dense, units: 3, activation: swish}\n"
      "    - {type: Dense, units: 2, activation: gelu_approximate}\n", "q.yaml");
  EXPECT_EQ(cfg.model.layers[1].activation, Activation::Silu);
  EXPECT_EQ(cfg.model.layers[2].activation, Activation::GeluApproximate);
  const std::string text = emit_config(cfg);
  EXPECT_NE(text.find("activation: silu"), std::string::npos) << text;
  EXPECT_EQ(text.find("swish"), std::string::npos) << text;
  EXPECT_EQ(parse_config(text, "again.yaml").model.layers[2].activation, Activation::GeluApproximate);
}

}  // namespace
}  // namespace rnntrain
