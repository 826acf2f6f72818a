// The non-recurrent stages of the CUDA model: Embedding (row gather, mask_zero), Masking, Dropout
// (inverted, training only, device-drawn masks) and Dense / TimeDistributed(Dense) over cuBLAS.
// Mirrors backend/cpu/basic_layers.cpp. Not the recurrent stages: cudnn_stack.cpp, generic_rnn.cpp.
#include <cmath>

#include <fmt/format.h>

#include "backend/cuda/blas.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/stage.h"
#include "core/error.h"

namespace rnntrain::cuda {

const std::vector<uint8_t>& MaskState::on_host(Gpu& gpu) {
  if (!host) {
    host = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(B * T));
    copy_to_host(host->data(), dev, host->size(), gpu.stream());
    gpu.sync();
  }
  return *host;
}

std::vector<int32_t> mask_lengths(const std::vector<uint8_t>& m, int64_t B, int64_t T, const std::string& what) {
  std::vector<int32_t> lens(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    int64_t len = 0;
    while (len < T && m[b * T + len]) ++len;
    for (int64_t t = len; t < T; ++t)
      if (m[b * T + t])
        throw DataError(fmt::format("{} has a gap: sample {} is masked at step {} but not at step {}; the cuDNN backend "
                                    "needs right-padded sequences (padding only at the end); pad at the end or use "
                                    "device: cpu",
                                    what, b, len, t));
    lens[b] = static_cast<int32_t>(len);
  }
  return lens;
}

namespace {

class EmbeddingStage final : public DeviceStage {
 public:
  EmbeddingStage(const StageEnv& env, const LayerSpec& l, size_t first)
      : gpu_(env.gpu), store_(env.store), spec_(l), first_(first) {}

  void reserve(ParamStore& store) override { off_ = store.reserve(spec_.input_dim * spec_.output_dim); }
  void place(ParamStore& store) override { store.place(first_, off_); }

  void check(const Batch& b) const override {
    const Tensor& ids = b.x;  // the model input: Embedding always reads it
    const int64_t T = ids.dim(1), V = spec_.input_dim;
    for (int64_t k = 0; k < ids.numel(); ++k) {
      const float v = ids[k];
      if (!(v >= 0.0f && v < static_cast<float>(V)) || v != std::floor(v))
        throw DataError(fmt::format("token id {} at sample {} step {} is not an integer in [0, {}) for layer '{}' "
                                    "(Embedding input_dim {}); raise input_dim or fix the vocabulary",
                                    v, k / T, k % T, V, spec_.name, V));
    }
  }

  // x: token ids [B, T] (floats) -> [B, T, E]
  DevTensor forward(const DevTensor& x, MaskState& mask, const RunInfo& run) override {
    const int64_t B = x.dim(0), T = x.dim(1), E = spec_.output_dim;
    const Tensor& ids = run.batch->x;
    x_ = x;
    DevTensor y{y_.ensure(B * T * E), {B, T, E}};
    k::embedding_forward(x.ptr, store_.w() + off_, y.ptr, B * T, E, gpu_.stream());
    if (spec_.mask_zero && mask.includes_first) {
      mask.includes_first = false;  // the upload applied mask_zero already
    } else if (spec_.mask_zero) {
      auto host = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(B * T), 1);
      if (mask.present()) *host = mask.on_host(gpu_);
      for (int64_t k = 0; k < B * T; ++k) (*host)[k] = (*host)[k] && ids[k] != 0.0f;
      copy_to_device(mask_.ensure(B * T), host->data(), host->size(), gpu_.stream());
      mask.dev = mask_.get(), mask.B = B, mask.T = T, mask.host = host;
    }
    return y;
  }

  DevTensor backward(const DevTensor& dy, bool) override {
    k::embedding_backward(x_.ptr, dy.ptr, store_.g() + off_, x_.numel(), spec_.output_dim, gpu_.stream());
    return DevTensor{};  // token ids have no gradient
  }


 private:
  Gpu& gpu_;
  ParamStore& store_;
  LayerSpec spec_;
  size_t first_;
  int64_t off_ = 0;
  DevTensor x_;
  DeviceBuffer<float> y_{"Embedding output"};
  DeviceBuffer<uint8_t> mask_{"Embedding mask"};
};

