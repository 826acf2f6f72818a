// The CPU backend's fast path for recurrent stacks (plan.cpu: onednn): consecutive LSTM or GRU
// (reset_after) layers run on oneDNN's RNN primitives, forward and backward, the CPU counterpart of a
// cuDNN stack. Keras' layouts are oneDNN's own (kernel [in, G*H] = ldigo; the GRU's two biases fold
// into oneDNN's four), so weights are copied, not transposed. What oneDNN cannot express runs on the
// reference ops (rnn_layers.cpp): batches with a mask, and layers onednn_ineligible() names.
#pragma once
#include <memory>
#include <string>

#include "backend/cpu/ops.h"
#include "plan/plan.h"
#include "spec/config.h"

namespace rnntrain::cpu {

// Whether this build has oneDNN (CMake found it).
bool onednn_built();
// oneDNN's threads (OpenMP); nothing without oneDNN.
void set_onednn_threads(int n);

// Why oneDNN cannot run this recurrent layer (LSTM, GRU, SimpleRNN or Bidirectional) in a stack; ""
// when it can. `input`: the width of its input.
std::string onednn_ineligible(const LayerSpec& l, int64_t input);

// How the CPU runs a model's recurrent layers under plan.cpu: onednn: within each planner stack, the
// runs of consecutive layers oneDNN can run (a Dropout between layers ends a run) are one oneDNN op
// each; every other recurrent layer runs on the reference ops (in bf16: the own engine, and oneDNN's
// FP32-only cells go there too), with the reason.
struct CpuPlan {
  struct Run {
    size_t first = 0, count = 0;
  };
  std::vector<Run> runs;
  std::vector<std::pair<size_t, std::string>> reference;  // layer index, why not oneDNN
};
CpuPlan plan_cpu(const ModelSpec& model, const Plan& plan, bool bf16 = false);
// The CPU lines of `rnntrain plan`: "CPU (plan.cpu: onednn): ..." per run and per reference layer.
std::string describe_cpu_plan(const ModelSpec& model, const Plan& plan, CpuRnn mode, bool bf16 = false);

// Layers first .. first + count - 1 of the model, consecutive recurrent layers that may share one
// primitive chain (same cell, units and directions; concat between layers), as one Op placed at
// `first`: its forward returns the last layer's output and its backward the first layer's input
// gradient. It reads and accumulates into params.layers[first .. first + count - 1]. input: the first
// layer's input features.
// bf16: the stack's activations and weights in bf16 (FP32 sums, cell state, weight copies and
// gradients), where onednn_bf16_reason says nothing against it; else FP32.
std::unique_ptr<Op> make_onednn_stack(const ModelSpec& model, size_t first, size_t count, int64_t input, Params& params,
                                      bool bf16 = false);
// Why a stack of `cell` runs in FP32 when plan.precision is bf16 ("" when it runs in bf16).
std::string onednn_bf16_reason(LayerKind cell);

}  // namespace rnntrain::cpu
