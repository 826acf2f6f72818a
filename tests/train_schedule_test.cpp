// Learning-rate schedules: values at chosen steps from the Keras formulas written out here, the
// per-epoch step decay, ReduceLROnPlateau's patience/cooldown/min_lr logic, and state round trips.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "train/callbacks.h"
#include "train/schedule.h"

using namespace rnntrain;

namespace {

ScheduleSpec spec_of(ScheduleKind kind) {
  ScheduleSpec s;
  s.kind = kind;
  return s;
}

std::map<std::string, double> logs(double val_loss) { return {{"loss", 1.0}, {"val_loss", val_loss}}; }

}  // namespace

TEST(Schedule, ConstantIgnoresStepsAndEpochs) {
  Schedule s(spec_of(ScheduleKind::Constant), 0.01);
  EXPECT_EQ(s.lr(0), 0.01);
  EXPECT_EQ(s.lr(123456), 0.01);
  EXPECT_EQ(s.on_epoch_end(0, logs(1.0)), "");
  EXPECT_EQ(s.lr(7), 0.01);
}

TEST(Schedule, ExponentialDecaySmoothAndStaircase) {
  ScheduleSpec e = spec_of(ScheduleKind::Exponential);
  e.decay_steps = 10;
  e.decay_rate = 0.5;
  Schedule smooth(e, 0.1);
  for (int64_t step : {0, 5, 10, 25, 1000})
    EXPECT_NEAR(smooth.lr(step), 0.1 * std::pow(0.5, step / 10.0), 1e-15) << "step " << step;
  e.staircase = true;
  Schedule stairs(e, 0.1);
  EXPECT_DOUBLE_EQ(stairs.lr(9), 0.1);
  EXPECT_DOUBLE_EQ(stairs.lr(10), 0.05);
  EXPECT_DOUBLE_EQ(stairs.lr(29), 0.025);
}

TEST(Schedule, CosineWithWarmup) {
  ScheduleSpec c = spec_of(ScheduleKind::Cosine);
  c.warmup_steps = 10;
  c.decay_steps = 100;
  c.alpha = 0.1;
  Schedule s(c, 0.2);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.0);         // warmup starts from 0 (Keras initial_learning_rate = 0)
  EXPECT_NEAR(s.lr(5), 0.1, 1e-15);       // linear halfway
  EXPECT_NEAR(s.lr(10), 0.2, 1e-15);      // the target at the end of warmup
  const double half = 0.2 * ((1 - 0.1) * 0.5 * (1 + std::cos(std::numbers::pi * 0.5)) + 0.1);
  EXPECT_NEAR(s.lr(60), half, 1e-15);     // halfway through the decay
  EXPECT_NEAR(s.lr(110), 0.02, 1e-15);    // alpha * lr at the end
  EXPECT_NEAR(s.lr(5000), 0.02, 1e-15);   // constant after
  c.warmup_steps = 0;
  Schedule nowarm(c, 0.2);
  EXPECT_NEAR(nowarm.lr(0), 0.2, 1e-15);
  EXPECT_NEAR(nowarm.lr(25), 0.2 * (0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 0.25)) + 0.1), 1e-15);
}

TEST(Schedule, PolynomialHeldAtTheEndOrCycling) {
  ScheduleSpec p = spec_of(ScheduleKind::Polynomial);
  p.decay_steps = 10, p.end_learning_rate = 0.01, p.power = 2.0;
  Schedule held(p, 0.1);
  EXPECT_DOUBLE_EQ(held.lr(0), 0.1);
  EXPECT_NEAR(held.lr(4), 0.09 * 0.36 + 0.01, 1e-15);
  EXPECT_NEAR(held.lr(10), 0.01, 1e-15);
  EXPECT_NEAR(held.lr(50), 0.01, 1e-15);
  p.cycle = true;  // past the end the decay stretches to the next multiple of decay_steps: 30 at step 25
  Schedule cycling(p, 0.1);
  EXPECT_DOUBLE_EQ(cycling.lr(0), 0.1);
  EXPECT_NEAR(cycling.lr(25), 0.09 * std::pow(1 - 25.0 / 30, 2) + 0.01, 1e-15);
  EXPECT_NEAR(cycling.lr(20), 0.01, 1e-15);
}

