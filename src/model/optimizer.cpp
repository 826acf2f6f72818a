// Keras 3 optimizers over host parameters, with Keras' order per step: clip the gradients, decay the
// weights (p -= lr*wd*p), then the kind's update rule (spec/optimizers/*.h) with t = iterations+1.
// Float32 arithmetic on flat arrays, as Keras on float32 variables. Not the schedules (schedule.cpp).
#include "model/optimizer.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace rnntrain {

namespace {

// One optimizer of descriptor D (spec/optimizers/*.h): its slots, one tensor per parameter and slot,
// and its update rule over each parameter's elements, after Keras' clipping and weight decay.
template <class D>
class RuleOptimizer : public Optimizer {
 public:
  RuleOptimizer(const OptimizerSpec& spec, std::vector<Param*> params)
      : spec_(spec), rule_(spec), params_(std::move(params)) {
    for (size_t i = 0; i < params_.size(); ++i) {
      const Param& p = *params_[i];
      if (p.grad.numel() != p.value.numel())
        throw RuntimeError(fmt::format("optimizer: parameter {} '{}' has {} values but its gradient has {} (an "
                                       "internal error: please report it)",
                                       i, p.name, p.value.numel(), p.grad.numel()));
    }
    kinds_ = D::slots(spec);
    for (int k = 0; k < kinds_.n; ++k) {
      std::vector<Tensor> tensors;
      for (Param* p : params_) tensors.emplace_back(p->value.shape, kinds_.at[k].init);
      slots_.emplace_back(kinds_.at[k].name, std::move(tensors));
    }
    if (kinds_.trust_ratio)
      for (Param* p : params_) scratch_.emplace_back(p->value.shape);
    for (size_t i = 0; i < params_.size(); ++i) {
      for (int64_t j = 0; j < params_[i]->value.numel(); j += kChunk) work_.push_back({i, j});
      total_ += params_[i]->value.numel();
    }
  }

  void step(double lr) override {
    const int64_t t = iterations_ + 1;
    if (t == 1)  // Keras builds its slots at the first step: some start as the parameter
      for (int k = 0; k < kinds_.n; ++k)
        if (kinds_.at[k].from_value)
          for (size_t i = 0; i < params_.size(); ++i) slots_[k].second[i].data = params_[i]->value.data;
    clip_gradients(spec_, params_);
    for (Param* p : params_) decay_weights(p->value, lr, spec_.weight_decay);
    const StepScalars scalars = D::scalars(spec_, lr, t);
    const typename D::Rule rule = rule_;  // a local: the stores through p and s cannot change it
    // Parameter i's elements [j0, j1): the rule, each element on its own.
    auto update = [&](size_t i, int64_t j0, int64_t j1) {
      float* s[SlotKinds::kMax] = {};
      for (size_t k = 0; k < slots_.size(); ++k) s[k] = slots_[k].second[i].ptr();
      if (kinds_.trust_ratio) s[kinds_.n] = scratch_[i].ptr();
      float* p = params_[i]->value.ptr();
      const float* g = params_[i]->grad.ptr();
      // Every rule reads and writes element j alone (of p and of each slot), so the loop has no
      // dependence from one j to the next: told so, the compiler runs it on vectors.
#pragma GCC ivdep
      for (int64_t j = j0; j < j1; ++j) rule(p[j], g[j], s, j, scalars);
    };
    auto update_chunks = [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const auto [i, j0] = work_[static_cast<size_t>(c)];
        update(i, j0, std::min(j0 + kChunk, params_[i]->value.numel()));
      }
    };
    if (!kinds_.trust_ratio)  // on several threads where there are several chunks' worth
      run_chunks(total_ >= 2 * kChunk ? chunks_ : nullptr, static_cast<int64_t>(work_.size()), update_chunks);
    for (size_t i = 0; kinds_.trust_ratio && i < params_.size(); ++i) {  // its sums run over whole tensors
      const int64_t n = params_[i]->value.numel();
      update(i, 0, n);
      float* p = params_[i]->value.ptr();
      const float* u = scratch_[i].ptr();
      double pp = 0.0, uu = 0.0;
      for (int64_t j = 0; j < n; ++j) pp += static_cast<double>(p[j]) * p[j], uu += static_cast<double>(u[j]) * u[j];
      const float r = pp > 0 && uu > 0 ? static_cast<float>(std::sqrt(pp) / std::sqrt(uu)) : 1.0f;
      const float f = r * scalars.lr;
      for (int64_t j = 0; j < n; ++j) p[j] -= f * u[j];
    }
    iterations_ = t;
  }

