// Bad Keras files get clear errors and nothing crashes or is overwritten: non-HDF5 and truncated
// files, missing groups and datasets, layer-count and shape mismatches (naming the layer and both
// shapes), Lambda/custom/unsupported layers (named), graphs that are not a chain, weights-only files
// given to import, and exports that fail half-way.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/h5.h"
#include "io/keras_file.h"
#include "io/keras_model.h"
#include "spec/parse.h"
#include "io_keras_util.h"
#include "test_util.h"


namespace fs = std::filesystem;
using namespace rnntrain;

namespace {

const char* kModel = R"(
model:
  layers:
    - {type: Input, shape: [5, 3]}
    - {type: LSTM, units: 4, return_sequences: true}
    - {type: GRU, units: 2}
    - {type: Dense, units: 1}
)";

class KerasErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rnntrain_io_keras_err_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    cfg_ = parse_config(kModel, "t.yaml");
    Rng rng(1);
    params_ = init_params(cfg_.model, rng);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  ModelSpec other(const std::string& yaml) { return parse_config(yaml, "o.yaml").model; }
  fs::path dir_;
  Config cfg_;
  Params params_;
};

// The DataError message of f(); fails the test when nothing or something else is thrown.
template <typename F>
std::string data_error(F&& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a DataError, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected a DataError";
  return "";
}


TEST_F(KerasErrors, NotHdf5NorZip) {
  std::ofstream(path("x.h5")) << "this is not a model\n";
  const std::string m = data_error([&] { load_keras_weights(path("x.h5"), cfg_.model, params_); });
  EXPECT_HAS(m, "neither an HDF5 file nor a .keras archive");
  EXPECT_HAS(data_error([&] { import_keras(path("x.h5")); }), "x.h5");
  EXPECT_HAS(data_error([&] { load_keras_weights(path("missing.h5"), cfg_.model, params_); }), "no such");
}

TEST_F(KerasErrors, TruncatedFilesOfEveryFormat) {
  for (const char* name : keras_formats()) {
    export_keras(path(name), cfg_.model, params_);
    const auto size = fs::file_size(path(name));
    for (auto keep : {size / 2, size - 200, uintmax_t(100)}) {
      fs::copy_file(path(name), path("cut"), fs::copy_options::overwrite_existing);
      fs::resize_file(path("cut"), keep);
      const std::string m = data_error([&] { load_keras_weights(path("cut"), cfg_.model, params_); });
      EXPECT_FALSE(m.empty()) << name << " cut to " << keep << " bytes";
    }
  }
}

TEST_F(KerasErrors, ShapeMismatchNamesTheLayerAndBothShapes) {
  export_keras(path("m.h5"), cfg_.model, params_);
  export_keras(path("m.weights.h5"), cfg_.model, params_);
  ModelSpec wide = other(R"(
model:
  layers:
    - {type: Input, shape: [5, 3]}
    - {type: LSTM, units: 5, return_sequences: true, name: enc}
    - {type: GRU, units: 2}
    - {type: Dense, units: 1}
)");
  Rng rng(2);
  Params p = init_params(wide, rng);
  const Params before = p;
  for (const char* name : {"m.h5", "m.weights.h5"}) {
    const std::string m = data_error([&] { load_keras_weights(path(name), wide, p); });
    EXPECT_HAS(m, "layer 'enc'");
    EXPECT_HAS(m, "(3, 16)");
    EXPECT_HAS(m, "(3, 20)");
    EXPECT_EQ(p.all()[0]->value.data, const_cast<Params&>(before).all()[0]->value.data) << "params changed on error";
  }
}

TEST_F(KerasErrors, LayerCountMismatch) {
  export_keras(path("m.h5"), cfg_.model, params_);
  export_keras(path("m.weights.h5"), cfg_.model, params_);
  ModelSpec fewer = other(R"(
model:
  layers:
    - {type: Input, shape: [5, 3]}
    - {type: LSTM, units: 4}
    - {type: Dense, units: 1}
)");
  Rng rng(2);
  Params p = init_params(fewer, rng);
  EXPECT_HAS(data_error([&] { load_keras_weights(path("m.h5"), fewer, p); }), "layer count mismatch");
  EXPECT_HAS(data_error([&] { load_keras_weights(path("m.weights.h5"), fewer, p); }), "layers/gru");
}

