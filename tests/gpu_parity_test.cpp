// The CUDA backend against the CPU backend (the specification) on random data: the model output,
// the gradient w.r.t. the inputs and every weight gradient, for each cell, direction mode, layer
// count, merge mode, masked and unmasked, fused (cuDNN stacks) and unfused (plan.fuse: never), the
// generic recurrent path, Embedding/Masking/Dense around them. Both sides use strict FP32 (cuDNN
// FMA_MATH, no TF32). Tolerances: outputs and input gradients |gpu - cpu| <= 1e-5 + 1e-4 |cpu|,
// weight gradients <= 2e-5 + 2e-4 |cpu|. Each case prints its worst differences. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdio>

#include "gpu_helpers.h"
#include "plan/plan.h"

namespace rnntrain {
namespace {

using namespace rnntrain::testing;

constexpr double kOutAtol = 1e-5, kOutRtol = 1e-4;    // outputs and dx
constexpr double kGradAtol = 2e-5, kGradRtol = 2e-4;  // weight gradients

struct Case {
  std::string name;
  std::string input;   // Input shape
  std::string layers;  // YAML list after the Input layer
  LossKind loss = LossKind::MSE;
  FuseMode fuse = FuseMode::Auto;
  bool masked = false;
  std::vector<int32_t> lengths = {7, 5, 3, 1, 7};
};

const char* kF = "[7, 5]";  // T = 7 steps of 5 features
const char* kTok = "[7]";

std::vector<Case> cases() {
  const std::vector<Case> base = {
      // cuDNN stacks: each cell, uni- and bidirectional, 1-3 layers, every last-layer merge mode.
      {"lstm_last_step", kF, "[{type: LSTM, units: 8}, {type: Dense, units: 3}]"},
      {"lstm3_sequences", kF, "[{type: LSTM, units: 8, return_sequences: true}, {type: LSTM, units: 8, return_sequences: true}, {type: LSTM, units: 8, return_sequences: true}]"},
      {"lstm2_dropout0_between", kF, "[{type: LSTM, units: 8, return_sequences: true}, {type: Dropout, rate: 0.0}, {type: LSTM, units: 8}]"},
      {"gru2_last_step", kF, "[{type: GRU, units: 8, return_sequences: true}, {type: GRU, units: 8}, {type: Dense, units: 2}]"},
      {"gru2_sequences", kF, "[{type: GRU, units: 8, return_sequences: true}, {type: GRU, units: 8, return_sequences: true}]"},
      {"rnn_tanh2_last_step", kF, "[{type: SimpleRNN, units: 8, return_sequences: true}, {type: SimpleRNN, units: 8}]"},
      {"rnn_relu2_sequences", kF, "[{type: SimpleRNN, units: 8, activation: relu, return_sequences: true}, {type: SimpleRNN, units: 8, activation: relu, return_sequences: true}]"},
      {"bilstm2_last_step", kF, "[{type: Bidirectional, layer: {type: LSTM, units: 8, return_sequences: true}}, {type: Bidirectional, layer: {type: LSTM, units: 8}}, {type: Dense, units: 2}]"},
      {"bigru2_sequences_ave", kF, "[{type: Bidirectional, layer: {type: GRU, units: 8, return_sequences: true}}, {type: Bidirectional, merge_mode: ave, layer: {type: GRU, units: 8, return_sequences: true}}]"},
      {"bilstm2_last_step_mul", kF, "[{type: Bidirectional, layer: {type: LSTM, units: 8, return_sequences: true}}, {type: Bidirectional, merge_mode: mul, layer: {type: LSTM, units: 8}}]"},
      {"birnn_sequences_sum", kF, "[{type: Bidirectional, merge_mode: sum, layer: {type: SimpleRNN, units: 8, return_sequences: true}}]"},
      {"bigru_last_step_concat", kF, "[{type: Bidirectional, layer: {type: GRU, units: 8}}]"},
      // The generic path: what cuDNN cannot run.
      {"generic_lstm_hard_sigmoid", kF, "[{type: LSTM, units: 8, recurrent_activation: hard_sigmoid, return_sequences: true}, {type: LSTM, units: 8, recurrent_activation: hard_sigmoid}]"},
      {"generic_gru_reset_before", kF, "[{type: GRU, units: 8, reset_after: false, return_sequences: true}, {type: Dense, units: 2}]"},
      {"generic_gru_reset_before_last", kF, "[{type: GRU, units: 8, reset_after: false}]"},
      {"generic_rnn_relu_no_bias", kF, "[{type: SimpleRNN, units: 8, activation: relu, use_bias: false, return_sequences: true}]"},
      {"generic_lstm_go_backwards", kF, "[{type: LSTM, units: 8, go_backwards: true, return_sequences: true}]"},
      {"generic_lstm_relu", kF, "[{type: LSTM, units: 8, activation: relu}, {type: Dense, units: 3}]"},
      {"generic_bigru_reset_before", kF, "[{type: Bidirectional, layer: {type: GRU, units: 8, reset_after: false, return_sequences: true}}]"},
      {"generic_bilstm_hard_sigmoid_mul", kF, "[{type: Bidirectional, merge_mode: mul, layer: {type: LSTM, units: 8, recurrent_activation: hard_sigmoid}}]"},
      {"generic_then_cudnn", kF, "[{type: GRU, units: 8, reset_after: false, return_sequences: true}, {type: GRU, units: 8, return_sequences: true}, {type: GRU, units: 8}]"},
      // Layers around the recurrent ones.
      {"embedding_mask_zero", kTok, "[{type: Embedding, input_dim: 11, output_dim: 5, mask_zero: true}, {type: LSTM, units: 8, return_sequences: true}, {type: TimeDistributed, layer: {type: Dense, units: 3}}]"},
      {"masking_gru", kF, "[{type: Masking, mask_value: 0.0}, {type: GRU, units: 8, return_sequences: true}, {type: Dense, units: 2, activation: tanh}]"},
      {"softmax_categorical", kF, "[{type: LSTM, units: 8}, {type: Dense, units: 4, activation: softmax}]", LossKind::CategoricalCrossentropy},
      // The activations whose derivative needs the pre-activation (the Dense stage keeps it).
      {"dense_gelu_silu_elu", kF, "[{type: GRU, units: 8, return_sequences: true}, {type: TimeDistributed, layer: {type: Dense, units: 6, activation: gelu}}, {type: Dense, units: 5, activation: silu}, {type: Dense, units: 4, activation: elu}, {type: Dense, units: 3, activation: gelu_approximate}]"},
      {"dense_selu_softplus_softsign", kF, "[{type: LSTM, units: 8}, {type: Dense, units: 6, activation: selu}, {type: Dense, units: 5, activation: softplus}, {type: Dense, units: 3, activation: softsign}]"},
      // The layers around the recurrent stacks (issue 36); dropout rates 0 (the masks of the two
      // engines come from different generators: gpu_dropout_test checks them).
      {"conv_same_maxpool_lstm", kF, "[{type: Conv1D, filters: 6, kernel_size: 3, padding: same, activation: relu}, {type: MaxPooling1D, pool_size: 2}, {type: LSTM, units: 8}, {type: Dense, units: 3}]"},
      {"conv_causal_avgpool_layernorm_gap", kF, "[{type: Conv1D, filters: 4, kernel_size: 2, padding: causal, dilation_rate: 2, activation: gelu}, {type: AveragePooling1D, pool_size: 3, strides: 1, padding: same}, {type: LayerNormalization}, {type: GRU, units: 8, return_sequences: true}, {type: GlobalAveragePooling1D}, {type: Dense, units: 2}]"},
      {"conv_strided_nobias_td_dropout", kF, "[{type: Conv1D, filters: 5, kernel_size: 2, strides: 2, use_bias: false}, {type: LSTM, units: 8, return_sequences: true}, {type: TimeDistributed, layer: {type: Dropout, rate: 0.0}}, {type: SpatialDropout1D, rate: 0.0}, {type: Activation, activation: silu}, {type: AveragePooling1D, pool_size: 2}]"},
      {"masking_layernorm_gmp_flatten", kF, "[{type: Masking, mask_value: 0.0}, {type: LSTM, units: 8, return_sequences: true}, {type: LayerNormalization, center: false, epsilon: 0.01}, {type: GlobalMaxPooling1D, keepdims: true}, {type: Flatten}, {type: Dense, units: 2}]"},
      {"masking_conv_drops_the_mask", kF, "[{type: Masking, mask_value: 0.0}, {type: Conv1D, filters: 4, kernel_size: 2, padding: same}, {type: LSTM, units: 8, return_sequences: true}, {type: Dense, units: 2}]"},
      {"masking_gap_activation_softmax", kF, "[{type: Masking, mask_value: 0.0}, {type: GRU, units: 8, return_sequences: true}, {type: Activation, activation: softmax}, {type: GlobalAveragePooling1D, keepdims: true}, {type: Conv1D, filters: 3, kernel_size: 1}]"},
      {"sparse_logits_sequences", kF, "[{type: GRU, units: 8, return_sequences: true}, {type: Dense, units: 4}]", LossKind::SparseCategoricalCrossentropy},
      {"lstm_empty_sequence", kF, "[{type: LSTM, units: 8, return_sequences: true}, {type: LSTM, units: 8, return_sequences: true}]",
       LossKind::MSE, FuseMode::Auto, true, {7, 0, 3, 1, 6}},
      {"bilstm_empty_sequence", kF, "[{type: Bidirectional, layer: {type: LSTM, units: 8}}]", LossKind::MSE, FuseMode::Auto,
       true, {0, 7, 2, 1, 5}},
      // A model that makes its own mask runs bidirectional stacks one direction at a time, the backward
      // one on each sequence reversed within its length (split_bidirectional.cpp).
      {"masking_bilstm2_sequences_sum", kF, "[{type: Masking, mask_value: 0.0}, {type: Bidirectional, layer: {type: LSTM, units: 8, return_sequences: true}}, {type: Bidirectional, merge_mode: sum, layer: {type: LSTM, units: 8, return_sequences: true}}]"},
      {"masking_bilstm2_dropout0_between", kF, "[{type: Masking, mask_value: 0.0}, {type: Bidirectional, layer: {type: LSTM, units: 8, return_sequences: true}}, {type: Dropout, rate: 0.0}, {type: Bidirectional, layer: {type: LSTM, units: 8}}, {type: Dense, units: 2}]"},
      {"mask_zero_bigru_last_step_mul", kTok, "[{type: Embedding, input_dim: 11, output_dim: 5, mask_zero: true}, {type: Bidirectional, merge_mode: mul, layer: {type: GRU, units: 8}}, {type: Dense, units: 3}]"},
      {"masking_bigru_empty_sequence", kF, "[{type: Masking, mask_value: 0.0}, {type: Bidirectional, merge_mode: ave, layer: {type: GRU, units: 8, return_sequences: true}}]",
       LossKind::MSE, FuseMode::Auto, true, {0, 7, 2, 1, 5}},
  };
  std::vector<Case> out;
  for (const Case& c : base) {
    if (c.masked) {  // a case about masks only
      out.push_back(c);
      continue;
    }
    for (bool masked : {false, true})
      for (FuseMode fuse : {FuseMode::Auto, FuseMode::Never}) {
        const ModelSpec m = config_of(c.input, c.layers, c.name).model;
        if (fuse == FuseMode::Never && make_plan(m, fuse).stages.size() == make_plan(m, FuseMode::Auto).stages.size())
          continue;  // nothing to fuse: the same plan as auto
        Case v = c;
        v.masked = masked, v.fuse = fuse;
        v.name += std::string(masked ? "_masked" : "") + (fuse == FuseMode::Never ? "_unfused" : "");
        out.push_back(v);
      }
  }
  return out;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class Parity : public ::testing::TestWithParam<Case> {};

TEST_P(Parity, OutputsInputGradientsAndWeightGradientsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const Case& c = GetParam();
  Config cfg = config_of(c.input, c.layers, c.name);
  cfg.train.loss.kind = c.loss;
  cfg.train.loss.from_logits = c.loss == LossKind::SparseCategoricalCrossentropy;
  cfg.plan.fuse = c.fuse;
  const int64_t B = 5, T = 7;
  const Batch batch = random_batch(cfg, B, T, 99, c.masked ? c.lengths : std::vector<int32_t>{});
  const Params params = random_params(cfg.model, 3);

  Config cpu_cfg = cfg, gpu_cfg = cfg;
  cpu_cfg.device = Device::Cpu;
  gpu_cfg.device = Device::Cuda;
  Rng r1(1), r2(1);
  auto cpu = make_engine(cpu_cfg, params, r1);
  auto gpu = make_engine(gpu_cfg, params, r2);
  ASSERT_NE(gpu->device_name().find("cuda"), std::string::npos) << gpu->device_name();

  Tensor pc, pg, dxc, dxg;
  const LossValue lc = cpu->gradients(batch, &pc, &dxc);
  const LossValue lg = gpu->gradients(batch, &pg, &dxg);
  EXPECT_NEAR(lg.sum, lc.sum, 1e-5 + 1e-4 * std::fabs(lc.sum)) << "loss sum";
  EXPECT_EQ(lg.count, lc.count) << "unmasked positions";
  const double e_out = expect_near_all(pg, pc, kOutAtol, kOutRtol, "output");
  double e_dx = 0.0;
  if (dxc.empty()) EXPECT_TRUE(dxg.empty()) << "token inputs have no input gradient";
  else e_dx = expect_near_all(dxg, dxc, kOutAtol, kOutRtol, "input gradient");
  double e_grad = 0.0;
  const std::vector<Param*> pcs = cpu->host_params().all(), pgs = gpu->host_params().all();
  ASSERT_EQ(pcs.size(), pgs.size());
  for (size_t i = 0; i < pcs.size(); ++i) {
    e_grad = std::max(e_grad, expect_near_all(pgs[i]->grad, pcs[i]->grad, kGradAtol, kGradRtol,
                                              "gradient of parameter " + std::to_string(i) + " " + pcs[i]->name));
    expect_near_all(pgs[i]->value, pcs[i]->value, 0.0, 0.0, "value of parameter " + std::to_string(i));
  }
  std::printf("parity case=%s max_abs_diff output=%.3g dx=%.3g weight_grad=%.3g\n", c.name.c_str(), e_out, e_dx,
              e_grad);
}

INSTANTIATE_TEST_SUITE_P(All, Parity, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rnntrain
