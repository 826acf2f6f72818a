// Tests of the Keras file layer without Keras: JSON round trips of every layer type, weights through
// all three formats bit for bit, the CuDNN conversion, Keras 3 weight paths, chunked name lists and
// the optimizer variable order. Real Keras checks the same files in tests/keras/.
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/h5.h"
#include "io/keras_cudnn.h"
#include "io/keras_file.h"
#include "io/keras_model.h"
#include "io/keras_train.h"
#include "io/keras_weights.h"
#include "spec/parse.h"
#include "io_keras_util.h"
#include "optimizer_variants.h"


namespace fs = std::filesystem;
using namespace rnntrain;

namespace {

const char* kAllLayers = R"(
model:
  layers:
    - {type: Input, shape: [null, 3]}
    - {type: Masking, mask_value: 0.5}
    - {type: LSTM, units: 4, return_sequences: true, recurrent_activation: hard_sigmoid, unit_forget_bias: false,
       kernel_initializer: {type: random_uniform, minval: -0.2, maxval: 0.1}}
    - {type: Bidirectional, merge_mode: ave, layer: {type: GRU, units: 3, return_sequences: true, reset_after: false}}
    - {type: Dropout, rate: 0.25}
    - {type: TimeDistributed, layer: {type: Dense, units: 2, activation: softmax}}
    - {type: SimpleRNN, units: 5, activation: relu, go_backwards: true, use_bias: false,
       recurrent_initializer: {type: orthogonal, gain: 2.0}}
    - {type: Dense, units: 1, activation: sigmoid, bias_initializer: {type: constant, value: 0.3}}
)";

const char* kTokens = R"(
model:
  layers:
    - {type: Input, shape: [7]}
    - {type: Embedding, input_dim: 11, output_dim: 4, mask_zero: true}
    - {type: Bidirectional, layer: {type: LSTM, units: 3}, merge_mode: mul}
    - {type: Dense, units: 2}
)";

class KerasFormats : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rnntrain_io_keras_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

Params random_params(const ModelSpec& m, uint64_t seed) {
  Rng rng(seed);
  Params p = init_params(m, rng);
  for (Param* q : p.all())
    for (float& x : q->value.data) x = static_cast<float>(rng.uniform(-1, 1));
  return p;
}

// Every weight equal bit for bit; prints the first difference.
void expect_same(const Params& a, const Params& b) {
  Params& ca = const_cast<Params&>(a);
  Params& cb = const_cast<Params&>(b);
  auto pa = ca.all(), pb = cb.all();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    ASSERT_EQ(pa[i]->value.shape, pb[i]->value.shape) << "weight " << i << " " << pa[i]->name;
    for (int64_t j = 0; j < pa[i]->value.numel(); ++j)
      ASSERT_EQ(pa[i]->value[j], pb[i]->value[j]) << "weight " << i << " (" << pa[i]->name << ") element " << j;
  }
}

TEST_F(KerasFormats, JsonRoundTripKeepsEveryLayerAndOption) {
  for (const char* yaml : {kAllLayers, kTokens}) {
    Config c = parse_config(yaml, "t.yaml");
    for (KerasJsonStyle style : {KerasJsonStyle::Legacy, KerasJsonStyle::Keras3}) {
      const nlohmann::json j = nlohmann::json::parse(model_to_keras_json(c.model, style).dump());
      Config back;
      back.path = c.path;
      back.model = model_from_keras_json(j, KerasOrigin{"t.h5", kKeras3Version});
      EXPECT_EQ(emit_config(back), emit_config(c)) << "style " << int(style) << "\nJSON: " << j.dump().substr(0, 600);
    }
  }
}

