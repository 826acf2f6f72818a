// Merge rules for cuDNN stacks (see plan.h and docs/planner.md).
#include "plan/plan.h"

#include <fmt/format.h>

#include "spec/shapes.h"

namespace rnntrain {

namespace {

// The recurrent layer itself (the wrapped one for Bidirectional), or null.
const LayerSpec* cell_of(const LayerSpec& l) {
  if (is_recurrent(l.kind)) return &l;
  if (l.kind == LayerKind::Bidirectional) return l.inner.get();
  return nullptr;
}

bool bidirectional(const LayerSpec& l) { return l.kind == LayerKind::Bidirectional; }

// Why layers a and b (consecutive recurrent layers, with `between` Dropout layers in between) cannot
// share one cuDNN descriptor (or one launch of the own kernels); "" if they can.
std::string merge_blocker(const LayerSpec& a, const LayerSpec& b, const std::vector<const LayerSpec*>& between,
                          const StackRule& rule) {
  const LayerSpec& ca = *cell_of(a);
  const LayerSpec& cb = *cell_of(b);
  if (std::string w = rule(a); !w.empty()) return fmt::format("'{}' cannot run on cuDNN: {}", a.name, w);
  if (std::string w = rule(b); !w.empty()) return fmt::format("'{}' cannot run on cuDNN: {}", b.name, w);
  if (activity_regularizer_of(a).active())
    return fmt::format("'{}' has an activity_regularizer (its own output is needed for the penalty)", a.name);
  for (const LayerSpec* d : between)
    if (d->kind != LayerKind::Dropout) return fmt::format("'{}' ({}) sits between them", d->name, layer_kind_name(d->kind));
  if (between.size() > 1) return "more than one Dropout layer between them (cuDNN has one inter-layer dropout)";
  if (ca.kind != cb.kind) return fmt::format("different cells ({} then {})", layer_kind_name(ca.kind), layer_kind_name(cb.kind));
  if (ca.units != cb.units) return fmt::format("different units ({} then {})", ca.units, cb.units);
  if (ca.kind == LayerKind::GRU && ca.reset_after != cb.reset_after) return "one GRU has reset_after and the other not";
  if (bidirectional(a) != bidirectional(b)) return "one is Bidirectional and the other is not";
  if (ca.activation != cb.activation) return "different activations";
  if (!ca.return_sequences) return fmt::format("'{}' has return_sequences: false", a.name);
  if (bidirectional(a) && a.merge_mode != MergeMode::Concat)
    return fmt::format("'{}' merges its directions with merge_mode other than concat", a.name);
  if (cb.dropout > 0) return fmt::format("'{}' has input dropout {} (per-sequence masks cannot run inside a cuDNN stack)", b.name, cb.dropout);
  return "";
}

}  // namespace

std::string cudnn_ineligible(const LayerSpec& layer) {
  const LayerSpec* c = cell_of(layer);
  if (!c) return "not a recurrent layer";
  if (std::string why = fused_cell_refusal(*c, "cuDNN"); !why.empty()) return why;
  if (!c->use_bias) return "use_bias: false";
  if (c->recurrent_dropout > 0) return fmt::format("recurrent_dropout {}", c->recurrent_dropout);
  if (c->go_backwards) return "go_backwards: true";
  if (layer.kind == LayerKind::Bidirectional && c->dropout > 0)
    return fmt::format("input dropout {} in a Bidirectional layer (Keras draws one mask per direction)", c->dropout);
  return "";
}

std::string own_ineligible(const LayerSpec& layer) {
  std::string why = cudnn_ineligible(layer);
  const LayerSpec* c = cell_of(layer);
  if (why.empty() || !c || c->kind != LayerKind::GRU || c->reset_after) return why;
  LayerSpec with = layer;  // is reset_after the only reason?
  if (with.inner) with.inner = std::make_shared<LayerSpec>(*with.inner);
  (with.inner ? *with.inner : with).reset_after = true;
  return cudnn_ineligible(with).empty() ? "" : why;
}

ResolvedModel resolve_model(const ModelSpec& spec, FuseMode fuse, const StackRule& rule) {
  ResolvedModel m{spec, infer_shapes(spec), {}, {0}};
  m.plan = make_plan(spec, fuse, rule);
  for (const LayerShape& s : m.shapes) m.first_weight.push_back(m.first_weight.back() + s.weights);
  return m;
}

Plan make_plan(const ModelSpec& model, FuseMode fuse, const StackRule& rule) {
  Plan plan;
  const auto& L = model.layers;
  size_t i = 0;
  while (i < L.size()) {
    if (!cell_of(L[i])) {
      plan.stages.push_back({StageKind::Layer, {i}, 0, ""});
      ++i;
      continue;
    }
    Stage st;
    st.layers = {i};
    st.rnn_layers = 1;
    st.why_generic = rule(L[i]);
    st.kind = st.why_generic.empty() ? StageKind::CudnnStack : StageKind::GenericRnn;
    size_t last = i, j = i + 1;
    double stack_dropout = -1.0;  // cuDNN has one inter-layer dropout rate per stack
    while (true) {
      // The next recurrent layer, and the layers between it and `last`.
      std::vector<const LayerSpec*> between;
      size_t k = j;
      for (; k < L.size() && !cell_of(L[k]); ++k) between.push_back(&L[k]);
      if (k >= L.size()) break;
      Boundary bd{last, k, false, ""};
      std::string why = merge_blocker(L[last], L[k], between, rule);
      const double rate = between.empty() ? 0.0 : between[0]->rate;
      if (why.empty() && stack_dropout >= 0 && rate != stack_dropout)
        why = fmt::format("inter-layer dropout {} differs from the stack's {} (cuDNN has one rate per stack)", rate, stack_dropout);
      if (why.empty() && fuse == FuseMode::Never) why = "plan.fuse: never";
      if (!why.empty()) {
        bd.reason = why;
        plan.boundaries.push_back(bd);
        break;
      }
      bd.merged = true;
      stack_dropout = rate;
      plan.boundaries.push_back(bd);
      for (size_t m = j; m <= k; ++m) st.layers.push_back(m);
      ++st.rnn_layers;
      last = k;
      j = k + 1;
    }
    plan.stages.push_back(st);
    i = st.layers.back() + 1;
  }
  return plan;
}

bool same_stages(const Plan& a, const Plan& b) {
  if (a.stages.size() != b.stages.size()) return false;
  for (size_t i = 0; i < a.stages.size(); ++i)
    if (a.stages[i].kind != b.stages[i].kind || a.stages[i].layers != b.stages[i].layers) return false;
  return true;
}

std::string describe_plan(const ResolvedModel& m) {
  const ModelSpec& model = m.spec;
  const Plan& plan = m.plan;
  const std::vector<LayerShape>& shapes = m.shapes;
  std::string out = "Plan (a stack is one cuDNN call on the GPU; how this machine's device runs it follows):\n";
  int n = 0;
  for (const Stage& s : plan.stages) {
    if (s.kind == StageKind::Layer && model.layers[s.layers[0]].kind == LayerKind::Input) continue;
    int64_t params = 0;
    std::string names;
    for (size_t i : s.layers) {
      params += shapes[i].params;
      names += (names.empty() ? "" : ", ") + model.layers[i].name;
    }
    const char* kind = s.kind == StageKind::CudnnStack ? "stack" : s.kind == StageKind::GenericRnn ? "generic-rnn" : "layer";
    out += fmt::format("  stage {:<2} {:<12} {:<44} params={}", ++n, kind, names, params);
    if (s.kind == StageKind::CudnnStack) out += fmt::format(" rnn_layers={}", s.rnn_layers);
    if (s.kind == StageKind::GenericRnn) out += " (" + s.why_generic + ")";
    out += "\n";
  }
  bool header = false;
  for (const Boundary& b : plan.boundaries) {
    if (b.merged) continue;
    if (!header) out += "Not merged:\n";
    header = true;
    out += fmt::format("  {} | {}: {}\n", model.layers[b.first].name, model.layers[b.second].name, b.reason);
  }
  return out;
}

}  // namespace rnntrain