TEST_F(KerasErrors, MissingGroupsAndDatasets) {
  export_keras(path("m.h5"), cfg_.model, params_);
  {
    h5::File f = h5::File::open(path("m.h5"), true);
    h5::Group mw = f.root().group("model_weights");
    mw.set_attr("layer_names", std::vector<std::string>{"lstm", "gru", "dense", "ghost"});
  }
  EXPECT_HAS(data_error([&] { load_keras_weights(path("m.h5"), cfg_.model, params_); }), "'ghost'");
  {
    h5::File f = h5::File::open(path("m.h5"), true);
    h5::Group mw = f.root().group("model_weights");
    mw.set_attr("layer_names", std::vector<std::string>{"lstm", "gru", "dense"});
    mw.group("dense").set_attr("weight_names", std::vector<std::string>{"dense/kernel:0", "dense/nothing:0"});
  }
  EXPECT_HAS(data_error([&] { load_keras_weights(path("m.h5"), cfg_.model, params_); }), "dense/nothing:0");

  export_keras(path("m.weights.h5"), cfg_.model, params_);
  ModelSpec renamed = other(R"(
model:
  layers:
    - {type: Input, shape: [5, 3]}
    - {type: LSTM, units: 4, return_sequences: true}
    - {type: SimpleRNN, units: 2}
    - {type: Dense, units: 1}
)");
  Rng rng(3);
  Params p = init_params(renamed, rng);
  EXPECT_HAS(data_error([&] { load_keras_weights(path("m.weights.h5"), renamed, p); }), "layers/simple_rnn/cell/vars");

  h5::File::create(path("empty.h5"));
  EXPECT_HAS(data_error([&] { load_keras_weights(path("empty.h5"), cfg_.model, params_); }), "without Keras weights");
}

TEST_F(KerasErrors, ImportRefusesWeightsOnlyFiles) {
  export_keras(path("m.weights.h5"), cfg_.model, params_);
  EXPECT_HAS(data_error([&] { import_keras(path("m.weights.h5")); }), "weights-only");
}

nlohmann::json sequential(const std::string& layers) {
  return nlohmann::json::parse(R"({"class_name": "Sequential", "config": {"name": "s", "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 5, 3], "name": "in"}},)" + layers + "]}}");
}

TEST_F(KerasErrors, LambdaCustomAndUnsupportedLayersAreRefusedByName) {
  const auto j = sequential(R"(
    {"class_name": "Lambda", "config": {"name": "my_lambda", "function": ["4wEAAAAA", null, null]}},
    {"module": "my_package.layers", "class_name": "Attention2", "registered_name": "my_package>Attention2",
     "config": {"name": "attn"}},
    {"class_name": "Conv2D", "config": {"name": "conv", "filters": 3}},
    {"class_name": "LSTM", "config": {"name": "lstm", "units": 4, "stateful": true, "activation": "elu"}})");
  const std::string m = data_error([&] { model_from_keras_json(j, {"evil.h5", "3.15.1"}); });
  EXPECT_HAS(m, "'my_lambda' (Lambda)");
  EXPECT_HAS(m, "never runs code");
  EXPECT_HAS(m, "'attn' (Attention2)");
  EXPECT_HAS(m, "'conv' (Conv2D): class 'Conv2D' is not supported");
  EXPECT_HAS(m, "stateful=true");
  EXPECT_HAS(m, "'lstm' (LSTM): activation 'elu' is not supported");
}

// Settings of the layers around the stacks that rnntrain does not compute (or that no Keras writes),
// each refused with the layer and key named.
TEST_F(KerasErrors, SequenceLayerSettingsRnntrainDoesNotHaveAreRefusedByName) {
  const auto j = sequential(R"(
    {"class_name": "Conv1D", "config": {"name": "c1", "filters": 3, "kernel_size": [2], "data_format": "channels_first",
     "groups": 3}},
    {"class_name": "Conv1D", "config": {"name": "c2", "filters": 2, "kernel_size": [0], "strides": [2],
     "dilation_rate": [2], "padding": "reflect"}},
    {"class_name": "MaxPooling1D", "config": {"name": "p", "pool_size": [2, 2], "padding": "causal"}},
    {"class_name": "LayerNormalization", "config": {"name": "ln", "axis": [1], "rms_scaling": true}},
    {"class_name": "Activation", "config": {"name": "a", "activation": "hard_shrink"}},
    {"class_name": "TimeDistributed", "config": {"name": "td", "layer": {"class_name": "Conv1D", "config": {"name": "x",
     "filters": 2, "kernel_size": 1}}}})");
  const std::string m = data_error([&] { model_from_keras_json(j, {"evil.h5", "3.15.1"}); });
  EXPECT_HAS(m, "'c1' (Conv1D): data_format 'channels_first' is not supported");
  EXPECT_HAS(m, "'c1' (Conv1D): groups 3 is not supported");
  EXPECT_HAS(m, "'c2' (Conv1D): 'kernel_size' is [0]");
  EXPECT_HAS(m, "'c2' (Conv1D): strides > 1 with dilation_rate > 1");
  EXPECT_HAS(m, "'c2' (Conv1D): padding 'reflect' is not supported (valid, same, causal)");
  EXPECT_HAS(m, "'p' (MaxPooling1D): 'pool_size' is [2,2]");
  EXPECT_HAS(m, "'p' (MaxPooling1D): padding 'causal' is not supported (valid, same)");
  EXPECT_HAS(m, "'ln' (LayerNormalization): axis [1] is not supported");
  EXPECT_HAS(m, "'ln' (LayerNormalization): rms_scaling=true is not supported");
  EXPECT_HAS(m, "'a' (Activation): activation 'hard_shrink' is not supported");
  EXPECT_HAS(m, "'td' (TimeDistributed): wraps a Conv1D; rnntrain's TimeDistributed wraps Dense or Dropout");
}

