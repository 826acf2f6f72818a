// The non-recurrent layers of the CPU backend as Ops: Embedding (row lookup, mask_zero), Masking,
// Dropout (inverted, training only) and Dense / TimeDistributed(Dense) over the last axis.
// Not the recurrent layers: rnn_layers.cpp.
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "backend/cpu/cpu_math.h"
#include "backend/cpu/ops.h"
#include "core/error.h"

namespace rnntrain::cpu {

Param& layer_param(const LayerSpec& l, LayerParams& p, size_t k, const Shape& shape) {
  if (k >= p.params.size() || p.params[k].value.shape != shape || p.params[k].grad.shape != shape)
    throw RuntimeError(fmt::format(
        "layer '{}' ({}): weight #{} should have shape {} but the parameters hold {}; they were not made for this "
        "model (check the weights file or init_from)",
        l.name, layer_kind_name(l.kind), k, shape_str(shape),
        k < p.params.size() ? shape_str(p.params[k].value.shape) : std::string("nothing")));
  return p.params[k];
}

namespace {

class EmbeddingOp : public Op {
 public:
  explicit EmbeddingOp(const LayerSpec& l) : spec_(l) {}

  // x: token ids [B, T] as floats -> [B, T, E]
  Tensor forward(LayerParams& p, const Tensor& x, Mask& mask, bool, Rng&, std::unique_ptr<Saved>&) override {
    const int64_t V = spec_.input_dim, E = spec_.output_dim, B = x.dim(0), T = x.dim(1);
    const Param* emb = &layer_param(spec_, p, 0, {V, E});
    Tensor y({B, T, E});
    for (int64_t k = 0; k < B * T; ++k) {
      const int64_t id = token(x[k], k, T);
      std::memcpy(y.ptr() + k * E, emb->value.ptr() + id * E, sizeof(float) * E);
    }
    if (spec_.mask_zero) {
      if (mask.empty()) mask.assign(B * T, 1);
      for (int64_t k = 0; k < B * T; ++k) mask[k] = mask[k] && x[k] != 0.0f;
    }
    return y;
  }

  Tensor backward(LayerParams& p, const Saved*, const Tensor& x, const Tensor&, const Tensor& dy) override {
    const int64_t E = spec_.output_dim, n = x.numel();
    float* g = layer_param(spec_, p, 0, {spec_.input_dim, E}).grad.ptr();
    for (int64_t k = 0; k < n; ++k) {
      float* row = g + static_cast<int64_t>(x[k]) * E;
      const float* d = dy.ptr() + k * E;
      for (int64_t j = 0; j < E; ++j) row[j] += d[j];
    }
    return Tensor();
  }

 private:
  int64_t token(float v, int64_t k, int64_t T) const {
    if (!(v >= 0.0f && v < static_cast<float>(spec_.input_dim)) || v != std::floor(v))
      throw DataError(fmt::format("token id {} at sample {} step {} is not an integer in [0, {}) for layer '{}' "
                                  "(Embedding input_dim {}); raise input_dim or fix the vocabulary",
                                  v, k / T, k % T, spec_.input_dim, spec_.name, spec_.input_dim));
    return static_cast<int64_t>(v);
  }
  LayerSpec spec_;
};

class MaskingOp : public Op {
 public:
  explicit MaskingOp(const LayerSpec& l) : spec_(l), value_(static_cast<float>(l.mask_value)) {}

  // x: [B, T, F]. A step is masked when all its features equal mask_value; masked steps become 0.
  Tensor forward(LayerParams&, const Tensor& x, Mask& mask, bool, Rng&, std::unique_ptr<Saved>&) override {
    const int64_t B = x.dim(0), T = x.dim(1), F = x.dim(2);
    Tensor y = x;
    if (mask.empty()) mask.assign(B * T, 1);
    for (int64_t k = 0; k < B * T; ++k) {
      if (step_used(x.ptr() + k * F, F)) continue;
      mask[k] = 0;
      std::memset(y.ptr() + k * F, 0, sizeof(float) * F);
    }
    return y;
  }

  Tensor backward(LayerParams&, const Saved*, const Tensor& x, const Tensor&, const Tensor& dy) override {
    const int64_t F = x.dim(2), steps = x.numel() / F;
    Tensor dx = dy;
    for (int64_t k = 0; k < steps; ++k)
      if (!step_used(x.ptr() + k * F, F)) std::memset(dx.ptr() + k * F, 0, sizeof(float) * F);
    return dx;
  }

 private:
  bool step_used(const float* v, int64_t F) const {
    for (int64_t j = 0; j < F; ++j)
      if (v[j] != value_) return true;
    return false;
  }
  LayerSpec spec_;
  float value_;
};

struct DropoutSaved : Saved {
  std::vector<float> keep;  // per element: 0 or 1/(1-rate); empty = identity
};

class DropoutOp : public Op {
 public:
  explicit DropoutOp(const LayerSpec& l) : spec_(l) {
    if (!(l.rate >= 0.0 && l.rate < 1.0))
      throw ConfigError(fmt::format("{}: layer '{}' (Dropout): rate must be in [0, 1), got {}", l.loc.str(), l.name,
                                    l.rate));
  }

