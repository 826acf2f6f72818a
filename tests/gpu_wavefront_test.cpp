// rnntrain's own recurrent kernels (plan.algo: wavefront) beyond one step's gradients (those are in
// gpu_precision_test.cpp, and graph replay in gpu_graphs_test.cpp):
// - training with them ends where the FP32 CPU run ends, also for a masked bidirectional stack, which
//   they keep whole;
// - inference (eval, predict) gives the CPU's outputs;
// - a batch too large for one launch is cut into slices and gives cuDNN's results;
// - a stack they cannot run (FP32, a Dropout between the layers) runs on cuDNN's standard algorithm,
//   with exactly its results.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include <fmt/format.h>

#include "backend/cuda/layout/wavefront_launches.h"
#include "gpu_helpers.h"

namespace rnntrain {
namespace {

using namespace rnntrain::testing;

const char* kLstm2 =
    "[{type: LSTM, units: 32, return_sequences: true}, {type: LSTM, units: 32, return_sequences: true}, "
    "{type: TimeDistributed, layer: {type: Dense, units: 4}}]";
const char* kGru3 =
    "[{type: GRU, units: 48, return_sequences: true}, {type: GRU, units: 48, return_sequences: true}, {type: GRU, "
    "units: 48}, {type: Dense, units: 3}]";
const char* kGru3ResetFirst =  // Keras 2's GRU: the second design only
    "[{type: GRU, units: 48, reset_after: false, return_sequences: true}, {type: GRU, units: 48, reset_after: false, "
    "return_sequences: true}, {type: GRU, units: 48, reset_after: false}, {type: Dense, units: 3}]";

double max_abs(const Tensor& t) {
  double m = 0.0;
  for (float v : t.data) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

Config gpu_config(const std::string& input, const std::string& layers, const std::string& name, Precision p,
                  RnnAlgo algo) {
  Config cfg = config_of(input, layers, name);
  cfg.device = Device::Cuda;
  cfg.plan.precision = p, cfg.plan.algo = algo;
  return cfg;
}

// How the second design splits a stack into launches (host logic; runs without a GPU): every layer
// once, in order; each launch's clusters for its slices side by side fit; and the split takes the
// fewest rounds of slices, then the fewest launches, of every way to cut the stack (all tried).
TEST(Wavefront, TheSecondDesignsLaunchesTakeTheFewestRounds) {
  // The clusters of a launch of n layers: a recurrent row per layer and direction, and for one
  // direction an input row per layer above the first (kernels_wavefront2.cu).
  auto rows = [](int64_t dirs, int64_t n) { return n * dirs + (dirs == 1 ? n - 1 : 0); };
  EXPECT_EQ(cuda::launch_rows2(1, 1), 1);
  EXPECT_EQ(cuda::launch_rows2(1, 4), 7);
  EXPECT_EQ(cuda::launch_rows2(2, 1), 2);
  EXPECT_EQ(cuda::launch_rows2(1, 8), 15);
  // The fewest {rounds, launches} over all cuts of layers l.. (brute force).
  std::function<std::pair<int64_t, int64_t>(int64_t, int64_t, int64_t, int64_t, int64_t)> best =
      [&](int64_t L, int64_t dirs, int64_t most, int64_t slices, int64_t l) -> std::pair<int64_t, int64_t> {
    if (l == L) return {0, 0};
    std::pair<int64_t, int64_t> b{INT64_MAX, INT64_MAX};
    for (int64_t n = 1; n <= (dirs == 2 ? 1 : std::min<int64_t>(L - l, 8)); ++n) {
      const int64_t side = std::min(slices, most / rows(dirs, n));
      if (side < 1) continue;
      const auto rest = best(L, dirs, most, slices, l + n);
      if (rest.first == INT64_MAX) continue;
      b = std::min(b, {(slices + side - 1) / side + rest.first, 1 + rest.second});
    }
    return b;
  };
  int checked = 0;
  for (int64_t L = 1; L <= 8; ++L)
    for (int64_t dirs : {1, 2})
      for (int64_t most = 0; most <= 16; ++most)
        for (int64_t B : {1, 37, 64, 65, 128, 256, 1100}) {
          const std::vector<cuda::Launch2> got = cuda::split_launches2(L, dirs, 8, most, B);
          const int64_t slices = (B + 63) / 64;
          const auto want = best(L, dirs, most, slices, 0);
          const std::string at = fmt::format("layers {} dirs {} clusters {} batch {}", L, dirs, most, B);
          if (want.first == INT64_MAX) {
            EXPECT_TRUE(got.empty()) << at;
            continue;
          }
          int64_t next = 0, rounds = 0;
          for (const cuda::Launch2& g : got) {
            EXPECT_EQ(g.first, next) << at;
            EXPECT_GE(g.slices, 1) << at;
            EXPECT_LE(g.slices, slices) << at;
            EXPECT_LE(g.slices * rows(dirs, g.layers), most) << at;
            if (dirs == 2) EXPECT_EQ(g.layers, 1) << at;
            next += g.layers, rounds += (slices + g.slices - 1) / g.slices;
          }
          EXPECT_EQ(next, L) << at;
          EXPECT_EQ(rounds, want.first) << at;
          EXPECT_EQ(static_cast<int64_t>(got.size()), want.second) << at;
          ++checked;
        }
  EXPECT_GT(checked, 1000);
  // The case the split was made for: charlm (B = 256, 3 layers) where 7 clusters are resident.
  const std::vector<cuda::Launch2> g = cuda::split_launches2(3, 1, 8, 7, 256);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].layers, 2);
  EXPECT_EQ(g[0].slices, 2);
  EXPECT_EQ(g[1].layers, 1);
  EXPECT_EQ(g[1].slices, 4);
}

TEST(Wavefront, TrainingEndsWhereTheFp32CpuRunEnds) {
  SKIP_WITHOUT_GPU();
  for (const char* layers : {kLstm2, kGru3, kGru3ResetFirst}) {
    Config cfg = gpu_config("[12, 16]", layers, "train", Precision::Bf16, RnnAlgo::Wavefront);
    cfg.train.optimizer.kind = OptimizerKind::SGD;  // steps proportional to the gradients: errors show
    cfg.train.optimizer.momentum = 0.9;
    cfg.plan.graphs = false;  // every step enqueued from the host, so gpu_wavefront_passes() counts it
    const Params init = random_params(cfg.model, 11, 0.2);
    auto [cpu, gpu] = engines_on_both(cfg, init, 2);
    const int64_t passes = gpu_wavefront_passes();
    double lg = 0, lc = 0, first = 0;
    for (int s = 0; s < 30; ++s) {
      const Batch b = random_batch(cfg, 16, 12, 100 + s % 4, s % 2 ? std::vector<int32_t>{} :
                                   std::vector<int32_t>{12, 5, 12, 1, 9, 12, 3, 12, 12, 7, 12, 2, 12, 11, 4, 12});
      lg = gpu->train_step(b, 0.05, {}).mean();
      lc = cpu->train_step(b, 0.05, {}).mean();
      if (s == 0) first = lc;
    }
    EXPECT_GE(gpu_wavefront_passes(), passes + 30) << "every step ran on the wavefront kernels";
    EXPECT_LT(lc, first) << "the CPU run learns";
    EXPECT_NEAR(lg, lc, 0.05 * lc) << "bf16 wavefront training ends near the FP32 CPU run";
    std::printf("wavefront training (%s): first loss %.5g, after 30 SGD steps cpu %.5g, gpu bf16 %.5g\n",
                layers == kLstm2 ? "lstm2" : layers == kGru3 ? "gru3" : "gru3 reset_after false", first, lc, lg);
  }
}

TEST(Wavefront, AMaskedBidirectionalStackRunsWholeAndTrainsAsTheCpu) {
  SKIP_WITHOUT_GPU();
  // With a Masking layer, cuDNN's algorithms run each Bidirectional layer one direction at a time so
  // that the step can be captured; the wavefront kernels take the lengths on the device and run both
  // directions of the stack at once, faster uncaptured, so they keep the stack whole.
  Config cfg = gpu_config("[12, 16]",
                          "[{type: Masking, mask_value: 0.0}, {type: Bidirectional, layer: {type: LSTM, units: 32, "
                          "return_sequences: true}}, {type: Bidirectional, layer: {type: LSTM, units: 32}}, "
                          "{type: Dense, units: 3}]",
                          "masked_bilstm", Precision::Bf16, RnnAlgo::Wavefront);
  cfg.train.optimizer.kind = OptimizerKind::SGD;
  cfg.train.optimizer.momentum = 0.9;
  const Params init = random_params(cfg.model, 5, 0.2);
  auto [cpu, gpu] = engines_on_both(cfg, init, 2);
  const int64_t passes = gpu_wavefront_passes(), graphs = gpu_graph_steps();
  double lg = 0, lc = 0, first = 0;
  for (int s = 0; s < 20; ++s) {
    const Batch b = random_batch(cfg, 8, 12, 200 + s % 4, {12, 5, 12, 1, 9, 2, 3, 12});
    lg = gpu->train_step(b, 0.05, {}).mean();
    lc = cpu->train_step(b, 0.05, {}).mean();
    if (s == 0) first = lc;
  }
  EXPECT_GE(gpu_wavefront_passes(), passes + 20) << "every step ran on the wavefront kernels";
  EXPECT_EQ(gpu_graph_steps(), graphs) << "the stack stays whole (uncaptured), not split into captured directions";
  EXPECT_LT(lc, first) << "the CPU run learns";
  EXPECT_NEAR(lg, lc, 0.05 * lc) << "bf16 wavefront training ends near the FP32 CPU run";
  std::printf("wavefront masked bilstm: first loss %.5g, after 20 SGD steps cpu %.5g, gpu bf16 %.5g\n", first, lc, lg);
}

TEST(Wavefront, InferenceGivesTheCpuOutputs) {
  SKIP_WITHOUT_GPU();
  Config cfg = gpu_config("[10, 8]", kGru3, "infer", Precision::Fp16, RnnAlgo::Wavefront);
  const Params init = random_params(cfg.model, 3, 0.3);
  auto [cpu, gpu] = engines_on_both(cfg, init, 1);
  const Batch b = random_batch(cfg, 7, 10, 5, {10, 4, 1, 10, 8, 10, 2});
  const int64_t passes = gpu_wavefront_passes();
  const Tensor pg = gpu->predict(b), pc = cpu->predict(b);
  EXPECT_GT(gpu_wavefront_passes(), passes);
  expect_near_all(pg, pc, 1e-2 * max_abs(pc), 0.0, "predictions");
  const double eg = gpu->eval_step(b, {}).mean(), ec = cpu->eval_step(b, {}).mean();
  EXPECT_NEAR(eg, ec, 1e-2 * std::fabs(ec)) << "evaluation loss";
}

// A model of `layers` on the wavefront kernels against the FP32 CPU: predictions, then a step's loss,
// outputs, input gradient and weight gradients, within tol of each one's largest value. design: which
// ran the stacks (2 or 1), or 0 for none (generic layers).
void expect_cpu_results(const char* layers, Precision p, int64_t batch, double tol, int design) {
  Config cfg = gpu_config("[12, 8]", layers, "design2", p, RnnAlgo::Wavefront);
  const Params init = random_params(cfg.model, 3, 0.3);
  auto [cpu, gpu] = engines_on_both(cfg, init, 1);
  std::vector<int32_t> lens(static_cast<size_t>(batch));
  for (size_t i = 0; i < lens.size(); ++i) lens[i] = static_cast<int32_t>(1 + (i * 5) % 12);
  const Batch b = random_batch(cfg, batch, 12, 5, lens);
  const int64_t passes = gpu_wavefront_passes(), passes2 = gpu_wavefront2_passes();
  const Tensor pg = gpu->predict(b), pc = cpu->predict(b);
  if (design) EXPECT_GT(gpu_wavefront_passes(), passes) << "the wavefront kernels ran";
  else EXPECT_EQ(gpu_wavefront_passes(), passes) << "the wavefront kernels did not run";
  if (design == 2) EXPECT_GT(gpu_wavefront2_passes(), passes2) << "the second design ran";
  else EXPECT_EQ(gpu_wavefront2_passes(), passes2) << "the second design did not run";
  expect_near_all(pg, pc, tol * max_abs(pc), 0.0, "predictions");
  Tensor tc, tg, dxc, dxg;
  const int64_t backward2 = gpu_wavefront2_backward_passes();
  const double lc = cpu->gradients(b, &tc, &dxc).mean();
  const double lg = gpu->gradients(b, &tg, &dxg).mean();
  if (design == 2) EXPECT_GT(gpu_wavefront2_backward_passes(), backward2) << "the second design's backward ran";
  else EXPECT_EQ(gpu_wavefront2_backward_passes(), backward2) << "the second design's backward did not run";
  EXPECT_NEAR(lg, lc, tol * std::fabs(lc)) << "loss";
  expect_near_all(tg, tc, tol * max_abs(tc), 0.0, "training outputs");
  expect_near_all(dxg, dxc, tol * max_abs(dxc), 0.0, "input gradient");
  const std::vector<Param*> wc = cpu->host_params().all(), wg = gpu->host_params().all();
  for (size_t i = 0; i < wc.size(); ++i)
    expect_near_all(wg[i]->grad, wc[i]->grad, tol * max_abs(wc[i]->grad) + 1e-7, 0.0, "gradient of " + wc[i]->name);
}

struct Case {
  const char* layers;
  Precision p;
  int64_t batch;
  double tol;
};

// Every case under both designs (RNNTRAIN_WAVEFRONT_DESIGN); second_only: the first design has not
// the cells, which then run as generic layers.
void expect_cpu_results_both_designs(const std::vector<Case>& cases, bool second_only) {
  for (const char* design : {"1", "2"}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string("design ") + design + ": " + c.layers);
      setenv("RNNTRAIN_WAVEFRONT_DESIGN", design, 1);
      expect_cpu_results(c.layers, c.p, c.batch, c.tol, design[0] == '2' ? 2 : second_only ? 0 : 1);
    }
  }
  unsetenv("RNNTRAIN_WAVEFRONT_DESIGN");
}