// Regularizers and constraints with values no Keras writes: negative or non-numeric factors and
// settings, axes a weight cannot have, an axis list of a million entries (one message, not a million).
TEST_F(KerasErrors, HostileRegularizersAndConstraintsAreRefusedByName) {
  std::string many = "[0";
  for (int i = 0; i < 1000000; ++i) many += ",1";
  many += "]";
  const auto j = sequential(R"(
    {"class_name": "LSTM", "config": {"name": "a", "units": 2, "kernel_regularizer": {"class_name": "L2", "config": {"l2": -1}},
     "recurrent_regularizer": {"class_name": "L1L2", "config": {"l1": "much"}}, "bias_constraint":
     {"class_name": "MaxNorm", "config": {"max_value": 1e300, "axis": 0}}}},
    {"class_name": "Dense", "config": {"name": "d", "units": 2, "kernel_constraint": {"class_name": "UnitNorm",
     "config": {"axis": 7}}, "bias_constraint": {"class_name": "MinMaxNorm", "config": {"rate": 2}},
     "activity_regularizer": {"class_name": "L1", "config": {"l1": null}}}},
    {"class_name": "Dense", "config": {"name": "e", "units": 1, "kernel_constraint": {"class_name": "MaxNorm",
     "config": {"axis": )" + many + R"(}}}})");
  const std::string m = data_error([&] { model_from_keras_json(j, {"evil.h5", "3.15.1"}); });
  EXPECT_HAS(m, "'a' (LSTM): kernel_regularizer l2 is -1");
  EXPECT_HAS(m, "recurrent_regularizer l1 is \"much\"");
  EXPECT_HAS(m, "bias_constraint max_value is 1e+300");
  EXPECT_HAS(m, "'d' (Dense): kernel_constraint axis 7 is not supported");
  EXPECT_HAS(m, "bias_constraint rate is 2");
  EXPECT_HAS(m, "'e' (Dense): kernel_constraint axis [0,1,1,1");
  EXPECT_LT(m.size(), 4000u) << "one message per setting";
}

TEST_F(KerasErrors, FunctionalModelsMustBeOneChain) {
  const auto j = nlohmann::json::parse(R"({"class_name": "Functional", "config": {"name": "f",
    "layers": [
      {"class_name": "InputLayer", "name": "in", "config": {"batch_shape": [null, 5, 3], "name": "in"}, "inbound_nodes": []},
      {"class_name": "LSTM", "name": "a", "config": {"name": "a", "units": 2}, "inbound_nodes": [[["in", 0, 0, {}]]]},
      {"class_name": "GRU", "name": "b", "config": {"name": "b", "units": 2}, "inbound_nodes": [[["in", 0, 0, {}]]]},
      {"class_name": "Add", "name": "add", "config": {"name": "add"}, "inbound_nodes": [[["a", 0, 0, {}], ["b", 0, 0, {}]]]}],
    "input_layers": [["in", 0, 0]], "output_layers": [["add", 0, 0]]}})");
  EXPECT_HAS(data_error([&] { model_from_keras_json(j, {"f.h5", "2.15.0"}); }), "single chain");
}

TEST_F(KerasErrors, AFailedExportLeavesTheOldFileUntouched) {
  for (const char* name : keras_formats()) {
    std::ofstream(path(name)) << "precious";
    Params broken = params_;
    broken.layers.pop_back();  // the Dense layer's weights are missing: writing fails half-way
    EXPECT_ANY_THROW(export_keras(path(name), cfg_.model, broken));
    std::ifstream in(path(name));
    std::string text;
    std::getline(in, text);
    EXPECT_EQ(text, "precious") << name;
    EXPECT_FALSE(fs::exists(path(name) + ".tmp")) << name;
  }
  EXPECT_THROW(export_keras(path("m.txt"), cfg_.model, params_), UsageError);
}

TEST_F(KerasErrors, GruResetAfterMismatchSaysWhatToSet) {
  export_keras(path("m.h5"), cfg_.model, params_);
  ModelSpec before = other(R"(
model:
  layers:
    - {type: Input, shape: [5, 3]}
    - {type: LSTM, units: 4, return_sequences: true}
    - {type: GRU, units: 2, reset_after: false}
    - {type: Dense, units: 1}
)");
  Rng rng(5);
  Params p = init_params(before, rng);
  const std::string m = data_error([&] { load_keras_weights(path("m.h5"), before, p); });
  EXPECT_HAS(m, "layer 'gru'");
  EXPECT_HAS(m, "(2, 6)");
}

}  // namespace