class MaskingStage final : public DeviceStage {
 public:
  MaskingStage(const StageEnv& env, const LayerSpec& l) : gpu_(env.gpu), value_(static_cast<float>(l.mask_value)) {}
  void reserve(ParamStore&) override {}
  void place(ParamStore&) override {}

  // x: [B, T, F]; masked steps (every feature == mask_value) become 0 and leave the mask.
  DevTensor forward(const DevTensor& x, MaskState& mask, const RunInfo&) override {
    const int64_t B = x.dim(0), T = x.dim(1), F = x.dim(2);
    DevTensor y{y_.ensure(B * T * F), x.shape};
    // With includes_first the incoming mask already is this layer's (the upload computed it from the
    // host batch): the kernel makes the same mask again, y and the steps' flags; the host copy holds.
    k::masking_forward(x.ptr, y.ptr, mask.dev, mask_.ensure(B * T), used_.ensure(B * T), B * T, F, value_,
                       gpu_.stream());
    if (!mask.includes_first) mask.host.reset();
    mask.dev = mask_.get(), mask.B = B, mask.T = T, mask.includes_first = false;
    steps_ = B * T, F_ = F;
    return y;
  }

  DevTensor backward(const DevTensor& dy, bool need_dx) override {
    if (!need_dx) return {};
    DevTensor dx{dx_.ensure(dy.numel()), dy.shape};
    k::masking_backward(dy.ptr, dx.ptr, used_.get(), steps_, F_, gpu_.stream());
    return dx;
  }

 private:
  Gpu& gpu_;
  float value_;
  int64_t steps_ = 0, F_ = 0;
  DeviceBuffer<float> y_{"Masking output"}, dx_{"Masking gradient"};
  DeviceBuffer<uint8_t> mask_{"Masking mask"}, used_{"Masking steps"};
};

class DropoutStage final : public DeviceStage {
 public:
  DropoutStage(const StageEnv& env, const LayerSpec& l) : gpu_(env.gpu), spec_(l) {
    if (!(l.rate >= 0.0 && l.rate < 1.0))
      throw ConfigError(fmt::format("{}: layer '{}' (Dropout): rate must be in [0, 1), got {}", l.loc.str(), l.name,
                                    l.rate));
  }
  void reserve(ParamStore&) override {}
  void place(ParamStore&) override {}

  DevTensor forward(const DevTensor& x, MaskState&, const RunInfo& run) override {
    active_ = run.training && spec_.rate > 0.0;
    if (!active_) return x;
    const int64_t n = x.numel();
    k::dropout_mask(keep_.ensure(n), n, static_cast<float>(spec_.rate), run.seed, run.next_site(), gpu_.stream());
    DevTensor y{y_.ensure(n), x.shape};
    k::mul(x.ptr, keep_.get(), y.ptr, n, gpu_.stream());
    return y;
  }

  DevTensor backward(const DevTensor& dy, bool need_dx) override {
    if (!active_ || !need_dx) return need_dx ? dy : DevTensor{};
    DevTensor dx{dx_.ensure(dy.numel()), dy.shape};
    k::mul(dy.ptr, keep_.get(), dx.ptr, dy.numel(), gpu_.stream());
    return dx;
  }

 private:
  Gpu& gpu_;
  LayerSpec spec_;
  bool active_ = false;
  DeviceBuffer<float> keep_{"Dropout mask"}, y_{"Dropout output"}, dx_{"Dropout gradient"};
};

class DenseStage final : public DeviceStage {
 public:
  DenseStage(const StageEnv& env, const LayerSpec& owner, const LayerSpec& d, int64_t input, size_t first)
      : gpu_(env.gpu), store_(env.store), owner_(owner), d_(d), I_(input), first_(first) {}

  void reserve(ParamStore& store) override {
    w_off_ = store.reserve(I_ * d_.units);
    if (d_.use_bias) b_off_ = store.reserve(d_.units);
  }
  void place(ParamStore& store) override {
    store.place(first_, w_off_);
    if (d_.use_bias) store.place(first_ + 1, b_off_);
  }

