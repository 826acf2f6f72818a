// Optimizers: the first three steps of each Keras 3 update rule on two small tensors against the
// closed form written out here in double; clipping (clipnorm, clipvalue, global_clipnorm); slots.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "core/error.h"
#include "model/optimizer.h"

using namespace rnntrain;

namespace {

// Two parameters: kernel [2, 3] and bias [3], with fixed starting values (a zero bias when asked).
struct Model {
  std::vector<Param> params;
  explicit Model(bool zero_bias = false) {
    params.push_back({"kernel", Tensor({2, 3}), Tensor({2, 3})});
    params.push_back({"bias", Tensor({3}), Tensor({3})});
    int64_t j = 0;
    for (Param& p : params)
      for (float& x : p.value.data) x = static_cast<float>(0.3 * std::cos(1.7 * static_cast<double>(j++)));
    if (zero_bias) params[1].value.zero();
  }
  std::vector<Param*> ptrs() { return {&params[0], &params[1]}; }
};

// Gradient of flat element j (over both parameters) at step t (1-based): varied signs and sizes;
// `shrink` scales step t by shrink^(t-1) (shrinking gradients exercise amsgrad's maximum).
double grad_at(int64_t j, int t, double shrink) {
  return std::pow(shrink, t - 1) * (0.5 * std::sin(0.9 * static_cast<double>(j) + 1.3 * t) + 0.05 * (j % 3 - 1));
}

void set_grads(Model& m, int t, double shrink) {
  int64_t j = 0;
  for (Param& p : m.params)
    for (float& g : p.grad.data) g = static_cast<float>(grad_at(j++, t, shrink));
}

OptimizerSpec spec_of(OptimizerKind kind) {
  OptimizerSpec s;
  s.kind = kind;
  return s;
}

// The Keras 3 update of one element in double. p: the value; s: the element's slots (m, v, ...),
// all starting at zero except Adagrad's accumulator and ScheduleFreeAdamW's iterate (the value).
// t: 1-based step. Lamb's trust ratio is per parameter: `sizes` are the parameters' element counts.
struct Reference {
  OptimizerSpec spec;
  std::vector<double> p, s0, s1, s2;
  std::vector<size_t> sizes = {6, 3};