  Tensor forward(LayerParams&, const Tensor& x, Mask&, bool training, Rng& rng,
                 std::unique_ptr<Saved>& saved) override {
    auto& s = saved_as<DropoutSaved>(saved);
    s.keep.clear();
    if (!training || spec_.rate <= 0.0) return x;
    const double keep = 1.0 - spec_.rate;
    const float scale = static_cast<float>(1.0 / keep);
    s.keep.resize(x.numel());
    Tensor y(x.shape);
    for (int64_t k = 0; k < x.numel(); ++k) {
      s.keep[k] = rng.uniform() < keep ? scale : 0.0f;
      y[k] = x[k] * s.keep[k];
    }
    return y;
  }

  Tensor backward(LayerParams&, const Saved* saved, const Tensor&, const Tensor&, const Tensor& dy) override {
    const auto& s = static_cast<const DropoutSaved&>(*saved);
    if (s.keep.empty()) return dy;
    Tensor dx(dy.shape);
    for (int64_t k = 0; k < dy.numel(); ++k) dx[k] = dy[k] * s.keep[k];
    return dx;
  }

 private:
  LayerSpec spec_;
};

// The pre-activation, for activations whose derivative needs it (act_grad_from_input).
struct PreActivation : Saved {
  Tensor pre;
};

class DenseOp : public Op {
 public:
  DenseOp(const LayerSpec& owner, const LayerSpec& d) : owner_(owner), d_(d) {}

  // x: [N..., I] -> [N..., K] = act(x @ kernel + bias) over the last axis.
  Tensor forward(LayerParams& p, const Tensor& x, Mask&, bool, Rng&, std::unique_ptr<Saved>& saved) override {
    const int64_t I = x.dim(-1), K = d_.units, N = x.numel() / I;
    check(p, I);
    const Param& kernel = p.params[0];
    Shape shape = x.shape;
    shape.back() = K;
    Tensor y(shape);
    float beta = 0.0f;
    if (d_.use_bias) {
      const float* b = p.params[1].value.ptr();
      for (int64_t r = 0; r < N; ++r) std::memcpy(y.ptr() + r * K, b, sizeof(float) * K);
      beta = 1.0f;
    }
    gemm(false, false, N, K, I, 1.0f, x.ptr(), I, kernel.value.ptr(), K, beta, y.ptr(), K);
    activate(d_.activation, y, K, act_grad_from_input(d_.activation) ? &saved_as<PreActivation>(saved).pre : nullptr);
    return y;
  }

  Tensor backward(LayerParams& p, const Saved* saved, const Tensor& x, const Tensor& y, const Tensor& dy) override {
    const int64_t I = x.dim(-1), K = d_.units, N = x.numel() / I;
    check(p, I);
    Param& kernel = p.params[0];
    Tensor dpre = dy;  // [N, K] d loss / d(x @ kernel + bias)
    activate_grad(d_.activation, y, act_grad_from_input(d_.activation) ? pre_of(saved) : y, dpre, K);
    gemm(true, false, I, K, N, 1.0f, x.ptr(), I, dpre.ptr(), K, 1.0f, kernel.grad.ptr(), K);
    if (d_.use_bias) add_colsum(dpre.ptr(), N, K, K, p.params[1].grad.ptr());
    Tensor dx(x.shape);
    gemm(false, true, N, I, K, 1.0f, dpre.ptr(), K, kernel.value.ptr(), K, 0.0f, dx.ptr(), I);
    return dx;
  }

 private:
  void check(LayerParams& p, int64_t I) const {
    const size_t n = d_.use_bias ? 2 : 1;
    if (p.params.size() != n)
      throw RuntimeError(fmt::format("layer '{}' ({}) has {} weights but needs {}; the parameters were not made for "
                                     "this model",
                                     owner_.name, layer_kind_name(owner_.kind), p.params.size(), n));
    layer_param(owner_, p, 0, {I, d_.units});
    if (d_.use_bias) layer_param(owner_, p, 1, {d_.units});
  }
  const Tensor& pre_of(const Saved* saved) const {
    const auto* s = dynamic_cast<const PreActivation*>(saved);
    if (!s) throw RuntimeError(fmt::format("internal: layer '{}' lost its pre-activation", owner_.name));
    return s->pre;
  }
  LayerSpec owner_, d_;
};

}  // namespace

std::unique_ptr<Op> make_embedding(const LayerSpec& l) { return std::make_unique<EmbeddingOp>(l); }
std::unique_ptr<Op> make_masking(const LayerSpec& l) { return std::make_unique<MaskingOp>(l); }
std::unique_ptr<Op> make_dropout(const LayerSpec& l) { return std::make_unique<DropoutOp>(l); }
std::unique_ptr<Op> make_dense(const LayerSpec& l, const LayerSpec& d) { return std::make_unique<DenseOp>(l, d); }

}  // namespace rnntrain::cpu
