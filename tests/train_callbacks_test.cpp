// EarlyStopping and the best-checkpoint tracker against Keras 3's rules, and the history files.
#include <gtest/gtest.h>

#include "train/callbacks.h"

using namespace rnntrain;

namespace {

Params one_param(float v) {
  Params p;
  p.layers.push_back({"dense", {{"kernel", Tensor({1}, v), Tensor({1})}}});
  return p;
}

// Runs EarlyStopping over a val_loss curve; returns the epoch it stopped at (-1: never), and the
// weight it would restore (the param holds the epoch number).
std::pair<int, float> run(EarlyStoppingSpec spec, const std::vector<double>& curve) {
  EarlyStopping es(spec, {MetricSpec{MetricKind::Accuracy, "accuracy"}});
  for (size_t e = 0; e < curve.size(); ++e) {
    Params p = one_param(static_cast<float>(e));
    if (es.on_epoch_end(static_cast<int64_t>(e), {{"val_loss", curve[e]}, {"val_accuracy", -curve[e]}}, p))
      return {static_cast<int>(e), es.best_weights() ? (*es.best_weights())[0][0] : -1.0f};
  }
  return {-1, es.best_weights() ? (*es.best_weights())[0][0] : -1.0f};
}

TEST(EarlyStopping, StopsAfterPatienceEpochsWithoutImprovement) {
  EarlyStoppingSpec s;
  s.patience = 2;
  EXPECT_EQ(run(s, {1.0, 0.5, 0.6, 0.7, 0.4}).first, 3);  // best at 1; epochs 2 and 3 do not improve
  EXPECT_EQ(run(s, {1.0, 0.5, 0.6, 0.4, 0.45, 0.3}).first, -1);
}

TEST(EarlyStopping, MinDeltaAndMaxMode) {
  EarlyStoppingSpec s;
  s.patience = 1;
  s.min_delta = 0.1;
  EXPECT_EQ(run(s, {1.0, 0.95, 0.5}).first, 1);  // 0.95 is not 0.1 better than 1.0
  EarlyStoppingSpec m;
  m.monitor = "val_accuracy";  // auto mode: maximise (the test feeds -val_loss)
  m.patience = 1;
  EXPECT_EQ(run(m, {1.0, 0.5, 0.6}).first, 2);
}

TEST(EarlyStopping, AnImprovingEpochNeverStopsEvenBelowTheBaseline) {
  EarlyStoppingSpec s;
  s.patience = 2;
  s.baseline = 0.0001;  // never beaten: the wait is not reset, but improving epochs do not stop
  EXPECT_EQ(run(s, {1.0, 0.5, 0.4, 0.45}).first, 3);
  EXPECT_EQ(run(s, {1.0, 0.5, 0.4, 0.3}).first, -1);
}

TEST(EarlyStopping, KeepsTheBestWeightsForRestoreEvenWithoutStopping) {
  EarlyStoppingSpec s;
  s.patience = 10;
  s.restore_best_weights = true;
  auto [stopped, w] = run(s, {1.0, 0.3, 0.5, 0.6});
  EXPECT_EQ(stopped, -1);
  EXPECT_EQ(w, 1.0f);  // the weights of epoch 1
}

TEST(EarlyStopping, StateRoundTripContinuesIdentically) {
  EarlyStoppingSpec s;
  s.patience = 2;
  EarlyStopping a(s, {}), b(s, {});
  Params p = one_param(0);
  a.on_epoch_end(0, {{"val_loss", 1.0}}, p);
  a.on_epoch_end(1, {{"val_loss", 1.5}}, p);
  b.set_state(a.state());
  EXPECT_EQ(a.on_epoch_end(2, {{"val_loss", 1.2}}, p), b.on_epoch_end(2, {{"val_loss", 1.2}}, p));
  EXPECT_TRUE(b.stopped());
}

TEST(BestTracker, WritesOnStrictImprovementOnly) {
  BestTracker t("val_loss", MonitorMode::Auto, {});
  EXPECT_TRUE(t.on_epoch_end({{"val_loss", 1.0}}));
  EXPECT_FALSE(t.on_epoch_end({{"val_loss", 1.0}}));
  EXPECT_TRUE(t.on_epoch_end({{"val_loss", 0.9}}));
  EXPECT_FALSE(t.on_epoch_end({{"loss", 0.1}}));  // monitor missing: nothing
}

// The user trial's curve: val_auc 0.9355, 0.9670, 0.9647 with mode auto. Keras 3's EarlyStopping and
// ModelCheckpoint maximise an AUC (its _direction is "up"), so the best epoch is the second.
TEST(MonitorMode, AutoFollowsTheMetricsDirectionAsKeras3) {
  const std::vector<MetricSpec> metrics = {{MetricKind::AUC, "auc"}, {MetricKind::Precision, "prec"},
                                           {MetricKind::RMSE, "rmse"}, {MetricKind::R2Score, "r2_score"},
                                           {MetricKind::MAE, "mae"}, {MetricKind::F1Score, "f1_score"}};
  EarlyStoppingSpec s;
  s.monitor = "val_auc";
  s.patience = 5;
  s.restore_best_weights = true;
  EarlyStopping es(s, metrics);
  BestTracker best("val_auc", MonitorMode::Auto, metrics);
  int written = -1;
  const double auc[] = {0.9355, 0.9670, 0.9647};
  for (int e = 0; e < 3; ++e) {
    Params p = one_param(static_cast<float>(e));
    es.on_epoch_end(e, {{"val_auc", auc[e]}}, p);
    if (best.on_epoch_end({{"val_auc", auc[e]}})) written = e;
  }
  EXPECT_EQ(es.best_epoch(), 1);
  EXPECT_EQ((*es.best_weights())[0][0], 1.0f) << "restore_best_weights would restore epoch 0's weights";
  EXPECT_EQ(written, 1) << "best.h5 would hold epoch " << written;
  // Every direction by name, as Keras decides it: "loss" suffixes down, then the metric's own way,
  // whatever name it was given; min and max override.
  for (const auto& [monitor, up] : std::vector<std::pair<std::string, bool>>{
           {"val_loss", false}, {"loss", false}, {"auc", true}, {"val_prec", true}, {"val_rmse", false},
           {"r2_score", true}, {"val_mae", false}, {"val_f1_score", true}})
    EXPECT_EQ(monitor_is_max(monitor, MonitorMode::Auto, metrics), up) << monitor;
  EXPECT_FALSE(monitor_is_max("val_auc", MonitorMode::Min, metrics));
  EXPECT_TRUE(monitor_is_max("val_loss", MonitorMode::Max, metrics));
}

TEST(History, CsvHasKerasColumnsAndJsonRoundTrips) {
  History h;
  h.epochs.push_back({{"loss", 1.5}, {"val_loss", 2.0}, {"accuracy", 0.25}});
  h.epochs.push_back({{"loss", 1.0}, {"val_loss", 1.5}, {"accuracy", 0.5}});
  EXPECT_EQ(h.to_csv(), "epoch,accuracy,loss,val_loss\n0,0.25,1.5,2\n1,0.5,1,1.5\n");
  History back = History::from_json(h.to_json());
  ASSERT_EQ(back.epochs.size(), 2u);
  EXPECT_EQ(back.epochs[1].at("accuracy"), 0.5);
}

}  // namespace