  void step(double lr, int t, const std::vector<double>& g) {
    for (size_t j = 0; j < p.size(); ++j) {
      if (spec.weight_decay > 0) p[j] = p[j] - p[j] * spec.weight_decay * lr;
      switch (spec.kind) {
        case OptimizerKind::SGD:
          if (spec.momentum == 0) {
            p[j] = p[j] - lr * g[j];
          } else {
            s0[j] = spec.momentum * s0[j] - lr * g[j];
            p[j] = spec.nesterov ? p[j] + spec.momentum * s0[j] - lr * g[j] : p[j] + s0[j];
          }
          break;
        case OptimizerKind::Adam:
        case OptimizerKind::AdamW: {
          s0[j] = spec.beta_1 * s0[j] + (1 - spec.beta_1) * g[j];         // m
          s1[j] = spec.beta_2 * s1[j] + (1 - spec.beta_2) * g[j] * g[j];  // v
          double v = s1[j];
          if (spec.amsgrad) v = s2[j] = std::max(s2[j], s1[j]);          // v_hat
          const double alpha = lr * std::sqrt(1 - std::pow(spec.beta_2, t)) / (1 - std::pow(spec.beta_1, t));
          p[j] = p[j] - alpha * s0[j] / (std::sqrt(v) + spec.epsilon);
          break;
        }
        case OptimizerKind::RMSprop: {
          s0[j] = spec.rho * s0[j] + (1 - spec.rho) * g[j] * g[j];  // velocity
          double denom = s0[j] + spec.epsilon;
          if (spec.centered) {
            s2[j] = spec.rho * s2[j] + (1 - spec.rho) * g[j];  // average gradient
            denom = s0[j] - s2[j] * s2[j] + spec.epsilon;
          }
          const double inc = lr * g[j] / std::sqrt(denom);
          if (spec.momentum > 0) {
            s1[j] = spec.momentum * s1[j] + inc;
            p[j] -= s1[j];
          } else {
            p[j] -= inc;
          }
          break;
        }
        case OptimizerKind::Adagrad:
          s0[j] += g[j] * g[j];
          p[j] = p[j] - lr * g[j] / std::sqrt(s0[j] + spec.epsilon);
          break;
        case OptimizerKind::Lion: {
          const double c = spec.beta_1 * s0[j] + (1 - spec.beta_1) * g[j];
          p[j] -= lr * ((c > 0) - (c < 0));
          s0[j] = spec.beta_2 * s0[j] + (1 - spec.beta_2) * g[j];  // momentum
          break;
        }
        case OptimizerKind::Adamax: {
          s0[j] = spec.beta_1 * s0[j] + (1 - spec.beta_1) * g[j];  // momentum
          s1[j] = std::max(spec.beta_2 * s1[j], std::fabs(g[j]));  // norm
          p[j] -= lr / (1 - std::pow(spec.beta_1, t)) * s0[j] / (s1[j] + spec.epsilon);
          break;
        }
        case OptimizerKind::Adadelta: {
          s0[j] = spec.rho * s0[j] + (1 - spec.rho) * g[j] * g[j];  // accumulated_grad
          const double delta = -std::sqrt(s1[j] + spec.epsilon) * g[j] / std::sqrt(s0[j] + spec.epsilon);
          s1[j] = spec.rho * s1[j] + (1 - spec.rho) * delta * delta;  // accumulated_delta_var
          p[j] += lr * delta;
          break;
        }
        case OptimizerKind::Nadam: {  // u_t and their product from step 1 on, as Keras keeps them
          auto u = [&](int k) { return spec.beta_1 * (1 - 0.5 * std::pow(0.96, k)); };
          double pi = 1;
          for (int k = 1; k <= t; ++k) pi *= u(k);
          s0[j] = spec.beta_1 * s0[j] + (1 - spec.beta_1) * g[j];         // momentum
          s1[j] = spec.beta_2 * s1[j] + (1 - spec.beta_2) * g[j] * g[j];  // velocity
          const double m_hat = u(t + 1) * s0[j] / (1 - pi * u(t + 1)) + (1 - u(t)) * g[j] / (1 - pi);
          const double v_hat = s1[j] / (1 - std::pow(spec.beta_2, t));
          p[j] -= m_hat * lr / (std::sqrt(v_hat) + spec.epsilon);
          break;
        }
        case OptimizerKind::Ftrl: {  // s0: accumulator n, s1: linear z
          const double c = -spec.learning_rate_power, n2 = s0[j] + g[j] * g[j];
          s1[j] += g[j] + 2 * spec.l2_shrinkage * p[j] - (std::pow(n2, c) - std::pow(s0[j], c)) / lr * p[j];
          const double quadratic = std::pow(n2, c) / lr + 2 * (spec.l2 + spec.beta / (2 * lr));
          p[j] = (std::clamp(s1[j], -spec.l1, spec.l1) - s1[j]) / quadratic;
          s0[j] = n2;
          break;
        }
        case OptimizerKind::Lamb: {  // s2: the update, scaled by the parameter's trust ratio below
          s0[j] = spec.beta_1 * s0[j] + (1 - spec.beta_1) * g[j];         // momentum
          s1[j] = spec.beta_2 * s1[j] + (1 - spec.beta_2) * g[j] * g[j];  // velocity
          s2[j] = s0[j] / (1 - std::pow(spec.beta_1, t)) /
                  (std::sqrt(s1[j] / (1 - std::pow(spec.beta_2, t))) + spec.epsilon);
          break;
        }
        case OptimizerKind::Adafactor:
        case OptimizerKind::Muon:
          break;  // per tensor: their own tests below
        case OptimizerKind::ScheduleFreeAdamW: {  // s0: the iterate z, s1: velocity
          const double rate = lr * (spec.warmup_steps > 0 ? std::min(t / spec.warmup_steps, 1.0) : 1.0);
          const double z_old = s0[j], b1 = spec.beta_1;
          s1[j] = spec.beta_2 * s1[j] + (1 - spec.beta_2) * g[j] * g[j];
          s0[j] = z_old - rate * g[j] / (std::sqrt(s1[j] / (1 - std::pow(spec.beta_2, t))) + spec.epsilon);
          const double x = (1 - 1.0 / t) * (p[j] - (1 - b1) * z_old) / b1 + s0[j] / t;
          p[j] = (1 - b1) * s0[j] + b1 * x;
          break;
        }
      }
    }
    if (spec.kind != OptimizerKind::Lamb) return;
    for (size_t begin = 0, k = 0; k < sizes.size(); begin += sizes[k++]) {
      double pp = 0, uu = 0;
      for (size_t j = begin; j < begin + sizes[k]; ++j) pp += p[j] * p[j], uu += s2[j] * s2[j];
      const double r = pp > 0 && uu > 0 ? std::sqrt(pp / uu) : 1.0;
      for (size_t j = begin; j < begin + sizes[k]; ++j) p[j] -= r * lr * s2[j];
    }
  }
};

// Runs 3 steps of the optimizer and of the reference with learning rates 0.1, 0.05, 0.02 and
// compares every value after each step: |got - want| <= 1e-6 + 2e-5 |want| (float32 arithmetic).
void check_three_steps(const OptimizerSpec& spec, double shrink = 1.0, bool zero_bias = false) {
  Model m(zero_bias);
  auto opt = make_optimizer(spec, m.ptrs());
  Reference ref{spec, {}, {}, {}, {}};
  for (const Param& p : m.params)
    for (float x : p.value.data) ref.p.push_back(x);
  const size_t n = ref.p.size();
  const bool accumulator = spec.kind == OptimizerKind::Adagrad || spec.kind == OptimizerKind::Ftrl;
  ref.s0.assign(n, accumulator ? static_cast<float>(spec.initial_accumulator_value) : 0.0);
  if (spec.kind == OptimizerKind::ScheduleFreeAdamW) ref.s0 = ref.p;
  ref.s1.assign(n, 0.0);
  ref.s2.assign(n, 0.0);
  const double lrs[] = {0.1, 0.05, 0.02};
  for (int t = 1; t <= 3; ++t) {
    set_grads(m, t, shrink);
    std::vector<double> g(n);
    for (size_t j = 0; j < n; ++j) g[j] = static_cast<float>(grad_at(static_cast<int64_t>(j), t, shrink));
    opt->step(lrs[t - 1]);
    ref.step(lrs[t - 1], t, g);
    EXPECT_EQ(opt->iterations(), t);
    double worst = 0.0;
    size_t worst_at = 0, j = 0;
    std::vector<double> got;
    for (const Param& p : m.params)
      for (float x : p.value.data) got.push_back(x);
    for (j = 0; j < n; ++j) {
      const double excess = std::fabs(got[j] - ref.p[j]) - (1e-6 + 2e-5 * std::fabs(ref.p[j]));
      if (j == 0 || excess > worst) {
        worst = excess;
        worst_at = j;
      }
    }
    EXPECT_LE(worst, 0.0) << "step " << t << ": worst at element " << worst_at << " got " << got[worst_at]
                          << " want " << ref.p[worst_at] << "; first values got " << got[0] << ", " << got[1]
                          << " want " << ref.p[0] << ", " << ref.p[1];
  }
}

}  // namespace

