// Losses: values against hand computations in double written out here (Keras' formulas), Keras'
// documented examples, finite-difference gradients, masking, clipping, and the errors for bad targets.
#include <gtest/gtest.h>

#include <cmath>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "data/dataset.h"
#include "model/loss.h"

using namespace rnntrain;

namespace {

const double kLo = static_cast<float>(1e-7), kHi = static_cast<float>(1.0 - 1e-7);  // Keras' clip, float32
double clipp(double p) { return std::min(std::max(p, kLo), kHi); }

LossSpec spec_of(LossKind kind, bool logits = false, double smoothing = 0.0, double delta = 1.0) {
  LossSpec s;
  s.kind = kind;
  s.from_logits = logits;
  s.label_smoothing = smoothing;
  s.delta = delta;
  return s;
}

// The Keras loss of one position, in double, straight from the formulas. p: [K], y: [K] (dense
// targets; sparse callers pass the one-hot row).
double ref_position(const LossSpec& s, const std::vector<double>& p, const std::vector<double>& y) {
  const size_t k = p.size();
  double sum = 0.0;
  if (s.kind == LossKind::MSE || s.kind == LossKind::MAE || s.kind == LossKind::Huber || s.kind == LossKind::MSLE ||
      s.kind == LossKind::LogCosh) {
    for (size_t j = 0; j < k; ++j) {
      const double e = p[j] - y[j];
      const double eps = static_cast<float>(1e-7);
      const double le = std::log(std::max(p[j], eps) + 1.0) - std::log(std::max(y[j], eps) + 1.0);
      if (s.kind == LossKind::MSE) sum += e * e;
      else if (s.kind == LossKind::MAE) sum += std::fabs(e);
      else if (s.kind == LossKind::MSLE) sum += le * le;
      else if (s.kind == LossKind::LogCosh) sum += std::log(std::cosh(e));
      else sum += std::fabs(e) <= s.delta ? 0.5 * e * e : s.delta * std::fabs(e) - 0.5 * s.delta * s.delta;
    }
    return sum / k;
  }
  if (s.kind == LossKind::BinaryCrossentropy) {
    for (size_t j = 0; j < k; ++j) {
      const double t = y[j] * (1 - s.label_smoothing) + 0.5 * s.label_smoothing;
      const double q = s.from_logits ? 1.0 / (1.0 + std::exp(-p[j])) : clipp(p[j]);
      sum += -(t * std::log(q) + (1 - t) * std::log(1 - q));
    }
    return sum / k;
  }
  // Categorical: softmax of logits, or probabilities renormalised and clipped.
  std::vector<double> q(k);
  double z = 0.0;
  for (size_t j = 0; j < k; ++j) z += s.from_logits ? std::exp(p[j]) : p[j];
  for (size_t j = 0; j < k; ++j) q[j] = s.from_logits ? std::exp(p[j]) / z : clipp(p[j] / z);
  for (size_t j = 0; j < k; ++j) {
    const double t = y[j] * (1 - s.label_smoothing) + s.label_smoothing / k;
    sum -= t * std::log(q[j]);
  }
  return sum;
}

// Mean over unmasked positions. pred: [N*K] viewed as [N, K]; y: [N, K] dense; mask: [N] or empty.
double ref_loss(const LossSpec& s, const Tensor& pred, const std::vector<std::vector<double>>& y,
                const std::vector<float>& mask) {
  const int64_t k = pred.dim(-1), n = pred.numel() / k;
  double sum = 0.0, count = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (!mask.empty() && mask[i] == 0) continue;
    std::vector<double> p(pred.ptr() + i * k, pred.ptr() + (i + 1) * k);
    sum += ref_position(s, p, y[i]);
    count += 1;
  }
  return count > 0 ? sum / count : 0.0;
}

bool is_ce(LossKind k) {
  return k == LossKind::CategoricalCrossentropy || k == LossKind::SparseCategoricalCrossentropy;
}

