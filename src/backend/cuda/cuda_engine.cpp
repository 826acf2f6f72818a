// See cuda_engine.h. Adapts the CUDA session to the Engine interface: steps are enqueued on the
// device and their losses and metric sums collected later; parameters are copied back lazily.
#include "backend/cuda/cuda_engine.h"

#include <deque>

#include <fmt/format.h>

#include "backend/cuda/session.h"
#include "backend/cuda/wavefront.h"
#include "core/error.h"
#include "model/targets.h"

namespace rnntrain::cuda {

namespace {

// The optimizer as the trainer sees it: iterations and host slot tensors; the update runs on the GPU.
class CudaOptimizerView final : public Optimizer {
 public:
  explicit CudaOptimizerView(Session& s) : s_(s) {}
  void step(double) override { throw RuntimeError("internal: the CUDA optimizer steps inside train_step"); }
  std::vector<NamedTensor> slots() override {
    std::vector<NamedTensor> out;
    for (auto& [name, t] : s_.slots()) out.push_back({name, t});
    return out;
  }

 private:
  Session& s_;
};

class CudaEngine final : public Engine {
 public:
  CudaEngine(const Config& cfg, Params params, Rng& rng, Comm* ranks)
      : cfg_(cfg),
        params_(std::move(params)),
        rng_(rng),
        model_(resolve_model(cfg_.model, cfg_.plan.fuse,
                             gpu_stack_rule(cfg_.plan.precision, cfg_.plan.algo, own_kernel_check()))),
        session_(cfg_, model_, params_, ranks), opt_(session_) {}

  std::string device_name() const override { return session_.device_name(); }
  const ResolvedModel& model() const override { return model_; }
  EngineTraits traits() const override { return {.async_steps = true, .device_memory = true}; }

  // A synchronous step is an enqueued one waited for; the losses of steps enqueued before it are kept
  // for the next collect_losses().
  LossValue train_step(const Batch& b, double lr, const std::vector<Metric*>& metrics) override {
    enqueue_train_step(b, lr, metrics);
    std::vector<LossValue> all = collect_losses(true);
    const LossValue last = all.back();
    all.pop_back();
    early_ = std::move(all);
    return last;
  }

  void enqueue_train_step(const Batch& b, double lr, const std::vector<Metric*>& metrics) override {
    check_targets(b);
    std::vector<MetricForm> forms;
    std::vector<std::pair<Metric*, size_t>> widths;
    for (Metric* m : metrics) {
      forms.push_back(m->form(pred_shape(b), b.y));
      widths.emplace_back(m, static_cast<size_t>(forms.back().width()));
    }
    const int64_t t = opt_.iterations() + 1;
    session_.enqueue_train_step(b, lr, t, rng_, forms);
    metrics_.push_back(std::move(widths));
    opt_.set_iterations(t);
    stale_ = true;
  }

  std::vector<LossValue> collect_losses(bool wait) override {
    std::vector<LossValue> out = std::exchange(early_, {});
    for (const StepLoss& l : session_.collect(wait)) {
      const std::vector<std::pair<Metric*, size_t>> ms = std::move(metrics_.front());
      metrics_.pop_front();
      size_t at = 0;  // each metric's form's sums, in order
      for (const auto& [m, width] : ms) {
        m->add(l.metrics.data() + at, l.metric_count);
        at += width;
      }
      out.push_back({l.sum, l.count, l.params_finite, l.penalty});
    }
    return out;
  }

  LossValue eval_step(const Batch& b, const std::vector<Metric*>& metrics) override {
    check_targets(b);
    Tensor pred, mask;
    const bool want = !metrics.empty();
    const StepLoss l = session_.eval_step(b, want ? &pred : nullptr, want ? &mask : nullptr);
    for (Metric* m : metrics) m->update(pred, b.y, mask.empty() ? nullptr : &mask);
    return {l.sum, l.count, true, l.penalty};
  }

  Tensor predict(const Batch& b) override { return session_.predict(b); }

  Params& host_params() override {
    if (stale_) session_.download();
    stale_ = false;
    return params_;
  }
  void params_changed() override {
    session_.upload();
    stale_ = false;
  }
  Optimizer& optimizer() override { return opt_; }

  LossValue gradients(const Batch& b, Tensor* pred, Tensor* dx) override {
    check_targets(b);
    host_params();  // the session overwrites values and grads of params_
    const StepLoss l = session_.gradients(b, rng_, pred, dx);
    return {l.sum, l.count};
  }

 private:
  Shape pred_shape(const Batch& b) const {
    Shape s = model_.shapes.back().out;
    for (int64_t& d : s)
      if (d < 0) d = b.x.dim(1);
    s.insert(s.begin(), b.size());
    return s;
  }

  // The loss's shape checks (same messages as the CPU engine), on the prediction's shape alone.
  void check_targets(const Batch& b) const {
    Tensor pred;
    pred.shape = pred_shape(b);
    const LossSpec& loss = cfg_.train.loss;
    if (loss_info(loss.kind).targets == Targets::Labels) check_sparse_targets(loss_name(loss.kind), pred, b.y, nullptr);
    else check_dense_targets(loss_name(loss.kind), pred, b.y, nullptr);
  }

  Config cfg_;
  Params params_;
  Rng& rng_;
  const ResolvedModel model_;
  Session session_;
  CudaOptimizerView opt_;
  bool stale_ = false;  // the device has newer parameters than params_
  // The metrics of the steps enqueued and not collected, oldest first, with their sums' widths.
  std::deque<std::vector<std::pair<Metric*, size_t>>> metrics_;
  std::vector<LossValue> early_;               // collected by train_step() for the next collect_losses()
};


}  // namespace

std::unique_ptr<Engine> make_cuda_engine(const Config& cfg, Params params, Rng& dropout_rng, Comm* ranks) {
  return std::make_unique<CudaEngine>(cfg, std::move(params), dropout_rng, ranks);
}

}  // namespace rnntrain::cuda
