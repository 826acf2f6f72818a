// The CUDA engine's contract beyond the math: device selection (cuda refused with the reason where
// it cannot run, auto taking the GPU where it can), parameters surviving the trip to the cuDNN weight
// space and back bit for bit, errors a user can trigger (out of memory, a mask with a gap before a
// cuDNN stack, bad labels) naming what to change. The first test runs everywhere; the others skip
// without a GPU.
#include <gtest/gtest.h>

#include <cstdio>

#include "core/error.h"
#include "gpu_helpers.h"

namespace rnntrain {
namespace {

using namespace rnntrain::testing;

const char* kStacks =
    "[{type: Bidirectional, layer: {type: LSTM, units: 6, return_sequences: true}}, {type: Bidirectional, layer: "
    "{type: LSTM, units: 6, return_sequences: true}}, {type: GRU, units: 5, return_sequences: true}, {type: GRU, "
    "units: 5, return_sequences: true}, {type: SimpleRNN, units: 4, return_sequences: true}, {type: SimpleRNN, "
    "units: 4}, {type: Dense, units: 2}]";

TEST(CudaEngine, DeviceChoiceFollowsWhatIsAvailable) {
  Config cfg = config_of("[4, 3]", kStacks, "choice");
  const Params p = random_params(cfg.model, 1);
  Rng rng(1);
  const std::string why = gpu_unavailable_reason();
  cfg.device = Device::Cuda;
  if (!why.empty()) {
    try {
      make_engine(cfg, p, rng);
      FAIL() << "device: cuda was accepted although: " << why;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("device: cpu"), std::string::npos) << e.what();
    }
    cfg.device = Device::Auto;
    EXPECT_EQ(make_engine(cfg, p, rng)->device_name(), "cpu");
    return;
  }
  EXPECT_NE(make_engine(cfg, p, rng)->device_name().find("cuda"), std::string::npos);
  cfg.device = Device::Auto;
  EXPECT_NE(make_engine(cfg, p, rng)->device_name().find("cuda"), std::string::npos) << "auto takes the GPU";
  cfg.device = Device::Cpu;
  EXPECT_EQ(make_engine(cfg, p, rng)->device_name(), "cpu");
}

TEST(CudaEngine, ParametersRoundTripThroughTheCudnnWeightSpaceExactly) {
  SKIP_WITHOUT_GPU();
  Config cfg = config_of("[4, 3]", kStacks, "roundtrip");
  cfg.device = Device::Cuda;
  Params p = random_params(cfg.model, 2);
  Rng rng(1);
  auto gpu = make_engine(cfg, p, rng);
  Params& back = gpu->host_params();
  const std::vector<Param*> a = p.all(), b = back.all();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) expect_near_all(b[i]->value, a[i]->value, 0.0, 0.0, a[i]->name);
  // Changed on the host, uploaded, trained zero steps, downloaded: still exact.
  for (Param* q : b)
    for (float& v : q->value.data) v = -v;
  gpu->params_changed();
  Tensor pred;
  gpu->gradients(random_batch(cfg, 2, 4, 3), &pred, nullptr);  // downloads values and gradients
  for (size_t i = 0; i < a.size(); ++i) {
    Tensor neg = a[i]->value;
    for (float& v : neg.data) v = -v;
    expect_near_all(gpu->host_params().all()[i]->value, neg, 0.0, 0.0, a[i]->name + " after params_changed");
  }
}

// What a checkpoint holds (parameters, optimizer slots, iterations) restarts training where it was.
TEST(CudaEngine, RestartingFromParamsAndSlotsContinuesTheSameRun) {
  SKIP_WITHOUT_GPU();
  Config cfg = config_of("[6, 3]", "[{type: LSTM, units: 8, return_sequences: true}, {type: LSTM, units: 8}, "
                         "{type: Dense, units: 2}]", "restart");
  cfg.device = Device::Cuda;
  cfg.train.optimizer.kind = OptimizerKind::Adam;
  cfg.train.optimizer.amsgrad = true;
  Rng r1(1), r2(1);
  auto a = make_engine(cfg, random_params(cfg.model, 4), r1);
  for (int s = 0; s < 6; ++s) a->train_step(random_batch(cfg, 4, 6, 10 + s), 0.01, {});
  // "Save": parameters, slots, iterations.
  Params saved = a->host_params();
  std::vector<Tensor> slots;
  for (const NamedTensor& t : a->optimizer().slots()) slots.push_back(*t.tensor);
  // "Load" into a fresh engine.
  auto b = make_engine(cfg, random_params(cfg.model, 99), r2);
  b->host_params() = saved;
  const auto bs = b->optimizer().slots();
  ASSERT_EQ(bs.size(), slots.size());
  for (size_t i = 0; i < bs.size(); ++i) *bs[i].tensor = slots[i];
  b->optimizer().set_iterations(a->optimizer().iterations());
  b->params_changed();
  for (int s = 6; s < 10; ++s) {
    const Batch batch = random_batch(cfg, 4, 6, 10 + s);
    const double la = a->train_step(batch, 0.01, {}).mean(), lb = b->train_step(batch, 0.01, {}).mean();
    EXPECT_NEAR(lb, la, 1e-6 * std::fabs(la)) << "step " << s + 1;
  }
  const std::vector<Param*> pa = a->host_params().all(), pb = b->host_params().all();
  for (size_t i = 0; i < pa.size(); ++i) expect_near_all(pb[i]->value, pa[i]->value, 1e-6, 1e-5, pa[i]->name);
}