TEST(Schedule, InverseTimeSmoothAndStaircase) {
  ScheduleSpec i = spec_of(ScheduleKind::InverseTime);
  i.decay_steps = 4, i.decay_rate = 0.5;
  Schedule smooth(i, 0.1);
  EXPECT_NEAR(smooth.lr(6), 0.1 / (1 + 0.5 * 1.5), 1e-15);
  i.staircase = true;
  Schedule stairs(i, 0.1);
  EXPECT_NEAR(stairs.lr(6), 0.1 / 1.5, 1e-15);
  EXPECT_NEAR(stairs.lr(8), 0.1 / 2, 1e-15);
}

TEST(Schedule, PiecewiseConstantIncludesEachBoundaryInThePieceBeforeIt) {
  ScheduleSpec p = spec_of(ScheduleKind::PiecewiseConstant);
  p.boundaries = {3, 7};
  p.values = {0.3, 0.2, 0.1};
  Schedule s(p, 99.0);  // the values are the rates: the optimizer's learning_rate is not used
  EXPECT_EQ(s.lr(0), 0.3);
  EXPECT_EQ(s.lr(3), 0.3);
  EXPECT_EQ(s.lr(4), 0.2);
  EXPECT_EQ(s.lr(7), 0.2);
  EXPECT_EQ(s.lr(8), 0.1);
  p.values.pop_back();
  EXPECT_THROW(Schedule(p, 0.1), ConfigError);
}

// Periods of 10, 20, 40 steps (t_mul 2), each peak half the one before (m_mul 0.5); and t_mul 1.
TEST(Schedule, CosineRestartsPeriodsGrowAndPeaksShrink) {
  ScheduleSpec c = spec_of(ScheduleKind::CosineRestarts);
  c.decay_steps = 10, c.t_mul = 2.0, c.m_mul = 0.5, c.alpha = 0.1;
  Schedule s(c, 0.2);
  auto at = [&](double peak, double fraction) {
    return 0.2 * (0.9 * 0.5 * peak * (1 + std::cos(std::numbers::pi * fraction)) + 0.1);
  };
  EXPECT_NEAR(s.lr(0), at(1, 0), 1e-15);
  EXPECT_NEAR(s.lr(5), at(1, 0.5), 1e-15);
  EXPECT_NEAR(s.lr(10), at(0.5, 0), 1e-12);   // the first restart
  EXPECT_NEAR(s.lr(20), at(0.5, 0.5), 1e-12);
  EXPECT_NEAR(s.lr(30), at(0.25, 0), 1e-12);  // the second, after 10 + 20 steps
  EXPECT_NEAR(s.lr(50), at(0.25, 0.5), 1e-12);
  c.t_mul = 1.0;
  Schedule same(c, 0.2);
  EXPECT_NEAR(same.lr(25), at(0.25, 0.5), 1e-12);
}

TEST(Schedule, DecayingSchedulesNeedDecaySteps) {
  for (ScheduleKind k : {ScheduleKind::Exponential, ScheduleKind::Cosine, ScheduleKind::Polynomial,
                         ScheduleKind::InverseTime, ScheduleKind::CosineRestarts})
    EXPECT_THROW(Schedule(spec_of(k), 0.1), ConfigError);
  ScheduleSpec p = spec_of(ScheduleKind::ReduceOnPlateau);
  p.factor = 1.5;
  EXPECT_THROW(Schedule(p, 0.1), ConfigError);
}

TEST(Schedule, StepDecayPerEpoch) {
  ScheduleSpec st = spec_of(ScheduleKind::Step);
  st.step_size = 2;
  st.gamma = 0.5;
  Schedule s(st, 1.0);
  // Epoch e runs at gamma^floor(e / 2): epochs 0,1 -> 1; 2,3 -> 0.5; 4 -> 0.25.
  const double want[] = {1.0, 1.0, 0.5, 0.5, 0.25};
  for (int64_t epoch = 0; epoch < 5; ++epoch) {
    EXPECT_DOUBLE_EQ(s.lr(epoch * 100), want[epoch]) << "epoch " << epoch;
    const std::string msg = s.on_epoch_end(epoch, logs(1.0));
    EXPECT_EQ(msg.empty(), epoch % 2 == 0) << "epoch " << epoch << ": '" << msg << "'";
  }
  // Resuming from the state continues with the same rate.
  Schedule resumed(st, 1.0);
  resumed.set_state(s.state());
  EXPECT_DOUBLE_EQ(resumed.lr(0), 0.25);
}