TEST(Optimizer, SGDPlain) { check_three_steps(spec_of(OptimizerKind::SGD)); }

TEST(Optimizer, SGDMomentum) {
  OptimizerSpec s = spec_of(OptimizerKind::SGD);
  s.momentum = 0.9;
  check_three_steps(s);
}

TEST(Optimizer, SGDNesterov) {
  OptimizerSpec s = spec_of(OptimizerKind::SGD);
  s.momentum = 0.8;
  s.nesterov = true;
  check_three_steps(s);
}

TEST(Optimizer, SGDWithWeightDecay) {
  OptimizerSpec s = spec_of(OptimizerKind::SGD);
  s.weight_decay = 0.1;
  check_three_steps(s);
}

TEST(Optimizer, Adam) { check_three_steps(spec_of(OptimizerKind::Adam)); }

TEST(Optimizer, AdamNonDefaultBetasAndEpsilon) {
  OptimizerSpec s = spec_of(OptimizerKind::Adam);
  s.beta_1 = 0.7;
  s.beta_2 = 0.8;
  s.epsilon = 0.01;  // large enough that its place (outside the sqrt) shows
  check_three_steps(s);
}

TEST(Optimizer, AdamAmsgradWithShrinkingGradients) {
  OptimizerSpec s = spec_of(OptimizerKind::Adam);
  s.amsgrad = true;
  s.beta_2 = 0.5;  // v falls quickly when the gradients shrink, so v_hat differs from v
  check_three_steps(s, 0.1);
}

TEST(Optimizer, AdamWDecoupledWeightDecay) {
  OptimizerSpec s = spec_of(OptimizerKind::AdamW);
  s.weight_decay = 0.3;
  check_three_steps(s);
}