// Predictions that suit the loss: probabilities (rows summing to 1 for CE, in (0.05, 0.95) for
// BCE), logits, or free values. Targets: one-hot / labels for CE, 0/1 for BCE, free for regression.
struct Case {
  Tensor pred, target;
  std::vector<std::vector<double>> dense;  // [N][K]: the target row (one-hot for sparse)
};

Case make_case(const LossSpec& s, Shape shape, uint64_t seed) {
  Rng rng(seed);
  Case c;
  c.pred = Tensor(shape);
  const int64_t k = shape.back(), n = c.pred.numel() / k;
  const bool sparse = s.kind == LossKind::SparseCategoricalCrossentropy;
  Shape tshape = shape;
  if (sparse) tshape.pop_back();
  c.target = Tensor(tshape);
  c.dense.assign(n, std::vector<double>(k, 0.0));
  for (int64_t i = 0; i < n; ++i) {
    double rowsum = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      float v = static_cast<float>(rng.uniform(-2.0, 2.0));
      if (!s.from_logits && is_ce(s.kind)) v = static_cast<float>(rng.uniform(0.1, 1.0));
      if (!s.from_logits && s.kind == LossKind::BinaryCrossentropy) v = static_cast<float>(rng.uniform(0.05, 0.95));
      c.pred[i * k + j] = v;
      rowsum += v;
    }
    if (!s.from_logits && is_ce(s.kind))
      for (int64_t j = 0; j < k; ++j) c.pred[i * k + j] = static_cast<float>(c.pred[i * k + j] / rowsum);
    const int64_t label = static_cast<int64_t>(rng.below(k));
    for (int64_t j = 0; j < k; ++j) {
      double t = 0.0;
      if (is_ce(s.kind)) t = j == label ? 1.0 : 0.0;
      else if (s.kind == LossKind::BinaryCrossentropy) t = static_cast<double>(rng.below(2));
      else t = static_cast<float>(rng.uniform(-2.0, 2.0));
      c.dense[i][j] = t;
      if (!sparse) c.target[i * k + j] = static_cast<float>(t);
    }
    if (sparse) c.target[i] = static_cast<float>(label);
  }
  return c;
}

std::vector<LossSpec> all_specs() {
  using K = LossKind;
  return {spec_of(K::MSE),
          spec_of(K::MAE),
          spec_of(K::Huber, false, 0.0, 1.0),
          spec_of(K::Huber, false, 0.0, 0.5),
          spec_of(K::MSLE),
          spec_of(K::LogCosh),
          spec_of(K::BinaryCrossentropy),
          spec_of(K::BinaryCrossentropy, true),
          spec_of(K::BinaryCrossentropy, false, 0.2),
          spec_of(K::BinaryCrossentropy, true, 0.2),
          spec_of(K::CategoricalCrossentropy),
          spec_of(K::CategoricalCrossentropy, true),
          spec_of(K::CategoricalCrossentropy, false, 0.1),
          spec_of(K::CategoricalCrossentropy, true, 0.1),
          spec_of(K::SparseCategoricalCrossentropy),
          spec_of(K::SparseCategoricalCrossentropy, true)};
}

std::string label(const LossSpec& s) {
  const char* names[] = {"mse", "mae", "huber", "bce", "cce", "scce"};
  return std::string(names[static_cast<int>(s.kind)]) + (s.from_logits ? "/logits" : "/probs") +
         " ls=" + std::to_string(s.label_smoothing) + " delta=" + std::to_string(s.delta);
}

}  // namespace

TEST(Loss, ValuesMatchHandComputationWithAndWithoutMask) {
  // [B=3, T=4, K=5] with a ragged mask, and [B=4, K=3] without a time axis.
  const std::vector<float> mask = {1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1};
  for (const LossSpec& s : all_specs()) {
    for (int variant = 0; variant < 3; ++variant) {
      const Shape shape = variant == 0 ? Shape{4, 3} : Shape{3, 4, 5};
      Case c = make_case(s, shape, 11 + variant);
      Tensor m({3, 4});
      m.data = mask;
      const bool masked = variant == 2;
      const LossValue got = compute_loss(s, c.pred, c.target, masked ? &m : nullptr, nullptr);
      const double want = ref_loss(s, c.pred, c.dense, masked ? mask : std::vector<float>{});
      const double want_count = masked ? 9.0 : static_cast<double>(c.pred.numel() / shape.back());
      EXPECT_NEAR(got.mean(), want, 1e-6 * (1 + std::fabs(want)))
          << label(s) << " shape=" << shape_str(shape) << " masked=" << masked << " first pred=" << c.pred[0];
      EXPECT_EQ(got.count, want_count) << label(s);
    }
  }
}

