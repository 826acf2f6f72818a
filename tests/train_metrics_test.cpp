// Metrics on small hand-made cases: "accuracy" resolved by the loss (thresholds on probabilities and
// logits), masked entries excluded, running means weighted by entries over batches, perplexity.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "model/metrics.h"

using namespace rnntrain;

namespace {

Tensor tensor(Shape s, std::vector<float> v) {
  Tensor t(std::move(s));
  EXPECT_EQ(t.numel(), static_cast<int64_t>(v.size()));
  t.data = std::move(v);
  return t;
}

LossSpec loss_of(LossKind kind, bool logits = false, double smoothing = 0.0) {
  LossSpec l;
  l.kind = kind;
  l.from_logits = logits;
  l.label_smoothing = smoothing;
  return l;
}

std::unique_ptr<Metric> metric(MetricKind kind, const LossSpec& loss, std::string name = "") {
  return make_metric(MetricSpec{kind, std::move(name)}, loss);
}

}  // namespace

TEST(Metrics, AccuracyWithBinaryCrossentropyThresholdsProbabilitiesAtHalf) {
  auto m = metric(MetricKind::Accuracy, loss_of(LossKind::BinaryCrossentropy));
  EXPECT_EQ(m->name(), "accuracy");
  // 0.7 -> 1 (hit), 0.5 -> 0 (not > 0.5: hit for target 0), 0.2 -> 0 (miss), 0.9 -> 1 (miss).
  m->update(tensor({4, 1}, {0.7f, 0.5f, 0.2f, 0.9f}), tensor({4, 1}, {1, 0, 1, 0}), nullptr);
  EXPECT_DOUBLE_EQ(m->result(), 0.5);
}

TEST(Metrics, AccuracyWithLogitsThresholdsAtZero) {
  auto m = metric(MetricKind::Accuracy, loss_of(LossKind::BinaryCrossentropy, true));
  // Logits 0.3 (prob 0.57) -> 1, -0.2 -> 0, 0.1 -> 1, -3 -> 0. At 0.5 the first and third would be 0.
  m->update(tensor({4, 1}, {0.3f, -0.2f, 0.1f, -3.0f}), tensor({4}, {1, 0, 1, 1}), nullptr);
  EXPECT_DOUBLE_EQ(m->result(), 0.75);
}

TEST(Metrics, BinaryAccuracyAveragesOverUnitsPerEntry) {
  auto m = metric(MetricKind::BinaryAccuracy, loss_of(LossKind::BinaryCrossentropy));
  // Two samples, three labels each: 2/3 and 3/3 right -> mean of the entries 5/6.
  m->update(tensor({2, 3}, {0.9f, 0.1f, 0.6f, 0.2f, 0.8f, 0.4f}), tensor({2, 3}, {1, 0, 0, 0, 1, 0}), nullptr);
  EXPECT_NEAR(m->result(), 5.0 / 6.0, 1e-12);
}

TEST(Metrics, CategoricalAndSparseAccuracyCompareArgmax) {
  const Tensor pred = tensor({3, 3}, {0.1f, 0.7f, 0.2f, 0.5f, 0.3f, 0.2f, 0.2f, 0.2f, 0.6f});  // argmax 1, 0, 2
  auto cat = metric(MetricKind::Accuracy, loss_of(LossKind::CategoricalCrossentropy));
  cat->update(pred, tensor({3, 3}, {0, 1, 0, 0, 1, 0, 0, 0, 1}), nullptr);
  EXPECT_NEAR(cat->result(), 2.0 / 3.0, 1e-12);
  auto sparse = metric(MetricKind::Accuracy, loss_of(LossKind::SparseCategoricalCrossentropy, true));
  sparse->update(pred, tensor({3}, {1, 1, 2}), nullptr);
  EXPECT_NEAR(sparse->result(), 2.0 / 3.0, 1e-12);
  sparse->reset();
  sparse->update(pred, tensor({3, 1}, {1, 0, 2}), nullptr);
  EXPECT_DOUBLE_EQ(sparse->result(), 1.0);
}

TEST(Metrics, AccuracyWithRegressionLossFollowsKerasShapeRule) {
  // One unit -> binary accuracy at 0.5; several units with same-shape targets -> categorical.
  auto m = metric(MetricKind::Accuracy, loss_of(LossKind::MSE));
  m->update(tensor({2, 1}, {0.6f, 0.4f}), tensor({2, 1}, {1, 1}), nullptr);
  EXPECT_DOUBLE_EQ(m->result(), 0.5);
  auto c = metric(MetricKind::Accuracy, loss_of(LossKind::MSE));
  c->update(tensor({2, 2}, {0.6f, 0.4f, 0.1f, 0.9f}), tensor({2, 2}, {1, 0, 1, 0}), nullptr);
  EXPECT_DOUBLE_EQ(c->result(), 0.5);
}

