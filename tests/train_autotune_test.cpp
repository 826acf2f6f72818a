// The plan candidates that bench and plan.autotune measure, the synthetic batch they time, and
// resolve_plan off the GPU (the CPU computes in FP32: nothing to measure, nothing cached).
#include <gtest/gtest.h>

#include <filesystem>

#include "spec/parse.h"
#include "train/autotune.h"
#include "train/trainer.h"

namespace rnntrain {
namespace {

namespace fs = std::filesystem;

Config config(const std::string& layers, const std::string& input = "[10, 4]") {
  return parse_config("model:\n  layers: [{type: Input, shape: " + input + "}, " + layers + "]\n", "t.yaml");
}

const char* kStack = "{type: LSTM, units: 8, return_sequences: true}, {type: LSTM, units: 8}, {type: Dense, units: 1}";

TEST(Candidates, FusedAndPerLayerTimesPrecisionsWithPersistAndWavefrontForHalfOnly) {
  const std::vector<PlanChoice> c = plan_candidates(config(kStack), {});
  std::vector<std::string> names;
  for (const auto& p : c) names.push_back(p.name());
  const std::vector<std::string> want = {
      "fused/fp32/standard",       "fused/tf32/standard",         "fused/fp16/standard",
      "fused/fp16/persist_static", "fused/fp16/wavefront",        "fused/bf16/standard",
      "fused/bf16/persist_static", "fused/bf16/wavefront",        "per-layer/fp32/standard",
      "per-layer/tf32/standard",   "per-layer/fp16/standard",     "per-layer/fp16/persist_static",
      "per-layer/fp16/wavefront",  "per-layer/bf16/standard",     "per-layer/bf16/persist_static",
      "per-layer/bf16/wavefront"};
  EXPECT_EQ(names, want);
}

TEST(Candidates, FiltersAndModelsThatLeaveFewer) {
  CandidateFilter f;
  f.precisions = {Precision::Fp32};
  f.algos = {RnnAlgo::Standard, RnnAlgo::PersistStatic};
  EXPECT_EQ(plan_candidates(config(kStack), f).size(), 4u) << "asked for: fp32 persist too";
  f.algos = {RnnAlgo::Wavefront, RnnAlgo::PersistDynamic};
  f.precisions = {Precision::Fp32, Precision::Bf16};
  EXPECT_EQ(plan_candidates(config(kStack), f).size(), 6u) << "wavefront: bf16 only; persist_dynamic: both";
  // One recurrent layer: fused and per-layer are the same plan.
  EXPECT_EQ(plan_candidates(config("{type: GRU, units: 8}"), {}).size(), 8u);
  // plan.fuse always / never pins one of the two (bench and autotune time only that one).
  for (FuseMode pin : {FuseMode::Always, FuseMode::Never}) {
    Config c = config(kStack);
    c.plan.fuse = pin;
    const std::vector<PlanChoice> only = plan_candidates(c, f);
    EXPECT_EQ(only.size(), 3u);
    for (const auto& p : only) EXPECT_EQ(p.fuse == FuseMode::Never, pin == FuseMode::Never) << p.name();
  }
  // Masks can reach the stack: cuDNN's persistent kernels cannot run padded sequences, so they are
  // not offered; the wavefront kernels can.
  const Config masked = config("{type: Embedding, input_dim: 20, output_dim: 4, mask_zero: true}, " + std::string(kStack), "[10]");
  f.precisions = {};
  f.algos = {RnnAlgo::Standard, RnnAlgo::PersistStatic, RnnAlgo::PersistDynamic, RnnAlgo::Wavefront};
  for (const auto& p : plan_candidates(masked, f))
    EXPECT_TRUE(p.algo == RnnAlgo::Standard || p.algo == RnnAlgo::Wavefront) << p.name();
  // A GRU with reset_after: false: a generic layer for cuDNN's algorithms, a stack for the wavefront
  // kernels; no persistent candidates, which would time the generic layer again.
  const std::vector<PlanChoice> ra = plan_candidates(config("{type: GRU, units: 8, reset_after: false}"), {});
  EXPECT_EQ(ra.size(), 6u);
  int wavefront = 0;
  for (const auto& p : ra) {
    EXPECT_TRUE(p.algo == RnnAlgo::Standard || p.algo == RnnAlgo::Wavefront) << p.name();
    wavefront += p.algo == RnnAlgo::Wavefront;
  }
  EXPECT_EQ(wavefront, 2) << "fp16 and bf16";
  // Nothing any engine runs as a stack (recurrent_dropout): nothing to choose.
  EXPECT_TRUE(plan_candidates(config("{type: GRU, units: 8, reset_after: false, recurrent_dropout: 0.1}"), {}).empty());
}

TEST(Candidates, SyntheticBatchHasTheShapeAndLengthsAsked) {
  Config cfg = config(kStack);
  cfg.train.batch_size = 64;
  Rng rng(1);
  const Batch b = synthetic_batch(cfg, 10, 4, rng);
  EXPECT_EQ(b.x.shape, (Shape{64, 10, 4}));
  EXPECT_EQ(b.y.shape, (Shape{64, 1}));
  ASSERT_EQ(b.lengths.size(), 64u);
  bool short_one = false;
  for (int32_t l : b.lengths) {
    EXPECT_GE(l, 4);
    EXPECT_LE(l, 10);
    short_one = short_one || l < 10;
  }
  EXPECT_TRUE(short_one) << "lengths vary";
  EXPECT_TRUE(synthetic_batch(cfg, 10, 0, rng).lengths.empty());
}

TEST(ResolvePlan, TheCpuComputesInFp32AndCachesNothing) {
  Config cfg = config(kStack);
  cfg.device = Device::Cpu;
  cfg.plan.autotune = true;
  cfg.plan.precision = Precision::Auto;
  cfg.plan.algo = RnnAlgo::Auto;
  const fs::path cache = fs::temp_directory_path() / ("rnntrain_at_cpu_" + std::to_string(::getpid()) + ".json");
  cfg.plan.cache = cache.string();
  const Config r = resolve_plan(cfg, initial_params(cfg, ""), 10);
  EXPECT_EQ(r.plan.precision, Precision::Fp32);
  EXPECT_EQ(r.plan.algo, RnnAlgo::Standard);
  EXPECT_FALSE(fs::exists(cache));
}

}  // namespace
}  // namespace rnntrain