TEST_F(KerasFormats, BidirectionalIsWrittenWithItsBackwardLayerAsKerasWritesIt) {
  // Without backward_layer, Keras derives the backward layer from the forward one's config, which
  // has failed to load a model with several Bidirectional layers.
  Config c = parse_config(kAllLayers, "t.yaml");
  for (KerasJsonStyle style : {KerasJsonStyle::Legacy, KerasJsonStyle::Keras3}) {
    const nlohmann::json j = nlohmann::json::parse(model_to_keras_json(c.model, style).dump());
    int seen = 0;
    for (const nlohmann::json& l : j["config"]["layers"]) {
      if (l["class_name"] != "Bidirectional") continue;
      ++seen;
      const nlohmann::json& f = l.at("config").at("layer");
      ASSERT_TRUE(l.at("config").contains("backward_layer")) << l.dump().substr(0, 300);
      const nlohmann::json& b = l.at("config").at("backward_layer");
      EXPECT_EQ(b["class_name"], f["class_name"]);
      EXPECT_EQ(b["config"]["units"], f["config"]["units"]);
      EXPECT_NE(b["config"]["go_backwards"], f["config"]["go_backwards"]);
      EXPECT_EQ(f["config"]["name"].get<std::string>().rfind("forward_", 0), 0u) << f["config"]["name"];
      EXPECT_EQ(b["config"]["name"].get<std::string>().rfind("backward_", 0), 0u) << b["config"]["name"];
    }
    EXPECT_GT(seen, 0) << "the model has Bidirectional layers";
  }
}

TEST_F(KerasFormats, HardSigmoidMeansWhatTheWritingKerasMeant) {
  Config c = parse_config(kAllLayers, "t.yaml");
  const nlohmann::json j = nlohmann::json::parse(model_to_keras_json(c.model, KerasJsonStyle::Legacy).dump());
  EXPECT_EQ(model_from_keras_json(j, {"k3.h5", "3.15.1"}).layers[2].recurrent_activation, Activation::HardSigmoid);
  EXPECT_EQ(model_from_keras_json(j, {"k2.h5", "2.15.0"}).layers[2].recurrent_activation, Activation::HardSigmoidKeras2);
  EXPECT_EQ(model_from_keras_json(j, {"k1.h5", "1"}).layers[2].recurrent_activation, Activation::HardSigmoidKeras2);
  c.model.layers[2].recurrent_activation = Activation::HardSigmoidKeras2;
  EXPECT_EQ(keras_version_for(c.model), kKeras2Version);
  EXPECT_THROW(export_keras(path("m.keras"), c.model, random_params(c.model, 1)), DataError);
  EXPECT_FALSE(fs::exists(path("m.keras")));
}

// Keras' names for the activations that need the pre-activation; a recurrent layer with one is
// refused on import (rnntrain's cells keep only their outputs), and gelu_approximate, which no Keras
// config can name, is not exported.
TEST_F(KerasFormats, InputDerivativeActivationsAreDenseOnlyAndGeluApproximateIsNotExported) {
  Config c = parse_config(
      "model:\n  layers:\n    - {type: Input, shape: [4, 2]}\n    - {type: LSTM, units: 3, return_sequences: true}\n"
      "    - {type: Dense, units: 3, activation: gelu}\n    - {type: Dense, units: 2, activation: swish}\n", "t.yaml");
  nlohmann::json j = nlohmann::json::parse(model_to_keras_json(c.model, KerasJsonStyle::Keras3).dump());
  EXPECT_EQ(j["config"]["layers"][2]["config"]["activation"], "gelu");
  EXPECT_EQ(j["config"]["layers"][3]["config"]["activation"], "silu");
  EXPECT_EQ(model_from_keras_json(j, {"k.keras", "3.15.1"}).layers[3].activation, Activation::Silu);
  j["config"]["layers"][3]["config"]["activation"] = "swish";  // what older Keras wrote
  EXPECT_EQ(model_from_keras_json(j, {"k.keras", "3.15.1"}).layers[3].activation, Activation::Silu);
  j["config"]["layers"][1]["config"]["activation"] = "gelu";
  try {
    model_from_keras_json(j, {"k.keras", "3.15.1"});
    ADD_FAILURE() << "an LSTM with gelu was imported";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("activation 'gelu' is not supported"), std::string::npos) << e.what();
  }
  c.model.layers[2].activation = Activation::GeluApproximate;
  try {
    export_keras(path("m.keras"), c.model, random_params(c.model, 1));
    ADD_FAILURE() << "gelu_approximate was exported";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'dense' (Dense): a Keras model config cannot name the activation "
                                         "gelu_approximate"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path("m.keras")));
}

