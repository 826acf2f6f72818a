// The layers Keras sequence models put around their recurrent stacks, as CPU Ops in Keras 3's exact
// equations (issue 36): Conv1D, MaxPooling1D and AveragePooling1D, GlobalAveragePooling1D and
// GlobalMaxPooling1D, LayerNormalization, Flatten, SpatialDropout1D and Activation. What becomes of the
// mask is CpuModel's (spec/layers.h's MaskRule); GlobalAveragePooling1D reads it first.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "backend/cpu/cpu_math.h"
#include "backend/cpu/ops.h"
#include "core/error.h"
#include "spec/layers.h"

namespace rnntrain::cpu {

namespace {

struct ConvSaved : Saved {
  Tensor col;  // [B * T', kernel_size * C]: the input under each output step's window (zeros in padding)
  Tensor pre;  // the pre-activation, where the activation's derivative needs it
  int64_t pad_left = 0;
};

// Conv1D: y[b, t'] = act(sum_j x[b, t' * strides - pad_left + j * dilation] @ kernel[j] + bias), as one
// GEMM over the windows laid out side by side (im2col).
class Conv1DOp : public Op {
 public:
  explicit Conv1DOp(const LayerSpec& l) : l_(l) {}

  Tensor forward(LayerParams& p, const Tensor& x, Mask&, bool, Rng&, std::unique_ptr<Saved>& saved) override {
    const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2), K = l_.kernel_size, F = l_.filters;
    const Param& kernel = layer_param(l_, p, 0, {K, C, F});
    const Window w = layer_window(l_, T);
    auto& s = saved_as<ConvSaved>(saved);
    s.pad_left = w.pad_left;
    s.col = Tensor({B * w.out, K * C});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < w.out; ++t)
        for (int64_t j = 0; j < K; ++j) {
          const int64_t src = t * l_.strides - w.pad_left + j * l_.dilation_rate;
          if (src >= 0 && src < T)
            std::memcpy(s.col.ptr() + ((b * w.out + t) * K + j) * C, x.ptr() + (b * T + src) * C, sizeof(float) * C);
        }
    Tensor y({B, w.out, F});
    float beta = 0.0f;
    if (l_.use_bias) {
      const float* bias = layer_param(l_, p, 1, {F}).value.ptr();
      for (int64_t r = 0; r < B * w.out; ++r) std::memcpy(y.ptr() + r * F, bias, sizeof(float) * F);
      beta = 1.0f;
    }
    gemm(false, false, B * w.out, F, K * C, 1.0f, s.col.ptr(), K * C, kernel.value.ptr(), F, beta, y.ptr(), F);
    activate(l_.activation, y, F, &s.pre);
    return y;
  }

  Tensor backward(LayerParams& p, const Saved* saved, const Tensor& x, const Tensor& y, const Tensor& dy) override {
    const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2), K = l_.kernel_size, F = l_.filters, To = y.dim(1);
    const auto& s = static_cast<const ConvSaved&>(*saved);
    Param& kernel = layer_param(l_, p, 0, {K, C, F});
    Tensor d = dy;
    activate_grad(l_.activation, y, s.pre, d, F);
    gemm(true, false, K * C, F, B * To, 1.0f, s.col.ptr(), K * C, d.ptr(), F, 1.0f, kernel.grad.ptr(), F);
    if (l_.use_bias) add_colsum(d.ptr(), B * To, F, F, layer_param(l_, p, 1, {F}).grad.ptr());
    Tensor dcol({B * To, K * C});
    gemm(false, true, B * To, K * C, F, 1.0f, d.ptr(), F, kernel.value.ptr(), F, 0.0f, dcol.ptr(), K * C);
    Tensor dx(x.shape);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < To; ++t)
        for (int64_t j = 0; j < K; ++j) {
          const int64_t src = t * l_.strides - s.pad_left + j * l_.dilation_rate;
          if (src < 0 || src >= T) continue;
          const float* g = dcol.ptr() + ((b * To + t) * K + j) * C;
          float* out = dx.ptr() + (b * T + src) * C;
          for (int64_t c = 0; c < C; ++c) out[c] += g[c];
        }
    return dx;
  }

 private:
  LayerSpec l_;
};

struct PoolSaved : Saved {
  std::vector<int64_t> from;  // max: the input step each output took; average: unused
  int64_t pad_left = 0;
};