TEST(CudaEngine, OutOfMemoryNamesTheSizeAndSuggestsASmallerBatch) {
  SKIP_WITHOUT_GPU();
  // TimeDistributed(Dense(100000)) over 600000 steps: a 240 GB output, more than any single GPU has.
  Config cfg = config_of("[null, 1]", "[{type: TimeDistributed, layer: {type: Dense, units: 100000}}]", "oom");
  cfg.device = Device::Cuda;
  Rng rng(1);
  auto gpu = make_engine(cfg, random_params(cfg.model, 1), rng);
  Batch b;
  b.x = Tensor({1, 600000, 1}, 0.5f);
  try {
    gpu->predict(b);
    FAIL() << "a 240 GB output was allocated";
  } catch (const RuntimeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("out of memory"), std::string::npos) << m;
    EXPECT_NE(m.find("MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("batch_size"), std::string::npos) << m;
    std::printf("out-of-memory message: %s\n", m.c_str());
  }
}

TEST(CudaEngine, AMaskWithAGapBeforeACudnnStackIsADataError) {
  SKIP_WITHOUT_GPU();
  Config cfg = config_of("[5, 2]", "[{type: Masking, mask_value: 0.0}, {type: LSTM, units: 4}]", "gap");
  cfg.device = Device::Cuda;
  Rng rng(1);
  auto gpu = make_engine(cfg, random_params(cfg.model, 1), rng);
  Batch b = random_batch(cfg, 2, 5, 1);
  b.x[(1 * 5 + 2) * 2] = 0.0f, b.x[(1 * 5 + 2) * 2 + 1] = 0.0f;  // sample 1, step 2 masked, step 3 not
  try {
    gpu->predict(b);
    FAIL() << "a mask with a gap reached a cuDNN stack";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("right-padded"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sample 1"), std::string::npos) << e.what();
  }
}

// The same gap with a Conv1D between the Masking and the stack: Conv1D drops the mask (as Keras), the
// stack never sees it, and the batch trains as on the CPU.
TEST(CudaEngine, AMaskWithAGapThatAConv1DDropsTrainsAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  Config cfg = config_of("[5, 2]",
                         "[{type: Masking, mask_value: 0.0}, {type: Conv1D, filters: 3, kernel_size: 2, padding: same}, "
                         "{type: LSTM, units: 4}]",
                         "gap_dropped");
  cfg.device = Device::Cuda;
  Config cpu_cfg = cfg;
  cpu_cfg.device = Device::Cpu;
  const Params init = random_params(cfg.model, 1);
  Rng r1(1), r2(1);
  auto gpu = make_engine(cfg, init, r1);
  auto cpu = make_engine(cpu_cfg, init, r2);
  Batch b = random_batch(cfg, 2, 5, 1);
  b.x[(1 * 5 + 2) * 2] = 0.0f, b.x[(1 * 5 + 2) * 2 + 1] = 0.0f;  // sample 1, step 2 masked, step 3 not
  const double lg = gpu->train_step(b, 0.01, {}).mean(), lc = cpu->train_step(b, 0.01, {}).mean();
  EXPECT_NEAR(lg, lc, 1e-5 * std::fabs(lc)) << "loss of the step";
}

TEST(CudaEngine, BadLabelsAreDataErrors) {
  SKIP_WITHOUT_GPU();
  Config cfg = config_of("[5, 2]", "[{type: GRU, units: 4}, {type: Dense, units: 3}]", "labels");
  cfg.train.loss.kind = LossKind::SparseCategoricalCrossentropy;
  cfg.device = Device::Cuda;
  Rng rng(1);
  auto gpu = make_engine(cfg, random_params(cfg.model, 1), rng);
  Batch b = random_batch(cfg, 2, 5, 1);
  b.y[1] = 3.0f;
  try {
    gpu->train_step(b, 0.01, {});
    FAIL() << "label 3 was accepted for 3 classes";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("label 3"), std::string::npos) << e.what();
  }
  b.y = Tensor({2, 3});
  EXPECT_THROW(gpu->train_step(b, 0.01, {}), DataError) << "one-hot targets with a sparse loss";
}

}  // namespace
}  // namespace rnntrain