TEST(Optimizer, RMSprop) {
  OptimizerSpec s = spec_of(OptimizerKind::RMSprop);
  s.epsilon = 1e-3;
  check_three_steps(s);
}

TEST(Optimizer, RMSpropCenteredWithMomentum) {
  OptimizerSpec s = spec_of(OptimizerKind::RMSprop);
  s.centered = true;
  s.momentum = 0.5;
  s.rho = 0.8;
  s.epsilon = 1e-3;
  check_three_steps(s);
}

TEST(Optimizer, Adagrad) {
  OptimizerSpec s = spec_of(OptimizerKind::Adagrad);
  s.initial_accumulator_value = 0.2;
  s.epsilon = 1e-2;
  check_three_steps(s);
}

TEST(Optimizer, Lion) { check_three_steps(optimizer_defaults(OptimizerKind::Lion)); }

TEST(Optimizer, Adamax) { check_three_steps(optimizer_defaults(OptimizerKind::Adamax)); }

TEST(Optimizer, AdamaxWithOtherBetasAndEpsilon) {
  OptimizerSpec s = optimizer_defaults(OptimizerKind::Adamax);
  s.beta_1 = 0.5, s.beta_2 = 0.8, s.epsilon = 1e-3;
  check_three_steps(s);
}

// Adadelta's steps are small (sqrt(epsilon) times the gradient at first): a learning rate of 0.1
// moves the weights by about 3e-5, so a wrong update shows against the 1e-6 tolerance only with
// epsilon large; both are run.
TEST(Optimizer, Adadelta) { check_three_steps(optimizer_defaults(OptimizerKind::Adadelta)); }

TEST(Optimizer, AdadeltaWithLargeEpsilonAndOtherRho) {
  OptimizerSpec s = optimizer_defaults(OptimizerKind::Adadelta);
  s.rho = 0.5, s.epsilon = 0.5;
  check_three_steps(s);
}

TEST(Optimizer, Nadam) { check_three_steps(optimizer_defaults(OptimizerKind::Nadam)); }

TEST(Optimizer, NadamWithOtherBetasAndEpsilon) {
  OptimizerSpec s = optimizer_defaults(OptimizerKind::Nadam);
  s.beta_1 = 0.8, s.beta_2 = 0.99, s.epsilon = 1e-3;
  check_three_steps(s);
}

// Ftrl's defaults (no regularization) and each of its terms: l1 (which zeroes small weights), l2,
// shrinkage, beta, another learning_rate_power and accumulator start.
TEST(Optimizer, Ftrl) { check_three_steps(optimizer_defaults(OptimizerKind::Ftrl)); }

TEST(Optimizer, FtrlWithEveryRegularization) {
  OptimizerSpec s = optimizer_defaults(OptimizerKind::Ftrl);
  s.l1 = 0.01, s.l2 = 0.05, s.l2_shrinkage = 0.02, s.beta = 0.1, s.learning_rate_power = -0.7;
  s.initial_accumulator_value = 0.3;
  check_three_steps(s);
  s.learning_rate_power = 0.0;
  check_three_steps(s);
}

// Nadam's momentum schedule product, which Keras keeps and rnntrain derives from the step: the
// closed form, cut off where 0.96^k no longer changes it, equals the running product.
TEST(Optimizer, NadamMomentumScheduleProductMatchesTheRunningProduct) {
  OptimizerSpec s = optimizer_defaults(OptimizerKind::Nadam);
  double pi = 1;
  for (int64_t t = 1; t <= 3000; ++t) {
    pi *= s.beta_1 * (1 - 0.5 * std::pow(0.96, static_cast<double>(t)));
    if (t % 500 == 0 || t < 5) EXPECT_NEAR(Nadam::u_product(s, t), pi, 1e-12 * pi) << t;
  }
}

TEST(Optimizer, LionWithWeightDecayAndOtherBetas) {
  OptimizerSpec s = optimizer_defaults(OptimizerKind::Lion);
  s.beta_1 = 0.5;
  s.beta_2 = 0.8;
  s.weight_decay = 0.1;
  check_three_steps(s);
}

// Lamb: Adam's update times |w| / |update| per parameter, after the weight decay; a parameter whose
// norm is 0 (the zero bias) takes the plain update (ratio 1), as Keras'.
TEST(Optimizer, Lamb) { check_three_steps(optimizer_defaults(OptimizerKind::Lamb)); }

