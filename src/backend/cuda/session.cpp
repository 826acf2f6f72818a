// The CUDA session: model, loss kernels and optimizer behind the engine's calls (see session.h).
// Targets are validated on the host (class labels at unmasked positions) before they are uploaded.
#include "backend/cuda/session.h"

#include <cmath>

#include <fmt/format.h>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/device_optimizer.h"
#include "backend/cuda/kernels.h"
#include "core/error.h"
#include "core/log.h"

namespace rnntrain::cuda {

static_assert(static_cast<int>(LossKind::MSE) == 0 && static_cast<int>(LossKind::MAE) == 1 &&
                  static_cast<int>(LossKind::Huber) == 2 && static_cast<int>(LossKind::BinaryCrossentropy) == 3 &&
                  static_cast<int>(LossKind::CategoricalCrossentropy) == 4 &&
                  static_cast<int>(LossKind::SparseCategoricalCrossentropy) == 5,
              "kernels_train.cu loss codes mirror LossKind");

struct Session::Impl {
  Impl(const Config& c, Params& p)
      : cfg(c), params(p), model(gpu, cfg.model, cfg.plan, p, cfg.train.seed),
        opt(gpu, model.store(), cfg.train.optimizer, p) {
    if (cfg.plan.precision == Precision::Fp16) opt.enable_loss_scale();
    log_info("cuda: {}; {} parameters in {:.1f} MiB of device memory\n{}", device_description(), p.count(),
             static_cast<double>(device_bytes_held()) / (1024.0 * 1024.0), model.summary());
  }

  // scaled: the gradient is multiplied by the optimizer's loss scale (train steps; off for gradients()).
  StepLoss loss(const DevTensor& pred, const Batch& b, bool grad, Tensor* mask_out, bool scaled = false);
  void to_host(const DevTensor& d, Tensor* out) {
    if (!out) return;
    *out = Tensor(d.shape);
    copy_to_host(out->ptr(), d.ptr, sizeof(float) * d.numel(), gpu.stream());
    gpu.sync();
  }