TEST(Loss, KerasDocumentedExamples) {
  // keras.losses docstrings (values printed there to 3-4 digits).
  Tensor p({3}), t({3});
  auto set = [](Tensor& x, Shape s, std::vector<float> v) {
    x.shape = std::move(s);
    x.data = std::move(v);
  };
  set(p, {1, 3}, {0.9f, 0.1f, 0.8f});
  set(t, {1, 3}, {1.0f, 0.0f, 1.0f});
  EXPECT_NEAR(compute_loss(spec_of(LossKind::MSE), p, t, nullptr, nullptr).mean(), 0.02, 1e-6);
  set(p, {1, 3}, {1.9f, 0.3f, 1.8f});
  set(t, {1, 3}, {1.0f, 0.3f, 1.0f});
  EXPECT_NEAR(compute_loss(spec_of(LossKind::MAE), p, t, nullptr, nullptr).mean(), 0.5666667, 1e-6);
  set(p, {2, 2}, {-18.6f, 0.51f, 2.94f, -12.8f});
  set(t, {2, 2}, {0, 1, 0, 0});
  EXPECT_NEAR(compute_loss(spec_of(LossKind::BinaryCrossentropy, true), p, t, nullptr, nullptr).mean(), 0.8654, 5e-4);
  set(p, {2, 3}, {0.05f, 0.95f, 0.0f, 0.1f, 0.8f, 0.1f});
  set(t, {2, 3}, {0, 1, 0, 0, 0, 1});
  EXPECT_NEAR(compute_loss(spec_of(LossKind::CategoricalCrossentropy), p, t, nullptr, nullptr).mean(), 1.177, 5e-4);
  set(t, {2}, {1, 2});
  EXPECT_NEAR(compute_loss(spec_of(LossKind::SparseCategoricalCrossentropy), p, t, nullptr, nullptr).mean(), 1.177,
              5e-4);
  set(p, {2, 2}, {0.6f, 0.4f, 0.4f, 0.6f});
  set(t, {2, 2}, {0, 1, 0, 0});
  EXPECT_NEAR(compute_loss(spec_of(LossKind::BinaryCrossentropy), p, t, nullptr, nullptr).mean(), 0.815, 5e-4);
  EXPECT_NEAR(compute_loss(spec_of(LossKind::Huber), p, t, nullptr, nullptr).mean(), 0.155, 5e-4);
  set(p, {2, 2}, {1.0f, 1.0f, 1.0f, 0.0f});
  set(t, {2, 2}, {0, 1, 0, 0});
  EXPECT_NEAR(compute_loss(spec_of(LossKind::MSLE), p, t, nullptr, nullptr).mean(), 0.240, 5e-4);
  set(p, {2, 2}, {1.0f, 1.0f, 0.0f, 0.0f});
  EXPECT_NEAR(compute_loss(spec_of(LossKind::LogCosh), p, t, nullptr, nullptr).mean(), 0.108, 5e-4);
  // Log-cosh of a large error is |e| - log 2, where cosh itself overflows.
  set(p, {1, 1}, {1000.0f});
  set(t, {1, 1}, {0});
  EXPECT_NEAR(compute_loss(spec_of(LossKind::LogCosh), p, t, nullptr, nullptr).mean(), 1000.0 - std::log(2.0), 1e-9);
}