  // x: [N..., I] -> [N..., K] = act(x @ kernel + bias)
  DevTensor forward(const DevTensor& x, MaskState&, const RunInfo&) override {
    const int64_t K = d_.units, N = x.numel() / I_;
    if (x.dim(-1) != I_)
      throw RuntimeError(fmt::format("internal: layer '{}' expects {} features, got {}", owner_.name, I_, x.dim(-1)));
    x_ = x;
    Shape shape = x.shape;
    shape.back() = K;
    y_ = DevTensor{ybuf_.ensure(N * K), shape};
    gemm(gpu_, false, false, N, K, I_, 1.0f, x.ptr, I_, store_.w() + w_off_, K, 0.0f, y_.ptr, K);
    bias_activate(gpu_, d_.activation, y_.ptr, d_.use_bias ? store_.w() + b_off_ : nullptr, N, K, pre_);
    return y_;
  }

  DevTensor backward(const DevTensor& dy, bool need_dx) override {
    const int64_t K = d_.units, N = x_.numel() / I_;
    // d loss / d(x @ kernel + bias): dy itself when linear (no copy, no buffer)
    const float* dpre = activation_grad(gpu_, d_.activation, y_.ptr, pre_.get(), dy.ptr, N, K, dpre_);
    gemm(gpu_, true, false, I_, K, N, 1.0f, x_.ptr, I_, dpre, K, 1.0f, store_.g() + w_off_, K);
    if (d_.use_bias) add_colsum(gpu_, dpre, N, K, K, store_.g() + b_off_);
    if (!need_dx) return {};
    DevTensor dx{dx_.ensure(N * I_), x_.shape};
    gemm(gpu_, false, true, N, I_, K, 1.0f, dpre, K, store_.w() + w_off_, K, 0.0f, dx.ptr, I_);
    return dx;
  }

 private:
  Gpu& gpu_;
  ParamStore& store_;
  LayerSpec owner_, d_;
  int64_t I_;
  size_t first_;
  int64_t w_off_ = 0, b_off_ = 0;
  DevTensor x_, y_;
  DeviceBuffer<float> ybuf_{"Dense output"}, dpre_{"Dense gradient"}, dx_{"Dense input gradient"},
      pre_{"Dense pre-activation"};  // where act_grad_from_input
};

}  // namespace

void bias_activate(Gpu& gpu, Activation act, float* y, const float* bias, int64_t rows, int64_t n,
                   DeviceBuffer<float>& pre) {
  if (act == Activation::Softmax) {
    k::bias_act(y, bias, rows, n, Activation::Linear, gpu.stream());
    k::softmax_rows(y, rows, n, gpu.stream());
  } else {
    k::bias_act(y, bias, rows, n, act, gpu.stream(), act_grad_from_input(act) ? pre.ensure(rows * n) : nullptr);
  }
}

const float* activation_grad(Gpu& gpu, Activation act, const float* y, const float* pre, const float* dy, int64_t rows,
                             int64_t n, DeviceBuffer<float>& d) {
  if (act == Activation::Linear) return dy;
  float* out = d.ensure(rows * n);
  if (act == Activation::Softmax) {
    k::softmax_rows_grad(y, dy, out, rows, n, gpu.stream());
    return out;
  }
  CUDA_CHECK(cudaMemcpyAsync(out, dy, sizeof(float) * rows * n, cudaMemcpyDeviceToDevice, gpu.stream()));
  k::act_grad(out, act_grad_from_input(act) ? pre : y, rows * n, act, gpu.stream());
  return out;
}

std::unique_ptr<DeviceStage> make_embedding_stage(const StageEnv& env, const LayerSpec& l, size_t first_param) {
  return std::make_unique<EmbeddingStage>(env, l, first_param);
}

std::unique_ptr<DeviceStage> make_masking_stage(const StageEnv& env, const LayerSpec& l) {
  return std::make_unique<MaskingStage>(env, l);
}

std::unique_ptr<DeviceStage> make_dropout_stage(const StageEnv& env, const LayerSpec& l) {
  return std::make_unique<DropoutStage>(env, l);
}

std::unique_ptr<DeviceStage> make_dense_stage(const StageEnv& env, const LayerSpec& owner, const LayerSpec& d, int64_t input,
                                        size_t first_param) {
  return std::make_unique<DenseStage>(env, owner, d, input, first_param);
}

}  // namespace rnntrain::cuda
