// The CUDA stages of the layers around the recurrent stacks (issue 36), each the counterpart of its
// CPU Op in backend/cpu/sequence_layers.cpp: Conv1D (window gather + one cuBLAS GEMM), the 1D
// poolings, the global poolings, LayerNormalization, Flatten (a view), SpatialDropout1D and
// Activation. All run inside a captured step (no host synchronisation). A stage whose layer passes no
// mask on (spec/layers.h: MaskRule Consume or Drop) clears the MaskState after reading it.
#include <algorithm>

#include <fmt/format.h>

#include "backend/cuda/api_errors.h"
#include "backend/cuda/blas.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/stage.h"
#include "core/error.h"
#include "spec/layers.h"

namespace rnntrain::cuda {

namespace {

// Layer l's window (spec/layers.h) over a batch of T steps, as the kernels take it.
k::Window1d window_of(const LayerSpec& l, int64_t T) {
  const Window w = layer_window(l, T);
  return {w.out, l.strides, l.kind == LayerKind::Conv1D ? l.dilation_rate : 1, w.pad_left};
}

// A stage whose layer passes no mask on clears it, after reading it.
void end_mask(const LayerSpec& l, MaskState& mask) {
  if (ends_mask(l.kind)) mask.clear();
}

class Conv1DStage final : public DeviceStage {
 public:
  Conv1DStage(const StageEnv& env, const LayerSpec& l, int64_t input, size_t first)
      : gpu_(env.gpu), store_(env.store), l_(l), C_(input), first_(first) {}

  void reserve(ParamStore& store) override {
    w_off_ = store.reserve(l_.kernel_size * C_ * l_.filters);
    if (l_.use_bias) b_off_ = store.reserve(l_.filters);
  }
  void place(ParamStore& store) override {
    store.place(first_, w_off_);
    if (l_.use_bias) store.place(first_ + 1, b_off_);
  }

  DevTensor forward(const DevTensor& x, MaskState& mask, const RunInfo&) override {
    const int64_t B = x.dim(0), T = x.dim(1), K = l_.kernel_size, F = l_.filters;
    w_ = window_of(l_, T);
    x_ = x;
    const int64_t rows = B * w_.out;
    k::conv1d_im2col(x.ptr, col_.ensure(rows * K * C_), w_, B, T, C_, K, gpu_.stream());
    y_ = DevTensor{y_buf_.ensure(rows * F), {B, w_.out, F}};
    gemm(gpu_, false, false, rows, F, K * C_, 1.0f, col_.get(), K * C_, store_.w() + w_off_, F, 0.0f, y_.ptr, F);
    bias_activate(gpu_, l_.activation, y_.ptr, l_.use_bias ? store_.w() + b_off_ : nullptr, rows, F, pre_);
    end_mask(l_, mask);
    return y_;
  }

  DevTensor backward(const DevTensor& dy, bool need_dx) override {
    const int64_t B = x_.dim(0), T = x_.dim(1), K = l_.kernel_size, F = l_.filters, rows = B * w_.out;
    const float* d = activation_grad(gpu_, l_.activation, y_.ptr, pre_.get(), dy.ptr, rows, F, dpre_);
    gemm(gpu_, true, false, K * C_, F, rows, 1.0f, col_.get(), K * C_, d, F, 1.0f, store_.g() + w_off_, F);
    if (l_.use_bias) add_colsum(gpu_, d, rows, F, F, store_.g() + b_off_);
    if (!need_dx) return {};
    float* dcol = dcol_.ensure(rows * K * C_);
    gemm(gpu_, false, true, rows, K * C_, F, 1.0f, d, F, store_.w() + w_off_, F, 0.0f, dcol, K * C_);
    DevTensor dx{dx_.ensure(B * T * C_), x_.shape};
    k::conv1d_col2im(dcol, dx.ptr, w_, B, T, C_, K, gpu_.stream());
    return dx;
  }

