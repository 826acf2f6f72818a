// CpuModel against real Keras: outputs, weight gradients and input gradients of small models,
// generated once by tests/backend_keras_golden/gen.py (Keras 3, JAX backend, CPU) and checked in.
// Each case here builds the same model as the generator's case of the same name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "backend/cpu/cpu_model.h"
#include "backend_helpers.h"

namespace rnntrain {
namespace {

using namespace rnntrain::testing;

// |cpu - keras| <= kAtol + kRtol * |keras|: float32 against float32 with another summation order.
constexpr double kAtol = 2e-6;
constexpr double kRtol = 1e-5;
constexpr int64_t T = 5, I = 3, H = 4;

// name -> array, from lines "name d0 d1 ... : v0 v1 ...".
std::map<std::string, Tensor> read_case(const std::string& name) {
  const std::string path = std::string(RNNTRAIN_SOURCE_DIR) + "/tests/backend_keras_golden/" + name + ".txt";
  std::ifstream in(path);
  std::map<std::string, Tensor> out;
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return out;
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream is(line);
    std::string key, tok;
    is >> key;
    Shape shape;
    while (is >> tok && tok != ":") shape.push_back(std::stoll(tok));
    Tensor t(shape);
    for (float& v : t.data) is >> v;
    EXPECT_FALSE(is.fail()) << path << ": array " << key << " is shorter than its shape " << shape_str(shape);
    out[key] = std::move(t);
  }
  return out;
}

LayerSpec cell(LayerKind k, bool seq, Activation ract = Activation::Sigmoid) {
  LayerSpec l = recurrent(k, H, seq);
  l.recurrent_activation = ract;
  return l;
}

MergeMode merge_of(const std::string& n) {
  if (n.find("_concat_") != std::string::npos) return MergeMode::Concat;
  if (n.find("_sum_") != std::string::npos) return MergeMode::Sum;
  if (n.find("_mul_") != std::string::npos) return MergeMode::Mul;
  return MergeMode::Ave;
}

Activation activation_of(const std::string& name) {
  for (Activation a : {Activation::Gelu, Activation::GeluApproximate, Activation::Elu, Activation::Selu,
                       Activation::Softplus, Activation::Softsign, Activation::Silu})
    if (name == activation_name(a)) return a;
  ADD_FAILURE() << "no activation " << name;
  return Activation::Linear;
}

// The model of gen.py's case `n` (Keras defaults otherwise).
ModelSpec model_for(const std::string& n) {
  std::vector<LayerSpec> ls{input_layer({T, I})};
  if (n.find("masked") != std::string::npos) ls.push_back(masking(0.0));
  if (n == "lstm_seq") {
    ls.push_back(cell(LayerKind::LSTM, true));
  } else if (n == "lstm_last_hardsig") {
    ls.push_back(cell(LayerKind::LSTM, false, Activation::HardSigmoid));
  } else if (n == "gru_after_seq") {
    ls.push_back(cell(LayerKind::GRU, true));
  } else if (n == "gru_before_seq") {
    ls.push_back(cell(LayerKind::GRU, true));
    ls.back().reset_after = false;
  } else if (n == "gru_nobias_last") {
    ls.push_back(cell(LayerKind::GRU, false, Activation::HardSigmoid));
    ls.back().use_bias = false;
  } else if (n == "simplernn_relu_seq") {
    ls.push_back(cell(LayerKind::SimpleRNN, true));
    ls.back().activation = Activation::Relu;
  } else if (n == "lstm_backwards_seq") {
    ls.push_back(cell(LayerKind::LSTM, true));
    ls.back().go_backwards = true;
  } else if (n == "gru_backwards_last_masked") {
    ls.push_back(cell(LayerKind::GRU, false));
    ls.back().go_backwards = true;
  } else if (n == "lstm_masked_seq") {
    ls.push_back(cell(LayerKind::LSTM, true));
  } else if (n == "simplernn_masked_last") {
    ls.push_back(cell(LayerKind::SimpleRNN, false));
  } else if (n.rfind("bidir_gru_", 0) == 0) {
    ls.push_back(bidirectional(cell(LayerKind::GRU, true), merge_of(n)));
  } else if (n.rfind("bidir_lstm_", 0) == 0) {
    ls.push_back(bidirectional(cell(LayerKind::LSTM, false), merge_of(n)));
  } else if (n == "stack_softmax") {
    ls.push_back(cell(LayerKind::LSTM, true));
    ls.push_back(cell(LayerKind::GRU, false));
    ls.push_back(dense(3, Activation::Softmax));
  } else if (n == "td_sigmoid_masked") {
    ls.push_back(cell(LayerKind::SimpleRNN, true));
    ls.push_back(time_distributed(dense(3, Activation::Sigmoid)));
  } else if (n == "dense_seq_tanh") {
    ls.push_back(dense(3, Activation::Tanh));
  } else if (n.rfind("dense_act_", 0) == 0) {
    ls.push_back(cell(LayerKind::GRU, true));
    ls.push_back(dense(3, activation_of(n.substr(10))));
  } else if (n == "conv1d_same_gelu") {
    ls.push_back(conv1d(4, 3, Padding::Same, 1, 1, Activation::Gelu));
    ls.push_back(cell(LayerKind::GRU, true));
  } else if (n == "conv1d_causal_dilated") {
    ls.push_back(conv1d(3, 2, Padding::Causal, 1, 2));
    ls.push_back(cell(LayerKind::LSTM, false));
  } else if (n == "conv1d_valid_strided_nobias") {
    ls.push_back(conv1d(4, 2, Padding::Valid, 2));
    ls.back().use_bias = false;
    ls.push_back(cell(LayerKind::LSTM, true));
  } else if (n == "maxpool_same") {
    ls.push_back(cell(LayerKind::LSTM, true));
    ls.push_back(pooling1d(LayerKind::MaxPooling1D, 2, Padding::Same));
  } else if (n == "avgpool_same_strides1") {
    ls.push_back(cell(LayerKind::LSTM, true));
    ls.push_back(pooling1d(LayerKind::AveragePooling1D, 3, Padding::Same, 1));
  } else if (n == "avgpool_valid") {
    ls.push_back(cell(LayerKind::GRU, true));
    ls.push_back(pooling1d(LayerKind::AveragePooling1D, 2));
  } else if (n == "gap_masked") {
    ls.push_back(cell(LayerKind::LSTM, true));
    ls.push_back(layer_of(LayerKind::GlobalAveragePooling1D));
    ls.push_back(dense(2));
  } else if (n == "gmp_keepdims") {
    ls.push_back(cell(LayerKind::GRU, true));
    ls.push_back(layer_of(LayerKind::GlobalMaxPooling1D));
    ls.back().keepdims = true;
  } else if (n == "layernorm_seq") {
    ls.push_back(cell(LayerKind::LSTM, true));
    ls.push_back(layer_of(LayerKind::LayerNormalization));
    ls.push_back(cell(LayerKind::GRU, false));
  } else if (n == "layernorm_noscale_masked") {
    ls.push_back(cell(LayerKind::GRU, true));
    ls.push_back(layer_of(LayerKind::LayerNormalization));
    ls.back().scale = false, ls.back().epsilon = 0.01;
    ls.push_back(cell(LayerKind::LSTM, true));
  } else if (n == "flatten_softmax") {
    ls.push_back(conv1d(2, 2));
    ls.push_back(layer_of(LayerKind::Flatten));
    ls.push_back(dense(3, Activation::Softmax));
  } else if (n == "activation_selu_masked") {
    ls.push_back(cell(LayerKind::GRU, true));
    ls.push_back(activation_layer(Activation::Selu));
    ls.push_back(cell(LayerKind::SimpleRNN, false));
  } else if (n == "conv1d_same_strided_even") {
    ls.push_back(conv1d(3, 4, Padding::Same, 2));
    ls.push_back(pooling1d(LayerKind::MaxPooling1D, 3, Padding::Same, 2));
  } else if (n == "avgpool_same_strided") {
    ls.push_back(cell(LayerKind::LSTM, true));
    ls.push_back(pooling1d(LayerKind::AveragePooling1D, 2, Padding::Same));
  } else if (n == "embedding_lstm_seq") {
    ls[0] = input_layer({T});
    ls.push_back(embedding(7, 3, true));
    ls.push_back(cell(LayerKind::LSTM, true));
  } else {
    ADD_FAILURE() << "no model for case " << n;
  }
  return model_of(std::move(ls));
}

// Fails with the worst entry of `got` against `want`.
void expect_match(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  int64_t worst = -1;
  double worst_excess = 0.0;
  for (int64_t k = 0; k < want.numel(); ++k) {
    const double excess = std::fabs(got[k] - want[k]) - (kAtol + kRtol * std::fabs(want[k]));
    if (excess > worst_excess) worst_excess = excess, worst = k;
  }
  if (worst >= 0)
    ADD_FAILURE() << what << ": entry " << worst << " is " << got[worst] << ", Keras has " << want[worst]
                  << " (first values " << got[0] << " vs " << want[0] << ")";
}

class KerasGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(KerasGolden, OutputsAndGradientsMatchKeras) {
  const std::string name = GetParam();
  std::map<std::string, Tensor> k = read_case(name);
  ASSERT_TRUE(k.count("x") && k.count("y") && k.count("w")) << name;
  const ModelSpec spec = model_for(name);
  Rng rng(1);
  Params params = init_params(spec, rng);
  std::vector<Param*> all = params.all();
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string key = "p" + std::to_string(i);
    ASSERT_TRUE(k.count(key)) << name << ": Keras has fewer weights than our " << all.size();
    ASSERT_EQ(k[key].shape, all[i]->value.shape) << name << ": weight " << i << " (" << all[i]->name << ")";
    all[i]->value = k[key];
  }
  ASSERT_FALSE(k.count("p" + std::to_string(all.size()))) << name << ": Keras has more weights than our " << all.size();
  CpuModel model(spec, params);
  ForwardContext ctx;
  const Tensor y = model.forward(k["x"], nullptr, false, rng, &ctx);
  expect_match(y, k["y"], name + " output");
  params.zero_grad();
  const Tensor dx = model.backward(ctx, k["w"]);
  for (size_t i = 0; i < all.size(); ++i)
    expect_match(all[i]->grad, k["g" + std::to_string(i)], name + " gradient of " + all[i]->name);
  if (k.count("dx")) expect_match(dx, k["dx"], name + " input gradient");
}