TEST(Optimizer, LambWithWeightDecayOtherBetasAndAZeroParameter) {
  OptimizerSpec s = optimizer_defaults(OptimizerKind::Lamb);
  s.beta_1 = 0.7, s.beta_2 = 0.9, s.epsilon = 1e-3, s.weight_decay = 0.1;
  check_three_steps(s);
  check_three_steps(s, 1.0, true);
}

// ScheduleFreeAdamW: the iterate starts as the weights (before the first step's decay), the weights
// average the iterates; warmup scales the rate by t / warmup_steps.
TEST(Optimizer, ScheduleFreeAdamW) { check_three_steps(optimizer_defaults(OptimizerKind::ScheduleFreeAdamW)); }

TEST(Optimizer, ScheduleFreeAdamWWithWarmupWeightDecayAndOtherBetas) {
  OptimizerSpec s = optimizer_defaults(OptimizerKind::ScheduleFreeAdamW);
  s.beta_1 = 0.6, s.beta_2 = 0.95, s.epsilon = 1e-4, s.weight_decay = 0.05, s.warmup_steps = 2;
  check_three_steps(s);
}

// Adafactor, written out in double over the [2, 3] kernel (factored: row and column moments) and the
// [3] bias (a full velocity): three steps against the optimizer, with weight decay and a clip
// threshold that clips. Its slots: r, c, velocity variable by variable, r and c scalars for the bias.
TEST(Optimizer, AdafactorFactorsTwoDimensionalParameters) {
  OptimizerSpec spec = optimizer_defaults(OptimizerKind::Adafactor);
  spec.weight_decay = 0.05, spec.clip_threshold = 0.5, spec.beta_2_decay = -0.6, spec.epsilon_2 = 0.02;
  Model m;
  auto opt = make_optimizer(spec, m.ptrs());
  const auto slots = opt->slots();
  ASSERT_EQ(slots.size(), 6u);
  const char* names[] = {"r/0", "c/0", "velocity/0", "r/1", "c/1", "velocity/1"};
  const Shape shapes[] = {{2}, {3}, {2, 3}, {}, {}, {3}};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(slots[i].name, names[i]);
    EXPECT_EQ(slots[i].tensor->shape, shapes[i]) << names[i];
  }
  std::vector<std::vector<double>> p(2), r{{0, 0}}, c{{0, 0, 0}}, v{{}, {0, 0, 0}};
  for (size_t i = 0; i < 2; ++i)
    for (float x : m.params[i].value.data) p[i].push_back(x);
  const double lrs[] = {0.1, 0.05, 0.02};
  for (int t = 1; t <= 3; ++t) {
    set_grads(m, t, 1.0);
    opt->step(lrs[t - 1]);
    const double rho = std::min(lrs[t - 1], 1 / std::sqrt(t)), b = 1 - std::pow(t, spec.beta_2_decay);
    for (size_t i = 0, j0 = 0; i < 2; j0 += p[i].size(), ++i) {
      std::vector<double> g(p[i].size()), u(p[i].size());
      double pp = 0, uu = 0;
      for (size_t j = 0; j < g.size(); ++j) {
        g[j] = static_cast<float>(grad_at(static_cast<int64_t>(j0 + j), t, 1.0));
        p[i][j] -= p[i][j] * spec.weight_decay * lrs[t - 1];
        pp += p[i][j] * p[i][j];
      }
      const double G = 1e-30;
      if (i == 0) {  // [2, 3]
        for (int a = 0; a < 2; ++a)
          r[0][a] = b * r[0][a] + (1 - b) * (g[3 * a] * g[3 * a] + g[3 * a + 1] * g[3 * a + 1] + g[3 * a + 2] * g[3 * a + 2] + 3 * G) / 3;
        for (int k = 0; k < 3; ++k) c[0][k] = b * c[0][k] + (1 - b) * (g[k] * g[k] + g[3 + k] * g[3 + k] + 2 * G) / 2;
        const double r_mean = (r[0][0] + r[0][1]) / 2;
        for (size_t j = 0; j < 6; ++j) u[j] = g[j] / std::sqrt(r[0][j / 3] / r_mean * c[0][j % 3]);
      } else {
        for (size_t j = 0; j < 3; ++j) {
          v[1][j] = b * v[1][j] + (1 - b) * (g[j] * g[j] + G);
          u[j] = g[j] / std::sqrt(v[1][j]);
        }
      }
      for (double x : u) uu += x * x;
      const double n = static_cast<double>(u.size());
      const double alpha = std::max(spec.epsilon_2, std::sqrt(pp / n)) * rho;
      const double clip = std::max(1.0, std::sqrt(uu / n) / spec.clip_threshold);
      for (size_t j = 0; j < u.size(); ++j) {
        p[i][j] -= alpha * u[j] / clip;
        EXPECT_NEAR(m.params[i].value.data[j], p[i][j], 1e-6 + 2e-5 * std::fabs(p[i][j]))
            << "step " << t << " parameter " << i << " element " << j;
      }
    }
  }
  EXPECT_EQ(opt->iterations(), 3);
}