// MaxPooling1D (padding: the window's maximum over its steps inside the sequence; the first of equal
// maxima takes the gradient) and AveragePooling1D (the mean over the window's steps inside the
// sequence: with padding same, the padded places are not counted, as Keras).
class Pooling1DOp : public Op {
 public:
  explicit Pooling1DOp(const LayerSpec& l) : l_(l), max_(l.kind == LayerKind::MaxPooling1D) {}

  Tensor forward(LayerParams&, const Tensor& x, Mask&, bool, Rng&, std::unique_ptr<Saved>& saved) override {
    const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2), P = l_.pool_size;
    const Window w = layer_window(l_, T);
    auto& s = saved_as<PoolSaved>(saved);
    s.pad_left = w.pad_left;
    Tensor y({B, w.out, C});
    if (max_) s.from.assign(static_cast<size_t>(y.numel()), -1);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < w.out; ++t) {
        const int64_t lo = std::max<int64_t>(t * l_.strides - w.pad_left, 0);
        const int64_t hi = std::min<int64_t>(t * l_.strides - w.pad_left + P, T);
        float* out = y.ptr() + (b * w.out + t) * C;
        for (int64_t c = 0; c < C; ++c) {
          float acc = max_ ? -std::numeric_limits<float>::infinity() : 0.0f;
          int64_t at = lo;
          for (int64_t u = lo; u < hi; ++u) {
            const float v = x[(b * T + u) * C + c];
            if (!max_) acc += v;
            else if (v > acc || v != v) acc = v, at = u;  // NaN wins, as the maximum of a NaN is NaN
          }
          out[c] = max_ ? acc : acc / static_cast<float>(hi - lo);
          if (max_) s.from[static_cast<size_t>((b * w.out + t) * C + c)] = at;
        }
      }
    return y;
  }

  Tensor backward(LayerParams&, const Saved* saved, const Tensor& x, const Tensor& y, const Tensor& dy) override {
    const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2), To = y.dim(1), P = l_.pool_size;
    const auto& s = static_cast<const PoolSaved&>(*saved);
    Tensor dx(x.shape);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < To; ++t) {
        const int64_t lo = std::max<int64_t>(t * l_.strides - s.pad_left, 0);
        const int64_t hi = std::min<int64_t>(t * l_.strides - s.pad_left + P, T);
        const float* g = dy.ptr() + (b * To + t) * C;
        for (int64_t c = 0; c < C; ++c) {
          if (max_) {
            dx[(b * T + s.from[static_cast<size_t>((b * To + t) * C + c)]) * C + c] += g[c];
          } else {
            const float share = g[c] / static_cast<float>(hi - lo);
            for (int64_t u = lo; u < hi; ++u) dx[(b * T + u) * C + c] += share;
          }
        }
      }
    return dx;
  }

 private:
  LayerSpec l_;
  bool max_;
};

struct MaskSaved : Saved {
  Mask mask;  // the mask the layer read (empty: none)
};

// GlobalAveragePooling1D: the mean over the steps the mask keeps (every step without a mask; a
// sequence with none kept is 0 / 0 = NaN, as Keras). GlobalMaxPooling1D: the maximum over every
// step, mask or not (Keras ignores it); equal maxima share the gradient, as JAX's max does.
class GlobalPooling1DOp : public Op {
 public:
  explicit GlobalPooling1DOp(const LayerSpec& l) : l_(l), max_(l.kind == LayerKind::GlobalMaxPooling1D) {}