TEST(Loss, GradientMatchesFiniteDifferences) {
  // Central differences of the loss (computed in double from the float predictions) with h = 1e-3;
  // every case is away from kinks (MAE at 0, Huber at |e| = delta) and from the clip bounds.
  // Tolerance: |fd - analytic| <= 2e-4 + 1e-3 * |analytic|.
  const std::vector<float> mask = {1, 0, 1, 1, 1, 1, 1, 0};
  for (const LossSpec& s : all_specs()) {
    for (int masked = 0; masked < 2; ++masked) {
      Case c = make_case(s, {2, 4, 3}, 29 + masked);
      Tensor m({2, 4});
      m.data = mask;
      const Tensor* mp = masked ? &m : nullptr;
      Tensor g;
      compute_loss(s, c.pred, c.target, mp, &g);
      ASSERT_EQ(g.shape, c.pred.shape);
      double worst = 0.0, worst_fd = 0.0;
      int64_t worst_at = -1;
      for (int64_t j = 0; j < c.pred.numel(); ++j) {
        const float orig = c.pred[j];
        c.pred[j] = orig + 1e-3f;
        const double up = compute_loss(s, c.pred, c.target, mp, nullptr).mean();
        const float hi = c.pred[j];
        c.pred[j] = orig - 1e-3f;
        const double down = compute_loss(s, c.pred, c.target, mp, nullptr).mean();
        const float lo = c.pred[j];
        c.pred[j] = orig;
        const double fd = (up - down) / (static_cast<double>(hi) - lo);
        const double err = std::fabs(fd - g[j]) - (2e-4 + 1e-3 * std::fabs(g[j]));
        if (worst_at < 0 || err > worst) {
          worst = err;
          worst_at = j;
          worst_fd = fd;
        }
      }
      EXPECT_LE(worst, 0.0) << label(s) << " masked=" << masked << ": worst excess error at index " << worst_at
                            << " analytic=" << g[worst_at] << " finite-difference=" << worst_fd
                            << " pred=" << c.pred[worst_at];
      if (masked) {  // position 1 (sample 0, step 1) is masked: no gradient
        for (int64_t j = 3; j < 6; ++j) EXPECT_EQ(g[j], 0.0f) << label(s) << " masked gradient at " << j;
      }
    }
  }
}

TEST(Loss, ProbabilitiesAreClippedAsKeras) {
  // A probability of 0 for the true class costs -log(1e-7) (clipped), with no gradient through the clip.
  Tensor p({2, 1}), t({2, 1});
  p.data = {0.0f, 1.0f};
  t.data = {1.0f, 0.0f};
  Tensor g;
  const LossValue v = compute_loss(spec_of(LossKind::BinaryCrossentropy), p, t, nullptr, &g);
  const double want = -std::log(kLo) / 2.0 - std::log(1.0 - kHi) / 2.0;
  EXPECT_NEAR(v.mean(), want, 1e-5) << "got " << v.mean();
  EXPECT_EQ(g[0], 0.0f);
  EXPECT_EQ(g[1], 0.0f);

  // Categorical: a row that does not sum to 1 is renormalised; a zero class is clipped.
  Tensor pc({1, 3}), tc({1, 3});
  pc.data = {0.0f, 1.0f, 3.0f};  // renormalised: 0, 0.25, 0.75
  tc.data = {1.0f, 0.0f, 0.0f};
  EXPECT_NEAR(compute_loss(spec_of(LossKind::CategoricalCrossentropy), pc, tc, nullptr, nullptr).mean(),
              -std::log(kLo), 1e-5);
  tc.data = {0.0f, 1.0f, 0.0f};
  EXPECT_NEAR(compute_loss(spec_of(LossKind::CategoricalCrossentropy), pc, tc, nullptr, nullptr).mean(),
              -std::log(0.25), 1e-6);
}