INSTANTIATE_TEST_SUITE_P(
    Keras, KerasGolden,
    ::testing::Values("lstm_seq", "lstm_last_hardsig", "gru_after_seq", "gru_before_seq", "gru_nobias_last",
                      "simplernn_relu_seq", "lstm_backwards_seq", "gru_backwards_last_masked", "lstm_masked_seq",
                      "simplernn_masked_last", "bidir_gru_concat_seq_masked", "bidir_gru_sum_seq_masked",
                      "bidir_gru_mul_seq_masked", "bidir_gru_ave_seq_masked", "bidir_lstm_concat_last_masked",
                      "bidir_lstm_sum_last_masked", "bidir_lstm_mul_last_masked", "bidir_lstm_ave_last_masked",
                      "stack_softmax", "td_sigmoid_masked", "dense_seq_tanh", "embedding_lstm_seq",
                      "dense_act_gelu", "dense_act_gelu_approximate", "dense_act_elu", "dense_act_selu",
                      "dense_act_softplus", "dense_act_softsign", "dense_act_silu", "conv1d_same_gelu",
                      "conv1d_causal_dilated", "conv1d_valid_strided_nobias", "maxpool_same", "avgpool_same_strides1",
                      "avgpool_valid", "gap_masked", "gmp_keepdims", "layernorm_seq", "layernorm_noscale_masked",
                      "flatten_softmax", "activation_selu_masked", "conv1d_same_strided_even",
                      "avgpool_same_strided"),
    [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace rnntrain