// Both designs (issue 33: the second, sm_90a, is the default where it runs; RNNTRAIN_WAVEFRONT_DESIGN=1
// keeps the first): 4 LSTM layers (one launch: recurrent and input rows, forward and backward), 4 GRU
// layers of 37 units (odd sizes; batch slices of 64 past 64 sequences, the second design's side by side
// in one launch, the last one partly empty), masked; outputs and a step's
// gradients (input and weights) against the FP32 CPU.
TEST(Wavefront, BothDesignsGiveTheCpuOutputsAndGradients) {
  SKIP_WITHOUT_GPU();
  expect_cpu_results_both_designs({
      {"[{type: LSTM, units: 64, return_sequences: true}, {type: LSTM, units: 64, return_sequences: true}, "
       "{type: LSTM, units: 64, return_sequences: true}, {type: LSTM, units: 64}, {type: Dense, units: 3}]",
       Precision::Bf16, 20, 5e-2},
      {"[{type: GRU, units: 37, return_sequences: true}, {type: GRU, units: 37, return_sequences: true}, "
       "{type: GRU, units: 37, return_sequences: true}, {type: GRU, units: 37}, {type: Dense, units: 3}]",
       Precision::Fp16, 70, 1e-2},
      {"[{type: Bidirectional, layer: {type: LSTM, units: 40, return_sequences: true}}, {type: Dense, units: 3}]",
       Precision::Fp16, 9, 1e-2},
      // 16 and 32 units a CTA in the second design, the last CTA of a row partly empty
      {"[{type: LSTM, units: 300, return_sequences: true}, {type: LSTM, units: 300}, {type: Dense, units: 3}]",
       Precision::Bf16, 5, 5e-2},
      {"[{type: GRU, units: 150, return_sequences: true}, {type: GRU, units: 150}, {type: Dense, units: 3}]",
       Precision::Fp16, 3, 1e-2},
  }, false);
}

