// CpuModel: runs the layer Ops in order, builds the [B, T] mask from batch lengths, keeps every
// layer's output in the ForwardContext for backward, and walks back accumulating gradients.
// Not the layer math: basic_layers.cpp, rnn_layers.cpp, recurrent.cpp and the cell files.
#include "backend/cpu/cpu_model.h"

#include <cmath>

#include <fmt/format.h>

#include "backend/cpu/onednn_stack.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/profile.h"
#include "backend/cpu/recurrent.h"
#include "core/error.h"
#include "core/log.h"
#include "spec/layers.h"

namespace rnntrain {

struct ForwardContext::Impl {
  bool valid = false;
  bool token_input = false;
  std::vector<Tensor> acts;                          // acts[0] = x, acts[i] = output of layer i
  std::vector<std::unique_ptr<cpu::Saved>> saved;  // per layer
};

ForwardContext::ForwardContext() : impl(std::make_unique<Impl>()) {}
ForwardContext::~ForwardContext() = default;
ForwardContext::ForwardContext(ForwardContext&&) noexcept = default;
ForwardContext& ForwardContext::operator=(ForwardContext&&) noexcept = default;

struct CpuModel::Layer {
  std::unique_ptr<cpu::Op> op;  // null for the Input layer and for layers an earlier op covers
  size_t cover = 0;             // the layers after this one that its op computes too (a oneDNN stack)
  bool covered = false;
  bool ends_mask = false;  // passes no mask on (spec/layers.h: MaskRule Consume or Drop)
};

CpuModel::CpuModel(const ModelSpec& spec, Params& params, const PlanSpec* plan)
    : CpuModel(resolve_model(spec, plan ? plan->fuse : FuseMode::Auto), params, plan) {}

CpuModel::CpuModel(ResolvedModel model, Params& params, const PlanSpec* plan)
    : model_(std::move(model)), params_(params) {
  const ModelSpec& spec = model_.spec;
  check_params_fit(params, model_.shapes);
  const bool bf16 = plan && plan->precision == Precision::Bf16;
  const CpuRnn path = plan ? cpu::cpu_path(plan->cpu, bf16) : CpuRnn::Reference;
  const cpu::RnnMath math = cpu::rnn_math(path, bf16);
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    auto layer = std::make_unique<Layer>();
    switch (l.kind) {
      case LayerKind::Input: break;
      case LayerKind::Embedding: layer->op = cpu::make_embedding(l); break;
      case LayerKind::Masking: layer->op = cpu::make_masking(l); break;
      default:  // the recurrent cells (spec/cells.h), and the layers of sequence_layers.cpp
        layer->op = is_recurrent(l.kind) ? cpu::make_recurrent(l, math) : cpu::make_sequence_layer(l);
        break;
      case LayerKind::Bidirectional: layer->op = cpu::make_bidirectional(l, math); break;
      case LayerKind::Dropout: layer->op = cpu::make_dropout(l); break;
      case LayerKind::Dense: layer->op = cpu::make_dense(l, l); break;
      case LayerKind::TimeDistributed:  // wrapping a Dense or a Dropout (infer_shapes checked)
        layer->op = l.inner->kind == LayerKind::Dropout ? cpu::make_dropout(*l.inner) : cpu::make_dense(l, *l.inner);
        break;
    }
    layer->ends_mask = ends_mask(l.kind);
    layers_.push_back(std::move(layer));
  }
  if (path == CpuRnn::Onednn) use_onednn(bf16);
}

// Each run of recurrent layers that plan_cpu() gives to oneDNN becomes one op at its first layer.
void CpuModel::use_onednn(bool bf16) {
  for (const cpu::CpuPlan::Run& r : cpu::plan_cpu(model_.spec, model_.plan, bf16).runs) {
    const int64_t input = model_.shapes[r.first].in.back();
    layers_[r.first]->op = cpu::make_onednn_stack(model_.spec, r.first, r.count, input, params_, bf16);
    layers_[r.first]->cover = r.count - 1;
    for (size_t k = r.first + 1; k < r.first + r.count; ++k) layers_[k]->op.reset(), layers_[k]->covered = true;
    log_debug("cpu: layers {}..{} run on oneDNN", model_.spec.layers[r.first].name,
              model_.spec.layers[r.first + r.count - 1].name);
  }
}

CpuModel::~CpuModel() = default;

namespace {

// l1 * sum|y| + l2 * sum y^2, in double.
double activity_sum(const Regularizer& r, const Tensor& y) {
  double s = 0.0;
  for (float v : y.data) s += r.l1 * std::fabs(v) + r.l2 * static_cast<double>(v) * v;
  return s;
}

// g += inv_b * (l1 * sign(y) + l2 * (2 * y)) in float32, as the CUDA kernel.
void add_activity_grad(const Regularizer& r, const Tensor& y, float inv_b, Tensor& g) {
  const float l1 = static_cast<float>(r.l1), l2 = static_cast<float>(r.l2);
  for (int64_t k = 0; k < y.numel(); ++k) {
    const float v = y[k];
    g[k] += inv_b * (l1 * static_cast<float>((v > 0.0f) - (v < 0.0f)) + l2 * (2.0f * v));
  }
}

}  // namespace

