// The recurrent layers of the CPU backend as Ops: a plain LSTM/GRU/SimpleRNN (one RnnDirection) and
// Bidirectional (a forward and a go_backwards direction, merged by concat, sum, mul or ave).
// Not the time loops: recurrent.cpp and the cell files.
#include <cstring>

#include <fmt/format.h>

#include "backend/cpu/recurrent.h"
#include "core/error.h"

namespace rnntrain::cpu {
namespace {

void check_recurrent_spec(const LayerSpec& owner, const LayerSpec& r) {
  if (r.activation == Activation::Softmax || r.recurrent_activation == Activation::Softmax)
    throw ConfigError(fmt::format("{}: layer '{}' ({}): softmax cannot be a recurrent cell's activation; use tanh, "
                                  "sigmoid, hard_sigmoid, relu or linear",
                                  owner.loc.str(), owner.name, layer_kind_name(owner.kind)));
}

void check_param_count(const LayerSpec& owner, const LayerParams& p, size_t n) {
  if (p.params.size() != n)
    throw RuntimeError(fmt::format("layer '{}' ({}) has {} weights but needs {}; the parameters were not made for "
                                   "this model (check the weights file or init_from)",
                                   owner.name, layer_kind_name(owner.kind), p.params.size(), n));
}

struct RecurrentSaved : Saved {
  RnnTape tape;
};

class RecurrentOp : public Op {
 public:
  RecurrentOp(const LayerSpec& l, RnnMath math) : spec_(l), dir_(l, l.go_backwards, false, math) {
    check_recurrent_spec(l, l);
  }

  Tensor forward(LayerParams& p, const Tensor& x, Mask& mask, bool training, Rng& rng,
                 std::unique_ptr<Saved>& saved) override {
    check_param_count(spec_, p, spec_.use_bias ? 3 : 2);
    const RnnWeights w = dir_.weights(spec_, p, 0, x.dim(2));
    auto& s = saved_as<RecurrentSaved>(saved);
    Tensor y = dir_.forward(w, x, mask, training, rng, s.tape);
    if (!spec_.return_sequences) mask.clear();  // Keras: the mask passes on only with return_sequences
    return y;
  }

  Tensor backward(LayerParams& p, const Saved* saved, const Tensor& x, const Tensor& y, const Tensor& dy) override {
    const auto& s = static_cast<const RecurrentSaved&>(*saved);
    return dir_.backward(dir_.weights(spec_, p, 0, s.tape.I), s.tape, dy);
  }

 private:
  LayerSpec spec_;
  RnnDirection dir_;
};

struct BidirectionalSaved : Saved {
  RnnTape fwd, bwd;
  Tensor yf, yb;  // mul only: each direction's output, the backward one in time order
};

// Reverses the time axis of y: [B, T, H].
Tensor flip_time(const Tensor& y) {
  const int64_t B = y.dim(0), T = y.dim(1), H = y.dim(2);
  Tensor out(y.shape);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(out.ptr() + (b * T + t) * H, y.ptr() + (b * T + (T - 1 - t)) * H, sizeof(float) * H);
  return out;
}

class BidirectionalOp : public Op {
 public:
  // Keras: the backward layer runs with go_backwards flipped, and both zero masked outputs when
  // they return sequences (zero_output_for_mask = return_sequences).
  BidirectionalOp(const LayerSpec& l, RnnMath math)
      : spec_(l),
        inner_(*l.inner),
        fwd_(*l.inner, l.inner->go_backwards, l.inner->return_sequences, math),
        bwd_(*l.inner, !l.inner->go_backwards, l.inner->return_sequences, math) {
    check_recurrent_spec(l, inner_);
  }

