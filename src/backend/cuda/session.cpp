// The CUDA session: model, loss kernels and optimizer behind the engine's calls (see session.h).
// Targets are validated on the host (class labels at unmasked positions) before they are uploaded.
#include "backend/cuda/session.h"

#include <cmath>
#include <deque>

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
  // host_sum: where the loss sum is copied (pinned memory, not waited for), or null to wait for it.
  StepLoss loss(const DevTensor& pred, const Batch& b, bool grad, Tensor* mask_out, bool scaled = false,
                double* host_sum = nullptr);
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
  Uploader target_up{gpu};
  DeviceBuffer<float> dpred{"loss gradient"};
  DeviceBuffer<double> sum{"loss sum"};
  // Enqueued steps: pinned slots for their loss sums, an event each, and the queue (oldest first).
  struct Pending {
    int slot;
    double count;
  };
  double* sums_host = nullptr;
  cudaEvent_t done[kInFlight] = {};
  std::deque<Pending> pending;
  std::vector<StepLoss> collected;  // waited for early (queue full), not yet returned
  int next_slot = 0;
  ~Impl() {
    CUDA_LOG(cudaStreamSynchronize(gpu.stream()));  // queued steps still copy into sums_host
    for (cudaEvent_t e : done)
      if (e) CUDA_LOG(cudaEventDestroy(e));
    if (sums_host) CUDA_LOG(cudaFreeHost(sums_host));
  }
  StepLoss finish_oldest();
};

StepLoss Session::Impl::finish_oldest() {
  const Pending p = pending.front();
  pending.pop_front();
  CUDA_CHECK(cudaEventSynchronize(done[p.slot]));
  return StepLoss{sums_host[p.slot], p.count};
}

StepLoss Session::Impl::loss(const DevTensor& pred, const Batch& b, bool grad, Tensor* mask_out, bool scaled,
                             double* host_sum) {
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
  const float* yd = static_cast<const float*>(target_up.put(y.ptr(), sizeof(float) * y.numel()));
  k::LossArgs a;
  a.kind = static_cast<int>(spec.kind);
  a.from_logits = spec.from_logits, a.delta = spec.delta, a.label_smoothing = spec.label_smoothing;
  a.pred = pred.ptr, a.target = yd, a.sparse = sparse;
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
  out.count = count;
  if (host_sum) {
    CUDA_CHECK(cudaMemcpyAsync(host_sum, a.sum, sizeof(double), cudaMemcpyDeviceToHost, st));
  } else {
    copy_to_host(&out.sum, a.sum, sizeof(double), st);
    gpu.sync();
  }
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
  s.gpu.profiler().mark("loss (and readback)");
  s.model.backward(DevTensor{s.dpred.get(), out.shape}, false);
  s.opt.step(lr, t);
  s.gpu.profiler().mark("optimizer");
  s.gpu.profiler().end_step();
  return l;
}

void Session::enqueue_train_step(const Batch& b, double lr, int64_t t, Rng& rng) {
  Impl& s = *impl_;
  if (!s.sums_host) {
    CUDA_CHECK(cudaMallocHost(&s.sums_host, sizeof(double) * kInFlight));
    for (cudaEvent_t& e : s.done) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  if (static_cast<int>(s.pending.size()) == kInFlight) s.collected.push_back(s.finish_oldest());
  const int slot = s.next_slot;
  s.next_slot = (slot + 1) % kInFlight;
  s.model.store().zero_grad();
  const DevTensor out = s.model.forward(b, true, rng);
  const StepLoss l = s.loss(out, b, true, nullptr, true, s.sums_host + slot);
  s.gpu.profiler().mark("loss");
  s.model.backward(DevTensor{s.dpred.get(), out.shape}, false);
  s.opt.step(lr, t);
  CUDA_CHECK(cudaEventRecord(s.done[slot], s.gpu.stream()));
  s.pending.push_back({slot, l.count});
  s.gpu.profiler().mark("optimizer");
  s.gpu.profiler().end_step();
}

std::vector<StepLoss> Session::collect(bool wait) {
  Impl& s = *impl_;
  std::vector<StepLoss> out = std::move(s.collected);
  s.collected.clear();
  while (!s.pending.empty()) {
    if (!wait) {
      const cudaError_t e = cudaEventQuery(s.done[s.pending.front().slot]);
      if (e == cudaErrorNotReady) break;
      CUDA_CHECK(e);
    }
    out.push_back(s.finish_oldest());
  }
  return out;
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
  s.gpu.profiler().end_step();
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