 private:
  Gpu& gpu_;
  ParamStore& store_;
  LayerSpec l_;
  int64_t C_;
  size_t first_;
  int64_t w_off_ = 0, b_off_ = 0;
  k::Window1d w_;
  DevTensor x_, y_;
  DeviceBuffer<float> col_{"Conv1D windows"}, y_buf_{"Conv1D output"}, pre_{"Conv1D pre-activation"},
      dpre_{"Conv1D gradient"}, dcol_{"Conv1D window gradient"}, dx_{"Conv1D input gradient"};
};

class Pooling1DStage final : public DeviceStage {
 public:
  Pooling1DStage(const StageEnv& env, const LayerSpec& l) : gpu_(env.gpu), l_(l), max_(l.kind == LayerKind::MaxPooling1D) {}
  void reserve(ParamStore&) override {}
  void place(ParamStore&) override {}

  DevTensor forward(const DevTensor& x, MaskState& mask, const RunInfo&) override {
    const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
    w_ = window_of(l_, T);
    x_shape_ = x.shape;
    DevTensor y{y_.ensure(B * w_.out * C), {B, w_.out, C}};
    k::pool1d_forward(x.ptr, y.ptr, max_ ? from_.ensure(y.numel()) : nullptr, w_, B, T, C, l_.pool_size, max_,
                      gpu_.stream());
    end_mask(l_, mask);
    return y;
  }

  DevTensor backward(const DevTensor& dy, bool need_dx) override {
    if (!need_dx) return {};
    DevTensor dx{dx_.ensure(shape_numel(x_shape_)), x_shape_};
    k::pool1d_backward(dy.ptr, from_.get(), dx.ptr, w_, x_shape_[0], x_shape_[1], x_shape_[2], l_.pool_size, max_,
                       gpu_.stream());
    return dx;
  }

 private:
  Gpu& gpu_;
  LayerSpec l_;
  bool max_;
  k::Window1d w_;
  Shape x_shape_;
  DeviceBuffer<float> y_{"pooling output"}, dx_{"pooling gradient"};
  DeviceBuffer<int32_t> from_{"max pooling steps"};
};

class GlobalPooling1DStage final : public DeviceStage {
 public:
  GlobalPooling1DStage(const StageEnv& env, const LayerSpec& l)
      : gpu_(env.gpu), l_(l), max_(l.kind == LayerKind::GlobalMaxPooling1D) {}
  void reserve(ParamStore&) override {}
  void place(ParamStore&) override {}

  DevTensor forward(const DevTensor& x, MaskState& mask, const RunInfo&) override {
    const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2);
    x_ = x;
    mask_ = max_ ? nullptr : mask.dev;  // the max ignores the mask, as Keras
    y_ = DevTensor{y_buf_.ensure(B * C), l_.keepdims ? Shape{B, 1, C} : Shape{B, C}};
    k::global_pool_forward(x.ptr, mask_, y_.ptr, n_.ensure(B * C), B, T, C, max_, gpu_.stream());
    end_mask(l_, mask);  // the mask's buffer is its stage's, untouched until the next forward
    return y_;
  }

  DevTensor backward(const DevTensor& dy, bool need_dx) override {
    if (!need_dx) return {};
    DevTensor dx{dx_.ensure(x_.numel()), x_.shape};
    k::global_pool_backward(x_.ptr, y_.ptr, n_.get(), dy.ptr, mask_, dx.ptr, x_.dim(0), x_.dim(1), x_.dim(2), max_,
                            gpu_.stream());
    return dx;
  }

 private:
  Gpu& gpu_;
  LayerSpec l_;
  bool max_;
  const uint8_t* mask_ = nullptr;
  DevTensor x_, y_;
  DeviceBuffer<float> y_buf_{"global pooling output"}, n_{"global pooling counts"}, dx_{"global pooling gradient"};
};

class LayerNormStage final : public DeviceStage {
 public:
  LayerNormStage(const StageEnv& env, const LayerSpec& l, int64_t input, size_t first)
      : gpu_(env.gpu), store_(env.store), l_(l), C_(input), first_(first) {}