TEST(Metrics, MaskedStepsAreExcludedAndBatchesWeightedByEntries) {
  // Batch 1: [B=2, T=3, K=2], mask keeps 4 of 6 steps, 3 of them right.
  auto m = metric(MetricKind::SparseCategoricalAccuracy, loss_of(LossKind::SparseCategoricalCrossentropy));
  const Tensor p1 = tensor({2, 3, 2}, {0.9f, 0.1f, 0.2f, 0.8f, 0.3f, 0.7f,    // argmax 0 1 1
                                        0.6f, 0.4f, 0.6f, 0.4f, 0.1f, 0.9f});  // argmax 0 0 1
  const Tensor y1 = tensor({2, 3}, {0, 1, 0, 1, 0, 0});                       // hits: 1 1 0 | 0 1 0
  const Tensor m1 = tensor({2, 3}, {1, 1, 0, 1, 1, 0});                       // kept hits 1 1 . 0 1 .
  m->update(p1, y1, &m1);
  EXPECT_DOUBLE_EQ(m->result(), 3.0 / 4.0);
  // Batch 2: one unmasked step, a miss -> 3 of 5 entries over the epoch (not the mean of 3/4 and 0).
  m->update(tensor({1, 1, 2}, {0.2f, 0.8f}), tensor({1, 1}, {0}), nullptr);
  EXPECT_DOUBLE_EQ(m->result(), 3.0 / 5.0);
  m->reset();
  EXPECT_DOUBLE_EQ(m->result(), 0.0);
}

TEST(Metrics, MaeAndMseAreRunningMeansOverEntries) {
  auto mae = metric(MetricKind::MAE, loss_of(LossKind::MSE));
  auto mse = metric(MetricKind::MSE, loss_of(LossKind::MSE));
  EXPECT_EQ(mae->name(), "mae");
  const Tensor p = tensor({2, 2}, {1.0f, 2.0f, 0.0f, -1.0f});
  const Tensor y = tensor({2, 2}, {0.0f, 0.0f, 0.0f, 1.0f});
  mae->update(p, y, nullptr);  // entries: (1 + 2)/2 = 1.5, (0 + 2)/2 = 1
  mse->update(p, y, nullptr);  // entries: (1 + 4)/2 = 2.5, (0 + 4)/2 = 2
  EXPECT_DOUBLE_EQ(mae->result(), 1.25);
  EXPECT_DOUBLE_EQ(mse->result(), 2.25);
  // A second batch of one entry with error 3: MAE (1.5 + 1 + 3) / 3.
  mae->update(tensor({1, 1}, {3.0f}), tensor({1, 1}, {0.0f}), nullptr);
  EXPECT_NEAR(mae->result(), 5.5 / 3.0, 1e-12);
  // Masked steps do not count: [B=1, T=2, K=1], only step 0 (error 2) is kept.
  auto masked = metric(MetricKind::MSE, loss_of(LossKind::MSE), "val_mse_name");
  EXPECT_EQ(masked->name(), "val_mse_name");
  const Tensor mask = tensor({1, 2}, {1, 0});
  masked->update(tensor({1, 2, 1}, {2.0f, 100.0f}), tensor({1, 2, 1}, {0.0f, 0.0f}), &mask);
  EXPECT_DOUBLE_EQ(masked->result(), 4.0);
}

TEST(Metrics, PerplexityIsExpOfMeanCrossentropy) {
  // Uniform probabilities over K classes: perplexity K.
  auto probs = metric(MetricKind::Perplexity, loss_of(LossKind::SparseCategoricalCrossentropy));
  probs->update(tensor({2, 4}, {0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f}), tensor({2}, {0, 3}),
                nullptr);
  EXPECT_NEAR(probs->result(), 4.0, 1e-5);
  // Logits [0, log 3] with label 1 -> p = 3/4; label 0 -> p = 1/4: exp(-(log .75 + log .25)/2).
  auto logits = metric(MetricKind::Perplexity, loss_of(LossKind::SparseCategoricalCrossentropy, true, 0.3));
  const float l3 = static_cast<float>(std::log(3.0));
  logits->update(tensor({2, 1, 2}, {0.0f, l3, 0.0f, l3}), tensor({2, 1}, {1, 0}), nullptr);
  EXPECT_NEAR(logits->result(), std::exp(-(std::log(0.75) + std::log(0.25)) / 2), 1e-5) << "label smoothing must not apply";
  // One-hot targets with categorical crossentropy, masked step excluded.
  auto cat = metric(MetricKind::Perplexity, loss_of(LossKind::CategoricalCrossentropy));
  const Tensor mask = tensor({1, 2}, {1, 0});
  cat->update(tensor({1, 2, 2}, {0.5f, 0.5f, 0.01f, 0.99f}), tensor({1, 2, 2}, {1, 0, 1, 0}), &mask);
  EXPECT_NEAR(cat->result(), 2.0, 1e-5);
}

TEST(Metrics, PerplexityNeedsACrossentropyLoss) {
  try {
    metric(MetricKind::Perplexity, loss_of(LossKind::MSE));
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("sparse_categorical_crossentropy"), std::string::npos) << e.what();
  }
}

TEST(Metrics, BadTargetsThrowDataError) {
  auto m = metric(MetricKind::Accuracy, loss_of(LossKind::CategoricalCrossentropy));
  try {
    m->update(tensor({2, 3}, {0, 0, 0, 0, 0, 0}), tensor({2, 2}, {0, 0, 0, 0}), nullptr);
    FAIL() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("(2, 2)"), std::string::npos) << e.what();
  }
}