TEST_F(KerasFormats, WeightsSurviveEveryFormatBitForBit) {
  for (const char* yaml : {kAllLayers, kTokens}) {
    Config c = parse_config(yaml, "t.yaml");
    const Params ref = random_params(c.model, 7);
    for (const char* name : keras_formats()) {
      export_keras(path(name), c.model, ref);
      Params got = random_params(c.model, 8);
      load_keras_weights(path(name), c.model, got);
      expect_same(got, ref);
      if (std::string(name) != "m.weights.h5") {
        ImportedKeras k = import_keras(path(name));
        Config back;
        back.path = c.path;
        back.model = k.model;
        EXPECT_EQ(emit_config(back), emit_config(c)) << name;
        expect_same(k.params, ref);
      }
    }
  }
}

TEST_F(KerasFormats, Keras3PathsAreByClassAndPosition) {
  Config c = parse_config(R"(
model:
  layers:
    - {type: Input, shape: [5, 3]}
    - {type: LSTM, units: 2, return_sequences: true, name: encoder}
    - {type: LSTM, units: 2, name: decoder, return_sequences: true}
    - {type: TimeDistributed, layer: {type: Dense, units: 1}}
    - {type: Bidirectional, layer: {type: GRU, units: 2}}
)", "t.yaml");
  export_keras(path("m.weights.h5"), c.model, random_params(c.model, 3));
  h5::File f = h5::File::open(path("m.weights.h5"));
  for (const char* p : {"layers/lstm/cell/vars/2", "layers/lstm_1/cell/vars/0", "layers/time_distributed/layer/vars/1",
                        "layers/bidirectional/forward_layer/cell/vars/2", "layers/bidirectional/backward_layer/cell/vars/0"})
    EXPECT_TRUE(f.root().has_dataset(p)) << p;
  EXPECT_EQ(f.root().shape("layers/bidirectional/backward_layer/cell/vars/2"), (Shape{2, 6}));  // GRU reset_after bias
  EXPECT_EQ(f.root().group("layers/lstm_1/vars").attr_string("name"), "decoder");
}

TEST_F(KerasFormats, CudnnConversionRoundTripsAndMatchesTheDocumentedLayout) {
  Tensor k({3, 8});  // in = 3, 2 gates of 4 units
  for (int64_t i = 0; i < k.numel(); ++i) k[i] = static_cast<float>(i);
  Tensor kc = cudnn_compat::kernel_to_cudnn(k, 2);
  // Block g's row-major buffer equals that block transposed, read row by row.
  for (int g = 0; g < 2; ++g)
    for (int64_t p = 0; p < 12; ++p) {
      const int64_t j = p / 3, i = p % 3;  // (K_g)^T [j][i]
      EXPECT_EQ(kc[(p / 4) * 8 + g * 4 + p % 4], k[i * 8 + g * 4 + j]) << "gate " << g << " p " << p;
    }
  Tensor back = cudnn_compat::kernel_from_cudnn(kc, 2);
  EXPECT_EQ(back.data, k.data);
  Tensor r({4, 8});
  for (int64_t i = 0; i < r.numel(); ++i) r[i] = static_cast<float>(i * 3 % 7);
  EXPECT_EQ(cudnn_compat::recurrent_from_cudnn(cudnn_compat::recurrent_to_cudnn(r, 2), 2).data, r.data);
  Tensor b({8});
  for (int64_t i = 0; i < 8; ++i) b[i] = static_cast<float>(i) - 3.0f;
  EXPECT_EQ(cudnn_compat::lstm_bias_from_cudnn(cudnn_compat::lstm_bias_to_cudnn(b)).data, b.data);
  Tensor gb = cudnn_compat::gru_bias_from_cudnn(b);
  EXPECT_EQ(gb.shape, (Shape{2, 4}));
}

TEST_F(KerasFormats, LongNameListsAreChunkedAsKerasDoes) {
  h5::File f = h5::File::create(path("names.h5"));
  std::vector<std::string> names;
  for (int i = 0; i < 7000; ++i) names.push_back(fmt::format("layer_{:05d}", i));  // 11 bytes: 77000 > 64512
  write_name_list(f.root(), "layer_names", names);
  EXPECT_FALSE(f.root().has_attr("layer_names"));
  EXPECT_TRUE(f.root().has_attr("layer_names0"));
  EXPECT_TRUE(f.root().has_attr("layer_names1"));
  EXPECT_FALSE(f.root().has_attr("layer_names2"));
  EXPECT_EQ(read_name_list(f.root(), "layer_names"), names);
}

