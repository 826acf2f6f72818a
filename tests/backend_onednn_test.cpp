// The CPU backend's oneDNN stacks (plan.cpu: onednn) against its reference path: outputs, input
// gradients and every weight gradient, for LSTM and GRU, one direction and both (concat and sum),
// 1 to 3 layers, return_sequences both ways, inputs as wide as the stack's outputs (one multi-layer
// primitive) and not; a masked batch (lengths, an empty sequence among them) gives the reference
// results too: unidirectional stacks on oneDNN over the longest sequence's steps with the mask
// applied around them,
// bidirectional ones on the reference ops exactly, as is a mask with a gap; a layer oneDNN cannot
// run splits the stack; and 20 Adam steps end where the reference run ends. Skips with the reason
// in a build without oneDNN.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "backend/cpu/cpu_model.h"
#include "backend/cpu/onednn_stack.h"
#include "backend/cpu/packed_gemm.h"
#include "backend_helpers.h"
#include "spec/parse.h"
#include "backend/engine.h"

namespace rnntrain {
namespace {

using namespace rnntrain::testing;

#define SKIP_WITHOUT_ONEDNN()                                                                            \
  do {                                                                                                   \
    if (!cpu::onednn_built()) GTEST_SKIP() << "this build has no oneDNN (libdnnl-dev not found by CMake)"; \
  } while (0)

struct StackCase {
  std::string name, layers;  // YAML list items after the Input
  int64_t features = 6;
};

void PrintTo(const StackCase& c, std::ostream* os) { *os << c.name; }

// plan.cpu: onednn (the default, auto, is the own engine on CPUs with AVX-512).
Config config_of(const StackCase& c) {
  Config cfg = parse_config("model:\n  layers: [{type: Input, shape: [null, " + std::to_string(c.features) + "]}, " +
                                c.layers.substr(1) + "\nplan: {cpu: onednn}\n",
                            c.name + ".yaml");
  return cfg;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (float v : t.data) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

// |a - b| <= 1e-5 * max|b| + 1e-6 everywhere (float sums in another order).
void expect_close(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape, b.shape) << what;
  const double tol = 1e-5 * max_abs(b) + 1e-6;
  for (int64_t i = 0; i < b.numel(); ++i) ASSERT_NEAR(a[i], b[i], tol) << what << " [" << i << "]";
}

// Forward and backward of one batch on both paths; dy is a fixed random tensor.
void compare(const StackCase& c, const std::vector<int32_t>& lengths, bool exact) {
  Config cfg = config_of(c);
  Params p1 = random_params(cfg.model, 3, 0.5), p2 = p1;
  CpuModel ref(cfg.model, p1);
  CpuModel fast(cfg.model, p2, &cfg.plan);
  Rng rng(5);
  const int64_t B = 5, T = 7;
  const Tensor x = random_tensor({B, T, c.features}, rng);
  const std::vector<int32_t>* lens = lengths.empty() ? nullptr : &lengths;
  ForwardContext c1, c2;
  Rng r1(1), r2(1);
  const Tensor y1 = ref.forward(x, lens, true, r1, &c1);
  const Tensor y2 = fast.forward(x, lens, true, r2, &c2);
  const Tensor dy = random_tensor(y1.shape, rng);
  const Tensor dx1 = ref.backward(c1, dy), dx2 = fast.backward(c2, dy);
  if (exact) {
    EXPECT_EQ(y2.data, y1.data) << c.name << ": outputs";
    EXPECT_EQ(dx2.data, dx1.data) << c.name << ": input gradient";
  } else {
    expect_close(y2, y1, c.name + ": outputs");
    expect_close(dx2, dx1, c.name + ": input gradient");
  }
  const std::vector<Param*> g1 = p1.all(), g2 = p2.all();
  for (size_t i = 0; i < g1.size(); ++i) {
    if (exact) EXPECT_EQ(g2[i]->grad.data, g1[i]->grad.data) << c.name << ": gradient of " << g1[i]->name;
    else expect_close(g2[i]->grad, g1[i]->grad, c.name + ": gradient of " + g1[i]->name);
  }
}

class OnednnStacks : public ::testing::TestWithParam<StackCase> {};

TEST_P(OnednnStacks, MatchTheReferencePath) {
  SKIP_WITHOUT_ONEDNN();
  compare(GetParam(), {}, false);
}

TEST_P(OnednnStacks, AMaskedBatchMatchesTheReferencePath) {
  SKIP_WITHOUT_ONEDNN();
  const bool bidir = GetParam().layers.find("Bidirectional") != std::string::npos;  // the reference ops: exactly
  compare(GetParam(), {7, 3, 7, 0, 5}, bidir);
  compare(GetParam(), {5, 3, 1, 0, 5}, bidir);  // no sequence uses the last 2 steps: oneDNN runs 5
}

TEST(Onednn, AMaskWithAGapRunsTheReferenceOpsExactly) {
  SKIP_WITHOUT_ONEDNN();
  // Masking makes the mask from the data: sample 1 has a masked step between used ones, which no
  // lengths can say; the stack runs the reference ops.
  Config cfg = config_of(StackCase{"gap", "[{type: Masking, mask_value: 0.0}, {type: LSTM, units: 4, "
                                          "return_sequences: true}, {type: LSTM, units: 4}]"});
  Params p1 = random_params(cfg.model, 3, 0.5), p2 = p1;
  CpuModel ref(cfg.model, p1), fast(cfg.model, p2, &cfg.plan);
  Rng rng(5);
  Tensor x = random_tensor({3, 6, 6}, rng);
  for (int64_t j = 0; j < 6; ++j) x[(1 * 6 + 2) * 6 + j] = 0.0f;  // sample 1, step 2
  ForwardContext c1, c2;
  Rng r1(1), r2(1);
  const Tensor y1 = ref.forward(x, nullptr, true, r1, &c1), y2 = fast.forward(x, nullptr, true, r2, &c2);
  EXPECT_EQ(y2.data, y1.data);
  const Tensor dy = random_tensor(y1.shape, rng);
  EXPECT_EQ(fast.backward(c2, dy).data, ref.backward(c1, dy).data);
  const std::vector<Param*> g1 = p1.all(), g2 = p2.all();
  for (size_t i = 0; i < g1.size(); ++i) EXPECT_EQ(g2[i]->grad.data, g1[i]->grad.data) << g1[i]->name;
}

const char* kLstm3 =
    "[{type: LSTM, units: 8, return_sequences: true}, {type: LSTM, units: 8, return_sequences: true}, {type: LSTM, "
    "units: 8, return_sequences: true}]";
const char* kGru2Last = "[{type: GRU, units: 6, return_sequences: true}, {type: GRU, units: 6}]";
const char* kBilstm2 =
    "[{type: Bidirectional, layer: {type: LSTM, units: 5, return_sequences: true}}, {type: Bidirectional, layer: "
    "{type: LSTM, units: 5, return_sequences: true}}]";
const char* kBigruSumLast =
    "[{type: Bidirectional, layer: {type: GRU, units: 4, return_sequences: true}}, {type: Bidirectional, merge_mode: "
    "sum, layer: {type: GRU, units: 4}}]";
const char* kBilstmSum3 =
    "[{type: Bidirectional, layer: {type: LSTM, units: 3, return_sequences: true}}, {type: Bidirectional, layer: "
    "{type: LSTM, units: 3, return_sequences: true}}, {type: Bidirectional, merge_mode: sum, layer: {type: LSTM, "
    "units: 3, return_sequences: true}}]";
const char* kGru1 = "[{type: GRU, units: 9}]";
const char* kLstmDense = "[{type: LSTM, units: 6, return_sequences: true}, {type: Dense, units: 2}]";

INSTANTIATE_TEST_SUITE_P(
    Cells, OnednnStacks,
    ::testing::Values(StackCase{"lstm3", kLstm3},  // input 6, then 8: two primitives
                      StackCase{"lstm3_wide_input", kLstm3, 8},  // input = units: one 3-layer primitive
                      StackCase{"gru2_last_state", kGru2Last}, StackCase{"gru1_last_state", kGru1},
                      StackCase{"bilstm2_concat", kBilstm2}, StackCase{"bilstm2_concat_input10", kBilstm2, 10},
                      StackCase{"bigru2_sum_last_state", kBigruSumLast}, StackCase{"bilstm3_sum", kBilstmSum3},
                      StackCase{"lstm_then_dense", kLstmDense}),
    [](const auto& info) { return info.param.name; });

// plan.precision bf16 (issue 35 item 3): LSTM stacks run on oneDNN's bf16 kernels where the CPU has
// AVX512-BF16: outputs and gradients within bf16's rounding of the FP32 reference path, and not equal
// to the FP32 oneDNN stacks' (so bf16 did run). GRU stacks go to the own engine (onednn_bf16_reason).
void compare_bf16(const StackCase& c, const std::vector<int32_t>& lengths) {
  Config f32 = config_of(c), cfg = f32;
  cfg.plan.precision = Precision::Bf16;
  Params p1 = random_params(cfg.model, 3, 0.5), p2 = p1, p3 = p1;
  CpuModel ref(cfg.model, p1), bf(cfg.model, p2, &cfg.plan), fp(f32.model, p3, &f32.plan);
  Rng rng(5);
  const Tensor x = random_tensor({5, 7, c.features}, rng);
  const std::vector<int32_t>* lens = lengths.empty() ? nullptr : &lengths;
  ForwardContext c1, c2, c3;
  Rng r1(1), r2(1), r3(1);
  const Tensor y1 = ref.forward(x, lens, true, r1, &c1), y2 = bf.forward(x, lens, true, r2, &c2),
               y3 = fp.forward(x, lens, true, r3, &c3);
  const Tensor dy = random_tensor(y1.shape, rng);
  const Tensor dx1 = ref.backward(c1, dy), dx2 = bf.backward(c2, dy);
  fp.backward(c3, dy);
  double e_out = rel_err(y2, y1), e_dx = rel_err(dx2, dx1), e_grad = 0;
  const std::vector<Param*> g1 = p1.all(), g2 = p2.all();
  for (size_t i = 0; i < g1.size(); ++i) e_grad = std::max(e_grad, rel_err(g2[i]->grad, g1[i]->grad));
  EXPECT_LT(e_out, 2e-2) << c.name << ": outputs";
  EXPECT_LT(e_dx, 5e-2) << c.name << ": input gradient";
  EXPECT_LT(e_grad, 5e-2) << c.name << ": weight gradients";
  EXPECT_NE(y2.data, y3.data) << c.name << ": the bf16 stack computed what the FP32 one does";
  std::printf("bf16 case=%s%s output=%.3g dx=%.3g weight_grad=%.3g (relative to the largest)\n", c.name.c_str(),
              lens ? "_masked" : "", e_out, e_dx, e_grad);
}

#define SKIP_WITHOUT_BF16()                                                                                       \
  do {                                                                                                            \
    SKIP_WITHOUT_ONEDNN();                                                                                        \
    if (const std::string why = cpu::onednn_bf16_reason(LayerKind::LSTM); !why.empty()) GTEST_SKIP() << why;     \
  } while (0)

class OnednnBf16 : public ::testing::TestWithParam<StackCase> {};

TEST_P(OnednnBf16, LstmStacksMatchTheReferenceWithinBf16) {
  SKIP_WITHOUT_BF16();
  compare_bf16(GetParam(), {});
  if (GetParam().layers.find("Bidirectional") == std::string::npos) compare_bf16(GetParam(), {7, 3, 7, 0, 5});
}
INSTANTIATE_TEST_SUITE_P(Lstm, OnednnBf16,
                         ::testing::Values(StackCase{"lstm3", kLstm3}, StackCase{"lstm3_wide_input", kLstm3, 8},
                                           StackCase{"bilstm2_concat", kBilstm2}, StackCase{"bilstm3_sum", kBilstmSum3},
                                           StackCase{"lstm_then_dense", kLstmDense},
                                           StackCase{"lstm2_last_state", "[{type: LSTM, units: 6, return_sequences: "
                                                                         "true}, {type: LSTM, units: 6}]"},
                                           StackCase{"bilstm_last_state", "[{type: Bidirectional, layer: {type: LSTM, "
                                                                          "units: 4}}]"}),
                         [](const auto& info) { return info.param.name; });

// bf16 training (Adam) ends near the FP32 reference run: bf16's rounding does not derail it.
TEST(Onednn, Bf16TrainingEndsNearTheFp32ReferenceRun) {
  SKIP_WITHOUT_BF16();
  const testing::SideBySide l = testing::expect_bf16_training_tracks_fp32(
      "[{type: Input, shape: [null, 4]}, {type: LSTM, units: 16, return_sequences: true}, {type: LSTM, units: 16}, "
      "{type: Dense, units: 3}]",
      CpuRnn::Onednn);
  std::printf("30 Adam steps: bf16 loss %.6g, FP32 reference %.6g (first %.6g)\n", l.fast, l.ref, l.first);
}

// oneDNN's bf16 GRU is no faster than its FP32 one: under bf16 a GRU stack runs on the own engine in
// bf16 where the CPU has AVX512-BF16 (not equal to FP32, within bf16's rounding), else on oneDNN in FP32.
TEST(Onednn, GruStacksRunInBf16OnTheOwnEngineUnderBf16) {
  SKIP_WITHOUT_ONEDNN();
  EXPECT_NE(cpu::onednn_bf16_reason(LayerKind::GRU), "");
  StackCase c{"gru2_last_state", kGru2Last};
  Config f32 = config_of(c), cfg = f32;
  cfg.plan.precision = Precision::Bf16;
  Params p1 = random_params(cfg.model, 3, 0.5), p2 = p1;
  CpuModel bf(cfg.model, p1, &cfg.plan), fp(f32.model, p2, &f32.plan);
  Rng rng(5), r1(1), r2(1);
  const Tensor x = random_tensor({5, 7, c.features}, rng);
  const Tensor yb = bf.forward(x, nullptr, false, r1), yf = fp.forward(x, nullptr, false, r2);
  const std::string plan = cpu::describe_cpu_plan(cfg.model, make_plan(cfg.model, FuseMode::Auto), CpuRnn::Onednn, true);
  if (!cpu::own_gemm_refusal(true).empty()) {
    EXPECT_EQ(yb.data, yf.data);
    EXPECT_NE(plan.find("on oneDNN (2 layers, one stack), in FP32: oneDNN 2.6's bf16 GRU"), std::string::npos) << plan;
    return;
  }
  EXPECT_NE(yb.data, yf.data) << "the GRU stack ran in bf16";
  EXPECT_LT(rel_err(yb, yf), 2e-2);
  EXPECT_NE(plan.find("  gru on the own engine in bf16: oneDNN 2.6's bf16 GRU is no faster"), std::string::npos) << plan;
}

TEST(Onednn, ALayerItCannotRunSplitsTheStackAndStillMatches) {
  SKIP_WITHOUT_ONEDNN();
  // hard_sigmoid is not a oneDNN activation: the middle layer runs on the reference ops, and the
  // plan says so.
  const StackCase c{"split", "[{type: LSTM, units: 5, return_sequences: true}, {type: LSTM, units: 5, "
                             "recurrent_activation: hard_sigmoid, return_sequences: true}, {type: LSTM, units: 5}]"};
  compare(c, {}, false);
  const Config cfg = config_of(c);
  const std::string text = cpu::describe_cpu_plan(cfg.model, make_plan(cfg.model, FuseMode::Auto), CpuRnn::Onednn);
  EXPECT_NE(text.find("  lstm on oneDNN\n  lstm_1 on the reference ops: recurrent_activation hard_sigmoid (oneDNN has "
                      "sigmoid)\n  lstm_2 on oneDNN\n"),
            std::string::npos)
      << text;
  // A model that masks every batch runs its bidirectional stacks on the reference ops, and says so.
  const Config masked = parse_config("model:\n  layers: [{type: Input, shape: [null]}, {type: Embedding, input_dim: 9, "
                                     "output_dim: 4, mask_zero: true}, {type: Bidirectional, layer: {type: GRU, units: "
                                     "4}}, {type: Dense, units: 2}]\n",
                                     "m.yaml");
  const std::string mtext =
      cpu::describe_cpu_plan(masked.model, make_plan(masked.model, FuseMode::Auto), CpuRnn::Onednn);
  EXPECT_NE(mtext.find("  bidirectional on the reference ops: 'embedding' masks every batch"), std::string::npos)
      << mtext;
  EXPECT_NE(cpu::onednn_ineligible(parse_config("model:\n  layers: [{type: Input, shape: [3, 2]}, {type: LSTM, units: "
                                                "2, recurrent_activation: hard_sigmoid}]\n",
                                                "h.yaml")
                                       .model.layers[1], 2),
            "");
}

// Every cell over narrow and wide inputs and states (oneDNN 2.6's GRU was wrong over one input
// feature, which the plan now runs on the reference ops): the results of the planned path, masked
// batches included, are the reference ones.
TEST(Onednn, EveryWidthMatchesTheReferencePath) {
  SKIP_WITHOUT_ONEDNN();
  for (const char* cell : {"GRU", "LSTM"})
    for (int64_t in : {1, 2, 3})
      for (int units : {1, 4, 8, 12, 16}) {
        const StackCase c{fmt::format("{}_in{}_units{}", cell, in, units),
                          fmt::format("[{{type: {}, units: {}}}, {{type: Dense, units: 2}}]", cell, units), in};
        compare(c, {}, false);
        compare(c, {7, 3, 7, 0, 5}, false);
      }
}

TEST(Onednn, TrainingEndsWhereTheReferenceRunEnds) {
  SKIP_WITHOUT_ONEDNN();
  Config cfg = parse_config(
      "model:\n  layers: [{type: Input, shape: [null, 4]}, {type: Bidirectional, layer: {type: GRU, units: 8, "
      "return_sequences: true}}, {type: Bidirectional, layer: {type: GRU, units: 8, return_sequences: true}}, {type: "
      "LSTM, units: 8}, {type: Dense, units: 3}]\ntrain: {optimizer: {type: adam, learning_rate: 0.01}}\nplan: {cpu: onednn}\n",
      "train.yaml");
  cfg.device = Device::Cpu;
  Config ref = cfg;
  ref.plan.cpu = CpuRnn::Reference;
  const testing::SideBySide l = train_side_by_side(cfg, ref, 20);
  const double la = l.fast, lb = l.ref;
  EXPECT_NEAR(la, lb, 1e-4 * lb) << "after 20 Adam steps";
  std::printf("20 Adam steps: oneDNN loss %.7g, reference %.7g\n", la, lb);
}

}  // namespace
}  // namespace rnntrain