TEST(Loss, LogitsAreStableForLargeValues) {
  Tensor p({2, 1}), t({2, 1});
  p.data = {100.0f, -100.0f};
  t.data = {0.0f, 1.0f};
  Tensor g;
  const LossValue v = compute_loss(spec_of(LossKind::BinaryCrossentropy, true), p, t, nullptr, &g);
  EXPECT_NEAR(v.mean(), 100.0, 1e-9);                // each costs |x| + log1p(e^-100)
  EXPECT_NEAR(g[0], 0.5, 1e-7);                       // (sigmoid(100) - 0) / 2
  EXPECT_NEAR(g[1], -0.5, 1e-7);                      // (sigmoid(-100) - 1) / 2
  Tensor pc({1, 3}), tc({1});
  pc.data = {1000.0f, 0.0f, -1000.0f};
  tc.data = {1.0f};
  const LossValue vc = compute_loss(spec_of(LossKind::SparseCategoricalCrossentropy, true), pc, tc, nullptr, &g);
  EXPECT_NEAR(vc.mean(), 1000.0, 1e-9);
  EXPECT_TRUE(std::isfinite(g[0]) && std::isfinite(g[1]) && std::isfinite(g[2]));
  EXPECT_NEAR(g[0], 1.0, 1e-7);
  EXPECT_NEAR(g[1], -1.0, 1e-7);
}

TEST(Loss, SparseLabelShapesAgreeWithOneHot) {
  const LossSpec dense = spec_of(LossKind::CategoricalCrossentropy, true);
  const LossSpec sparse = spec_of(LossKind::SparseCategoricalCrossentropy, true);
  Case c = make_case(sparse, {2, 3, 4}, 5);
  Tensor onehot({2, 3, 4});
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 4; ++j) onehot[i * 4 + j] = static_cast<float>(c.dense[i][j]);
  Tensor gd, gs;
  const double want = compute_loss(dense, c.pred, onehot, nullptr, &gd).mean();
  for (Shape ts : {Shape{2, 3}, Shape{2, 3, 1}}) {
    Tensor labels = c.target;
    labels.shape = ts;
    EXPECT_NEAR(compute_loss(sparse, c.pred, labels, nullptr, &gs).mean(), want, 1e-9) << shape_str(ts);
    for (int64_t j = 0; j < gd.numel(); ++j) ASSERT_NEAR(gs[j], gd[j], 1e-7) << shape_str(ts) << " at " << j;
  }
  // [B] and [B, 1] labels against [B, K] predictions.
  Tensor p2({3, 4}, 0.0f), l2({3});
  p2.data = {1, 2, 3, 4, 0, 0, 0, 0, 4, 3, 2, 1};
  l2.data = {3, 1, 0};
  const double v1 = compute_loss(sparse, p2, l2, nullptr, nullptr).mean();
  l2.shape = {3, 1};
  EXPECT_EQ(compute_loss(sparse, p2, l2, nullptr, nullptr).mean(), v1);
  const double lse1 = 4 + std::log(1 + std::exp(-1.0) + std::exp(-2.0) + std::exp(-3.0));
  EXPECT_NEAR(v1, (2 * (lse1 - 4) + std::log(4.0)) / 3.0, 1e-6);
}

TEST(Loss, FullyMaskedBatchGivesZero) {
  const LossSpec s = spec_of(LossKind::MSE);
  Case c = make_case(s, {2, 2, 3}, 3);
  Tensor m({2, 2}, 0.0f), g;
  const LossValue v = compute_loss(s, c.pred, c.target, &m, &g);
  EXPECT_EQ(v.count, 0.0);
  EXPECT_EQ(v.mean(), 0.0);
  for (float x : g.data) ASSERT_EQ(x, 0.0f);
}

TEST(Loss, SqueezedTargetsForOneUnit) {
  // Targets [B] for predictions [B, 1] (and [B, T] for [B, T, 1]), as Keras squeezes them.
  Tensor p({3, 1}), t({3});
  p.data = {0.5f, 1.0f, -1.0f};
  t.data = {0.0f, 1.0f, 1.0f};
  EXPECT_NEAR(compute_loss(spec_of(LossKind::MSE), p, t, nullptr, nullptr).mean(), (0.25 + 0 + 4) / 3, 1e-7);
  Tensor p3({1, 2, 1}), t3({1, 2});
  p3.data = {0.5f, 2.0f};
  t3.data = {0.0f, 0.0f};
  EXPECT_NEAR(compute_loss(spec_of(LossKind::MAE), p3, t3, nullptr, nullptr).mean(), 1.25, 1e-7);
}