TEST(Schedule, PlateauPatienceAndMinDelta) {
  ScheduleSpec p = spec_of(ScheduleKind::ReduceOnPlateau);
  p.patience = 2;
  p.factor = 0.5;
  p.min_delta = 0.01;
  Schedule s(p, 0.1);
  // 1.0 best; 0.995 is not better by min_delta (wait 1); 0.999 (wait 2 -> reduce to 0.05);
  // 0.98 improves on 1.0 by > 0.01 (best, wait 0); 0.975 (wait 1); 0.98 (wait 2 -> 0.025).
  const double vals[] = {1.0, 0.995, 0.999, 0.98, 0.975, 0.98};
  const double lr_after[] = {0.1, 0.1, 0.05, 0.05, 0.05, 0.025};
  for (int e = 0; e < 6; ++e) {
    const std::string msg = s.on_epoch_end(e, logs(vals[e]));
    EXPECT_NEAR(s.lr(0), lr_after[e], 1e-15) << "after epoch " << e;
    const bool reduced = e == 2 || e == 5;
    EXPECT_EQ(!msg.empty(), reduced) << "epoch " << e << ": '" << msg << "'";
    if (reduced) {
      EXPECT_NE(msg.find("val_loss"), std::string::npos) << msg;
    }
  }
}

TEST(Schedule, PlateauCooldownAndMinLr) {
  ScheduleSpec p = spec_of(ScheduleKind::ReduceOnPlateau);
  p.patience = 1;
  p.factor = 0.1;
  p.cooldown = 2;
  p.min_lr = 0.005;
  Schedule s(p, 1.0);
  // Never improving after epoch 0. Epoch 1: wait 1 -> reduce to 0.1, cooldown 2. Epoch 2: in
  // cooldown (2 -> 1), no counting. Epoch 3: the counter reaches 0 first, so it counts again:
  // reduce to 0.01, cooldown 2. Epoch 4 cooldown; epoch 5: reduce to max(0.001, 0.005) = 0.005.
  // From epoch 7 on the rate is at min_lr: no further change and no message.
  const double lr_after[] = {1.0, 0.1, 0.1, 0.01, 0.01, 0.005, 0.005, 0.005, 0.005, 0.005, 0.005, 0.005};
  for (int e = 0; e < 12; ++e) {
    const std::string msg = s.on_epoch_end(e, logs(5.0));
    EXPECT_NEAR(s.lr(0), lr_after[e], 1e-12) << "after epoch " << e;
    EXPECT_EQ(!msg.empty(), e == 1 || e == 3 || e == 5) << "epoch " << e << ": '" << msg << "'";
  }
}

TEST(Schedule, PlateauStopsAtMinLrAsKerasFloat32) {
  // min_lr just below 0.25 (closer than float32 can tell): after 1 -> 0.5 -> 0.25 Keras compares
  // float32(0.25) > float32(min_lr), finds them equal and stops reducing, with no message.
  ScheduleSpec p = spec_of(ScheduleKind::ReduceOnPlateau);
  p.patience = 1;
  p.factor = 0.5;
  p.min_lr = 0.25 - 1e-12;
  Schedule s(p, 1.0);
  int messages = 0;
  for (int e = 0; e < 8; ++e) messages += !s.on_epoch_end(e, logs(2.0)).empty();
  EXPECT_EQ(messages, 2);
  EXPECT_EQ(s.lr(0), 0.25);
}