TEST_F(KerasFormats, OptimizerVariablesFollowKerasOrder) {
  // Adam: momentum and velocity interleaved per parameter, then velocity_hat.
  std::vector<std::string> adam{"momentum/0", "momentum/1", "velocity/0", "velocity/1", "velocity_hat/0", "velocity_hat/1"};
  EXPECT_EQ(keras_slot_order(adam), (std::vector<size_t>{0, 2, 1, 3, 4, 5}));
  // RMSprop: velocity, then momentum, then average_gradient lists.
  std::vector<std::string> rms{"velocity/0", "velocity/1", "momentum/0", "momentum/1"};
  EXPECT_EQ(keras_slot_order(rms), (std::vector<size_t>{0, 1, 2, 3}));
  // Adamax and Adadelta create their two slots in one call too.
  std::vector<std::string> adamax{"momentum/0", "momentum/1", "norm/0", "norm/1"};
  EXPECT_EQ(keras_slot_order(adamax), (std::vector<size_t>{0, 2, 1, 3}));
  std::vector<std::string> adadelta{"accumulated_grad/0", "accumulated_grad/1", "accumulated_delta_var/0",
                                    "accumulated_delta_var/1"};
  EXPECT_EQ(keras_slot_order(adadelta), (std::vector<size_t>{0, 2, 1, 3}));
  // SGD's and Lion's one momentum slot: in order.
  EXPECT_EQ(keras_slot_order({"momentum/0", "momentum/1"}), (std::vector<size_t>{0, 1}));
}

TEST_F(KerasFormats, TrainingConfigRoundTrips) {
  TrainSpec t;
  t.optimizer.kind = OptimizerKind::RMSprop;
  t.optimizer.learning_rate = 0.003;
  t.optimizer.rho = 0.8;
  t.optimizer.centered = true;
  t.optimizer.clipnorm = 1.5;
  t.loss.kind = LossKind::BinaryCrossentropy;
  t.loss.from_logits = true;
  auto back = train_from_keras_json(nlohmann::json::parse(training_config_json({t, 0.003, 0, {}}).dump()), "t.h5");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->optimizer.kind, OptimizerKind::RMSprop);
  EXPECT_DOUBLE_EQ(back->optimizer.learning_rate, 0.003);
  EXPECT_DOUBLE_EQ(back->optimizer.rho, 0.8);
  EXPECT_TRUE(back->optimizer.centered);
  EXPECT_EQ(back->optimizer.clipnorm, 1.5);
  EXPECT_EQ(back->loss.kind, LossKind::BinaryCrossentropy);
  EXPECT_TRUE(back->loss.from_logits);
}

