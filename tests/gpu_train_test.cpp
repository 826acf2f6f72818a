// Training on the GPU ends where the same training on the CPU ends: N optimizer steps on the same
// batches from the same initial parameters, compared step by step (loss) and at the end (every
// parameter and every optimizer slot). Covers a fused cuDNN stack, a generic layer, Adam with
// global_clipnorm, SGD with Nesterov momentum and clipnorm, RMSprop (centered), and masked batches
// shaped as length bucketing makes them (each batch trimmed to its longest sequence, so the padded
// length changes from step to step; the CPU runs them on its oneDNN stack). Tolerances: each
// step's loss within 1e-4 relative; final parameters within 2e-4 + 2e-3 |cpu| (after 25 steps the
// FP32 rounding differences of the two backends compound). Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdio>

#include "gpu_helpers.h"
#include "optimizer_variants.h"

namespace rnntrain {
namespace {

using namespace rnntrain::testing;

struct TrainCase {
  std::string name;
  std::string layers;
  OptimizerKind opt;
  bool masked;
  bool bucketed = false;  // T changes from step to step and the longest sequence fills it
};

void PrintTo(const TrainCase& c, std::ostream* os) { *os << c.name; }

class TrainParity : public ::testing::TestWithParam<TrainCase> {};

TEST_P(TrainParity, NStepsOnTheGpuEndNearTheCpu) {
  SKIP_WITHOUT_GPU();
  const TrainCase& c = GetParam();
  Config cfg = config_of(c.bucketed ? "[null, 4]" : "[9, 4]", c.layers, c.name);
  cfg.train.optimizer.kind = c.opt;
  switch (c.opt) {
    case OptimizerKind::Adam:
      cfg.train.optimizer.learning_rate = 3e-3;
      cfg.train.optimizer.global_clipnorm = 0.5;
      break;
    case OptimizerKind::SGD:
      cfg.train.optimizer.learning_rate = 0.05;
      cfg.train.optimizer.momentum = 0.9;
      cfg.train.optimizer.nesterov = true;
      cfg.train.optimizer.clipnorm = 0.1;
      break;
    default:
      cfg.train.optimizer.learning_rate = 1e-3;
      cfg.train.optimizer.centered = true;
      cfg.train.optimizer.momentum = 0.5;
  }
  const Params init = random_params(cfg.model, 21, 0.3);
  Config cpu_cfg = cfg, gpu_cfg = cfg;
  cpu_cfg.device = Device::Cpu;
  gpu_cfg.device = Device::Cuda;
  Rng r1(5), r2(5);
  auto cpu = make_engine(cpu_cfg, init, r1);
  auto gpu = make_engine(gpu_cfg, init, r2);

  const int steps = 25;
  double worst_loss_rel = 0.0;
  std::string curve;
  for (int s = 0; s < steps; ++s) {
    const int32_t T = c.bucketed ? std::vector<int32_t>{9, 5, 7}[s % 3] : 9;
    const std::vector<int32_t> lens = !c.masked   ? std::vector<int32_t>{}
                                      : c.bucketed ? std::vector<int32_t>{T - 1, T, T - 2, 1, T, 0}
                                                   : std::vector<int32_t>{9, 4, 7, 1, 9, 2};
    const Batch b = random_batch(cfg, 6, T, 1000 + s % 5, lens);
    const double lc = cpu->train_step(b, cfg.train.optimizer.learning_rate, {}).mean();
    const double lg = gpu->train_step(b, cfg.train.optimizer.learning_rate, {}).mean();
    const double rel = std::fabs(lg - lc) / std::max(1e-12, std::fabs(lc));
    worst_loss_rel = std::max(worst_loss_rel, rel);
    EXPECT_LE(rel, 1e-4) << "step " << s + 1 << ": gpu loss " << lg << ", cpu loss " << lc;
    if (s % 6 == 0 || s == steps - 1) curve += " " + std::to_string(lg);
  }
  EXPECT_EQ(gpu->optimizer().iterations(), steps);
  double worst_param = 0.0;
  const std::vector<Param*> pc = cpu->host_params().all(), pg = gpu->host_params().all();
  for (size_t i = 0; i < pc.size(); ++i)
    worst_param = std::max(worst_param, expect_near_all(pg[i]->value, pc[i]->value, 2e-4, 2e-3,
                                                        "parameter " + std::to_string(i) + " " + pc[i]->name));
  const auto sc = cpu->optimizer().slots(), sg = gpu->optimizer().slots();
  ASSERT_EQ(sc.size(), sg.size()) << "the same optimizer slots";
  for (size_t i = 0; i < sc.size(); ++i) {
    EXPECT_EQ(sg[i].name, sc[i].name);
    expect_near_all(*sg[i].tensor, *sc[i].tensor, 1e-4, 2e-3, "slot " + sc[i].name);
  }
  std::printf("train case=%s steps=%d loss_curve=[%s ] worst_loss_rel=%.3g worst_param_abs=%.3g\n", c.name.c_str(),
              steps, curve.c_str(), worst_loss_rel, worst_param);
}

INSTANTIATE_TEST_SUITE_P(
    All, TrainParity,
    ::testing::Values(
        TrainCase{"lstm2_stack_adam",
                  "[{type: LSTM, units: 16, return_sequences: true}, {type: LSTM, units: 16}, {type: Dense, units: 3}]",
                  OptimizerKind::Adam, false},
        TrainCase{"bigru_stack_sgd_masked",
                  "[{type: Bidirectional, layer: {type: GRU, units: 8, return_sequences: true}}, {type: Bidirectional, "
                  "layer: {type: GRU, units: 8, return_sequences: true}}, {type: TimeDistributed, layer: {type: Dense, "
                  "units: 2}}]",
                  OptimizerKind::SGD, true},
        TrainCase{"lstm2_bucketed_masked_adam",
                  "[{type: LSTM, units: 16, return_sequences: true}, {type: LSTM, units: 16}, {type: Dense, units: 3}]",
                  OptimizerKind::Adam, true, true},
        TrainCase{"generic_and_stack_rmsprop",
                  "[{type: GRU, units: 12, reset_after: false, return_sequences: true}, {type: LSTM, units: 12}, "
                  "{type: Dense, units: 1}]",
                  OptimizerKind::RMSprop, true}),
    [](const auto& info) { return info.param.name; });

// Every optimizer descriptor, in each of its slot layouts (optimizer_variants.h: defaults, flags, every key
// off its default), runs the same update on the GPU (its kernel) as on the CPU: 8 steps of an LSTM stack
// and a Dense layer, with global_clipnorm, then parameters and slots compared as above.
TEST(TrainParity, EveryOptimizerVariantEndsNearTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const auto& [name, o] : optimizer_variants()) {
    SCOPED_TRACE(name);
    Config cfg = config_of("[9, 4]", "[{type: LSTM, units: 8, return_sequences: true}, {type: LSTM, units: 8}, "
                           "{type: Dense, units: 2}]", "opt_" + name);
    cfg.train.optimizer = o;
    cfg.train.optimizer.global_clipnorm = 1.0;
    auto [cpu, gpu] = engines_on_both(cfg, random_params(cfg.model, 9, 0.3), 5);
    for (int s = 0; s < 8; ++s) {
      const Batch b = random_batch(cfg, 6, 9, 300 + s);
      const double lc = cpu->train_step(b, o.learning_rate, {}).mean();
      const double lg = gpu->train_step(b, o.learning_rate, {}).mean();
      EXPECT_LE(std::fabs(lg - lc), 1e-4 * std::max(1e-12, std::fabs(lc))) << "step " << s + 1;
    }
    const std::vector<Param*> pc = cpu->host_params().all(), pg = gpu->host_params().all();
    for (size_t i = 0; i < pc.size(); ++i)
      expect_near_all(pg[i]->value, pc[i]->value, 2e-4, 2e-3, "parameter " + pc[i]->name);
    const auto sc = cpu->optimizer().slots(), sg = gpu->optimizer().slots();
    ASSERT_EQ(sc.size(), sg.size()) << "the same optimizer slots";
    if (!with_optimizer(o.kind, [](auto d) { return PerTensor<decltype(d)>::value; }))  // their own layouts
      ASSERT_EQ(sc.size(), pc.size() * optimizer_slot_kinds(o).n);
    for (size_t i = 0; i < sc.size(); ++i) {
      EXPECT_EQ(sg[i].name, sc[i].name);
      expect_near_all(*sg[i].tensor, *sc[i].tensor, 1e-4, 2e-3, "slot " + sc[i].name);
    }
  }
}

// Every loss descriptor, at its defaults and with every setting off them (optimizer_variants.h), is
// computed by the GPU's kernel for it as by the CPU: 6 SGD steps of a GRU and a Dense layer on every
// step of masked sequences (lengths 9, 4, 1 and 7: masked positions count neither in the loss nor in
// the gradient), targets of the kind the loss takes; losses per step and final parameters compared.
// Every loss variant, with loss weights per sample and per timestep on most steps.
TEST(TrainParity, EveryLossVariantEndsNearTheCpu) {
  SKIP_WITHOUT_GPU();
  constexpr int64_t K = 3;
  for (const auto& [name, l] : loss_variants()) {
    SCOPED_TRACE(name);
    const Targets targets = loss_info(l.kind).targets;
    const char* activation = l.from_logits || targets == Targets::Values ? "linear"
                             : targets == Targets::Probabilities       ? "sigmoid"
                                                                       : "softmax";
    Config cfg = config_of("[9, 4]", std::string("[{type: GRU, units: 8, return_sequences: true}, {type: Dense, units: ") +
                                         std::to_string(K) + ", activation: " + activation + "}]",
                           "loss_" + name);
    cfg.train.loss = l;
    cfg.train.optimizer.kind = OptimizerKind::SGD;
    auto [cpu, gpu] = engines_on_both(cfg, random_params(cfg.model, 9, 0.3), 5);
    for (int s = 0; s < 6; ++s) {
      Batch b = random_batch(cfg, 4, 9, 500 + s, {9, 4, 1, 7});
      Rng rng(700 + s);
      if (targets == Targets::Probabilities)
        for (float& y : b.y.data) y = static_cast<float>(rng.below(5)) / 4.0f;  // 0, 0.25, ..., 1
      if (targets == Targets::Distributions)
        for (int64_t r = 0; r < b.y.numel() / K; ++r) {
          const auto hot = static_cast<int64_t>(rng.below(K));
          for (int64_t j = 0; j < K; ++j) b.y[r * K + j] = j == hot ? 1.0f : 0.0f;
        }
      // Loss weights (sample_weight, class_weight): none, then per sample and per timestep in turn,
      // so that weighted steps are captured and replayed as graphs.
      if (s > 0) {
        b.w = s % 2 ? Tensor({4}) : Tensor({4, 9});
        for (float& w : b.w.data) w = static_cast<float>(rng.below(9)) / 4.0f;  // 0 .. 2
      }
      const double lc = cpu->train_step(b, 0.05, {}).mean();
      const double lg = gpu->train_step(b, 0.05, {}).mean();
      EXPECT_TRUE(std::isfinite(lc)) << "step " << s + 1;
      EXPECT_LE(std::fabs(lg - lc), 1e-4 * std::max(1e-12, std::fabs(lc))) << "step " << s + 1;
      if (s == 5) {
        const double ec = cpu->eval_step(b, {}).mean(), eg = gpu->eval_step(b, {}).mean();
        EXPECT_LE(std::fabs(eg - ec), 1e-4 * std::max(1e-12, std::fabs(ec))) << "weighted evaluation";
      }
    }
    const std::vector<Param*> pc = cpu->host_params().all(), pg = gpu->host_params().all();
    for (size_t i = 0; i < pc.size(); ++i)
      expect_near_all(pg[i]->value, pc[i]->value, 2e-4, 2e-3, "parameter " + pc[i]->name);
  }
}

// Keras' regularizers and constraints on every kind of weight and stage (a fused cuDNN LSTM stack, a
// generic GRU, a Bidirectional stack, Dense, Embedding), and activity regularizers on the outputs of
// each kind of stage (masked steps included), train on the GPU as on the CPU: the penalty in each step's loss and
// in evaluation, the weights' gradient before clipping (Adam with clipnorm), after the loss scale is
// taken off (fp16 stacks: looser tolerances, as gpu_precision_test.cpp), in replayed steps.
TEST(TrainParity, RegularizersTrainAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  const std::string regs = "kernel_regularizer: {l1: 0.002}, recurrent_regularizer: {l2: 0.01}, "
                           "bias_regularizer: {l1: 0.001, l2: 0.003}";
  const std::pair<std::string, Config> models[] = {
      {"features", config_of("[9, 4]", "[{type: LSTM, units: 8, return_sequences: true, kernel_constraint: {type: "
                             "max_norm, max_value: 0.5}, " + regs + "}, {type: LSTM, "
                             "units: 8, return_sequences: true, activity_regularizer: {l2: 0.05}, " + regs + "}, {type: "
                             "GRU, units: 6, reset_after: false, return_sequences: true, activity_regularizer: {l1: 0.01},"
                             " recurrent_constraint: {type: unit_norm, axis: 1},"
                             " " + regs + "}, {type: Bidirectional, layer: {type: GRU, units: 4, activity_regularizer: "
                             "{l2: 0.1}, bias_constraint: non_neg, " + regs + "}}, {type: Dense, units: 2, kernel_regularizer: "
                             "l2, bias_regularizer: l1, activity_regularizer: {l2: 0.2}, kernel_constraint: {type: "
                             "min_max_norm, min_value: 0.2, max_value: 0.6, rate: 0.5}}]", "regs_features")},
      {"tokens", config_of("[9]", "[{type: Embedding, input_dim: 12, output_dim: 5, embeddings_regularizer: {l2: 0.01},"
                           " activity_regularizer: {l2: 0.05}, embeddings_constraint: {type: max_norm, max_value: 0.4, "
                           "axis: 1}}, {type: LSTM, units: 8, " + regs + "}, {type: Dense, "
                           "units: 2}]", "regs_tokens")}};
  for (const auto& [model, base] : models) {
    for (const char* variant : {"sgd", "adam_clipnorm", "sgd_fp16"}) {
      SCOPED_TRACE(model + " " + variant);
      Config cfg = base;
      cfg.train.optimizer.kind = std::string(variant) == "adam_clipnorm" ? OptimizerKind::Adam : OptimizerKind::SGD;
      if (cfg.train.optimizer.kind == OptimizerKind::Adam) cfg.train.optimizer.clipnorm = 0.05;
      const bool half = std::string(variant) == "sgd_fp16";
      const double lr = cfg.train.optimizer.kind == OptimizerKind::Adam ? 3e-3 : 0.2;
      Config gpu_cfg = cfg;
      if (half) gpu_cfg.plan.precision = Precision::Fp16;
      const Params init = random_params(cfg.model, 9, 0.3);
      Config cpu_cfg = cfg;
      cpu_cfg.device = Device::Cpu, gpu_cfg.device = Device::Cuda;
      Rng r1(5), r2(5);
      auto cpu = make_engine(cpu_cfg, init, r1);
      auto gpu = make_engine(gpu_cfg, init, r2);
      const double tol = half ? 2e-2 : 1e-4;
      double penalty = 0.0;
      for (int s = 0; s < 8; ++s) {
        const Batch b = random_batch(cfg, 6, 9, 300 + s % 2, model == "features" ? std::vector<int32_t>{9, 4, 7, 1, 9, 2}
                                                                                    : std::vector<int32_t>{});
        const LossValue lc = cpu->train_step(b, lr, {}), lg = gpu->train_step(b, lr, {});
        EXPECT_GT(lc.penalty, 0.0);
        EXPECT_LE(std::fabs(lg.penalty - lc.penalty), tol * lc.penalty) << "step " << s + 1;
        EXPECT_LE(std::fabs(lg.mean() - lc.mean()), tol * std::fabs(lc.mean())) << "step " << s + 1;
        penalty = lg.penalty;
      }
      const Batch b = random_batch(cfg, 6, 9, 400, model == "features" ? std::vector<int32_t>{3, 9, 9, 5, 8, 9}
                                                                       : std::vector<int32_t>{});
      const LossValue ec = cpu->eval_step(b, {}), eg = gpu->eval_step(b, {});
      EXPECT_LE(std::fabs(eg.penalty - ec.penalty), tol * ec.penalty) << "evaluation";
      EXPECT_LE(std::fabs(eg.mean() - ec.mean()), tol * std::fabs(ec.mean())) << "evaluation";
      const std::vector<Param*> pc = cpu->host_params().all(), pg = gpu->host_params().all();
      double worst = 0.0;
      for (size_t i = 0; i < pc.size(); ++i)
        worst = std::max(worst, expect_near_all(pg[i]->value, pc[i]->value, half ? 2e-2 : 2e-4, half ? 2e-2 : 2e-3,
                                                "parameter " + pc[i]->name));
      std::printf("regularizers case=%s/%s penalty=%.5g eval_penalty=%.5g worst_param_abs=%.3g\n", model.c_str(),
                  variant, penalty, eg.penalty, worst);
    }
  }
}

// A step whose update overflows the weights (finite loss, targets of 1e10, SGD at lr 1e30) is flagged
// by both engines, queued and replayed steps included, so that the trainer stops before saving it.
TEST(TrainNonFinite, AnUpdateThatOverflowsIsFlaggedOnBothEngines) {
  SKIP_WITHOUT_GPU();
  Config cfg = config_of("[9, 4]", "[{type: LSTM, units: 16}, {type: Dense, units: 3}]", "overflow");
  cfg.train.optimizer.kind = OptimizerKind::SGD;
  const Params init = random_params(cfg.model, 3, 0.3);
  for (Device d : {Device::Cpu, Device::Cuda}) {
    Config c = cfg;
    c.device = d;
    Rng rng(5);
    auto engine = make_engine(c, init, rng);
    for (int s = 0; s < 6; ++s) engine->enqueue_train_step(random_batch(cfg, 6, 9, 100), 1e-3, {});
    Batch bad = random_batch(cfg, 6, 9, 100);
    for (float& y : bad.y.data) y = 1e10f;
    engine->enqueue_train_step(bad, 1e30, {});
    const std::vector<LossValue> got = engine->collect_losses(true);
    ASSERT_EQ(got.size(), 7u);
    for (int s = 0; s < 6; ++s) EXPECT_TRUE(got[s].params_finite) << "step " << s + 1 << " on " << engine->device_name();
    EXPECT_TRUE(std::isfinite(got[6].sum)) << "the loss of the overflowing step is finite";
    EXPECT_FALSE(got[6].params_finite) << engine->device_name();
    EXPECT_NE(engine->host_params().first_nonfinite(), "");
    std::printf("nonfinite case=%s flagged at step 7 of 7, first=%s\n", d == Device::Cpu ? "cpu" : "cuda",
                engine->host_params().first_nonfinite().c_str());
  }
}

}  // namespace
}  // namespace rnntrain
