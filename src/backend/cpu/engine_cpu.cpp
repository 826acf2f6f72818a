// The CPU engine: CpuModel (BLAS) + loss + optimizer on host memory. The reference every other
// backend is compared with. Chosen by make_engine (engine_registry.cpp).
#include <cblas.h>

#include "backend/cpu/cpu_model.h"
#include "backend/cpu/onednn_stack.h"
#include "core/error.h"
#include "core/log.h"
#include "backend/engine.h"

namespace rnntrain {

namespace {

class CpuEngine final : public Engine {
 public:
  CpuEngine(const Config& cfg, Params params, Rng& rng)
      : cfg_(cfg), params_(std::move(params)), model_(cfg_.model, params_, &cfg_.plan), rng_(rng),
        opt_(make_optimizer(cfg_.train.optimizer, params_.all())) {}

  std::string device_name() const override { return "cpu"; }

  LossValue train_step(const Batch& b, double lr, const std::vector<Metric*>& metrics) override {
    ForwardContext& ctx = ctx_;
    Tensor mask;
    params_.zero_grad();
    Tensor pred = model_.forward(b.x, lengths(b), true, rng_, &ctx, &mask);
    Tensor dpred;
    LossValue lv = compute_loss(cfg_.train.loss, pred, b.y, mask.empty() ? nullptr : &mask, &dpred);
    for (Metric* m : metrics) m->update(pred, b.y, mask.empty() ? nullptr : &mask);
    model_.backward(ctx, dpred);
    opt_->step(lr);
    lv.params_finite = params_.first_nonfinite().empty();
    return lv;
  }

  LossValue eval_step(const Batch& b, const std::vector<Metric*>& metrics) override {
    Tensor mask;
    Tensor pred = model_.forward(b.x, lengths(b), false, rng_, nullptr, &mask);
    LossValue lv = compute_loss(cfg_.train.loss, pred, b.y, mask.empty() ? nullptr : &mask, nullptr);
    for (Metric* m : metrics) m->update(pred, b.y, mask.empty() ? nullptr : &mask);
    return lv;
  }

  Tensor predict(const Batch& b) override { return model_.forward(b.x, lengths(b), false, rng_); }

  Params& host_params() override { return params_; }
  void params_changed() override {}
  Optimizer& optimizer() override { return *opt_; }

  LossValue gradients(const Batch& b, Tensor* pred, Tensor* dx) override {
    ForwardContext& ctx = ctx_;
    Tensor mask;
    params_.zero_grad();
    Tensor out = model_.forward(b.x, lengths(b), true, rng_, &ctx, &mask);
    Tensor dpred;
    LossValue lv = compute_loss(cfg_.train.loss, out, b.y, mask.empty() ? nullptr : &mask, &dpred);
    Tensor g = model_.backward(ctx, dpred);
    if (dx) *dx = std::move(g);
    if (pred) *pred = std::move(out);
    return lv;
  }

 private:
  static const std::vector<int32_t>* lengths(const Batch& b) { return b.lengths.empty() ? nullptr : &b.lengths; }

  const Config cfg_;  // a copy: the engine may outlive the caller's config (CpuModel refers into it)
  Params params_;
  CpuModel model_;
  Rng& rng_;
  std::unique_ptr<Optimizer> opt_;
  ForwardContext ctx_;  // reused by every step, so the layers' tapes keep their memory between batches
};

}  // namespace

std::unique_ptr<Engine> make_cpu_engine(const Config& cfg, Params params, Rng& dropout_rng) {
  if (cfg.train.threads > 0) {  // BLAS and oneDNN take turns: each may use them all
    openblas_set_num_threads(static_cast<int>(cfg.train.threads));
    cpu::set_onednn_threads(static_cast<int>(cfg.train.threads));
  }
  return std::make_unique<CpuEngine>(cfg, std::move(params), dropout_rng);
}

}  // namespace rnntrain