// Both dialects carry the metrics Keras has and the learning rate: the rate now for a constant or
// per-epoch schedule, Keras' schedule object for those Keras runs per step, read back as the same.
TEST_F(KerasFormats, MetricsAndTheLearningRateOrScheduleRoundTrip) {
  const Config c = parse_config("model:\n  layers:\n    - {type: Input, shape: [3, 2]}\n    - {type: LSTM, units: 2}\n"
                                "train:\n  loss: binary_crossentropy\n  metrics: [binary_accuracy, mae, perplexity]\n",
                                "m.yaml");
  ScheduleSpec exponential;
  exponential.kind = ScheduleKind::Exponential, exponential.decay_steps = 40, exponential.decay_rate = 0.5;
  exponential.staircase = true;
  ScheduleSpec cosine;
  cosine.kind = ScheduleKind::Cosine, cosine.decay_steps = 100, cosine.alpha = 0.1;
  ScheduleSpec warm = cosine;
  warm.warmup_steps = 7;
  ScheduleSpec plateau;
  plateau.kind = ScheduleKind::ReduceOnPlateau;
  for (const ScheduleSpec& sched : {exponential, cosine, warm, plateau}) {
    SCOPED_TRACE(static_cast<int>(sched.kind));
    KerasTraining kt{c.train, 0.00075, 0, {}};
    kt.train.optimizer.learning_rate = 0.003;
    kt.train.schedule = sched;
    for (const Json& written : {training_config_json(kt), compile_config_json(kt)}) {
      EXPECT_EQ(written["metrics"], Json::parse(R"(["binary_accuracy", "mae"])"));  // Keras has no perplexity
      auto back = train_from_keras_json(nlohmann::json::parse(written.dump()), "t.keras");
      ASSERT_TRUE(back);
      ASSERT_EQ(back->metrics.size(), 2u);
      EXPECT_EQ(back->metrics[0].kind, MetricKind::BinaryAccuracy);
      EXPECT_EQ(back->metrics[1].name, "mae");
      const ScheduleSpec& b = back->schedule;
      if (sched.kind == ScheduleKind::ReduceOnPlateau) {  // a callback in Keras: the file holds the rate now
        EXPECT_EQ(b.kind, ScheduleKind::Constant);
        EXPECT_EQ(back->optimizer.learning_rate, 0.00075);
        continue;
      }
      EXPECT_EQ(b.kind, sched.kind);
      EXPECT_EQ(back->optimizer.learning_rate, 0.003);
      EXPECT_EQ(b.decay_steps, sched.decay_steps);
      EXPECT_EQ(b.decay_rate, sched.decay_rate);
      EXPECT_EQ(b.staircase, sched.staircase);
      EXPECT_EQ(b.alpha, sched.alpha);
      EXPECT_EQ(b.warmup_steps, sched.warmup_steps);
    }
  }
  // Keras' own spellings and classes of the metrics are read too; others are left out.
  auto back = train_from_keras_json(Json::parse(R"({"loss": "mse", "metrics": ["acc", "mean_squared_error",
      {"class_name": "MeanAbsoluteError", "config": {}}, {"class_name": "MeanIoU", "config": {}}]})"), "t.h5");
  ASSERT_TRUE(back);
  ASSERT_EQ(back->metrics.size(), 3u);
  EXPECT_EQ(back->metrics[0].kind, MetricKind::Accuracy);
  EXPECT_EQ(back->metrics[1].kind, MetricKind::MSE);
  EXPECT_EQ(back->metrics[2].kind, MetricKind::MAE);
}

// The metrics with settings are written as Keras' objects (Keras 3 and legacy forms) and read back
// the same; settings rnntrain cannot report leave the metric out, the rest of the file still read.
TEST_F(KerasFormats, MetricsWithSettingsRoundTripAsKerasObjects) {
  const Config c = parse_config(
      "model:\n  layers:\n    - {type: Input, shape: [3, 2]}\n    - {type: LSTM, units: 4}\n"
      "    - {type: Dense, units: 4, activation: softmax}\n"
      "train:\n  loss: categorical_crossentropy\n  metrics: [precision, {type: recall, thresholds: 0.3, class_id: 2},\n"
      "    {type: auc, curve: PR, summation_method: minoring, num_thresholds: 50, multi_label: true, name: pr_auc},\n"
      "    {type: auc, from_logits: true}, {type: f1_score, average: weighted, threshold: 0.4},\n"
      "    {type: fbeta_score, beta: 0.5, average: micro}, {type: top_k_categorical_accuracy, k: 2}]\n",
      "m.yaml");
  ASSERT_EQ(c.train.metrics.size(), 7u);
  const KerasTraining kt{c.train, 0.001, 0, {}};
  for (const Json& written : {training_config_json(kt), compile_config_json(kt)}) {
    EXPECT_EQ(written["metrics"][0]["class_name"], "Precision");
    EXPECT_EQ(written["metrics"][2]["config"]["curve"], "PR");
    EXPECT_EQ(written["metrics"][4]["config"]["average"], "weighted");
    auto back = train_from_keras_json(nlohmann::json::parse(written.dump()), "t.keras");
    ASSERT_TRUE(back);
    EXPECT_EQ(back->metrics, c.train.metrics);
  }
  // Keras' defaults by name, and what rnntrain leaves out (with a warning each).
  auto back = train_from_keras_json(Json::parse(R"({"loss": "mse", "metrics": ["auc", "f1_score",
      {"class_name": "Precision", "config": {"thresholds": [0.2, 0.7], "name": "p"}},
      {"class_name": "Recall", "config": {"top_k": 2}},
      {"class_name": "AUC", "config": {"curve": "PRGAIN"}},
      {"class_name": "AUC", "config": {"num_thresholds": 1}},
      {"class_name": "AUC", "config": {"label_weights": [1, 2]}},
      {"class_name": "F1Score", "config": {"average": null, "name": "f1"}}]})"), "t.h5");
  ASSERT_TRUE(back);
  ASSERT_EQ(back->metrics.size(), 3u);
  EXPECT_EQ(back->metrics[0].kind, MetricKind::AUC);
  EXPECT_EQ(back->metrics[0].num_thresholds, 200);
  EXPECT_EQ(back->metrics[1].name, "f1_score");
  EXPECT_EQ(back->metrics[2].name, "f1");
  EXPECT_EQ(back->metrics[2].average, FAverage::Macro);
}