  void reserve(ParamStore& store) override {
    if (l_.scale) gamma_off_ = store.reserve(C_);
    if (l_.center) beta_off_ = store.reserve(C_);
  }
  void place(ParamStore& store) override {
    if (l_.scale) store.place(first_, gamma_off_);
    if (l_.center) store.place(first_ + (l_.scale ? 1 : 0), beta_off_);
  }

  DevTensor forward(const DevTensor& x, MaskState&, const RunInfo&) override {
    const int64_t rows = x.numel() / C_;
    x_ = x;
    DevTensor y{y_.ensure(x.numel()), x.shape};
    k::layer_norm_forward(x.ptr, l_.scale ? store_.w() + gamma_off_ : nullptr, l_.center ? store_.w() + beta_off_ : nullptr,
                          y.ptr, stats_.ensure(2 * rows), rows, C_, static_cast<float>(l_.epsilon), gpu_.stream());
    return y;
  }

  DevTensor backward(const DevTensor& dy, bool need_dx) override {
    const int64_t rows = x_.numel() / C_;
    float* gterm = l_.scale ? gterm_.ensure(rows * C_) : nullptr;
    DevTensor dx{dx_.ensure(x_.numel()), x_.shape};
    k::layer_norm_backward(x_.ptr, l_.scale ? store_.w() + gamma_off_ : nullptr, stats_.get(), dy.ptr, dx.ptr, gterm,
                           rows, C_, gpu_.stream());
    if (l_.scale) add_colsum(gpu_, gterm, rows, C_, C_, store_.g() + gamma_off_);
    if (l_.center) add_colsum(gpu_, dy.ptr, rows, C_, C_, store_.g() + beta_off_);
    return need_dx ? dx : DevTensor{};
  }

 private:
  Gpu& gpu_;
  ParamStore& store_;
  LayerSpec l_;
  int64_t C_;
  size_t first_;
  int64_t gamma_off_ = 0, beta_off_ = 0;
  DevTensor x_;
  DeviceBuffer<float> y_{"LayerNormalization output"}, stats_{"LayerNormalization statistics"},
      gterm_{"LayerNormalization gamma terms"}, dx_{"LayerNormalization gradient"};
};

// Flatten: [B, T, C] as [B, T * C], the same memory.
class FlattenStage final : public DeviceStage {
 public:
  explicit FlattenStage(const LayerSpec& l) : l_(l) {}
  void reserve(ParamStore&) override {}
  void place(ParamStore&) override {}
  DevTensor forward(const DevTensor& x, MaskState& mask, const RunInfo&) override {
    x_shape_ = x.shape;
    end_mask(l_, mask);
    return {x.ptr, {x.dim(0), x.numel() / std::max<int64_t>(x.dim(0), 1)}};
  }
  DevTensor backward(const DevTensor& dy, bool need_dx) override {
    return need_dx ? DevTensor{dy.ptr, x_shape_} : DevTensor{};
  }

 private:
  LayerSpec l_;
  Shape x_shape_;
};

// SpatialDropout1D: one keep factor per (sequence, channel) for every step.
class SpatialDropoutStage final : public DeviceStage {
 public:
  SpatialDropoutStage(const StageEnv& env, const LayerSpec& l) : gpu_(env.gpu), l_(l) {
    if (!(l.rate >= 0.0 && l.rate < 1.0))
      throw ConfigError(fmt::format("{}: layer '{}' (SpatialDropout1D): rate must be in [0, 1), got {}", l.loc.str(),
                                    l.name, l.rate));
  }
  void reserve(ParamStore&) override {}
  void place(ParamStore&) override {}

