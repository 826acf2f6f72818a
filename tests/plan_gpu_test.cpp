// How the planner says a GPU runs a model (plan/gpu_plan.h): masked batches at full length (captured)
// or with host lengths, bidirectional stacks split per direction, and which stacks the own kernels
// take, asked of a stand-in for the GPU. What the CUDA model builds from it runs on the GPU machine
// (gpu_* tests); the decisions themselves are checked here, on any machine.
#include <gtest/gtest.h>

#include <vector>

#include "plan/gpu_plan.h"
#include "spec/parse.h"

using namespace rnntrain;

namespace {

ResolvedModel model_of(const std::string& layers, const std::string& input = "{type: Input, shape: [6, 3]}") {
  const Config cfg = parse_config("model:\n  layers: [" + input + ", " + layers + "]\n", "m.yaml");
  return resolve_model(cfg.model, FuseMode::Auto);
}

// The own kernels as a GPU that holds stacks of at most `max_hidden` units; records what was asked.
struct FakeGpu {
  int64_t max_hidden = 1 << 20;
  std::vector<OwnStackShape> asked;
  OwnKernelCheck check() {
    return [this](const OwnStackShape& s, Precision) {
      asked.push_back(s);
      return s.hidden <= max_hidden ? std::string() : "does not fit";
    };
  }
};

const GpuStagePlan& stack_plan(const ResolvedModel& m, const GpuPlan& g, size_t n = 0) {
  for (size_t s = 0; s < m.plan.stages.size(); ++s)
    if (m.plan.stages[s].kind == StageKind::CudnnStack && n-- == 0) return g.stages[s];
  throw std::runtime_error("no such stack");
}

constexpr const char* kBidir2 =
    "{type: Bidirectional, layer: {type: LSTM, units: 8, return_sequences: true}}, "
    "{type: Bidirectional, layer: {type: LSTM, units: 8}}";

TEST(GpuPlan, AMaskFromTheFirstLayerRunsUnidirectionalStacksAtFullLengthCaptured) {
  FakeGpu gpu;
  const ResolvedModel m = model_of("{type: Masking}, {type: LSTM, units: 8, return_sequences: true}, {type: LSTM, units: 8}");
  const GpuPlan g = plan_gpu(m, Precision::Fp32, RnnAlgo::Standard, gpu.check());
  EXPECT_EQ(g.mask_first, std::optional<size_t>(1));
  EXPECT_TRUE(g.cudnn && g.full_length && g.capturable);
  EXPECT_FALSE(stack_plan(m, g).split_bidirectional);
  EXPECT_FALSE(stack_plan(m, g).own_kernels);
  EXPECT_TRUE(gpu.asked.empty()) << "cuDNN's algorithms never ask for the own kernels";
}

TEST(GpuPlan, AMaskedBidirectionalStackOnCudnnIsSplitPerDirection) {
  FakeGpu gpu;
  const ResolvedModel m = model_of(std::string("{type: Masking}, ") + kBidir2);
  const GpuPlan g = plan_gpu(m, Precision::Bf16, RnnAlgo::Standard, gpu.check());
  EXPECT_TRUE(g.full_length && g.capturable);
  EXPECT_TRUE(stack_plan(m, g).split_bidirectional);
  const std::string text = describe_gpu_plan(m, g, Precision::Bf16, RnnAlgo::Standard);
  EXPECT_NE(text.find("each direction on its own"), std::string::npos) << text;
  EXPECT_NE(text.find("captured"), std::string::npos) << text;
}

// A Conv1D (or a pooling, or Flatten) before the stacks drops the mask, as Keras does: the stacks never
// see one, so a bidirectional stack stays whole, masked batches are captured, and the upload does not
// check the dropped mask for gaps (the CPU trains such batches).
TEST(GpuPlan, AMaskDroppedBeforeTheStacksNeverReachesThem) {
  FakeGpu gpu;
  const ResolvedModel m =
      model_of(std::string("{type: Masking}, {type: Conv1D, filters: 4, kernel_size: 2, padding: same}, ") + kBidir2);
  const GpuPlan g = plan_gpu(m, Precision::Bf16, RnnAlgo::Standard, gpu.check());
  EXPECT_EQ(g.mask_first, std::optional<size_t>(1));
  EXPECT_FALSE(g.stacks_see_masks);
  EXPECT_TRUE(g.capturable);
  EXPECT_FALSE(stack_plan(m, g).split_bidirectional);
  const std::string text = describe_gpu_plan(m, g, Precision::Bf16, RnnAlgo::Standard);
  EXPECT_NE(text.find("'conv1d' (Conv1D) drops the mask before the recurrent stacks"), std::string::npos) << text;
  // The same without the Conv1D: split, as before.
  const ResolvedModel kept = model_of(std::string("{type: Masking}, {type: LayerNormalization}, ") + kBidir2);
  const GpuPlan gk = plan_gpu(kept, Precision::Bf16, RnnAlgo::Standard, gpu.check());
  EXPECT_TRUE(gk.stacks_see_masks);
  EXPECT_TRUE(stack_plan(kept, gk).split_bidirectional);
}

TEST(GpuPlan, TheOwnKernelsKeepAMaskedBidirectionalStackWholeAndUncaptured) {
  FakeGpu gpu;
  const ResolvedModel m = model_of(std::string("{type: Masking}, ") + kBidir2);
  const GpuPlan g = plan_gpu(m, Precision::Bf16, RnnAlgo::Wavefront, gpu.check());
  EXPECT_TRUE(stack_plan(m, g).own_kernels);
  EXPECT_FALSE(stack_plan(m, g).split_bidirectional);
  EXPECT_FALSE(g.full_length);
  EXPECT_FALSE(g.capturable);
  ASSERT_EQ(gpu.asked.size(), 1u);
  EXPECT_EQ(gpu.asked[0].layers, 2);
  EXPECT_EQ(gpu.asked[0].dirs, 2);
  EXPECT_EQ(gpu.asked[0].input, 3);
  EXPECT_EQ(gpu.asked[0].hidden, 8);
}

TEST(GpuPlan, WhereTheOwnKernelsCannotHoldAStackItRunsOnCudnnWithTheReason) {
  FakeGpu gpu;
  gpu.max_hidden = 4;
  const ResolvedModel m = model_of(std::string("{type: Masking}, ") + kBidir2);
  const GpuPlan g = plan_gpu(m, Precision::Bf16, RnnAlgo::Wavefront, gpu.check());
  EXPECT_FALSE(stack_plan(m, g).own_kernels);
  EXPECT_TRUE(stack_plan(m, g).split_bidirectional);  // then split, as on cuDNN
  EXPECT_TRUE(g.full_length);
  EXPECT_EQ(stack_plan(m, g).why_not_own, "does not fit");
  ASSERT_EQ(gpu.asked.size(), 2u);  // whole, then each direction of one layer
  EXPECT_EQ(gpu.asked[1].layers, 1);
  EXPECT_EQ(gpu.asked[1].dirs, 1);
  const std::string text = describe_gpu_plan(m, g, Precision::Bf16, RnnAlgo::Wavefront);
  EXPECT_NE(text.find("not the wavefront kernels: does not fit"), std::string::npos) << text;
}

TEST(GpuPlan, DropoutBetweenLayersKeepsAStackOffTheOwnKernels) {
  FakeGpu gpu;
  const ResolvedModel m = model_of(
      "{type: LSTM, units: 8, return_sequences: true}, {type: Dropout, rate: 0.2}, {type: LSTM, units: 8}");
  const GpuPlan g = plan_gpu(m, Precision::Bf16, RnnAlgo::Wavefront, gpu.check());
  EXPECT_FALSE(stack_plan(m, g).own_kernels);
  EXPECT_NE(stack_plan(m, g).why_not_own.find("dropout between layers"), std::string::npos);
  EXPECT_TRUE(gpu.asked.empty());
}

TEST(GpuPlan, MasksMadeAfterTheFirstLayerOrAGenericFirstLayerRunUncaptured) {
  FakeGpu gpu;
  // An Embedding with mask_zero first makes the upload's mask.
  const ResolvedModel first = model_of("{type: Embedding, input_dim: 10, output_dim: 4, mask_zero: true}, {type: GRU, units: 8}",
                                       "{type: Input, shape: [6]}");
  EXPECT_TRUE(plan_gpu(first, Precision::Fp32, RnnAlgo::Standard, gpu.check()).full_length);
  // A Masking after a Dense: a mask the upload cannot make.
  const ResolvedModel later = model_of("{type: Dense, units: 4}, {type: Masking}, {type: GRU, units: 8}");
  const GpuPlan gl = plan_gpu(later, Precision::Fp32, RnnAlgo::Standard, gpu.check());
  EXPECT_FALSE(gl.mask_first);
  EXPECT_FALSE(gl.full_length || gl.capturable);
  EXPECT_NE(gl.masks.find("after the first"), std::string::npos) << gl.masks;
  // A generic RNN (recurrent_dropout) before the cuDNN stack.
  const ResolvedModel generic = model_of(
      "{type: Masking}, {type: GRU, units: 8, recurrent_dropout: 0.1, return_sequences: true}, {type: GRU, units: 8}");
  const GpuPlan gg = plan_gpu(generic, Precision::Fp32, RnnAlgo::Standard, gpu.check());
  EXPECT_FALSE(gg.full_length || gg.capturable);
  EXPECT_NE(gg.masks.find("outside cuDNN"), std::string::npos) << gg.masks;
}

TEST(GpuPlan, WithoutMasksABidirectionalStackIsOneCudnnCallAndCaptured) {
  FakeGpu gpu;
  const ResolvedModel m = model_of(kBidir2);
  const GpuPlan g = plan_gpu(m, Precision::Fp32, RnnAlgo::Standard, gpu.check());
  EXPECT_FALSE(stack_plan(m, g).split_bidirectional);
  EXPECT_FALSE(g.full_length);
  EXPECT_TRUE(g.capturable);
  // Masked, with a Dropout layer between: split, the Dropout between the split layers.
  const ResolvedModel d = model_of(
      "{type: Masking}, {type: Bidirectional, layer: {type: LSTM, units: 8, return_sequences: true}}, "
      "{type: Dropout, rate: 0.3}, {type: Bidirectional, layer: {type: LSTM, units: 8}}");
  const GpuPlan gd = plan_gpu(d, Precision::Fp32, RnnAlgo::Standard, gpu.check());
  EXPECT_TRUE(gd.full_length);
  EXPECT_TRUE(stack_plan(d, gd).split_bidirectional);
}

// GRUs with reset_after: false (Keras 2's), which cuDNN has not: with plan.algo wavefront they form
// stacks where the own kernels hold them, told apart from GRUs with reset_after; elsewhere they stay
// generic layers, with the reason.
TEST(GpuPlan, GrusWithoutResetAfterStackOnlyWhereTheOwnKernelsRunThem) {
  const Config cfg = parse_config(
      "model:\n  layers: [{type: Input, shape: [6, 3]}, {type: GRU, units: 8, reset_after: false, return_sequences: "
      "true}, {type: GRU, units: 8, reset_after: false, return_sequences: true}, {type: GRU, units: 8, "
      "return_sequences: true}, {type: GRU, units: 16, reset_after: false}]\n",
      "m.yaml");
  FakeGpu gpu;
  gpu.max_hidden = 8;
  const ResolvedModel own = resolve_model(cfg.model, FuseMode::Auto, gpu_stack_rule(Precision::Bf16, RnnAlgo::Wavefront, gpu.check()));
  ASSERT_EQ(own.plan.stages.size(), 4u);  // Input; the two layers without reset_after; the one with; the wide one
  EXPECT_EQ(own.plan.stages[1].kind, StageKind::CudnnStack);
  EXPECT_EQ(own.plan.stages[1].rnn_layers, 2);
  EXPECT_EQ(own.plan.stages[2].kind, StageKind::CudnnStack);
  EXPECT_EQ(own.plan.stages[3].kind, StageKind::GenericRnn);
  EXPECT_NE(own.plan.stages[3].why_generic.find("nor can the wavefront kernels: does not fit"), std::string::npos)
      << own.plan.stages[3].why_generic;
  EXPECT_NE(describe_plan(own).find("one GRU has reset_after and the other not"), std::string::npos) << describe_plan(own);
  ASSERT_FALSE(gpu.asked.empty());
  EXPECT_FALSE(gpu.asked.front().reset_after);
  // The stack is asked of the own kernels as a GRU without reset_after, and they run it.
  gpu.asked.clear();
  const GpuPlan g = plan_gpu(own, Precision::Bf16, RnnAlgo::Wavefront, gpu.check());
  EXPECT_TRUE(stack_plan(own, g).own_kernels);
  ASSERT_FALSE(gpu.asked.empty());
  EXPECT_FALSE(gpu.asked.front().reset_after);
  EXPECT_EQ(gpu.asked.front().layers, 2);
  // cuDNN's algorithms, and no own kernels: generic layers, as before.
  for (const ResolvedModel& m : {resolve_model(cfg.model, FuseMode::Auto, gpu_stack_rule(Precision::Bf16, RnnAlgo::Standard, gpu.check())),
                                 resolve_model(cfg.model, FuseMode::Auto)}) {
    EXPECT_EQ(m.plan.stages[1].kind, StageKind::GenericRnn);
    EXPECT_NE(m.plan.stages[1].why_generic.find("reset_after: false"), std::string::npos) << m.plan.stages[1].why_generic;
  }
  // Another reason to stay generic is not lifted: recurrent_dropout.
  const Config rd = parse_config(
      "model:\n  layers: [{type: Input, shape: [6, 3]}, {type: GRU, units: 8, reset_after: false, recurrent_dropout: 0.1}]\n",
      "m.yaml");
  const ResolvedModel mr = resolve_model(rd.model, FuseMode::Auto, gpu_stack_rule(Precision::Bf16, RnnAlgo::Wavefront, gpu.check()));
  EXPECT_EQ(mr.plan.stages[1].kind, StageKind::GenericRnn);
}

}  // namespace