  Tensor forward(LayerParams&, const Tensor& x, Mask& mask, bool, Rng&, std::unique_ptr<Saved>& saved) override {
    const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
    auto& s = saved_as<MaskSaved>(saved);
    s.mask = max_ ? Mask() : mask;
    Tensor y(l_.keepdims ? Shape{B, 1, C} : Shape{B, C});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) {
        float acc = max_ ? -std::numeric_limits<float>::infinity() : 0.0f, n = 0.0f;
        for (int64_t t = 0; t < T; ++t) {
          const float v = x[(b * T + t) * C + c];
          if (max_) acc = v > acc || v != v ? v : acc;
          else if (s.mask.empty() || s.mask[b * T + t]) acc += v, n += 1.0f;
        }
        y[b * C + c] = max_ ? acc : acc / n;
      }
    return y;
  }

  Tensor backward(LayerParams&, const Saved* saved, const Tensor& x, const Tensor& y, const Tensor& dy) override {
    const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
    const auto& s = static_cast<const MaskSaved&>(*saved);
    Tensor dx(x.shape);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) {
        const float g = dy[b * C + c], top = y[b * C + c];
        float n = 0.0f;
        for (int64_t t = 0; t < T; ++t)
          n += max_ ? (x[(b * T + t) * C + c] == top ? 1.0f : 0.0f) : (s.mask.empty() || s.mask[b * T + t] ? 1.0f : 0.0f);
        for (int64_t t = 0; t < T; ++t) {
          const bool takes = max_ ? x[(b * T + t) * C + c] == top : s.mask.empty() || s.mask[b * T + t];
          if (takes) dx[(b * T + t) * C + c] = g / n;
        }
      }
    return dx;
  }

 private:
  LayerSpec l_;
  bool max_;
};

// LayerNormalization over the last axis: (x - mean) / sqrt(variance + epsilon) (the biased variance,
// epsilon inside the root, as Keras), times gamma, plus beta, each where the layer has it.
class LayerNormOp : public Op {
 public:
  explicit LayerNormOp(const LayerSpec& l) : l_(l) {}

  Tensor forward(LayerParams& p, const Tensor& x, Mask&, bool, Rng&, std::unique_ptr<Saved>&) override {
    const int64_t C = x.dim(-1), N = x.numel() / C;
    const float* gamma = l_.scale ? layer_param(l_, p, 0, {C}).value.ptr() : nullptr;
    const float* beta = l_.center ? layer_param(l_, p, l_.scale ? 1 : 0, {C}).value.ptr() : nullptr;
    Tensor y(x.shape);
    for (int64_t r = 0; r < N; ++r) {
      const float* in = x.ptr() + r * C;
      float* out = y.ptr() + r * C;
      const auto [mean, inv] = moments(in, C);
      for (int64_t c = 0; c < C; ++c) {
        const float v = (in[c] - mean) * inv;
        out[c] = (gamma ? v * gamma[c] : v) + (beta ? beta[c] : 0.0f);
      }
    }
    return y;
  }

  Tensor backward(LayerParams& p, const Saved*, const Tensor& x, const Tensor&, const Tensor& dy) override {
    const int64_t C = x.dim(-1), N = x.numel() / C;
    Param* gamma = l_.scale ? &layer_param(l_, p, 0, {C}) : nullptr;
    Param* beta = l_.center ? &layer_param(l_, p, l_.scale ? 1 : 0, {C}) : nullptr;
    Tensor dx(x.shape);
    std::vector<float> xhat(static_cast<size_t>(C)), dxhat(static_cast<size_t>(C));
    for (int64_t r = 0; r < N; ++r) {
      const float* in = x.ptr() + r * C;
      const float* g = dy.ptr() + r * C;
      const auto [mean, inv] = moments(in, C);
      double m1 = 0.0, m2 = 0.0;  // the means of dxhat and of dxhat * xhat
      for (int64_t c = 0; c < C; ++c) {
        xhat[c] = (in[c] - mean) * inv;
        dxhat[c] = gamma ? g[c] * gamma->value[c] : g[c];
        if (gamma) gamma->grad[c] += g[c] * xhat[c];
        if (beta) beta->grad[c] += g[c];
        m1 += dxhat[c], m2 += static_cast<double>(dxhat[c]) * xhat[c];
      }
      const float a = static_cast<float>(m1 / C), b = static_cast<float>(m2 / C);
      for (int64_t c = 0; c < C; ++c) dx[r * C + c] = inv * (dxhat[c] - a - xhat[c] * b);
    }
    return dx;
  }

 private:
  // The row's mean and 1 / sqrt(variance + epsilon), summed in double.
  std::pair<float, float> moments(const float* in, int64_t C) const {
    double sum = 0.0, sq = 0.0;
    for (int64_t c = 0; c < C; ++c) sum += in[c];
    const double mean = sum / C;
    for (int64_t c = 0; c < C; ++c) sq += (in[c] - mean) * (in[c] - mean);
    return {static_cast<float>(mean), static_cast<float>(1.0 / std::sqrt(sq / C + l_.epsilon))};
  }
  LayerSpec l_;
};