// GRUs with reset_after: false (Keras 2's GRU, which cuDNN has not) on the second design (r * h_{t-1}
// shared a step forward, d(r h_{t-1}) a step backward): 3 masked layers of 37 units in two batch slices
// side by side (recurrent and input rows), a bidirectional layer, 150 and 300 units (16 and 32 a CTA).
// With the first design they run as generic layers, with the same results.
TEST(Wavefront, GrusWithoutResetAfterRunOnTheSecondDesign) {
  SKIP_WITHOUT_GPU();
  expect_cpu_results_both_designs({
      {"[{type: GRU, units: 37, reset_after: false, return_sequences: true}, {type: GRU, units: 37, reset_after: "
       "false, return_sequences: true}, {type: GRU, units: 37, reset_after: false}, {type: Dense, units: 3}]",
       Precision::Fp16, 70, 1e-2},
      {"[{type: Bidirectional, layer: {type: GRU, units: 40, reset_after: false, return_sequences: true}}, "
       "{type: Dense, units: 3}]",
       Precision::Bf16, 9, 5e-2},
      {"[{type: GRU, units: 150, reset_after: false, return_sequences: true}, {type: GRU, units: 150, reset_after: "
       "false}, {type: Dense, units: 3}]",
       Precision::Fp16, 3, 1e-2},
      {"[{type: GRU, units: 300, reset_after: false}, {type: Dense, units: 3}]", Precision::Bf16, 5, 5e-2},
  }, true);
}