// Crafted training configs: each is read into settings the config check then refuses with its
// message, or is a DataError naming the file; never a crash or a wrapped library message.
TEST_F(KerasFormats, HostileTrainingConfigsAreRefusedWithAMessage) {
  const std::string lr = R"({"optimizer_config": {"class_name": "SGD", "config": {"learning_rate": )";
  const std::vector<std::string> texts = {
      lr + R"({"class_name": "PiecewiseConstantDecay", "config": {"boundaries": "x", "values": [0.1, 0.2]}}}}})",
      lr + R"({"class_name": "PiecewiseConstantDecay", "config": {"boundaries": [5, 2], "values": [1, 2, 3]}}}}})",
      lr + R"({"class_name": "PiecewiseConstantDecay", "config": {"boundaries": [5], "values": [-1, 1e300]}}}}})",
      lr + R"({"class_name": "ExponentialDecay", "config": {"initial_learning_rate": 0.1, "decay_steps": 1e300}}}}})",
      lr + R"({"class_name": "CosineDecayRestarts", "config": {"first_decay_steps": -4}}}}})",
      lr + R"({"class_name": "PolynomialDecay", "config": {"decay_steps": 3, "cycle": "yes"}}}}})",
      lr + R"(0.1, "use_ema": "sometimes"}}})",
      R"({"loss": "mse", "metrics": [{"class_name": 5}]})",
  };
  const std::string model = "model:\n  layers:\n    - {type: Input, shape: [3, 2]}\n    - {type: LSTM, units: 2}\n";
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    try {
      const std::optional<TrainSpec> t = train_from_keras_json(Json::parse(text), "crafted.h5");
      Config c = parse_config(model, "m.yaml");
      if (t) c.train = *t;
      EXPECT_THROW(parse_config(emit_config(c), "imported.yaml"), ConfigError);  // as `import` checks it
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("crafted.h5"), std::string::npos) << e.what();
    }
  }
}

TEST_F(KerasFormats, EveryOptimizerDescriptorRoundTripsThroughTheTrainingConfig) {
  for (const auto& [name, o] : rnntrain::testing::optimizer_variants()) {
    SCOPED_TRACE(name);
    TrainSpec t;
    t.optimizer = o;
    t.optimizer.clipvalue = 0.25;
    const Json written = training_config_json({t, o.learning_rate, 0, {}});
    const OptimizerInfo& info = optimizer_info(o.kind);
    EXPECT_EQ(written["optimizer_config"]["class_name"], info.keras_class);
    auto back = train_from_keras_json(nlohmann::json::parse(written.dump()), "t.h5");
    ASSERT_TRUE(back);
    const OptimizerSpec& b = back->optimizer;
    EXPECT_EQ(b.kind, o.kind);
    EXPECT_EQ(b.learning_rate, o.learning_rate);
    EXPECT_EQ(b.weight_decay, o.weight_decay);
    EXPECT_EQ(b.clipvalue, 0.25);
    for (int i = 0; i < info.num_keys; ++i) {
      const OptimizerKey& k = info.keys[i];
      if (k.flag) EXPECT_EQ(b.*k.flag, o.*k.flag) << k.name;
      else EXPECT_EQ(b.*k.number, o.*k.number) << k.name;
    }
  }
}

