// The planner: a pure function from the model spec to stages. A cuDNN stack is the longest run of
// consecutive recurrent layers that one cuDNN RNN descriptor computes; every boundary between two
// recurrent layers that were not merged carries the reason. No device, no files: tested in
// milliseconds and printed by `rnntrain plan`.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "spec/shapes.h"

namespace rnntrain {

enum class StageKind {
  CudnnStack,  // recurrent layers (and Dropouts between them) run as one cuDNN multi-layer RNN
  GenericRnn,  // a recurrent layer cuDNN cannot run (GEMMs and element-wise kernels)
  Layer,       // any other layer (Input, Embedding, Masking, Dropout, Dense, TimeDistributed)
};

struct Stage {
  StageKind kind = StageKind::Layer;
  std::vector<size_t> layers;  // indices into ModelSpec::layers, consecutive
  int64_t rnn_layers = 0;      // recurrent layers in the stage (cuDNN numLayers)
  std::string why_generic;     // GenericRnn: why cuDNN cannot run this layer
};

struct Boundary {
  size_t first = 0, second = 0;  // the two recurrent layers (model indices)
  bool merged = false;
  std::string reason;  // why not merged ("" when merged)
};

struct Plan {
  std::vector<Stage> stages;
  std::vector<Boundary> boundaries;  // one per pair of consecutive recurrent layers
};

// Why cuDNN cannot compute this recurrent layer (LSTM, GRU, SimpleRNN or Bidirectional) at all;
// "" if it can.
std::string cudnn_ineligible(const LayerSpec& layer);
// Why a layer cannot be part of a stack ("" if it can): cudnn_ineligible, unless the engine runs some
// stacks itself (the CUDA engine's own kernels take GRUs with reset_after: false, which cuDNN has not).
using StackRule = std::function<std::string(const LayerSpec& layer)>;
// cudnn_ineligible but for a GRU whose only reason is reset_after: false: what the own kernels may
// take before they are asked (plan/gpu_plan.h: gpu_stack_rule asks them).
std::string own_ineligible(const LayerSpec& layer);

Plan make_plan(const ModelSpec& model, FuseMode fuse, const StackRule& rule = cudnn_ineligible);
// Whether two plans have the same stages (kinds and layers).
bool same_stages(const Plan& a, const Plan& b);

// A model resolved once: the spec, each layer's shapes (infer_shapes), the plan for one fusion mode
// (make_plan) and where each layer's weights start among Params::all(). The engines are built from
// one and hand theirs out (Engine::model()); the trainer, the memory estimate and the commands read
// that, or resolve once themselves, instead of inferring shapes and planning wherever they are needed.
struct ResolvedModel {
  ModelSpec spec;
  std::vector<LayerShape> shapes;
  Plan plan;
  std::vector<size_t> first_weight;  // [layers + 1]: layer i's weights are Params::all()[first_weight[i], first_weight[i + 1])
};
// Throws ConfigError as infer_shapes does.
ResolvedModel resolve_model(const ModelSpec& spec, FuseMode fuse, const StackRule& rule = cudnn_ineligible);

// The plan as text: stages, their layers and parameter counts, and every unmerged boundary's reason.
std::string describe_plan(const ResolvedModel& model);

}  // namespace rnntrain