  std::vector<NamedTensor> slots() override {
    std::vector<NamedTensor> out;
    for (auto& [name, tensors] : slots_)
      for (size_t i = 0; i < tensors.size(); ++i) out.push_back({fmt::format("{}/{}", name, i), &tensors[i]});
    return out;
  }

 private:
  OptimizerSpec spec_;
  typename D::Rule rule_;
  SlotKinds kinds_;
  std::vector<Param*> params_;
  std::vector<Tensor> scratch_;  // the update before the trust ratio (SlotKinds::trust_ratio), per parameter
  static constexpr int64_t kChunk = 16384;  // elements of one parameter a chunk of step()'s work
  std::vector<std::pair<size_t, int64_t>> work_;  // the chunks: (parameter, first element)
  int64_t total_ = 0;  // elements of all parameters
  std::vector<std::pair<std::string, std::vector<Tensor>>> slots_;  // per slot kind: one tensor per parameter
};

bool is_set(const std::optional<double>& v) { return v.has_value() && *v > 0; }

double sum_squares(const Tensor& t) {
  double s = 0.0;
  for (float x : t.data) s += static_cast<double>(x) * x;
  return s;
}

void scale(Tensor& t, float f) {
  for (float& x : t.data) x *= f;
}

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec, std::vector<Param*> params,
                                          const std::vector<std::string>& paths) {
  check_clipping(spec);
  return with_optimizer(spec.kind, [&](auto d) -> std::unique_ptr<Optimizer> {
    using D = decltype(d);
    if constexpr (PerTensor<D>::value) return make_tensor_optimizer(spec, std::move(params), paths);
    else return std::make_unique<RuleOptimizer<D>>(spec, std::move(params));
  });
}

void decay_weights(Tensor& value, double lr, double wd) {
  if (wd <= 0) return;
  const float f = static_cast<float>(lr * wd);
  for (float& x : value.data) x -= x * f;
}

double clip_gradients(const OptimizerSpec& spec, const std::vector<Param*>& params) {
  // The norms only where a norm clips: most runs clip nothing, and the sums were a serial pass over
  // every gradient each step.
  const bool by_norm = is_set(spec.clipnorm) || is_set(spec.global_clipnorm);
  double total = 0.0;
  std::vector<double> squares(by_norm ? params.size() : 0);
  for (size_t i = 0; i < squares.size(); ++i) total += squares[i] = sum_squares(params[i]->grad);
  const double norm = std::sqrt(total);

  // Keras' precedence: clipnorm, else global_clipnorm, else clipvalue (a value <= 0 is off).
  if (is_set(spec.clipnorm)) {
    // Each gradient: g * c / max(|g|, c).
    const double c = *spec.clipnorm;
    for (size_t i = 0; i < params.size(); ++i) {
      const double n = std::sqrt(squares[i]);
      if (n > c) scale(params[i]->grad, static_cast<float>(c / n));
    }
  } else if (is_set(spec.global_clipnorm)) {
    // All gradients: g * c * min(1/norm, 1/c); a non-finite norm makes them NaN, as Keras.
    const double c = *spec.global_clipnorm;
    const double f = c * std::min(1.0 / norm, 1.0 / c) + (norm - norm);
    if (f != 1.0)
      for (Param* p : params) scale(p->grad, static_cast<float>(f));
  } else if (is_set(spec.clipvalue)) {
    const float c = static_cast<float>(*spec.clipvalue);
    for (Param* p : params)
      for (float& x : p->grad.data) x = std::min(std::max(x, -c), c);
  }
  return norm;
}

}  // namespace rnntrain