TEST_F(KerasFormats, EveryLossDescriptorRoundTripsThroughTheTrainingConfig) {
  for (const auto& [name, l] : rnntrain::testing::loss_variants()) {
    SCOPED_TRACE(name);
    TrainSpec t;
    t.loss = l;
    const Json written = training_config_json({t, t.optimizer.learning_rate, 0, {}});
    const LossInfo& info = loss_info(l.kind);
    EXPECT_EQ(written["loss"]["class_name"], info.keras_class);
    EXPECT_EQ(written["loss"]["config"]["name"], info.keras_name);
    auto back = train_from_keras_json(nlohmann::json::parse(written.dump()), "t.h5");
    ASSERT_TRUE(back);
    EXPECT_EQ(back->loss.kind, l.kind);
    for (int i = 0; i < info.num_keys; ++i) {  // what Keras' class has comes back; the rest is left out
      const LossKey& k = info.keys[i];
      EXPECT_EQ(written["loss"]["config"].contains(k.name), k.keras) << k.name;
      if (!k.keras) continue;
      if (k.flag) EXPECT_EQ(back->loss.*k.flag, l.*k.flag) << k.name;
      else EXPECT_EQ(back->loss.*k.number, l.*k.number) << k.name;
    }
  }
}

// Every cell (spec/cells.h), with each flag turned and other activations, alone and inside a
// Bidirectional, is written under its Keras class with its flags and read back the same, in both
// dialects; Keras 2's CuDNN class of a cell reads as the cell with the fused engines' flags.
TEST_F(KerasFormats, EveryCellRoundTripsThroughTheModelConfig) {
  for (const auto& [name, layer] : rnntrain::testing::cell_variants()) {
    SCOPED_TRACE(name);
    for (const std::string& entry : {layer, "{type: Bidirectional, layer: " + layer + "}"}) {
      const Config c = parse_config("model:\n  layers:\n    - {type: Input, shape: [null, 4]}\n    - " + entry + "\n",
                                    "cell.yaml");
      const LayerSpec& l = c.model.layers[1].inner ? *c.model.layers[1].inner : c.model.layers[1];
      const CellTraits& cell = cell_traits(l.kind);
      for (KerasJsonStyle style : {KerasJsonStyle::Legacy, KerasJsonStyle::Keras3}) {
        const Json written = model_to_keras_json(c.model, style);
        const std::string text = written.dump();
        EXPECT_NE(text.find(fmt::format("\"class_name\":\"{}\"", cell.keras_class)), std::string::npos) << text;
        const ModelSpec back = model_from_keras_json(nlohmann::json::parse(text), KerasOrigin{"m.keras", "3.15.1"});
        ASSERT_EQ(back.layers.size(), 2u);
        const LayerSpec& b = back.layers[1].inner ? *back.layers[1].inner : back.layers[1];
        EXPECT_EQ(b.kind, l.kind);
        EXPECT_EQ(b.activation, l.activation);
        EXPECT_EQ(b.recurrent_activation, l.recurrent_activation);
        for (const CellFlag& f : cell.flags) EXPECT_EQ(b.*f.field, l.*f.field) << f.name;
        EXPECT_EQ(emit_config(Config{.model = back}), emit_config(Config{.model = c.model})) << text;
        if (!cell.cudnn_class) continue;
        std::string cudnn = text;
        for (size_t at = 0; (at = cudnn.find(fmt::format("\"{}\"", cell.keras_class), at)) != std::string::npos;)
          cudnn.replace(at, std::strlen(cell.keras_class) + 2, fmt::format("\"{}\"", cell.cudnn_class));
        const ModelSpec from_cudnn = model_from_keras_json(nlohmann::json::parse(cudnn), KerasOrigin{"m.h5", "2.2.4"});
        const LayerSpec& d = from_cudnn.layers[1].inner ? *from_cudnn.layers[1].inner : from_cudnn.layers[1];
        EXPECT_EQ(d.kind, l.kind);
        EXPECT_EQ(d.activation, Activation::Tanh);
        for (const CellFlag& f : cell.flags)
          if (f.fused_why) EXPECT_EQ(d.*f.field, f.fused_value) << f.name;
      }
    }
  }
}