  Tensor forward(LayerParams& p, const Tensor& x, Mask& mask, bool training, Rng& rng,
                 std::unique_ptr<Saved>& saved) override {
    const size_t per = inner_.use_bias ? 3 : 2;
    check_param_count(spec_, p, 2 * per);
    auto& s = saved_as<BidirectionalSaved>(saved);
    Tensor yf = fwd_.forward(fwd_.weights(spec_, p, 0, x.dim(2)), x, mask, training, rng, s.fwd);
    Tensor yb = bwd_.forward(bwd_.weights(spec_, p, per, x.dim(2)), x, mask, training, rng, s.bwd);
    if (inner_.return_sequences) yb = flip_time(yb);
    else mask.clear();
    const int64_t H = inner_.units, rows = yf.numel() / H;
    Tensor y;
    if (spec_.merge_mode == MergeMode::Concat) {
      Shape shape = yf.shape;
      shape.back() = 2 * H;
      y = Tensor(shape);
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(y.ptr() + r * 2 * H, yf.ptr() + r * H, sizeof(float) * H);
        std::memcpy(y.ptr() + r * 2 * H + H, yb.ptr() + r * H, sizeof(float) * H);
      }
      return y;
    }
    y = Tensor(yf.shape);
    const int64_t n = y.numel();
    float* o = y.ptr();
    const float* a = yf.ptr();
    const float* b = yb.ptr();
    switch (spec_.merge_mode) {
      case MergeMode::Sum:
        for (int64_t k = 0; k < n; ++k) o[k] = a[k] + b[k];
        break;
      case MergeMode::Ave:
        for (int64_t k = 0; k < n; ++k) o[k] = (a[k] + b[k]) * 0.5f;
        break;
      case MergeMode::Mul:
        for (int64_t k = 0; k < n; ++k) o[k] = a[k] * b[k];
        s.yf = std::move(yf);
        s.yb = std::move(yb);
        break;
      case MergeMode::Concat: break;
    }
    return y;
  }

  Tensor backward(LayerParams& p, const Saved* saved, const Tensor& x, const Tensor& y, const Tensor& dy) override {
    const auto& s = static_cast<const BidirectionalSaved&>(*saved);
    const size_t per = inner_.use_bias ? 3 : 2;
    const int64_t H = inner_.units;
    Shape half = dy.shape;
    half.back() = H;
    Tensor dyf(half), dyb(half);
    const int64_t rows = dyf.numel() / H, n = dyf.numel();
    switch (spec_.merge_mode) {
      case MergeMode::Concat:
        for (int64_t r = 0; r < rows; ++r) {
          std::memcpy(dyf.ptr() + r * H, dy.ptr() + r * 2 * H, sizeof(float) * H);
          std::memcpy(dyb.ptr() + r * H, dy.ptr() + r * 2 * H + H, sizeof(float) * H);
        }
        break;
      case MergeMode::Sum:
        dyf = dy;
        dyb = dy;
        break;
      case MergeMode::Ave:
        for (int64_t k = 0; k < n; ++k) dyf[k] = dyb[k] = 0.5f * dy[k];
        break;
      case MergeMode::Mul:
        for (int64_t k = 0; k < n; ++k) {
          dyf[k] = dy[k] * s.yb[k];
          dyb[k] = dy[k] * s.yf[k];
        }
        break;
    }
    if (inner_.return_sequences) dyb = flip_time(dyb);
    Tensor dx = fwd_.backward(fwd_.weights(spec_, p, 0, s.fwd.I), s.fwd, dyf);
    const Tensor dxb = bwd_.backward(bwd_.weights(spec_, p, per, s.bwd.I), s.bwd, dyb);
    for (int64_t k = 0; k < dx.numel(); ++k) dx[k] += dxb[k];
    return dx;
  }

 private:
  LayerSpec spec_;
  LayerSpec inner_;
  RnnDirection fwd_, bwd_;
};

}  // namespace

std::unique_ptr<Op> make_recurrent(const LayerSpec& l, RnnMath math) { return std::make_unique<RecurrentOp>(l, math); }

std::unique_ptr<Op> make_bidirectional(const LayerSpec& l, RnnMath math) {
  return std::make_unique<BidirectionalOp>(l, math);
}

}  // namespace rnntrain::cpu
