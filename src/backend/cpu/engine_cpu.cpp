// The CPU engine: CpuModel (BLAS) + loss + optimizer on host memory. The reference every other
// backend is compared with. Chosen by make_engine (engine_registry.cpp).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "backend/cpu/cpu_math.h"
#include "backend/cpu/cpu_model.h"
#include "backend/cpu/onednn_stack.h"
#include "backend/cpu/profile.h"
#include "backend/cpu/thread_governor.h"
#include "core/error.h"
#include "core/log.h"
#include "backend/engine.h"
#include "dist/comm.h"

namespace rnntrain {

namespace {

class CpuEngine final : public Engine {
 public:
  CpuEngine(const Config& cfg, Params params, Rng& rng, Comm* ranks)
      : cfg_(cfg), params_(std::move(params)),
        model_(resolve_model(cfg_.model, cfg_.plan.fuse), params_, &cfg_.plan), rng_(rng),
        opt_(make_optimizer(cfg_.train.optimizer, params_.all(), keras_variable_paths(cfg_.model, params_))), dp_(ranks && ranks->distributed() ? ranks : nullptr),
        regs_(weight_regularizers(cfg_.model, params_)), constraints_(weight_constraints(cfg_.model, params_)) {
    if (dp_) refuse_activity_regularizers(cfg_.model, dp_->describe());
    // train.threads 0 (under data parallelism DataParallel::for_engine has set each rank's share)
    if (cfg_.train.threads == 0) governor_.emplace(cpu::ThreadGovernor::for_this_machine());
    model_.set_profile(&profile_);
    opt_->set_chunks(&chunks_);
  }

  std::string device_name() const override { return "cpu"; }
  const ResolvedModel& model() const override { return model_.model(); }

  // Under data parallelism (`ranks` of several processes) the batch is this rank's share of the
  // global batch: the loss is the global batch's (its sum and count reduced across the ranks), the
  // share's gradient is weighted by its count over the global count and the gradients are summed
  // across the ranks, so every rank takes the one-process update. The metrics hold this share's.
  // The regularizers' gradients join the summed ones (every rank holds the same weights).
  LossValue train_step(const Batch& b, double lr, const std::vector<Metric*>& metrics) override {
    const auto start = std::chrono::steady_clock::now();
    profile_.start_step();
    ForwardContext& ctx = ctx_;
    params_.zero_grad();
    profile_.mark("zero gradients");
    LossValue lv;
    Tensor dpred;
    double activity = 0.0;
    const bool rows = b.x.dim(0) > 0;  // a rank's share of a global batch smaller than the ranks is empty
    if (rows) {
      Tensor mask;
      Tensor pred = model_.forward(b.x, lengths(b), true, rng_, &ctx, &mask, &activity);
      lv = compute_loss(cfg_.train.loss, pred, b.y, mask.empty() ? nullptr : &mask, &dpred, weights(b), &chunks_);
      for (Metric* m : metrics) m->update(pred, b.y, mask.empty() ? nullptr : &mask);
      profile_.mark("loss and metrics");
    }
    if (dp_) {
      double sc[2] = {lv.sum, lv.count};
      dp_->allreduce_sum(sc, 2);
      const double w = sc[1] > 0 ? lv.count / sc[1] : 0.0;
      for (float& v : dpred.data) v = static_cast<float>(v * w);
      lv.sum = sc[0], lv.count = sc[1];
    }
    if (rows) model_.backward(ctx, dpred);
    if (dp_) allreduce_grads();
    lv.penalty = activity + weight_penalty(regs_, params_.all(), true);
    profile_.mark(dp_ ? "all-reduce, regularizers" : "regularizers");
    opt_->step(lr);
    profile_.mark("optimizer");
    apply_constraints(constraints_, params_.all());
    lv.params_finite = params_.first_nonfinite().empty();
    profile_.mark("constraints, finite check");
    profile_.end_step();
    if (governor_ && rows)  // the step's seconds per batch row and timestep, on this thread count
      governor_->update(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                        static_cast<double>(b.x.dim(0)) * (b.x.rank() > 1 ? b.x.dim(1) : 1));
    return lv;
  }

  LossValue eval_step(const Batch& b, const std::vector<Metric*>& metrics) override {
    Tensor mask;
    double activity = 0.0;
    Tensor pred = model_.forward(b.x, lengths(b), false, rng_, nullptr, &mask, &activity);
    LossValue lv =
        compute_loss(cfg_.train.loss, pred, b.y, mask.empty() ? nullptr : &mask, nullptr, weights(b), &chunks_);
    for (Metric* m : metrics) m->update(pred, b.y, mask.empty() ? nullptr : &mask);
    lv.penalty = activity + weight_penalty(regs_, params_.all(), false);
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
    LossValue lv = compute_loss(cfg_.train.loss, out, b.y, mask.empty() ? nullptr : &mask, &dpred, weights(b));
    Tensor g = model_.backward(ctx, dpred);
    if (dx) *dx = std::move(g);
    if (pred) *pred = std::move(out);
    return lv;
  }

 private:
  static const std::vector<int32_t>* lengths(const Batch& b) { return b.lengths.empty() ? nullptr : &b.lengths; }
  static const Tensor* weights(const Batch& b) { return b.w.empty() ? nullptr : &b.w; }

  // Sums every gradient across the ranks, through one buffer (one collective per step).
  void allreduce_grads() {
    flat_.clear();
    for (const Param* p : params_.all()) flat_.insert(flat_.end(), p->grad.data.begin(), p->grad.data.end());
    dp_->allreduce_sum(flat_.data(), static_cast<int64_t>(flat_.size()));
    size_t at = 0;
    for (Param* p : params_.all()) {
      std::copy(flat_.begin() + at, flat_.begin() + at + p->grad.data.size(), p->grad.data.begin());
      at += p->grad.data.size();
    }
  }

  const Config cfg_;  // a copy: the engine may outlive the caller's config (CpuModel refers into it)
  Params params_;
  CpuModel model_;
  Rng& rng_;
  std::unique_ptr<Optimizer> opt_;
  ForwardContext ctx_;  // reused by every step, so the layers' tapes keep their memory between batches
  Comm* dp_;  // the ranks whose steps sum their gradients, or null
  std::vector<float> flat_;  // the gradients in one buffer for the all-reduce
  std::vector<Regularizer> regs_;  // per parameter (Params::all() order)
  std::vector<Constraint> constraints_;  // likewise, applied after each update
  std::optional<cpu::ThreadGovernor> governor_;  // train.threads 0: the thread count for a shared machine
  cpu::Profile profile_;  // RNNTRAIN_PROFILE
  // The loss's and the optimizer's chunks over the BLAS threads (cpu::parallel_rows), a chunk a slice.
  const ChunkRunner chunks_ = [](int64_t chunks, const std::function<void(int64_t, int64_t)>& fn) {
    cpu::parallel_rows(chunks, 1, fn);
  };
};

}  // namespace

std::unique_ptr<Engine> make_cpu_engine(const Config& cfg, Params params, Rng& dropout_rng, Comm* ranks) {
  // Under data parallelism train.threads is the rank's share of the cores (DataParallel::for_engine).
  const int64_t threads = cfg.train.threads;
  if (threads > 0) {  // BLAS and oneDNN take turns: each may use them all
    openblas_set_num_threads(static_cast<int>(threads));
    cpu::set_onednn_threads(static_cast<int>(threads));
  }
  return std::make_unique<CpuEngine>(cfg, std::move(params), dropout_rng, ranks);
}

}  // namespace rnntrain