// Muon: AdamW (its own slots, decay and rate) on 1-D weights and on embeddings (by Keras path unless
// exclude_embeddings is off), Muon on the other 2-D weights; slots weight by weight as Keras lists them.
TEST(Optimizer, MuonChoosesAdamWForVectorsAndEmbeddings) {
  OptimizerSpec spec = optimizer_defaults(OptimizerKind::Muon);
  Model m;
  auto names_of = [&](const std::vector<std::string>& paths) {
    auto opt = make_optimizer(spec, m.ptrs(), paths);
    std::vector<std::string> out;
    for (const NamedTensor& s : opt->slots()) out.push_back(s.name);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names_of({"sequential/lstm/lstm_cell/kernel", "sequential/lstm/lstm_cell/bias"}),
            (V{"momentum/0", "momentum/1", "velocity/1"}));
  EXPECT_EQ(names_of({"sequential/Embedding_1/embeddings", "sequential/dense/bias"}),
            (V{"momentum/0", "velocity/0", "momentum/1", "velocity/1"}));
  spec.exclude_embeddings = false;
  EXPECT_EQ(names_of({"sequential/embedding/embeddings", "sequential/dense/bias"}),
            (V{"momentum/0", "momentum/1", "velocity/1"}));
  // One step from zero slots: the [2, 3] kernel moves by lr * sqrt(3) * rms_rate * NS(g), NS written
  // out here in double (X = X / |X|; 5 times X = a X + (b A + c A A) X with A = X X^T).
  spec = optimizer_defaults(OptimizerKind::Muon);
  spec.weight_decay = 0, spec.adam_weight_decay = 0, spec.nesterov = false;
  Model k;
  auto opt = make_optimizer(spec, k.ptrs());
  const Tensor before = k.params[0].value;
  set_grads(k, 1, 1.0);
  double x[6], norm = 0;
  for (int j = 0; j < 6; ++j) x[j] = k.params[0].grad.data[j], norm += x[j] * x[j];
  for (double& v : x) v /= std::sqrt(norm) + 1e-7;
  for (int step = 0; step < 5; ++step) {
    double A[2][2], B[2][2], y[6];
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) A[i][j] = x[3 * i] * x[3 * j] + x[3 * i + 1] * x[3 * j + 1] + x[3 * i + 2] * x[3 * j + 2];
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) B[i][j] = spec.muon_b * A[i][j] + spec.muon_c * (A[i][0] * A[0][j] + A[i][1] * A[1][j]);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) y[3 * i + j] = spec.muon_a * x[3 * i + j] + B[i][0] * x[j] + B[i][1] * x[3 + j];
    std::copy(y, y + 6, x);
  }
  opt->step(0.1);
  for (int j = 0; j < 6; ++j)
    EXPECT_NEAR(k.params[0].value.data[j], before.data[j] - 0.1 * std::sqrt(3.0) * 0.2 * x[j], 1e-6) << j;
}

// Config and Keras names: the config's snake case, Keras' class name in lower case (import) and
// Keras' own optimizer name, the scope of its variables in legacy files.
TEST(Optimizer, NamesOfTheNewKinds) {
  EXPECT_EQ(optimizer_named("schedule_free_adamw"), OptimizerKind::ScheduleFreeAdamW);
  EXPECT_EQ(optimizer_named("schedulefreeadamw"), OptimizerKind::ScheduleFreeAdamW);
  EXPECT_EQ(optimizer_named("lamb"), OptimizerKind::Lamb);
  EXPECT_EQ(optimizer_named("lam_b_x"), std::nullopt);
  EXPECT_STREQ(optimizer_info(OptimizerKind::ScheduleFreeAdamW).keras_name, "schedule_free_adam_w");
  EXPECT_STREQ(optimizer_info(OptimizerKind::Lamb).keras_name, "lamb");
}