TEST(Wavefront, ABatchTooLargeForOneLaunchIsSlicedAndMatchesCudnn) {
  SKIP_WITHOUT_GPU();
  const char* layers = "[{type: LSTM, units: 512, return_sequences: true}, {type: TimeDistributed, layer: {type: Dense, units: 2}}]";
  Config own = gpu_config("[3, 16]", layers, "sliced", Precision::Bf16, RnnAlgo::Wavefront);
  Config ref = gpu_config("[3, 16]", layers, "sliced", Precision::Bf16, RnnAlgo::Standard);
  const Params init = random_params(own.model, 4, 0.1);
  Rng r1(1), r2(1);
  auto a = make_engine(own, init, r1);
  auto b = make_engine(ref, init, r2);
  // More 16-row tiles than one launch's warps hold (first design); 18 slices of 64, as many side by side
  // as the GPU's clusters hold, in rounds (second design).
  const int64_t B = 1100;
  std::vector<int32_t> lens(B);
  for (int64_t i = 0; i < B; ++i) lens[i] = static_cast<int32_t>(1 + i % 3);
  const Batch batch = random_batch(own, B, 3, 8, lens);
  Tensor pa, pb, dxa, dxb;
  const int64_t passes = gpu_wavefront_passes();
  a->gradients(batch, &pa, &dxa);
  b->gradients(batch, &pb, &dxb);
  EXPECT_GT(gpu_wavefront_passes(), passes);
  expect_near_all(pa, pb, 2e-2 * max_abs(pb), 0.0, "outputs");
  expect_near_all(dxa, dxb, 2e-2 * max_abs(dxb), 0.0, "input gradient");
  const std::vector<Param*> ga = a->host_params().all(), gb = b->host_params().all();
  for (size_t i = 0; i < gb.size(); ++i)
    expect_near_all(ga[i]->grad, gb[i]->grad, 2e-2 * max_abs(gb[i]->grad) + 1e-7, 0.0, "gradient of " + gb[i]->name);
}

