// How a GPU runs a plan: how masked batches are handled (at full length with the masks applied around
// the stacks, so that every batch of a shape is the same GPU work and can be captured as a CUDA
// graph, or with host lengths and uncaptured), which bidirectional stacks run each direction on its
// own, and which stacks run on rnntrain's own kernels. Decided here once: the CUDA model builds what
// this says and `rnntrain plan` prints it. Pure: what the GPU's own kernels can hold is asked of the
// backend through OwnKernelCheck.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace rnntrain {

// A stack as the own kernels see it.
struct OwnStackShape {
  LayerKind cell = LayerKind::LSTM;
  int64_t layers = 1, dirs = 1, input = 0, hidden = 0;
  bool reset_after = true;  // GRU
};
// Why the GPU's own kernels cannot run a stack of this shape in this precision; "" when they can.
using OwnKernelCheck = std::function<std::string(const OwnStackShape&, Precision)>;

// The CUDA engine's stack rule (plan.h): cuDNN's; with plan.algo wavefront, GRUs with reset_after:
// false (which cuDNN has not) form stacks too where the own kernels run them in this precision.
StackRule gpu_stack_rule(Precision precision, RnnAlgo algo, const OwnKernelCheck& own);

struct GpuStagePlan {
  // A cuDNN stack of Bidirectional layers run layer by layer, each direction as its own
  // unidirectional stack (the backward one on each sequence reversed within its length).
  bool split_bidirectional = false;
  bool own_kernels = false;  // plan.algo wavefront, and the own kernels run it
  std::string why_not_own;   // plan.algo wavefront, but cuDNN runs it: why
};

struct GpuPlan {
  std::optional<size_t> mask_first;  // the first layer (index 1) when it makes the mask (Masking, mask_zero)
  bool cudnn = false;                // the model has a cuDNN stack
  // Masked batches run the stacks over every step, the masks applied around them from device lengths.
  bool full_length = false;
  bool capturable = true;           // masked steps can be captured as CUDA graphs
  // A mask the upload makes reaches the first recurrent stage: no layer before it drops or consumes
  // masks (spec/layers.h: Conv1D, the poolings, Flatten drop them). Else the stacks never see one.
  bool stacks_see_masks = true;
  std::vector<GpuStagePlan> stages;  // one per Plan stage
  std::string masks;                 // how masks are handled, and why, in a sentence
};

// plan.precision and plan.algo resolved (not auto).
GpuPlan plan_gpu(const ResolvedModel& model, Precision precision, RnnAlgo algo, const OwnKernelCheck& own);

// The GPU plan as text, after describe_plan's stages.
std::string describe_gpu_plan(const ResolvedModel& model, const GpuPlan& gpu, Precision precision, RnnAlgo algo);

}  // namespace rnntrain
