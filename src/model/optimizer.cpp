// Keras 3 optimizers over host parameters: SGD, Adam/AdamW, RMSprop, Adagrad, with Keras' order per
// step: clip the gradients, decay the weights (p -= lr*wd*p), then the update rule with t = iterations+1.
// Float32 arithmetic on flat arrays, as Keras on float32 variables. Not the schedules (schedule.cpp).
#include "model/optimizer.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace rnntrain {

namespace {

// The common part: parameters, slot tensors (one group per slot kind, one tensor per parameter),
// clipping and weight decay. Subclasses implement the update of one parameter.
class KerasOptimizer : public Optimizer {
 public:
  KerasOptimizer(const OptimizerSpec& spec, std::vector<Param*> params) : spec_(spec), params_(std::move(params)) {
    for (size_t i = 0; i < params_.size(); ++i) {
      const Param& p = *params_[i];
      if (p.grad.numel() != p.value.numel())
        throw RuntimeError(fmt::format("optimizer: parameter {} '{}' has {} values but its gradient has {} (an "
                                       "internal error: please report it)",
                                       i, p.name, p.value.numel(), p.grad.numel()));
    }
  }

  void step(double lr) override {
    clip_gradients(spec_, params_);
    if (spec_.weight_decay > 0) {
      const float f = static_cast<float>(lr * spec_.weight_decay);
      for (Param* p : params_)
        for (float& x : p->value.data) x -= x * f;
    }
    const int64_t t = iterations_ + 1;
    begin_step(lr, t);
    for (size_t i = 0; i < params_.size(); ++i)
      update(i, params_[i]->value.ptr(), params_[i]->grad.ptr(), params_[i]->value.numel());
    iterations_ = t;
  }

  std::vector<NamedTensor> slots() override {
    std::vector<NamedTensor> out;
    for (auto& [name, tensors] : groups_)
      for (size_t i = 0; i < tensors.size(); ++i) out.push_back({fmt::format("{}/{}", name, i), &tensors[i]});
    return out;
  }

 protected:
  // Adds a slot kind with one tensor per parameter, filled with `fill`; returns its index in groups_.
  size_t add_slot(const std::string& name, float fill = 0.0f) {
    std::vector<Tensor> tensors;
    tensors.reserve(params_.size());
    for (Param* p : params_) tensors.emplace_back(p->value.shape, fill);
    groups_.emplace_back(name, std::move(tensors));
    return groups_.size() - 1;
  }
  float* slot(size_t group, size_t param) { return groups_[group].second[param].ptr(); }

  // Per-step scalars (learning rate, bias corrections) before the per-parameter updates.
  virtual void begin_step(double lr, int64_t t) = 0;
  // p, g: [n], the flat value and (clipped) gradient of parameter i.
  virtual void update(size_t i, float* p, const float* g, int64_t n) = 0;

  OptimizerSpec spec_;
  std::vector<Param*> params_;

 private:
  std::vector<std::pair<std::string, std::vector<Tensor>>> groups_;
};

// m = momentum*m - lr*g; p += m (or, nesterov, p += momentum*m - lr*g). Without momentum p -= lr*g.
class SGD : public KerasOptimizer {
 public:
  SGD(const OptimizerSpec& spec, std::vector<Param*> params) : KerasOptimizer(spec, std::move(params)) {
    if (spec_.momentum != 0) m_ = add_slot("momentum");
  }
  void begin_step(double lr, int64_t) override { lr_ = static_cast<float>(lr); }
  void update(size_t i, float* p, const float* g, int64_t n) override {
    if (spec_.momentum == 0) {
      for (int64_t j = 0; j < n; ++j) p[j] -= lr_ * g[j];
      return;
    }
    float* m = slot(m_, i);
    const float mu = static_cast<float>(spec_.momentum);
    for (int64_t j = 0; j < n; ++j) {
      m[j] = mu * m[j] - lr_ * g[j];
      p[j] += spec_.nesterov ? mu * m[j] - lr_ * g[j] : m[j];
    }
  }

 private:
  size_t m_ = 0;
  float lr_ = 0;
};

// m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2); (amsgrad: v_hat = max(v_hat, v), used for v);
// p -= alpha*m / (sqrt(v) + eps) with alpha = lr*sqrt(1 - b2^t) / (1 - b1^t). AdamW adds the
// weight decay in KerasOptimizer::step.
class Adam : public KerasOptimizer {
 public:
  Adam(const OptimizerSpec& spec, std::vector<Param*> params) : KerasOptimizer(spec, std::move(params)) {
    m_ = add_slot("momentum");
    v_ = add_slot("velocity");
    if (spec_.amsgrad) vhat_ = add_slot("velocity_hat");
  }
  void begin_step(double lr, int64_t t) override {
    const double td = static_cast<double>(t);
    alpha_ = static_cast<float>(lr * std::sqrt(1.0 - std::pow(spec_.beta_2, td)) / (1.0 - std::pow(spec_.beta_1, td)));
  }
  void update(size_t i, float* p, const float* g, int64_t n) override {
    float* m = slot(m_, i);
    float* v = slot(v_, i);
    float* vhat = spec_.amsgrad ? slot(vhat_, i) : nullptr;
    const float c1 = static_cast<float>(1.0 - spec_.beta_1), c2 = static_cast<float>(1.0 - spec_.beta_2);
    const float eps = static_cast<float>(spec_.epsilon);
    for (int64_t j = 0; j < n; ++j) {
      m[j] += (g[j] - m[j]) * c1;
      v[j] += (g[j] * g[j] - v[j]) * c2;
      float vj = v[j];
      if (vhat) vj = vhat[j] = std::max(vhat[j], v[j]);
      p[j] -= m[j] * alpha_ / (std::sqrt(vj) + eps);
    }
  }