  Config cfg;  // the model below keeps a reference to cfg.model
  Params& params;
  Gpu gpu;
  CudaModel model;
  DeviceOptimizer opt;
  DeviceBuffer<float> target{"targets"}, dpred{"loss gradient"};
  DeviceBuffer<double> sum{"loss sum"};
};

StepLoss Session::Impl::loss(const DevTensor& pred, const Batch& b, bool grad, Tensor* mask_out, bool scaled) {
  const LossSpec& spec = cfg.train.loss;
  const bool sparse = spec.kind == LossKind::SparseCategoricalCrossentropy;
  const int64_t K = pred.dim(-1), N = pred.numel() / K;
  const Tensor& y = b.y;
  if (y.numel() != (sparse ? N : pred.numel()))
    throw DataError(fmt::format("the targets have shape {} but the predictions have shape {}; check the targets in "
                                "the data file and the units of the last layer",
                                shape_str(y.shape), shape_str(pred.shape)));
  MaskState& m = model.out_mask();
  const std::vector<uint8_t>* mask = m.present() ? &m.on_host(gpu) : nullptr;
  double count = 0.0;
  for (int64_t i = 0; i < N; ++i) count += (!mask || (*mask)[i]) ? 1.0 : 0.0;
  if (sparse) {
    for (int64_t i = 0; i < N; ++i) {
      if (mask && !(*mask)[i]) continue;
      const float v = y[i];
      if (std::isfinite(v) && std::floor(v) == v && v >= 0.0f && v < static_cast<float>(K)) continue;
      const std::string where = pred.shape.size() == 3
                                    ? fmt::format("sample {}, step {}", i / pred.dim(1), i % pred.dim(1))
                                    : fmt::format("sample {}", i);
      throw DataError(fmt::format("sparse_categorical_crossentropy: label {} at {} is not a class index in [0, {}); "
                                  "the last layer has {} units, so labels must be integers 0..{}; check the targets "
                                  "or the units of the last layer",
                                  v, where, K, K, K - 1));
    }
  }
  cudaStream_t st = gpu.stream();
  copy_to_device(target.ensure(y.numel()), y.ptr(), sizeof(float) * y.numel(), st);
  k::LossArgs a;
  a.kind = static_cast<int>(spec.kind);
  a.from_logits = spec.from_logits, a.delta = spec.delta, a.label_smoothing = spec.label_smoothing;
  a.pred = pred.ptr, a.target = target.get(), a.sparse = sparse;
  a.mask = mask ? m.dev : nullptr;
  a.n = N, a.k = K;
  a.gscale = count > 0 ? 1.0 / count : 0.0;
  a.gmul = scaled ? opt.loss_scale() : nullptr;
  if (grad) {
    a.grad = dpred.ensure(N * K);
    CUDA_CHECK(cudaMemsetAsync(a.grad, 0, sizeof(float) * N * K, st));
  }
  a.sum = sum.ensure(1);
  CUDA_CHECK(cudaMemsetAsync(a.sum, 0, sizeof(double), st));
  k::loss(a, st);
  StepLoss out;
  copy_to_host(&out.sum, a.sum, sizeof(double), st);
  gpu.sync();
  out.count = count;
  if (mask_out) {
    *mask_out = Tensor();
    if (mask) {
      *mask_out = Tensor({m.B, m.T});
      for (int64_t i = 0; i < m.B * m.T; ++i) (*mask_out)[i] = (*mask)[i] ? 1.0f : 0.0f;
    }
  }
  return out;
}

Session::Session(const Config& cfg, Params& params) : impl_(std::make_unique<Impl>(cfg, params)) {}
Session::~Session() = default;

std::string Session::device_name() const { return "cuda (" + device_description() + ")"; }

StepLoss Session::train_step(const Batch& b, double lr, int64_t t, Rng& rng, Tensor* pred, Tensor* mask) {
  Impl& s = *impl_;
  s.model.store().zero_grad();  // cuDNN's weight gradients accumulate
  const DevTensor out = s.model.forward(b, true, rng);
  const StepLoss l = s.loss(out, b, true, mask, true);
  s.to_host(out, pred);
  s.model.backward(DevTensor{s.dpred.get(), out.shape}, false);
  s.opt.step(lr, t);
  return l;
}

StepLoss Session::eval_step(const Batch& b, Tensor* pred, Tensor* mask) {
  Impl& s = *impl_;
  Rng unused(0);
  const DevTensor out = s.model.forward(b, false, unused);
  const StepLoss l = s.loss(out, b, false, mask);
  s.to_host(out, pred);
  return l;
}

Tensor Session::predict(const Batch& b) {
  Impl& s = *impl_;
  Rng unused(0);
  Tensor pred;
  s.to_host(s.model.forward(b, false, unused), &pred);
  return pred;
}

StepLoss Session::gradients(const Batch& b, Rng& rng, Tensor* pred, Tensor* dx) {
  Impl& s = *impl_;
  s.model.store().zero_grad();
  const DevTensor out = s.model.forward(b, true, rng);
  const StepLoss l = s.loss(out, b, true, nullptr);
  s.to_host(out, pred);
  const DevTensor g = s.model.backward(DevTensor{s.dpred.get(), out.shape}, dx != nullptr);
  if (dx) {
    *dx = Tensor();
    if (g.ptr) s.to_host(g, dx);
  }
  s.model.store().download(s.params, true);
  return l;
}

void Session::download() {
  impl_->model.store().download(impl_->params, false);
  impl_->opt.download();
}

void Session::upload() {
  impl_->model.store().upload(impl_->params);
  impl_->opt.upload();
}

std::vector<std::pair<std::string, Tensor*>> Session::slots() { return impl_->opt.slots(); }

}  // namespace rnntrain::cuda