std::string CpuModel::phase_name(size_t i, const char* pass) const {
  const std::string& first = model_.spec.layers[i].name;
  if (layers_[i]->cover == 0) return fmt::format("{} {}", first, pass);
  return fmt::format("{} .. {} {}", first, model_.spec.layers[i + layers_[i]->cover].name, pass);
}

Tensor CpuModel::forward(const Tensor& x, const std::vector<int32_t>* lengths, bool training, Rng& rng,
                         ForwardContext* ctx, Tensor* out_mask, double* activity) {
  check_input_batch(model_.spec.layers[0], x);
  const int64_t B = x.dim(0), T = x.dim(1);
  cpu::Mask mask;  // [B, T]
  if (lengths && !lengths->empty()) {
    if (static_cast<int64_t>(lengths->size()) != B)
      throw DataError(fmt::format("the batch has {} samples but {} sequence lengths", B, lengths->size()));
    mask.assign(B * T, 1);
    for (int64_t b = 0; b < B; ++b) {
      const int32_t len = (*lengths)[b];
      if (len < 0 || len > T)
        throw DataError(fmt::format("sample {} of the batch has length {}, outside [0, {}] (the padded timesteps)", b,
                                    len, T));
      for (int64_t t = len; t < T; ++t) mask[b * T + t] = 0;
    }
  }

  ForwardContext::Impl local;
  ForwardContext::Impl* c = &local;
  if (ctx) {
    if (!ctx->impl) ctx->impl = std::make_unique<ForwardContext::Impl>();
    c = ctx->impl.get();
  }
  const size_t n = layers_.size();
  c->valid = false;
  c->token_input = model_.spec.layers[0].shape.size() == 1;
  c->saved.resize(n);
  c->acts.resize(ctx ? n : 0);

  Tensor cur = x;
  if (activity) *activity = 0.0;
  for (size_t i = 1; i < n; ++i) {
    Tensor y = layers_[i]->op->forward(params_.layers[i], cur, mask, training, rng, c->saved[i]);
    if (layers_[i]->ends_mask) mask.clear();
    if (ctx) c->acts[i - 1] = std::move(cur);
    for (size_t k = 0; k < layers_[i]->cover; ++k)  // computed inside the op: no outputs of their own
      if (ctx) c->acts[i + k] = Tensor();
    if (ctx && profile_ && profile_->on()) profile_->mark(phase_name(i, "forward"));
    i += layers_[i]->cover;  // the planner ends a stack at a layer with an activity regularizer
    const Regularizer& r = activity_regularizer_of(model_.spec.layers[i]);
    if (activity && r.active() && B > 0) *activity += activity_sum(r, y) / static_cast<double>(B);
    cur = std::move(y);
  }
  if (out_mask) {
    *out_mask = Tensor();
    if (cur.rank() == 3 && !mask.empty()) {
      *out_mask = Tensor({B, T});
      for (int64_t k = 0; k < B * T; ++k) (*out_mask)[k] = mask[k] ? 1.0f : 0.0f;
    }
  }
  if (!ctx) return cur;
  c->acts[n - 1] = cur;
  c->valid = true;
  return cur;
}

Tensor CpuModel::backward(ForwardContext& ctx, const Tensor& dy) {
  if (!ctx.impl || !ctx.impl->valid)
    throw RuntimeError("internal: CpuModel::backward() needs the context of a forward() call made with it");
  ForwardContext::Impl& c = *ctx.impl;
  const size_t n = layers_.size();
  if (dy.shape != c.acts[n - 1].shape)
    throw RuntimeError(fmt::format("internal: the output gradient has shape {} but the model output has shape {}",
                                   shape_str(dy.shape), shape_str(c.acts[n - 1].shape)));
  Tensor g = dy;
  const int64_t B = c.acts[0].dim(0);
  for (size_t i = n - 1; i >= 1; --i) {
    if (layers_[i]->covered) continue;
    const size_t last = i + layers_[i]->cover;  // the layer whose output the op returns
    if (const Regularizer& r = activity_regularizer_of(model_.spec.layers[last]); r.active() && B > 0)
      add_activity_grad(r, c.acts[last], 1.0f / static_cast<float>(B), g);
    g = layers_[i]->op->backward(params_.layers[i], c.saved[i].get(), c.acts[i - 1], c.acts[i + layers_[i]->cover], g);
    if (profile_ && profile_->on()) profile_->mark(phase_name(i, "backward"));
    if (g.empty()) break;  // Embedding: token ids have no gradient
  }
  if (c.token_input) return Tensor();
  return g;
}

}  // namespace rnntrain