TEST(Schedule, PlateauMaximisesAccuracy) {
  ScheduleSpec p = spec_of(ScheduleKind::ReduceOnPlateau);
  p.monitor = "val_accuracy";
  p.patience = 1;
  p.factor = 0.5;
  p.min_delta = 0.0;
  Schedule s(p, 1.0);
  s.on_epoch_end(0, {{"val_accuracy", 0.5}});
  s.on_epoch_end(1, {{"val_accuracy", 0.6}});  // better (higher)
  EXPECT_EQ(s.lr(0), 1.0);
  s.on_epoch_end(2, {{"val_accuracy", 0.55}});  // worse
  EXPECT_EQ(s.lr(0), 0.5);
}

TEST(Schedule, PlateauWithoutTheMonitorDoesNothing) {
  ScheduleSpec p = spec_of(ScheduleKind::ReduceOnPlateau);
  p.patience = 0;
  Schedule s(p, 1.0);
  for (int e = 0; e < 3; ++e) EXPECT_EQ(s.on_epoch_end(e, {{"loss", 1.0 + e}}), "");
  EXPECT_EQ(s.lr(0), 1.0);
}

TEST(Schedule, PlateauStateRoundTripResumesExactly) {
  ScheduleSpec p = spec_of(ScheduleKind::ReduceOnPlateau);
  p.patience = 2;
  p.cooldown = 1;
  p.factor = 0.5;
  const double vals[] = {1.0, 0.9, 0.95, 0.96, 0.97, 0.98, 0.85, 0.99, 0.99, 0.99, 0.99};
  Schedule whole(p, 0.1), first(p, 0.1);
  for (int e = 0; e < 4; ++e) {
    whole.on_epoch_end(e, logs(vals[e]));
    first.on_epoch_end(e, logs(vals[e]));
  }
  Schedule second(p, 0.1);
  second.set_state(first.state());
  for (int e = 4; e < 11; ++e) {
    const std::string a = whole.on_epoch_end(e, logs(vals[e]));
    const std::string b = second.on_epoch_end(e, logs(vals[e]));
    EXPECT_EQ(a, b) << "epoch " << e;
    EXPECT_EQ(whole.lr(0), second.lr(0)) << "epoch " << e;
  }
  EXPECT_EQ(whole.state(), second.state());
  EXPECT_LT(whole.lr(0), 0.1);  // the sequence did reduce
  EXPECT_THROW(second.set_state({1.0, 2.0}), DataError);
}

TEST(Schedule, PlateauDirectionAgreesWithEarlyStoppingForEveryMonitor) {
  // reduce_on_plateau, early_stopping and the best checkpoint share one "auto" rule (monitor_is_max):
  // a monitor that rises every epoch improves in max mode and stalls in min mode. An AUC rises,
  // though Keras' own ReduceLROnPlateau (the "acc" rule) would minimise it.
  const std::vector<MetricSpec> metrics = {{MetricKind::Accuracy, "accuracy"}, {MetricKind::AUC, "auc"},
                                           {MetricKind::MAE, "mae"}, {MetricKind::Perplexity, "perplexity"},
                                           {MetricKind::Recall, "recall"}};
  for (const std::string monitor : {"val_loss", "loss", "val_accuracy", "val_auc", "auc", "val_recall", "val_mae",
                                    "perplexity"}) {
    for (MonitorMode mode : {MonitorMode::Auto, MonitorMode::Min, MonitorMode::Max}) {
      ScheduleSpec p = spec_of(ScheduleKind::ReduceOnPlateau);
      p.monitor = monitor;
      p.mode = mode;
      p.patience = 1;
      p.factor = 0.5;
      p.min_delta = 0.0;
      Schedule s(p, 1.0, metrics);
      for (int e = 0; e < 3; ++e) s.on_epoch_end(e, {{monitor, 0.1 * (e + 1)}});
      const bool schedule_max = s.lr(0) == 1.0;  // never reduced: rising counted as improvement
      EXPECT_EQ(schedule_max, monitor_is_max(monitor, mode, metrics))
          << monitor << ": the schedule " << (schedule_max ? "maximises" : "minimises") << " (lr " << s.lr(0)
          << ") but early stopping would " << (schedule_max ? "minimise" : "maximise");
    }
  }
  EXPECT_TRUE(monitor_is_max("val_auc", MonitorMode::Auto, metrics));
}