TEST(Optimizer, SlotsHaveStableNamesAndRestoreExactly) {
  OptimizerSpec s = spec_of(OptimizerKind::Adam);
  s.amsgrad = true;
  Model a;
  auto opt_a = make_optimizer(s, a.ptrs());
  std::vector<std::string> names;
  for (const NamedTensor& t : opt_a->slots()) names.push_back(t.name);
  const std::vector<std::string> want = {"momentum/0", "momentum/1", "velocity/0",
                                         "velocity/1", "velocity_hat/0", "velocity_hat/1"};
  EXPECT_EQ(names, want);
  EXPECT_EQ(opt_a->slots()[1].tensor->shape, Shape{3});
  for (int t = 1; t <= 2; ++t) {
    set_grads(a, t, 1.0);
    opt_a->step(0.01);
  }
  // A second optimizer resumed from a's parameters, slots and iteration count steps identically.
  Model b;
  b.params = a.params;
  auto opt_b = make_optimizer(s, b.ptrs());
  auto sa = opt_a->slots(), sb = opt_b->slots();
  for (size_t i = 0; i < sa.size(); ++i) *sb[i].tensor = *sa[i].tensor;
  opt_b->set_iterations(opt_a->iterations());
  set_grads(a, 3, 1.0);
  set_grads(b, 3, 1.0);
  opt_a->step(0.01);
  opt_b->step(0.01);
  for (size_t i = 0; i < a.params.size(); ++i)
    EXPECT_EQ(a.params[i].value.data, b.params[i].value.data) << "parameter " << i;

  // Names of the other kinds.
  OptimizerSpec r = spec_of(OptimizerKind::RMSprop);
  r.centered = true;
  r.momentum = 0.1;
  Model c;
  names.clear();
  for (const NamedTensor& t : make_optimizer(r, c.ptrs())->slots()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"velocity/0", "velocity/1", "momentum/0", "momentum/1",
                                             "average_gradient/0", "average_gradient/1"}));
  EXPECT_TRUE(make_optimizer(spec_of(OptimizerKind::SGD), c.ptrs())->slots().empty());
  auto ada = make_optimizer(spec_of(OptimizerKind::Adagrad), c.ptrs());
  ASSERT_EQ(ada->slots().size(), 2u);
  EXPECT_EQ(ada->slots()[0].name, "accumulator/0");
  EXPECT_FLOAT_EQ((*ada->slots()[0].tensor)[0], 0.1f);  // initial_accumulator_value
}

namespace {

// Gradients: kernel (3, 4, 0, 0, 0, 0) with norm 5; bias (0.3, -0.4, 0) with norm 0.5.
Model clip_model() {
  Model m;
  m.params[0].grad.data = {3, 4, 0, 0, 0, 0};
  m.params[1].grad.data = {0.3f, -0.4f, 0};
  return m;
}

}  // namespace

TEST(Optimizer, ClipNormPerVariable) {
  OptimizerSpec s;
  s.clipnorm = 1.0;
  Model m = clip_model();
  EXPECT_NEAR(clip_gradients(s, m.ptrs()), std::sqrt(25.25), 1e-6);
  EXPECT_NEAR(m.params[0].grad[0], 0.6, 1e-7);
  EXPECT_NEAR(m.params[0].grad[1], 0.8, 1e-7);
  EXPECT_FLOAT_EQ(m.params[1].grad[0], 0.3f);  // norm 0.5 <= 1: unchanged
  EXPECT_FLOAT_EQ(m.params[1].grad[1], -0.4f);
}

TEST(Optimizer, GlobalClipNorm) {
  OptimizerSpec s;
  s.global_clipnorm = 1.0;
  Model m = clip_model();
  const double norm = std::sqrt(25.25);
  EXPECT_NEAR(clip_gradients(s, m.ptrs()), norm, 1e-6);
  EXPECT_NEAR(m.params[0].grad[1], 4 / norm, 1e-7);
  EXPECT_NEAR(m.params[1].grad[1], -0.4 / norm, 1e-7);
  s.global_clipnorm = 10.0;  // above the norm: no change
  Model k = clip_model();
  clip_gradients(s, k.ptrs());
  EXPECT_FLOAT_EQ(k.params[0].grad[1], 4.0f);
}