namespace {
std::string error_of(const LossSpec& s, const Tensor& p, const Tensor& t, const Tensor* m) {
  try {
    compute_loss(s, p, t, m, nullptr);
  } catch (const DataError& e) {
    return e.what();
  }
  return "<no DataError>";
}
}  // namespace

TEST(Loss, BadTargetsThrowDataErrorWithShapes) {
  Tensor p({4, 3}, 0.3f);
  const std::string wrong = error_of(spec_of(LossKind::CategoricalCrossentropy), p, Tensor({4, 2}), nullptr);
  EXPECT_NE(wrong.find("(4, 2)"), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("(4, 3)"), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("categorical_crossentropy"), std::string::npos) << wrong;

  // Class indices given to a dense loss: the message suggests the sparse loss.
  const std::string labels = error_of(spec_of(LossKind::CategoricalCrossentropy), p, Tensor({4}), nullptr);
  EXPECT_NE(labels.find("sparse_categorical_crossentropy"), std::string::npos) << labels;

  const std::string onehot = error_of(spec_of(LossKind::SparseCategoricalCrossentropy), p, Tensor({4, 3}), nullptr);
  EXPECT_NE(onehot.find("(4,)"), std::string::npos) << onehot;
  EXPECT_NE(onehot.find("(4, 3)"), std::string::npos) << onehot;

  Tensor l({4}, 1.0f);
  l[2] = 3.0f;
  const std::string range = error_of(spec_of(LossKind::SparseCategoricalCrossentropy), p, l, nullptr);
  EXPECT_NE(range.find("label 3 at sample 2"), std::string::npos) << range;
  EXPECT_NE(range.find("[0, 3)"), std::string::npos) << range;
  l[2] = 1.5f;
  EXPECT_NE(error_of(spec_of(LossKind::SparseCategoricalCrossentropy), p, l, nullptr).find("label 1.5"),
            std::string::npos);

  Tensor p3({2, 5, 3}, 0.3f), l3({2, 5}, 0.0f), m({2, 5}, 1.0f);
  l3[7] = -1.0f;
  const std::string step = error_of(spec_of(LossKind::SparseCategoricalCrossentropy), p3, l3, &m);
  EXPECT_NE(step.find("sample 1, step 2"), std::string::npos) << step;
  m[7] = 0.0f;  // a bad label under the mask is padding, not an error
  EXPECT_EQ(error_of(spec_of(LossKind::SparseCategoricalCrossentropy), p3, l3, &m), "<no DataError>");

  const std::string mask = error_of(spec_of(LossKind::MSE), p3, Tensor({2, 5, 3}), &l);
  EXPECT_NE(mask.find("mask"), std::string::npos) << mask;
  EXPECT_NE(mask.find("(2, 5)"), std::string::npos) << mask;
}

TEST(Loss, NamesAreTheConfigSpellings) {
  // One loss_name (data/dataset.h) serves the losses, the metrics and check_dataset; it prints what a
  // user writes in train.loss.
  const std::pair<LossKind, const char*> spellings[] = {
      {LossKind::MSE, "mse"},
      {LossKind::MAE, "mae"},
      {LossKind::Huber, "huber"},
      {LossKind::BinaryCrossentropy, "binary_crossentropy"},
      {LossKind::CategoricalCrossentropy, "categorical_crossentropy"},
      {LossKind::SparseCategoricalCrossentropy, "sparse_categorical_crossentropy"},
  };
  for (const auto& [kind, name] : spellings) EXPECT_STREQ(loss_name(kind), name);
}

