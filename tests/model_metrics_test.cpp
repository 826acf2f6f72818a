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
  return make_metric(MetricSpec{kind, std::move(name)}, loss, Shape{});
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

// Keras' regression metrics: RootMeanSquaredError is the root of the mse's running mean (not the
// mean of batch roots); MeanSquaredLogarithmicError and LogCoshError as their losses; R2Score as
// Keras' docstring, over batches, per output with both aggregations and adjusted.
TEST(Metrics, RegressionMetricsAsKerasComputesThem) {
  const LossSpec mse = loss_of(LossKind::MSE);
  auto rmse = metric(MetricKind::RMSE, mse);
  EXPECT_EQ(rmse->name(), "root_mean_squared_error");
  rmse->update(tensor({2, 1}, {1.0f, 3.0f}), tensor({2, 1}, {0.0f, 0.0f}), nullptr);  // squares 1, 9
  rmse->update(tensor({1, 1}, {2.0f}), tensor({1, 1}, {0.0f}), nullptr);              // 4
  EXPECT_NEAR(rmse->result(), std::sqrt(14.0 / 3.0), 1e-12);
  auto msle = metric(MetricKind::MSLE, mse), logcosh = metric(MetricKind::LogCosh, mse);
  const Tensor p = tensor({2, 2}, {1.0f, 1.0f, 1.0f, 0.0f}), y = tensor({2, 2}, {0, 1, 0, 0});
  msle->update(p, y, nullptr);
  logcosh->update(tensor({2, 2}, {1.0f, 1.0f, 0.0f, 0.0f}), y, nullptr);
  EXPECT_NEAR(msle->result(), 0.240, 5e-4);  // keras.metrics.MeanSquaredLogarithmicError's docstring
  EXPECT_NEAR(logcosh->result(), 0.108, 5e-4);  // keras.metrics.LogCoshError's
  EXPECT_EQ(logcosh->name(), "logcosh");

  MetricSpec r2{MetricKind::R2Score, "r2_score"};
  auto one = make_metric(r2, mse, Shape{1});
  one->update(tensor({2, 1}, {2.0f, 4.0f}), tensor({2, 1}, {1.0f, 4.0f}), nullptr);
  one->update(tensor({1, 1}, {4.0f}), tensor({1, 1}, {3.0f}), nullptr);
  EXPECT_NEAR(one->result(), 0.57142854, 1e-6);  // keras.metrics.R2Score's docstring, in two batches
  // Two outputs: t = [[0, 1], [2, 3], [4, 8]], p = t + [[1, 0], [-1, 1], [0, -1]].
  const Tensor t2 = tensor({3, 2}, {0, 1, 2, 3, 4, 8}), p2 = tensor({3, 2}, {1, 1, 1, 4, 4, 7});
  const double ss0 = 8.0, ss1 = 26.0;  // sum (t - mean)^2 per output; residuals 2 and 2
  const double r0 = 1 - 2 / ss0, r1 = 1 - 2 / ss1;
  auto uniform = make_metric(r2, mse, Shape{2});
  uniform->update(p2, t2, nullptr);
  EXPECT_NEAR(uniform->result(), (r0 + r1) / 2, 1e-12);
  r2.aggregation = R2Aggregation::VarianceWeighted;
  auto weighted = make_metric(r2, mse, Shape{2});
  weighted->update(p2, t2, nullptr);
  EXPECT_NEAR(weighted->result(), (ss0 * r0 + ss1 * r1) / (ss0 + ss1), 1e-12);
  r2.num_regressors = 2;  // adjusted over Keras' num_samples, every value: n = 6
  auto adjusted = make_metric(r2, mse, Shape{2});
  adjusted->update(p2, t2, nullptr);
  EXPECT_NEAR(adjusted->result(), 1 - (1 - weighted->result()) * 5.0 / 3.0, 1e-12);
  // State: restored exactly, and merged across ranks.
  auto back = make_metric(r2, mse, Shape{2});
  const std::vector<double> st = adjusted->state();
  back->merge(st.data());
  EXPECT_EQ(back->result(), adjusted->result());
  // As Keras refuses it: R2Score over a sequence, or with a loss over classes.
  EXPECT_THROW(make_metric(r2, mse, Shape{5, 2}), ConfigError);
  EXPECT_THROW(make_metric(r2, loss_of(LossKind::CategoricalCrossentropy), Shape{2}), ConfigError);
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

namespace {

std::unique_ptr<Metric> metric_of(const MetricSpec& spec, const LossSpec& loss, Shape out) {
  return make_metric(spec, loss, out);
}

MetricSpec spec_of(MetricKind kind) {
  MetricSpec s{kind, ""};
  return s;
}

}  // namespace

// Keras' in_top_k (JAX): the label's prediction ranks 1 + the predictions above it, so ties count
// as hits; categorical takes the label from the one-hot target, sparse from the index.
TEST(Metrics, TopKAccuracyRanksTheLabelWithTiesInItsFavour) {
  const Tensor pred = tensor({4, 4}, {0.1f, 0.4f, 0.3f, 0.2f, 0.25f, 0.25f, 0.25f, 0.25f,  //
                                      0.7f, 0.1f, 0.1f, 0.1f, 0.1f, 0.2f, 0.3f, 0.4f});
  const Tensor labels = tensor({4}, {2, 3, 1, 0});
  const Tensor onehot = tensor({4, 4}, {0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1, 0, 0, 0});
  for (int64_t k : {1, 2}) {
    MetricSpec cat = spec_of(MetricKind::TopKCategoricalAccuracy), sparse = spec_of(MetricKind::SparseTopKCategoricalAccuracy);
    cat.k = sparse.k = k;
    auto c = metric_of(cat, loss_of(LossKind::CategoricalCrossentropy), {4});
    auto s = metric_of(sparse, loss_of(LossKind::SparseCategoricalCrossentropy), {4});
    c->update(pred, onehot, nullptr);
    s->update(pred, labels, nullptr);
    EXPECT_DOUBLE_EQ(c->result(), k == 1 ? 0.25 : 0.75) << k;
    EXPECT_DOUBLE_EQ(s->result(), k == 1 ? 0.25 : 0.75) << k;
  }
  auto masked = metric_of([] { MetricSpec m{MetricKind::SparseTopKCategoricalAccuracy, ""}; m.k = 2; return m; }(),
                          loss_of(LossKind::SparseCategoricalCrossentropy), {4});
  const Tensor mask = tensor({4}, {1, 1, 1, 0});
  masked->update(pred, labels, &mask);
  EXPECT_DOUBLE_EQ(masked->result(), 1.0);
  auto bad = metric_of(spec_of(MetricKind::SparseTopKCategoricalAccuracy), loss_of(LossKind::SparseCategoricalCrossentropy), {4});
  EXPECT_THROW(bad->update(pred, tensor({4}, {2, 3, 4, 0}), nullptr), DataError);  // label 4 of 4 classes
}

// Precision and Recall count p > threshold against targets != 0; class_id keeps one unit.
TEST(Metrics, PrecisionAndRecallAtTheirThresholdAndClass) {
  const LossSpec bce = loss_of(LossKind::BinaryCrossentropy);
  const Tensor pred = tensor({5, 1}, {0.9f, 0.6f, 0.4f, 0.2f, 0.7f}), y = tensor({5, 1}, {1, 0, 0.3f, 0, 1});
  for (double t : {0.5, 0.3}) {
    MetricSpec p = spec_of(MetricKind::Precision), r = spec_of(MetricKind::Recall);
    p.threshold = r.threshold = t;
    auto pm = metric_of(p, bce, {1}), rm = metric_of(r, bce, {1});
    pm->update(pred, y, nullptr);
    rm->update(pred, y, nullptr);
    EXPECT_DOUBLE_EQ(pm->result(), t == 0.5 ? 2.0 / 3.0 : 0.75) << t;
    EXPECT_DOUBLE_EQ(rm->result(), t == 0.5 ? 2.0 / 3.0 : 1.0) << t;
  }
  const Tensor two = tensor({3, 2}, {0.9f, 0.2f, 0.1f, 0.8f, 0.6f, 0.7f}), y2 = tensor({3, 2}, {1, 0, 0, 1, 0, 1});
  for (int64_t id : {0, 1}) {
    MetricSpec p = spec_of(MetricKind::Precision);
    p.class_id = id;
    auto m = metric_of(p, bce, {2});
    m->update(two, y2, nullptr);
    EXPECT_DOUBLE_EQ(m->result(), id == 0 ? 0.5 : 1.0) << id;
  }
  auto empty = metric_of(spec_of(MetricKind::Precision), bce, {1});
  EXPECT_EQ(empty->result(), 0.0);  // no predicted positives: Keras' divide_no_nan
}

// AUC from Keras' 200 evenly spaced thresholds: the ROC area of well separated predictions is the
// rank statistic; predictions in one bucket make a step whose height the summation method picks.
TEST(Metrics, AucOfTheRocAndItsSummationMethods) {
  const LossSpec bce = loss_of(LossKind::BinaryCrossentropy);
  auto roc = metric_of(spec_of(MetricKind::AUC), bce, {1});
  roc->update(tensor({4, 1}, {0.1f, 0.4f, 0.35f, 0.8f}), tensor({4, 1}, {0, 0, 1, 1}), nullptr);
  EXPECT_NEAR(roc->result(), 0.75, 1e-12);
  MetricSpec logits = spec_of(MetricKind::AUC);
  logits.from_logits = true;
  auto lm = metric_of(logits, bce, {1});
  lm->update(tensor({4, 1}, {-2.0f, 0.5f, 0.3f, 3.0f}), tensor({4, 1}, {0, 0, 1, 1}), nullptr);
  EXPECT_NEAR(lm->result(), 0.75, 1e-12);
  const std::pair<AucSummation, double> methods[] = {
      {AucSummation::Interpolation, 0.5}, {AucSummation::Minoring, 0.0}, {AucSummation::Majoring, 1.0}};
  for (const auto& [method, area] : methods) {
    MetricSpec s = spec_of(MetricKind::AUC);
    s.summation = method;
    auto m = metric_of(s, bce, {1});
    m->update(tensor({2, 1}, {0.5f, 0.5f}), tensor({2, 1}, {1, 0}), nullptr);
    EXPECT_NEAR(m->result(), area, 1e-12) << static_cast<int>(method);
  }
  // multi_label: the mean of each unit's AUC (1 and 0 here); flattened, one curve over all units.
  const Tensor pred = tensor({2, 2}, {0.9f, 0.9f, 0.1f, 0.1f}), y = tensor({2, 2}, {1, 0, 0, 0});
  MetricSpec multi = spec_of(MetricKind::AUC);
  multi.multi_label = true;
  auto mm = metric_of(multi, bce, {2}), flat = metric_of(spec_of(MetricKind::AUC), bce, {2});
  mm->update(pred, y, nullptr);
  flat->update(pred, y, nullptr);
  EXPECT_NEAR(mm->result(), 0.5, 1e-12);
  EXPECT_NEAR(flat->result(), 2.5 / 3.0, 1e-12);
}

// F-scores per class from the row's maximum (no threshold) or p > threshold, then averaged as Keras
// does: macro (mean), weighted (by each class's targets), micro (counts summed first).
TEST(Metrics, FScoresAverageThePerClassScores) {
  const LossSpec cce = loss_of(LossKind::CategoricalCrossentropy);
  const Tensor pred = tensor({5, 3}, {0.7f, 0.2f, 0.1f, 0.1f, 0.6f, 0.3f, 0.3f, 0.3f, 0.4f, 0.5f, 0.4f, 0.1f, 0.2f, 0.7f, 0.1f});
  const Tensor y = tensor({5, 3}, {1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0});
  // By the maximum: class 0 tp 1 fp 1 fn 1 (F 0.5), class 1 tp 2 (F 1), class 2 tp 0 (F 0).
  const std::pair<FAverage, double> averages[] = {{FAverage::Macro, 0.5}, {FAverage::Weighted, 0.6}, {FAverage::Micro, 0.6}};
  for (const auto& [average, want] : averages) {
    MetricSpec f = spec_of(MetricKind::F1Score);
    f.average = average;
    auto m = metric_of(f, cce, {3});
    m->update(pred, y, nullptr);
    EXPECT_NEAR(m->result(), want, 1e-6) << static_cast<int>(average);
  }
  MetricSpec f2 = spec_of(MetricKind::FBetaScore);  // beta 2 above 0.35: F2 0.5, 10/11, 0
  f2.beta = 2.0, f2.threshold = 0.35;
  auto m = metric_of(f2, cce, {3});
  m->update(pred, y, nullptr);
  EXPECT_NEAR(m->result(), (0.5 + 10.0 / 11.0) / 3.0, 1e-6);
}

// The state of a confusion metric adds up across batches and ranks, and restores it exactly.
TEST(Metrics, ConfusionStateMergesAndRestores) {
  const LossSpec bce = loss_of(LossKind::BinaryCrossentropy);
  MetricSpec pr = spec_of(MetricKind::AUC);
  pr.curve = AucCurve::PR;
  auto all = metric_of(pr, bce, {1}), a = metric_of(pr, bce, {1}), b = metric_of(pr, bce, {1});
  const Tensor p1 = tensor({3, 1}, {0.9f, 0.3f, 0.6f}), y1 = tensor({3, 1}, {1, 0, 1});
  const Tensor p2 = tensor({3, 1}, {0.2f, 0.8f, 0.55f}), y2 = tensor({3, 1}, {1, 0, 0});
  all->update(p1, y1, nullptr);
  all->update(p2, y2, nullptr);
  a->update(p1, y1, nullptr);
  b->update(p2, y2, nullptr);
  a->merge(b->state().data());
  EXPECT_EQ(a->state(), all->state());
  EXPECT_EQ(a->result(), all->result());
  EXPECT_GT(all->result(), 0.0);
  const std::vector<double> saved = all->state();
  all->reset();
  EXPECT_EQ(all->result(), 0.0);
  all->merge(saved.data());
  EXPECT_EQ(all->result(), a->result());
}

// What Keras' classes cannot take is refused before training, naming the metric and the way out.
TEST(Metrics, ConfusionMetricsTheModelCannotHaveAreConfigErrors) {
  const auto message = [](const MetricSpec& s, const LossSpec& l, Shape out) {
    try {
      make_metric(s, l, out);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(spec_of(MetricKind::F1Score), loss_of(LossKind::CategoricalCrossentropy), {-1, 4})
                .find("one prediction per sample"), std::string::npos);
  EXPECT_NE(message(spec_of(MetricKind::Precision), loss_of(LossKind::SparseCategoricalCrossentropy), {4})
                .find("takes class labels"), std::string::npos);
  MetricSpec multi = spec_of(MetricKind::AUC);
  multi.multi_label = true;
  EXPECT_NE(message(multi, loss_of(LossKind::BinaryCrossentropy), {-1, 4}).find("drop multi_label"), std::string::npos);
  MetricSpec id = spec_of(MetricKind::Recall);
  id.class_id = 4;
  EXPECT_NE(message(id, loss_of(LossKind::BinaryCrossentropy), {4}).find("class_id 4 is not a unit"), std::string::npos);
}