  DevTensor forward(const DevTensor& x, MaskState&, const RunInfo& run) override {
    active_ = run.training && l_.rate > 0.0;
    if (!active_) return x;
    B_ = x.dim(0), T_ = x.dim(1), C_ = x.dim(2);
    k::dropout_mask(keep_.ensure(B_ * C_), B_ * C_, static_cast<float>(l_.rate), run.seed, run.next_site(), gpu_.stream());
    DevTensor y{y_.ensure(x.numel()), x.shape};
    k::mul_per_sequence(x.ptr, keep_.get(), y.ptr, B_, T_, C_, gpu_.stream());
    return y;
  }

  DevTensor backward(const DevTensor& dy, bool need_dx) override {
    if (!need_dx) return {};
    if (!active_) return dy;
    DevTensor dx{dx_.ensure(dy.numel()), dy.shape};
    k::mul_per_sequence(dy.ptr, keep_.get(), dx.ptr, B_, T_, C_, gpu_.stream());
    return dx;
  }

 private:
  Gpu& gpu_;
  LayerSpec l_;
  bool active_ = false;
  int64_t B_ = 0, T_ = 0, C_ = 0;
  DeviceBuffer<float> keep_{"SpatialDropout1D keep factors"}, y_{"SpatialDropout1D output"},
      dx_{"SpatialDropout1D gradient"};
};

// Activation: y = act(x), elementwise (softmax along the last axis); x is its pre-activation.
class ActivationStage final : public DeviceStage {
 public:
  ActivationStage(const StageEnv& env, const LayerSpec& l) : gpu_(env.gpu), l_(l) {}
  void reserve(ParamStore&) override {}
  void place(ParamStore&) override {}

  DevTensor forward(const DevTensor& x, MaskState&, const RunInfo&) override {
    x_ = x;
    y_ = DevTensor{y_buf_.ensure(x.numel()), x.shape};
    CUDA_CHECK(cudaMemcpyAsync(y_.ptr, x.ptr, sizeof(float) * x.numel(), cudaMemcpyDeviceToDevice, gpu_.stream()));
    const int64_t n = x.dim(-1);
    if (l_.activation == Activation::Softmax) k::softmax_rows(y_.ptr, x.numel() / n, n, gpu_.stream());
    else k::bias_act(y_.ptr, nullptr, x.numel() / n, n, l_.activation, gpu_.stream());
    return y_;
  }

  DevTensor backward(const DevTensor& dy, bool need_dx) override {
    if (!need_dx) return {};
    const int64_t n = x_.dim(-1);
    return {const_cast<float*>(activation_grad(gpu_, l_.activation, y_.ptr, x_.ptr, dy.ptr, x_.numel() / n, n, d_)),
            x_.shape};
  }

 private:
  Gpu& gpu_;
  LayerSpec l_;
  DevTensor x_, y_;
  DeviceBuffer<float> y_buf_{"Activation output"}, d_{"Activation gradient"};
};

}  // namespace

std::unique_ptr<DeviceStage> make_sequence_stage(const StageEnv& env, const LayerSpec& l, int64_t input,
                                                 size_t first_param) {
  switch (l.kind) {
    case LayerKind::Conv1D: return std::make_unique<Conv1DStage>(env, l, input, first_param);
    case LayerKind::MaxPooling1D:
    case LayerKind::AveragePooling1D: return std::make_unique<Pooling1DStage>(env, l);
    case LayerKind::GlobalAveragePooling1D:
    case LayerKind::GlobalMaxPooling1D: return std::make_unique<GlobalPooling1DStage>(env, l);
    case LayerKind::LayerNormalization: return std::make_unique<LayerNormStage>(env, l, input, first_param);
    case LayerKind::Flatten: return std::make_unique<FlattenStage>(l);
    case LayerKind::SpatialDropout1D: return std::make_unique<SpatialDropoutStage>(env, l);
    case LayerKind::Activation: return std::make_unique<ActivationStage>(env, l);
    default:
      throw RuntimeError(fmt::format("internal: layer '{}' ({}) has no GPU stage", l.name, layer_kind_name(l.kind)));
  }
}

}  // namespace rnntrain::cuda