// Keras' sample_weight: each position's loss and gradient times its weight (per sample weights
// cover the sample's timesteps), the mean still over the unmasked positions.
TEST(Loss, WeightsScaleEachPositionsLossAndGradient) {
  const std::vector<float> mask = {1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1};
  for (const LossSpec& s : all_specs()) {
    Case c = make_case(s, {3, 4, 5}, 21);
    Tensor m({3, 4});
    m.data = mask;
    Tensor g0, g1, g2;
    const LossValue plain = compute_loss(s, c.pred, c.target, &m, &g0);
    Tensor per_step({3, 4}), per_sample({3});
    per_sample.data = {0.5f, 2.0f, 0.0f};
    for (int64_t i = 0; i < 12; ++i) per_step[i] = per_sample[i / 4];
    const LossValue a = compute_loss(s, c.pred, c.target, &m, &g1, &per_sample);
    const LossValue b = compute_loss(s, c.pred, c.target, &m, &g2, &per_step);
    EXPECT_EQ(a.count, plain.count) << label(s);  // the count is not weighted
    EXPECT_EQ(a.sum, b.sum) << label(s);
    EXPECT_EQ(g1.data, g2.data) << label(s);
    double want = 0.0;  // the weighted sum from each position's own loss
    for (int64_t i = 0; i < 12; ++i) {
      if (mask[i] == 0.0f) continue;
      Tensor one({3, 4}, 0.0f);
      one[i] = 1.0f;
      want += per_step[i] * compute_loss(s, c.pred, c.target, &one, nullptr).sum;
    }
    EXPECT_NEAR(a.sum, want, 1e-9 * (1 + std::fabs(want))) << label(s);
    for (int64_t e = 0; e < g0.numel(); ++e)
      ASSERT_NEAR(g1[e], g0[e] * per_step[e / 5], 1e-6 * (1 + std::fabs(g0[e]))) << label(s) << " element " << e;
    Tensor wrong({5});
    EXPECT_THROW(compute_loss(s, c.pred, c.target, &m, nullptr, &wrong), DataError) << label(s);
  }
}

// The CPU engine runs the loss's chunks of positions on several threads (core/chunks.h):
// every loss gives the same value and gradient, bit for bit, whichever way the chunks run, and the
// first bad label is the one named.
TEST(Loss, ChunksRunInAnyOrderGiveTheSameBits) {
  int backwards_runs = 0;
  const ChunkRunner backwards = [&](int64_t chunks, const std::function<void(int64_t, int64_t)>& fn) {
    ++backwards_runs;
    for (int64_t c = chunks - 1; c >= 0; --c) fn(c, c + 1);
  };
  const ChunkRunner halves = [](int64_t chunks, const std::function<void(int64_t, int64_t)>& fn) {
    std::exception_ptr later;  // as cpu::parallel_rows: the first half's error first
    std::thread t([&] {
      try {
        fn(chunks / 2, chunks);
      } catch (...) {
        later = std::current_exception();
      }
    });
    try {
      fn(0, chunks / 2);
    } catch (...) {
      t.join();
      throw;
    }
    t.join();
    if (later) std::rethrow_exception(later);
  };
  for (const LossSpec& s : all_specs()) {
    Case c = make_case(s, {20, 151, 6}, 5);  // 3020 positions: 48 chunks, the last one partial
    Tensor m({20, 151}, 1.0f);
    for (int64_t i = 0; i < m.numel(); i += 9) m[i] = 0.0f;
    Tensor g0, g1, g2;
    const LossValue a = compute_loss(s, c.pred, c.target, &m, &g0);
    const LossValue b = compute_loss(s, c.pred, c.target, &m, &g1, nullptr, &backwards);
    const LossValue d = compute_loss(s, c.pred, c.target, &m, &g2, nullptr, &halves);
    EXPECT_EQ(a.sum, b.sum) << label(s);
    EXPECT_EQ(a.sum, d.sum) << label(s);
    EXPECT_EQ(a.count, d.count) << label(s);
    EXPECT_EQ(g0.data, g1.data) << label(s);
    EXPECT_EQ(g0.data, g2.data) << label(s);
  }
  EXPECT_EQ(backwards_runs, static_cast<int>(all_specs().size())) << "the runner ran every loss";
  Tensor p({6000, 3}, 0.3f), l({6000}, 1.0f);  // wide enough for the runner (kLossWide)
  l[100] = 5.0f, l[5000] = 7.0f;
  try {
    compute_loss(spec_of(LossKind::SparseCategoricalCrossentropy), p, l, nullptr, nullptr, nullptr, &halves);
    FAIL() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("label 5 at sample 100"), std::string::npos) << e.what();
  }
}