// Flatten: [B, T, C] -> [B, T * C], row-major.
class FlattenOp : public Op {
 public:
  Tensor forward(LayerParams&, const Tensor& x, Mask&, bool, Rng&, std::unique_ptr<Saved>&) override {
    Tensor y = x;
    y.shape = {x.dim(0), x.numel() / std::max<int64_t>(x.dim(0), 1)};
    return y;
  }
  Tensor backward(LayerParams&, const Saved*, const Tensor& x, const Tensor&, const Tensor& dy) override {
    Tensor dx = dy;
    dx.shape = x.shape;
    return dx;
  }
};

struct SpatialSaved : Saved {
  std::vector<float> keep;  // [B, C]: 0 or 1 / (1 - rate); empty = identity
};

// SpatialDropout1D: in training, each channel of each sequence is dropped for every step at once (the
// noise shape [B, 1, C]) and the kept ones scaled by 1 / (1 - rate).
class SpatialDropoutOp : public Op {
 public:
  explicit SpatialDropoutOp(const LayerSpec& l) : l_(l) {
    if (!(l.rate >= 0.0 && l.rate < 1.0))
      throw ConfigError(fmt::format("{}: layer '{}' (SpatialDropout1D): rate must be in [0, 1), got {}", l.loc.str(),
                                    l.name, l.rate));
  }

  Tensor forward(LayerParams&, const Tensor& x, Mask&, bool training, Rng& rng, std::unique_ptr<Saved>& saved) override {
    auto& s = saved_as<SpatialSaved>(saved);
    s.keep.clear();
    if (!training || l_.rate <= 0.0) return x;
    const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
    const double keep = 1.0 - l_.rate;
    const float scale = static_cast<float>(1.0 / keep);
    s.keep.resize(static_cast<size_t>(B * C));
    for (float& k : s.keep) k = rng.uniform() < keep ? scale : 0.0f;
    return scaled(x, s.keep, B, T, C);
  }

  Tensor backward(LayerParams&, const Saved* saved, const Tensor& x, const Tensor&, const Tensor& dy) override {
    const auto& s = static_cast<const SpatialSaved&>(*saved);
    if (s.keep.empty()) return dy;
    return scaled(dy, s.keep, x.dim(0), x.dim(1), x.dim(2));
  }

 private:
  static Tensor scaled(const Tensor& v, const std::vector<float>& keep, int64_t B, int64_t T, int64_t C) {
    Tensor out(v.shape);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < C; ++c) out[(b * T + t) * C + c] = v[(b * T + t) * C + c] * keep[b * C + c];
    return out;
  }
  LayerSpec l_;
};

// Activation: y = act(x) elementwise (softmax along the last axis).
class ActivationOp : public Op {
 public:
  explicit ActivationOp(const LayerSpec& l) : l_(l) {}

  Tensor forward(LayerParams&, const Tensor& x, Mask&, bool, Rng&, std::unique_ptr<Saved>&) override {
    Tensor y = x;
    activate(l_.activation, y, x.dim(-1), nullptr);
    return y;
  }
  Tensor backward(LayerParams&, const Saved*, const Tensor& x, const Tensor& y, const Tensor& dy) override {
    Tensor d = dy;
    activate_grad(l_.activation, y, x, d, x.dim(-1));  // the input is the pre-activation
    return d;
  }

 private:
  LayerSpec l_;
};

}  // namespace

std::unique_ptr<Op> make_sequence_layer(const LayerSpec& l) {
  switch (l.kind) {
    case LayerKind::Conv1D: return std::make_unique<Conv1DOp>(l);
    case LayerKind::MaxPooling1D:
    case LayerKind::AveragePooling1D: return std::make_unique<Pooling1DOp>(l);
    case LayerKind::GlobalAveragePooling1D:
    case LayerKind::GlobalMaxPooling1D: return std::make_unique<GlobalPooling1DOp>(l);
    case LayerKind::LayerNormalization: return std::make_unique<LayerNormOp>(l);
    case LayerKind::Flatten: return std::make_unique<FlattenOp>();
    case LayerKind::SpatialDropout1D: return std::make_unique<SpatialDropoutOp>(l);
    case LayerKind::Activation: return std::make_unique<ActivationOp>(l);
    default:
      throw RuntimeError(fmt::format("internal: layer '{}' ({}) is not a sequence layer", l.name, layer_kind_name(l.kind)));
  }
}

}  // namespace rnntrain::cpu
