// The optimizers whose update is not elementwise (spec/optimizers.h: kPerTensor), over whole host
// parameters in Keras layout, after Keras' clipping and weight decay as every kind. Float32 values,
// sums and means in double. Slots are listed variable by variable, Keras' creation order: Adafactor
// (r, c, velocity of each), Muon (momentum of each, velocity of those AdamW updates).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "model/optimizer.h"

namespace rnntrain {

namespace {

double sum_squares(const float* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}
double mean_square(const float* x, int64_t n) { return n > 0 ? sum_squares(x, n) / static_cast<double>(n) : 0.0; }

// Adafactor (spec/optimizers/adafactor.h).
class AdafactorOptimizer : public Optimizer {
 public:
  AdafactorOptimizer(const OptimizerSpec& spec, std::vector<Param*> params) : spec_(spec), params_(std::move(params)) {
    for (Param* p : params_)
      for (int k = 0; k < 3; ++k) state_.emplace_back(Adafactor::slot_shape(k, p->value.shape));
  }

  void step(double lr) override {
    clip_gradients(spec_, params_);
    for (Param* p : params_) decay_weights(p->value, lr, spec_.weight_decay);
    const int64_t t = iterations_ + 1;
    const StepScalars sc = Adafactor::scalars(spec_, lr, t);
    const float rho = sc.k[0], b = sc.k[1], eps1 = static_cast<float>(spec_.epsilon_1);
    for (size_t i = 0; i < params_.size(); ++i) {
      Param& prm = *params_[i];
      float* p = prm.value.ptr();
      const float* g = prm.grad.ptr();
      float *r = state_[3 * i].ptr(), *c = state_[3 * i + 1].ptr(), *v = state_[3 * i + 2].ptr();
      const int64_t n = prm.value.numel();
      const float alpha =
          std::max(static_cast<float>(spec_.epsilon_2), static_cast<float>(std::sqrt(mean_square(p, n)))) * rho;
      if (prm.value.shape.size() >= 2) {  // factored over the last two dimensions (rnntrain's have two)
        const int64_t C = prm.value.shape.back(), R = n / C;
        double r_sum = 0.0;
        for (int64_t a = 0; a < R; ++a) {
          double s = 0.0;
          for (int64_t j = 0; j < C; ++j) s += g[a * C + j] * g[a * C + j] + eps1;
          r[a] = b * r[a] + (1.0f - b) * static_cast<float>(s / static_cast<double>(C));
          r_sum += r[a];
        }
        for (int64_t j = 0; j < C; ++j) {
          double s = 0.0;
          for (int64_t a = 0; a < R; ++a) s += g[a * C + j] * g[a * C + j] + eps1;
          c[j] = b * c[j] + (1.0f - b) * static_cast<float>(s / static_cast<double>(R));
        }
        const float r_mean = static_cast<float>(r_sum / static_cast<double>(R));
        for (int64_t a = 0; a < R; ++a)
          for (int64_t j = 0; j < C; ++j) v[a * C + j] = (r[a] / r_mean) * c[j];
      } else {
        for (int64_t j = 0; j < n; ++j) v[j] = b * v[j] + (1.0f - b) * (g[j] * g[j] + eps1);
      }
      std::vector<float> u(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) u[j] = g[j] / std::sqrt(v[j]);
      const float clip = std::max(1.0f, static_cast<float>(std::sqrt(mean_square(u.data(), n)) / spec_.clip_threshold));
      for (int64_t j = 0; j < n; ++j) p[j] -= alpha * (u[j] / clip);
    }
    iterations_ = t;
  }

  std::vector<NamedTensor> slots() override {
    static constexpr const char* kNames[] = {"r", "c", "velocity"};
    std::vector<NamedTensor> out;
    for (size_t i = 0; i < state_.size(); ++i)
      out.push_back({fmt::format("{}/{}", kNames[i % 3], i / 3), &state_[i]});
    return out;
  }

 private:
  OptimizerSpec spec_;
  std::vector<Param*> params_;
  std::vector<Tensor> state_;  // r, c, velocity of each parameter in turn
};

// c [m, n] = a [m, k] @ b [k, n] (row-major; ta: a is given as [k, m]; tb: b as [n, k]), double sums.
void matmul(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t q = 0; q < k; ++q) s += static_cast<double>(ta ? a[q * m + i] : a[i * k + q]) * (tb ? b[j * k + q] : b[q * n + j]);
      c[i * n + j] = static_cast<float>(s);
    }
}