TEST(Optimizer, ClipValueElementwise) {
  OptimizerSpec s;
  s.clipvalue = 0.35;
  Model m = clip_model();
  clip_gradients(s, m.ptrs());
  EXPECT_FLOAT_EQ(m.params[0].grad[0], 0.35f);
  EXPECT_FLOAT_EQ(m.params[0].grad[2], 0.0f);
  EXPECT_FLOAT_EQ(m.params[1].grad[0], 0.3f);
  EXPECT_FLOAT_EQ(m.params[1].grad[1], -0.35f);
}

TEST(Optimizer, StepClipsBeforeUpdating) {
  OptimizerSpec s = spec_of(OptimizerKind::SGD);
  s.clipnorm = 1.0;
  Model m = clip_model();
  const float before = m.params[0].value[1];
  make_optimizer(s, m.ptrs())->step(0.5);
  EXPECT_NEAR(m.params[0].value[1], before - 0.5 * 0.8, 1e-6);
}

TEST(Optimizer, MoreThanOneClipIsAConfigError) {
  OptimizerSpec s;
  s.clipnorm = 1.0;
  s.clipvalue = 1.0;
  Model m;
  EXPECT_THROW(make_optimizer(s, m.ptrs()), ConfigError);
}

// The CPU engine runs the elementwise updates in chunks on several threads (Optimizer::set_chunks):
// every kind gives the same bits, steps and slots, whichever way the chunks ran, on parameters wider
// than a chunk.
TEST(Optimizer, ChunksOnSeveralThreadsGiveTheSameBits) {
  const ChunkRunner halves = [](int64_t chunks, const std::function<void(int64_t, int64_t)>& fn) {
    std::thread t([&] { fn(chunks / 2, chunks); });
    fn(0, chunks / 2);
    t.join();
  };
  int backwards_runs = 0;
  const ChunkRunner backwards = [&](int64_t chunks, const std::function<void(int64_t, int64_t)>& fn) {
    ++backwards_runs;
    for (int64_t c = chunks - 1; c >= 0; --c) fn(c, c + 1);
  };
  for (int k = 0; k <= static_cast<int>(OptimizerKind::Muon); ++k) {
    OptimizerSpec spec = optimizer_defaults(static_cast<OptimizerKind>(k));
    spec.weight_decay = 0.01;
    std::vector<std::vector<Param>> runs(3);
    std::vector<std::unique_ptr<Optimizer>> opts;
    for (size_t r = 0; r < runs.size(); ++r) {
      runs[r].push_back({"kernel", Tensor({300, 130}), Tensor({300, 130})});  // 39000 elements: 3 chunks
      runs[r].push_back({"bias", Tensor({130}), Tensor({130})});
      int64_t j = 0;
      for (Param& p : runs[r])
        for (float& x : p.value.data) x = static_cast<float>(0.3 * std::cos(1.7 * static_cast<double>(j++)));
      opts.push_back(make_optimizer(spec, {&runs[r][0], &runs[r][1]}));
    }
    opts[1]->set_chunks(&halves);
    opts[2]->set_chunks(&backwards);
    for (int t = 1; t <= 3; ++t)
      for (size_t r = 0; r < runs.size(); ++r) {
        int64_t j = 0;
        for (Param& p : runs[r])
          for (float& g : p.grad.data) g = static_cast<float>(grad_at(j++, t, 0.7));
        opts[r]->step(0.01);
      }
    int64_t unmoved = 0, j = 0;  // every chunk ran: the kernel's elements have moved (Adadelta's tiny
    for (float x : runs[0][0].value.data)  // steps leave one in float rounding; a chunk is 16384)
      unmoved += x == static_cast<float>(0.3 * std::cos(1.7 * static_cast<double>(j++)));
    EXPECT_LT(unmoved, 100) << optimizer_name(spec.kind);
    for (size_t r = 1; r < runs.size(); ++r) {
      for (size_t i = 0; i < runs[0].size(); ++i)
        EXPECT_EQ(runs[r][i].value.data, runs[0][i].value.data) << optimizer_name(spec.kind) << " run " << r;
      const std::vector<NamedTensor> a = opts[0]->slots(), b = opts[r]->slots();
      ASSERT_EQ(a.size(), b.size());
      for (size_t s = 0; s < a.size(); ++s) EXPECT_EQ(a[s].tensor->data, b[s].tensor->data) << a[s].name;
    }
  }
  EXPECT_GT(backwards_runs, 0) << "the elementwise kinds ran their chunks through the runner";
}