 private:
  size_t m_ = 0, v_ = 0, vhat_ = 0;
  float alpha_ = 0;
};

// v = rho*v + (1-rho)*g^2; centered: a = rho*a + (1-rho)*g, denominator v - a^2 + eps, else v + eps;
// inc = lr*g / sqrt(denominator); with momentum: mom = momentum*mom + inc, p -= mom; else p -= inc.
class RMSprop : public KerasOptimizer {
 public:
  RMSprop(const OptimizerSpec& spec, std::vector<Param*> params) : KerasOptimizer(spec, std::move(params)) {
    v_ = add_slot("velocity");
    if (spec_.momentum > 0) mom_ = add_slot("momentum");
    if (spec_.centered) avg_ = add_slot("average_gradient");
  }
  void begin_step(double lr, int64_t) override { lr_ = static_cast<float>(lr); }
  void update(size_t i, float* p, const float* g, int64_t n) override {
    float* v = slot(v_, i);
    float* mom = spec_.momentum > 0 ? slot(mom_, i) : nullptr;
    float* avg = spec_.centered ? slot(avg_, i) : nullptr;
    const float rho = static_cast<float>(spec_.rho), c = static_cast<float>(1.0 - spec_.rho);
    const float eps = static_cast<float>(spec_.epsilon), mu = static_cast<float>(spec_.momentum);
    for (int64_t j = 0; j < n; ++j) {
      v[j] = rho * v[j] + c * g[j] * g[j];
      float denom = v[j] + eps;
      if (avg) {
        avg[j] = rho * avg[j] + c * g[j];
        denom = v[j] - avg[j] * avg[j] + eps;
      }
      const float inc = lr_ * g[j] / std::sqrt(denom);
      if (mom) {
        mom[j] = mu * mom[j] + inc;
        p[j] -= mom[j];
      } else {
        p[j] -= inc;
      }
    }
  }

 private:
  size_t v_ = 0, mom_ = 0, avg_ = 0;
  float lr_ = 0;
};

// acc += g^2 (acc starts at initial_accumulator_value); p -= lr*g / sqrt(acc + eps).
class Adagrad : public KerasOptimizer {
 public:
  Adagrad(const OptimizerSpec& spec, std::vector<Param*> params) : KerasOptimizer(spec, std::move(params)) {
    acc_ = add_slot("accumulator", static_cast<float>(spec_.initial_accumulator_value));
  }
  void begin_step(double lr, int64_t) override { lr_ = static_cast<float>(lr); }
  void update(size_t i, float* p, const float* g, int64_t n) override {
    float* acc = slot(acc_, i);
    const float eps = static_cast<float>(spec_.epsilon);
    for (int64_t j = 0; j < n; ++j) {
      acc[j] += g[j] * g[j];
      p[j] -= lr_ * g[j] / std::sqrt(acc[j] + eps);
    }
  }

 private:
  size_t acc_ = 0;
  float lr_ = 0;
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

std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec, std::vector<Param*> params) {
  const int clips = spec.clipnorm.has_value() + spec.clipvalue.has_value() + spec.global_clipnorm.has_value();
  if (clips > 1)
    throw ConfigError("train.optimizer: only one of clipnorm, clipvalue and global_clipnorm can be set (as in "
                      "Keras); remove the others");
  switch (spec.kind) {
    case OptimizerKind::SGD: return std::make_unique<SGD>(spec, std::move(params));
    case OptimizerKind::Adam:
    case OptimizerKind::AdamW: return std::make_unique<Adam>(spec, std::move(params));
    case OptimizerKind::RMSprop: return std::make_unique<RMSprop>(spec, std::move(params));
    case OptimizerKind::Adagrad: return std::make_unique<Adagrad>(spec, std::move(params));
  }
  throw ConfigError("train.optimizer: unknown kind");
}

double clip_gradients(const OptimizerSpec& spec, const std::vector<Param*>& params) {
  double total = 0.0;
  std::vector<double> squares(params.size());
  for (size_t i = 0; i < params.size(); ++i) total += squares[i] = sum_squares(params[i]->grad);
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