// Keras' zeropower_via_newtonschulz5 on x [R, C] in place, over the smaller side: with R <= C,
// A = X X^T and X = a X + B X; with R > C (Keras transposes), A = X^T X and X = a X + X B; B = b A + c A A.
void newton_schulz(float* x, int64_t R, int64_t C, const OptimizerSpec& o) {
  const int64_t n = R * C, s = std::min(R, C);
  const float norm = static_cast<float>(std::sqrt(sum_squares(x, n)));
  for (int64_t i = 0; i < n; ++i) x[i] /= norm + 1e-7f;
  std::vector<float> A(s * s), AA(s * s), B(s * s), T(n);
  const auto a = static_cast<float>(o.muon_a), b = static_cast<float>(o.muon_b), c = static_cast<float>(o.muon_c);
  for (int step = 0; step < static_cast<int>(o.ns_steps); ++step) {
    if (R <= C) matmul(x, x, A.data(), s, s, C, false, true);
    else matmul(x, x, A.data(), s, s, R, true, false);
    matmul(A.data(), A.data(), AA.data(), s, s, s, false, false);
    for (int64_t i = 0; i < s * s; ++i) B[i] = b * A[i] + c * AA[i];
    if (R <= C) matmul(B.data(), x, T.data(), R, C, R, false, false);
    else matmul(x, B.data(), T.data(), R, C, C, false, false);
    for (int64_t i = 0; i < n; ++i) x[i] = a * x[i] + T[i];
  }
}

// Muon (spec/optimizers/muon.h): its weight decay, AdamW or Muon per weight.
class MuonOptimizer : public Optimizer {
 public:
  MuonOptimizer(const OptimizerSpec& spec, std::vector<Param*> params, const std::vector<std::string>& paths)
      : spec_(spec), params_(std::move(params)) {
    for (size_t i = 0; i < params_.size(); ++i) {
      const Shape& shape = params_[i]->value.shape;
      adamw_.push_back(Muon::adamw(shape, i < paths.size() ? paths[i] : params_[i]->name, spec_));
      momentum_.emplace_back(shape);
      velocity_.emplace_back(adamw_.back() ? shape : Shape{0});
    }
  }

  void step(double lr) override {
    clip_gradients(spec_, params_);
    for (size_t i = 0; i < params_.size(); ++i)  // Keras' Muon._apply_weight_decay: the base rate
      decay_weights(params_[i]->value, lr, adamw_[i] ? spec_.adam_weight_decay : spec_.weight_decay);
    const int64_t t = iterations_ + 1;
    const StepScalars sc = Muon::scalars(spec_, lr, t);
    const float c1 = static_cast<float>(1.0 - spec_.beta_1), c2 = static_cast<float>(1.0 - spec_.beta_2);
    const float eps = static_cast<float>(spec_.epsilon), mu = static_cast<float>(spec_.momentum);
    for (size_t i = 0; i < params_.size(); ++i) {
      float* p = params_[i]->value.ptr();
      const float* g = params_[i]->grad.ptr();
      float* m = momentum_[i].ptr();
      const int64_t n = params_[i]->value.numel();
      if (adamw_[i]) {
        float* v = velocity_[i].ptr();
        for (int64_t j = 0; j < n; ++j) {
          m[j] += (g[j] - m[j]) * c1;
          v[j] += (g[j] * g[j] - v[j]) * c2;
          p[j] -= m[j] * sc.k[0] / (std::sqrt(v[j]) + eps);
        }
        continue;
      }
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) {
        m[j] += g[j] + m[j] * (mu - 1.0f);
        x[j] = spec_.nesterov ? g[j] + mu * m[j] : m[j];
      }
      const int64_t R = params_[i]->value.shape[0], C = params_[i]->value.shape[1];
      newton_schulz(x.data(), R, C, spec_);
      const float scale = static_cast<float>(std::sqrt(static_cast<double>(std::max(R, C)))),
                  rms = static_cast<float>(spec_.rms_rate);
      for (int64_t j = 0; j < n; ++j) p[j] -= sc.lr * x[j] * scale * rms;
    }
    iterations_ = t;
  }

  // momentum of each weight, then velocity of the AdamW ones, weight by weight (Keras' order).
  std::vector<NamedTensor> slots() override {
    std::vector<NamedTensor> out;
    for (size_t i = 0; i < params_.size(); ++i) {
      out.push_back({fmt::format("momentum/{}", i), &momentum_[i]});
      if (adamw_[i]) out.push_back({fmt::format("velocity/{}", i), &velocity_[i]});
    }
    return out;
  }

 private:
  OptimizerSpec spec_;
  std::vector<Param*> params_;
  std::vector<bool> adamw_;
  std::vector<Tensor> momentum_, velocity_;
};

}  // namespace

std::unique_ptr<Optimizer> make_tensor_optimizer(const OptimizerSpec& spec, std::vector<Param*> params,
                                                 const std::vector<std::string>& paths) {
  switch (spec.kind) {
    case OptimizerKind::Adafactor:
      return std::make_unique<AdafactorOptimizer>(spec, std::move(params));
    case OptimizerKind::Muon:
      return std::make_unique<MuonOptimizer>(spec, std::move(params), paths);
    default:
      throw RuntimeError(fmt::format("optimizer {} is not a per-tensor kind (an internal error: please report it)",
                                     optimizer_name(spec.kind)));
  }
}

}  // namespace rnntrain