TEST(Wavefront, StacksItCannotRunUseCudnnStandardWithItsResults) {
  SKIP_WITHOUT_GPU();
  const char* dropped =
      "[{type: LSTM, units: 16, return_sequences: true}, {type: Dropout, rate: 0.2}, {type: LSTM, units: 16, "
      "return_sequences: true}, {type: TimeDistributed, layer: {type: Dense, units: 2}}]";
  struct Case {
    const char* what;
    const char* layers;
    Precision precision;
  };
  for (const Case& c : {Case{"fp32", kLstm2, Precision::Fp32}, Case{"dropout between layers", dropped, Precision::Bf16}}) {
    Config own = gpu_config("[8, 6]", c.layers, "fallback", c.precision, RnnAlgo::Wavefront);
    Config ref = gpu_config("[8, 6]", c.layers, "fallback", c.precision, RnnAlgo::Standard);
    const Params init = random_params(own.model, 6, 0.3);
    Rng r1(4), r2(4);
    auto a = make_engine(own, init, r1);
    auto b = make_engine(ref, init, r2);
    const int64_t passes = gpu_wavefront_passes();
    for (int s = 0; s < 3; ++s) {
      const Batch batch = random_batch(own, 8, 8, 20 + s);
      EXPECT_EQ(a->train_step(batch, 0.01, {}).mean(), b->train_step(batch, 0.01, {}).mean()) << c.what << " step " << s;
    }
    EXPECT_EQ(gpu_wavefront_passes(), passes) << c.what << ": the wavefront kernels did not run";
    const std::vector<Param*> pa = a->host_params().all(), pb = b->host_params().all();
    for (size_t i = 0; i < pb.size(); ++i) expect_near_all(pa[i]->value, pb[i]->value, 0.0, 0.0, c.what + std::string(": ") + pb[i]->name);
  }
}

}  // namespace
}  // namespace rnntrain