TEST_F(KerasFormats, CheckpointsAreKerasFullModelsAndResume) {
  Config c = parse_config(std::string(kTokens) + "train: {optimizer: {type: adam, learning_rate: 0.02}}\n", "t.yaml");
  Params p = random_params(c.model, 4);
  std::vector<Tensor> m(p.all().size()), v(p.all().size());
  OptimizerSlots slots;
  auto all = p.all();
  for (size_t i = 0; i < all.size(); ++i) {
    m[i] = Tensor(all[i]->value.shape, 0.5f + i);
    v[i] = Tensor(all[i]->value.shape, 0.25f + i);
  }
  for (size_t i = 0; i < all.size(); ++i) slots.emplace_back("momentum/" + std::to_string(i), &m[i]);
  for (size_t i = 0; i < all.size(); ++i) slots.emplace_back("velocity/" + std::to_string(i), &v[i]);
  ResumeState st;
  st.epoch = 2;
  st.iterations = 17;
  st.schedule = {1, 0, 0, 0, 0, 0};
  st.checkpoint = {0.5, 1};
  st.config_yaml = emit_config(c);
  save_checkpoint(path("last.h5"), c.model, p, slots, st);
  {
    h5::File f = h5::File::open(path("last.h5"));
    EXPECT_TRUE(f.root().has_attr("model_config"));
    EXPECT_NE(f.root().attr_string("training_config").find("\"Adam\""), std::string::npos);
    EXPECT_FALSE(f.root().has_group("optimizer_weights"));  // not where Keras 3.15 trips over it (checkpoint.h)
    auto names = read_name_list(f.root().group("rnntrain/optimizer_weights"), "weight_names");
    ASSERT_EQ(names.size(), 2 + slots.size());
    EXPECT_EQ(names[0], "adam/iteration");
    EXPECT_EQ(names[2], "adam/sequential_embedding_embeddings_momentum");
    EXPECT_EQ(names[3], "adam/sequential_embedding_embeddings_velocity");
  }
  std::vector<Tensor> m2(m.size()), v2(v.size());
  OptimizerSlots slots2;
  for (size_t i = 0; i < all.size(); ++i) slots2.emplace_back("momentum/" + std::to_string(i), &m2[i]);
  for (size_t i = 0; i < all.size(); ++i) slots2.emplace_back("velocity/" + std::to_string(i), &v2[i]);
  for (size_t i = 0; i < all.size(); ++i) m2[i] = Tensor(m[i].shape), v2[i] = Tensor(v[i].shape);
  Params q = random_params(c.model, 9);
  ResumeState back = load_checkpoint(path("last.h5"), c.model, q, slots2);
  expect_same(q, p);
  EXPECT_EQ(back.iterations, 17);
  EXPECT_EQ(back.epoch, 2);
  for (size_t i = 0; i < m.size(); ++i) {
    EXPECT_EQ(m2[i].data, m[i].data) << "momentum " << i;
    EXPECT_EQ(v2[i].data, v[i].data) << "velocity " << i;
  }
  // The checkpoint is also a Keras full model that import reads.
  ImportedKeras k = import_keras(path("last.h5"));
  expect_same(k.params, p);
  ASSERT_TRUE(k.train);
  EXPECT_DOUBLE_EQ(k.train->optimizer.learning_rate, 0.02);
}

}  // namespace

// Metric settings of the wrong type or out of range leave the metric out with a warning; nothing
// throws a JSON library error or casts a huge number.
TEST_F(KerasFormats, HostileMetricSettingsLeaveTheMetricOut) {
  auto back = train_from_keras_json(Json::parse(R"({"loss": "binary_crossentropy", "metrics": [
      {"class_name": "AUC", "config": {"curve": 3, "summation_method": ["x"], "multi_label": "yes"}},
      {"class_name": "Precision", "config": {"class_id": 1e300}},
      {"class_name": "TopKCategoricalAccuracy", "config": {"k": -5}},
      {"class_name": "F1Score", "config": {"threshold": 7}}]})"), "t.h5");
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->metrics.empty());
}
