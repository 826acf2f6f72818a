// The planner's merge rules, table-driven: for each model, the stages it makes (cuDNN stacks with
// their recurrent-layer counts, generic RNNs) and the reason printed for each unmerged boundary.
#include <gtest/gtest.h>

#include "plan/plan.h"
#include "spec/parse.h"

using namespace rnntrain;

namespace {

struct Case {
  const char* name;
  const char* layers;   // YAML list items after the Input layer
  const char* stages;   // compact: "C2 L C1" = cuDNN stack of 2, a plain layer, cuDNN stack of 1; "G" generic
  const char* reason;   // substring of the first unmerged boundary's reason ("" = all merged)
  FuseMode fuse = FuseMode::Auto;
};

std::string compact(const ModelSpec& m, const Plan& p) {
  std::string out;
  for (const Stage& s : p.stages) {
    if (m.layers[s.layers[0]].kind == LayerKind::Input) continue;
    if (!out.empty()) out += " ";
    if (s.kind == StageKind::CudnnStack) out += "C" + std::to_string(s.rnn_layers);
    else if (s.kind == StageKind::GenericRnn) out += "G";
    else out += "L";
  }
  return out;
}

const Case kCases[] = {
    {"three_lstm_merge", "[{type: LSTM, units: 8, return_sequences: true}, {type: LSTM, units: 8, return_sequences: true}, {type: LSTM, units: 8}]", "C3", ""},
    {"dropout_between_maps_to_cudnn", "[{type: LSTM, units: 8, return_sequences: true}, {type: Dropout, rate: 0.2}, {type: LSTM, units: 8}]", "C2", ""},
    {"two_dropouts_between", "[{type: LSTM, units: 8, return_sequences: true}, {type: Dropout, rate: 0.2}, {type: Dropout, rate: 0.1}, {type: LSTM, units: 8}]", "C1 L L C1", "more than one Dropout"},
    {"different_dropout_rates", "[{type: GRU, units: 8, return_sequences: true}, {type: Dropout, rate: 0.2}, {type: GRU, units: 8, return_sequences: true}, {type: GRU, units: 8}]", "C2 C1", "differs from the stack"},
    {"dense_between", "[{type: LSTM, units: 8, return_sequences: true}, {type: Dense, units: 8}, {type: LSTM, units: 8}]", "C1 L C1", "sits between"},
    {"different_cells", "[{type: LSTM, units: 8, return_sequences: true}, {type: GRU, units: 8}]", "C1 C1", "different cells"},
    {"different_units", "[{type: LSTM, units: 8, return_sequences: true}, {type: LSTM, units: 16}]", "C1 C1", "different units"},
    {"hard_sigmoid_is_generic", "[{type: LSTM, units: 8, return_sequences: true, recurrent_activation: hard_sigmoid}, {type: LSTM, units: 8}]", "G C1", "recurrent_activation hard_sigmoid"},
    {"relu_lstm_is_generic", "[{type: LSTM, units: 8, activation: relu}]", "G", ""},
    {"gru_reset_before_is_generic", "[{type: GRU, units: 8, reset_after: false, return_sequences: true}, {type: GRU, units: 8}]", "G C1", "reset_after"},
    {"recurrent_dropout_is_generic", "[{type: GRU, units: 8, return_sequences: true}, {type: GRU, units: 8, recurrent_dropout: 0.1}]", "C1 G", "recurrent_dropout"},
    {"no_bias_is_generic", "[{type: SimpleRNN, units: 8, use_bias: false}]", "G", ""},
    {"simple_rnn_relu_merges", "[{type: SimpleRNN, units: 8, activation: relu, return_sequences: true}, {type: SimpleRNN, units: 8, activation: relu}]", "C2", ""},
    {"simple_rnn_mixed_activations", "[{type: SimpleRNN, units: 8, return_sequences: true}, {type: SimpleRNN, units: 8, activation: relu}]", "C1 C1", "different activations"},
    {"go_backwards_is_generic", "[{type: LSTM, units: 8, go_backwards: true}]", "G", ""},
    {"input_dropout_on_second_layer", "[{type: LSTM, units: 8, return_sequences: true}, {type: LSTM, units: 8, dropout: 0.1}]", "C1 C1", "input dropout"},
    {"input_dropout_on_first_layer_merges", "[{type: LSTM, units: 8, return_sequences: true, dropout: 0.1}, {type: LSTM, units: 8}]", "C2", ""},
    {"bidirectional_concat_merges", "[{type: Bidirectional, layer: {type: LSTM, units: 8, return_sequences: true}}, {type: Bidirectional, layer: {type: LSTM, units: 8}}]", "C2", ""},
    {"bidirectional_sum_between", "[{type: Bidirectional, merge_mode: sum, layer: {type: LSTM, units: 8, return_sequences: true}}, {type: Bidirectional, layer: {type: LSTM, units: 8}}]", "C1 C1", "merge_mode"},
    {"bidirectional_sum_on_last_merges", "[{type: Bidirectional, layer: {type: GRU, units: 8, return_sequences: true}}, {type: Bidirectional, merge_mode: ave, layer: {type: GRU, units: 8}}]", "C2", ""},
    {"bidirectional_then_unidirectional", "[{type: Bidirectional, layer: {type: LSTM, units: 8, return_sequences: true}}, {type: LSTM, units: 8}]", "C1 C1", "Bidirectional"},
    {"bidirectional_input_dropout_is_generic", "[{type: Bidirectional, layer: {type: LSTM, units: 8, dropout: 0.1}}]", "G", ""},
    {"activity_regularizer_ends_a_stack", "[{type: LSTM, units: 8, return_sequences: true}, {type: LSTM, units: 8, return_sequences: true, activity_regularizer: l2}, {type: LSTM, units: 8}]", "C2 C1", "activity_regularizer"},
    {"activity_regularizer_on_the_last_merges", "[{type: Bidirectional, layer: {type: GRU, units: 8, return_sequences: true}}, {type: Bidirectional, layer: {type: GRU, units: 8, activity_regularizer: {l1: 0.01}}}]", "C2", ""},
    {"fuse_never", "[{type: LSTM, units: 8, return_sequences: true}, {type: LSTM, units: 8}]", "C1 C1", "plan.fuse: never", FuseMode::Never},
};

class PlanRules : public ::testing::TestWithParam<Case> {};

TEST_P(PlanRules, StagesAndReasons) {
  const Case& c = GetParam();
  const std::string yaml = std::string("model:\n  layers: [{type: Input, shape: [5, 3]}, ") + (c.layers + 1) + "\n";
  Config cfg = parse_config(yaml, std::string(c.name) + ".yaml");
  Plan p = make_plan(cfg.model, c.fuse);
  EXPECT_EQ(compact(cfg.model, p), c.stages) << describe_plan(resolve_model(cfg.model, c.fuse));
  std::string first_reason;
  for (const Boundary& b : p.boundaries)
    if (!b.merged) {
      first_reason = b.reason;
      break;
    }
  if (std::string(c.reason).empty()) EXPECT_EQ(first_reason, "") << describe_plan(resolve_model(cfg.model, c.fuse));
  else EXPECT_NE(first_reason.find(c.reason), std::string::npos) << "reason was: " << first_reason;
  // Every pair of consecutive recurrent layers has exactly one boundary.
  size_t rnn = 0;
  for (const auto& l : cfg.model.layers) rnn += is_recurrent(l.kind) || l.kind == LayerKind::Bidirectional;
  EXPECT_EQ(p.boundaries.size(), rnn ? rnn - 1 : 0);
}

INSTANTIATE_TEST_SUITE_P(All, PlanRules, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
