// How the GPU runs the plan (see gpu_plan.h and docs/planner.md).
#include "plan/gpu_plan.h"

#include <fmt/format.h>

#include "spec/layers.h"

namespace rnntrain {

namespace {

const LayerSpec& cell_of(const LayerSpec& l) {
  return l.kind == LayerKind::Bidirectional && l.inner ? *l.inner : l;
}

bool makes_mask(const LayerSpec& l) {
  const LayerSpec& c = cell_of(l);
  return c.kind == LayerKind::Masking || c.mask_zero;
}

// Whether the own kernels run this cuDNN stack (as a whole, or each direction of its layers when split).
void plan_own_kernels(const ModelSpec& spec, const std::vector<LayerShape>& shapes, const Stage& st, Precision precision,
                      const OwnKernelCheck& own, GpuStagePlan& out) {
  const LayerSpec& l = spec.layers[st.layers[0]];
  for (size_t j : st.layers)  // split, each layer is a stack of its own
    if (!out.split_bidirectional && spec.layers[j].kind == LayerKind::Dropout && spec.layers[j].rate > 0) {
      out.why_not_own = "the wavefront kernels have no dropout between layers";
      return;
    }
  const bool bidir = l.kind == LayerKind::Bidirectional;
  const OwnStackShape shape{cell_of(l).kind, out.split_bidirectional ? 1 : st.rnn_layers,
                            bidir && !out.split_bidirectional ? 2 : 1, shapes[st.layers[0]].in.back(), cell_of(l).units,
                            cell_of(l).reset_after};
  out.why_not_own = own(shape, precision);
  out.own_kernels = out.why_not_own.empty();
}

}  // namespace

StackRule gpu_stack_rule(Precision precision, RnnAlgo algo, const OwnKernelCheck& own) {
  if (algo != RnnAlgo::Wavefront || !own) return cudnn_ineligible;
  return [precision, own](const LayerSpec& layer) -> std::string {
    const std::string why = cudnn_ineligible(layer);
    if (why.empty() || !own_ineligible(layer).empty()) return why;
    // A GRU with reset_after: false and nothing else cuDNN lacks: as the own kernels have it.
    const int64_t dirs = layer.kind == LayerKind::Bidirectional ? 2 : 1;
    const std::string own_why = own({LayerKind::GRU, 1, dirs, 1, cell_of(layer).units, false}, precision);
    return own_why.empty() ? "" : why + "; nor can the wavefront kernels: " + own_why;
  };
}

GpuPlan plan_gpu(const ResolvedModel& model, Precision precision, RnnAlgo algo, const OwnKernelCheck& own) {
  const ModelSpec& spec = model.spec;
  GpuPlan g;
  g.stages.resize(model.plan.stages.size());
  bool other_masks = false;
  for (size_t i = 1; i < spec.layers.size(); ++i) {
    if (makes_mask(spec.layers[i]) && i == 1) g.mask_first = 1;
    else if (makes_mask(spec.layers[i])) other_masks = true;
  }
  // The own kernels take each sequence's length on the device and run both directions of a layer in
  // one launch, faster uncaptured than the two split directions captured (bilstm bf16 on the H200:
  // 10.1 against 14.0 ms per step), so a bidirectional stack they run is not split.
  bool bidir_stack = false, bidir_own = false;
  const Stage* first_rnn = nullptr;
  for (size_t s = 0; s < model.plan.stages.size(); ++s) {
    const Stage& st = model.plan.stages[s];
    if (st.kind != StageKind::Layer && !first_rnn) first_rnn = &st;
    if (st.kind != StageKind::CudnnStack) continue;
    g.cudnn = true;
    // (cudnn_ineligible keeps Bidirectional layers with dropout out of cuDNN stacks, so a split
    // direction never needs a dropout mask of its own.)
    for (size_t j : st.layers) bidir_stack = bidir_stack || spec.layers[j].kind == LayerKind::Bidirectional;
    if (algo == RnnAlgo::Wavefront) {
      plan_own_kernels(spec, model.shapes, st, precision, own, g.stages[s]);
      bidir_own = bidir_own || (g.stages[s].own_kernels && spec.layers[st.layers[0]].kind == LayerKind::Bidirectional);
    }
  }
  // Masks the upload makes from the host batch: lengths, and the first layer's own. When no other layer
  // makes one, masked batches run the stacks at full length with the masks applied around them: the
  // same GPU work for every batch of a shape, so masked steps are captured as CUDA graphs too. A
  // bidirectional stack then runs layer by layer, each direction on its own (the backward one must
  // start at each sequence's end), where the model makes the mask (else most batches have none, and
  // one cuDNN call per stack is faster). The upload checks the mask for gaps where the first recurrent
  // stage is a cuDNN stack (the one the mask reaches unchanged); a generic RNN first may take gaps,
  // and the mask it passes on is not the upload's, so then masks stay on the stacks' own path.
  const LayerSpec* stops = nullptr;  // the layer before the first recurrent stage that ends the upload's mask
  for (size_t i = 1; first_rnn && i < first_rnn->layers[0] && !stops; ++i)
    if (ends_mask(spec.layers[i].kind)) stops = &spec.layers[i];
  g.stacks_see_masks = !stops;
  const bool split = g.mask_first && !bidir_own && g.stacks_see_masks;
  g.full_length = !other_masks && (!g.stacks_see_masks || ((!bidir_stack || split) &&
                                                           (!g.cudnn || first_rnn->kind == StageKind::CudnnStack)));
  g.capturable = g.full_length || (!g.mask_first && !other_masks);
  for (size_t s = 0; s < model.plan.stages.size(); ++s) {
    const Stage& st = model.plan.stages[s];
    if (st.kind != StageKind::CudnnStack || !g.full_length || !g.stacks_see_masks ||
        spec.layers[st.layers[0]].kind != LayerKind::Bidirectional)
      continue;
    g.stages[s].split_bidirectional = true;
    if (algo == RnnAlgo::Wavefront) plan_own_kernels(spec, model.shapes, st, precision, own, g.stages[s]);
  }

  if (stops && !other_masks)
    g.masks = fmt::format("'{}' ({}) drops the mask before the recurrent stacks, as Keras does: masked batches run "
                          "as unmasked ones, captured as CUDA graphs", stops->name, layer_kind_name(stops->kind));
  else if (g.full_length)
    g.masks = "masked batches run the stacks over every step, the masks applied around them: captured as CUDA graphs";
  else if (other_masks)
    g.masks = "a layer after the first makes a mask: masked batches run with host lengths, uncaptured";
  else if (g.cudnn && first_rnn->kind != StageKind::CudnnStack)
    g.masks = "the first recurrent layer runs outside cuDNN: masked batches run with host lengths, uncaptured";
  else if (bidir_own)
    g.masks = "a bidirectional stack runs on the own kernels, which take lengths on the device: masked batches "
              "run uncaptured";
  else
    g.masks = "batches with lengths run the bidirectional stacks with host lengths, uncaptured (one cuDNN call per "
              "stack is faster where most batches have no mask)";
  return g;
}

std::string describe_gpu_plan(const ResolvedModel& model, const GpuPlan& gpu, Precision precision, RnnAlgo algo) {
  std::string out = fmt::format("On the GPU ({}, {}):\n", precision_name(precision), rnn_algo_name(algo));
  for (size_t s = 0; s < model.plan.stages.size(); ++s) {
    const Stage& st = model.plan.stages[s];
    if (st.kind != StageKind::CudnnStack) continue;
    const GpuStagePlan& g = gpu.stages[s];
    std::string names;
    for (size_t i : st.layers) names += (names.empty() ? "" : ", ") + model.spec.layers[i].name;
    std::string how = g.own_kernels ? "rnntrain's wavefront kernels" : "cuDNN";
    if (g.split_bidirectional) how += ", layer by layer, each direction on its own";
    if (!g.own_kernels && algo == RnnAlgo::Wavefront) how += " (not the wavefront kernels: " + g.why_not_own + ")";
    out += fmt::format("  {}: {}\n", names, how);
  }
  out += fmt::format("  masks: {}\n", gpu.masks);
  return out;
}

}  // namespace rnntrain
