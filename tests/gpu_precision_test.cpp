// Reduced precision and the persistent algorithms on the GPU, against the CPU in FP32:
// - every weight gradient and the input gradient of one step in tf32, fp16 and bf16 (standard,
//   persist_static, persist_dynamic and rnntrain's wavefront kernels), masked and unmasked, within a
//   tolerance scaled to each tensor's largest entry: tf32 1e-2, fp16 1e-2, bf16 5e-2 of max |cpu|
//   (10, 10 and 7 mantissa bits, summed over T steps). The wavefront cases cover LSTM and GRU, 1 to
//   4 layers, uni- and bidirectional, return_sequences both ways, odd sizes (37 units, batch 3) and
//   sizes that split a layer over many thread blocks and its operands over several chunks;
// - fp16 training with dynamic loss scaling: an overflowing step is skipped (the weights do not
//   change) and training goes on; 30 SGD steps (whose size follows the gradient, so a wrong unscale
//   shows) end within 5% of the fp32 run's loss;
// - one persist_static engine given full, padded, full... batches in turn matches a standard engine:
//   exactly on padded batches (cuDNN's persistent kernels cannot run them; the stack falls back to
//   standard), within the fp16 tolerance on the others, while its cached descriptors switch.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "gpu_helpers.h"

namespace rnntrain {
namespace {

using namespace rnntrain::testing;

struct PrecCase {
  std::string name;
  std::string layers;
  Precision precision;
  RnnAlgo algo;
  bool masked;
  double rtol;  // of the tensor's max |cpu|
  int64_t batch = 16;
  std::string input = "[12, 16]";
};

void PrintTo(const PrecCase& c, std::ostream* os) { *os << c.name; }

const char* kLstm2 =
    "[{type: LSTM, units: 32, return_sequences: true}, {type: LSTM, units: 32, return_sequences: true}, "
    "{type: TimeDistributed, layer: {type: Dense, units: 4}}]";
const char* kBigru =
    "[{type: Bidirectional, layer: {type: GRU, units: 32, return_sequences: true}}, {type: Bidirectional, layer: "
    "{type: GRU, units: 32}}, {type: Dense, units: 3}]";
const char* kLstm4Odd =
    "[{type: LSTM, units: 37, return_sequences: true}, {type: LSTM, units: 37, return_sequences: true}, {type: LSTM, "
    "units: 37, return_sequences: true}, {type: LSTM, units: 37}, {type: Dense, units: 3}]";
const char* kGru4Odd =
    "[{type: GRU, units: 37, return_sequences: true}, {type: GRU, units: 37, return_sequences: true}, {type: GRU, "
    "units: 37, return_sequences: true}, {type: GRU, units: 37, return_sequences: true}, {type: TimeDistributed, "
    "layer: {type: Dense, units: 2}}]";
const char* kBilstmSum =
    "[{type: Bidirectional, merge_mode: sum, layer: {type: LSTM, units: 24, return_sequences: true}}, "
    "{type: TimeDistributed, layer: {type: Dense, units: 2}}]";
// 200 units over 66 blocks per layer, 272-wide operand rows in several chunks, a batch of 40.
const char* kLstmWide =
    "[{type: LSTM, units: 200, return_sequences: true}, {type: LSTM, units: 200}, {type: Dense, units: 2}]";
const char* kBigruWide =
    "[{type: Bidirectional, layer: {type: GRU, units: 130, return_sequences: true}}, {type: Bidirectional, layer: "
    "{type: GRU, units: 130, return_sequences: true}}, {type: TimeDistributed, layer: {type: Dense, units: 2}}]";

// Lengths 1..T for a masked batch of B sequences (every third full, one of length 1).
std::vector<int32_t> lengths_for(int64_t B, int64_t T) {
  std::vector<int32_t> lens;
  for (int64_t b = 0; b < B; ++b)
    lens.push_back(static_cast<int32_t>(b % 3 == 0 ? T : b == 1 ? 1 : 1 + (b * 7) % T));
  return lens;
}

double max_abs(const Tensor& t) {
  double m = 0.0;
  for (float v : t.data) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

class PrecisionGrads : public ::testing::TestWithParam<PrecCase> {};

TEST_P(PrecisionGrads, GradientsMatchTheFp32CpuWithinThePrecision) {
  SKIP_WITHOUT_GPU();
  const PrecCase& c = GetParam();
  Config cfg = config_of(c.input, c.layers, c.name);
  const Params init = random_params(cfg.model, 7, 0.2);
  Config cpu_cfg = cfg, gpu_cfg = cfg;
  cpu_cfg.device = Device::Cpu;
  gpu_cfg.device = Device::Cuda;
  gpu_cfg.plan.precision = c.precision, gpu_cfg.plan.algo = c.algo;
  Rng r1(5), r2(5);
  auto cpu = make_engine(cpu_cfg, init, r1);
  auto gpu = make_engine(gpu_cfg, init, r2);
  const int64_t T = cfg.model.layers[0].shape[0];
  const Batch b = random_batch(cfg, c.batch, T, 99, c.masked ? lengths_for(c.batch, T) : std::vector<int32_t>{});
  Tensor pc, pg, dxc, dxg;
  const int64_t passes = gpu_wavefront_passes();
  const double lc = cpu->gradients(b, &pc, &dxc).mean();
  const double lg = gpu->gradients(b, &pg, &dxg).mean();
  if (c.algo == RnnAlgo::Wavefront) EXPECT_GT(gpu_wavefront_passes(), passes) << "the wavefront kernels ran";
  EXPECT_NEAR(lg, lc, c.rtol * std::fabs(lc)) << "loss";
  expect_near_all(pg, pc, c.rtol * max_abs(pc), 0.0, "output");
  expect_near_all(dxg, dxc, c.rtol * max_abs(dxc), 0.0, "input gradient");
  const std::vector<Param*> gc = cpu->host_params().all(), gg = gpu->host_params().all();
  double worst = 0.0;
  for (size_t i = 0; i < gc.size(); ++i) {
    const double scale = max_abs(gc[i]->grad);
    const double d = expect_near_all(gg[i]->grad, gc[i]->grad, c.rtol * scale + 1e-7, 0.0, "gradient of " + gc[i]->name);
    worst = std::max(worst, d / std::max(scale, 1e-30));
  }
  std::printf("precision case=%s loss gpu=%.6g cpu=%.6g worst_grad_err/max=%.3g (tolerance %.3g)\n", c.name.c_str(), lg,
              lc, worst, c.rtol);
}

INSTANTIATE_TEST_SUITE_P(
    All, PrecisionGrads,
    ::testing::Values(PrecCase{"lstm2_tf32", kLstm2, Precision::Tf32, RnnAlgo::Standard, false, 1e-2},
                      PrecCase{"lstm2_fp16", kLstm2, Precision::Fp16, RnnAlgo::Standard, false, 1e-2},
                      PrecCase{"lstm2_bf16", kLstm2, Precision::Bf16, RnnAlgo::Standard, false, 5e-2},
                      PrecCase{"lstm2_fp16_persist", kLstm2, Precision::Fp16, RnnAlgo::PersistStatic, false, 1e-2},
                      PrecCase{"lstm2_fp16_masked", kLstm2, Precision::Fp16, RnnAlgo::Standard, true, 1e-2},
                      PrecCase{"bigru_fp16_masked_persist", kBigru, Precision::Fp16, RnnAlgo::PersistStatic, true, 1e-2},
                      PrecCase{"bigru_bf16", kBigru, Precision::Bf16, RnnAlgo::Standard, false, 5e-2},
                      PrecCase{"bigru_tf32_masked", kBigru, Precision::Tf32, RnnAlgo::Standard, true, 1e-2},
                      PrecCase{"lstm2_fp16_persist_dynamic", kLstm2, Precision::Fp16, RnnAlgo::PersistDynamic, false, 1e-2},
                      PrecCase{"lstm2_bf16_wavefront", kLstm2, Precision::Bf16, RnnAlgo::Wavefront, false, 5e-2},
                      PrecCase{"lstm2_fp16_wavefront_masked", kLstm2, Precision::Fp16, RnnAlgo::Wavefront, true, 1e-2},
                      PrecCase{"bigru_bf16_wavefront_masked", kBigru, Precision::Bf16, RnnAlgo::Wavefront, true, 5e-2},
                      PrecCase{"bigru_fp16_wavefront", kBigru, Precision::Fp16, RnnAlgo::Wavefront, false, 1e-2},
                      PrecCase{"lstm4_odd_fp16_wavefront_masked", kLstm4Odd, Precision::Fp16, RnnAlgo::Wavefront, true,
                               1e-2, 3, "[9, 5]"},
                      PrecCase{"gru4_odd_bf16_wavefront", kGru4Odd, Precision::Bf16, RnnAlgo::Wavefront, false, 5e-2, 3,
                               "[9, 5]"},
                      PrecCase{"gru4_odd_fp16_wavefront_masked", kGru4Odd, Precision::Fp16, RnnAlgo::Wavefront, true,
                               1e-2, 3, "[9, 5]"},
                      PrecCase{"bilstm_sum_fp16_wavefront_masked", kBilstmSum, Precision::Fp16, RnnAlgo::Wavefront,
                               true, 1e-2},
                      PrecCase{"lstm_wide_fp16_wavefront_masked", kLstmWide, Precision::Fp16, RnnAlgo::Wavefront, true,
                               1e-2, 40, "[7, 150]"},
                      PrecCase{"bigru_wide_bf16_wavefront", kBigruWide, Precision::Bf16, RnnAlgo::Wavefront, false,
                               5e-2, 20, "[6, 40]"}),
    [](const auto& info) { return info.param.name; });

TEST(Precision, PersistStaticAlternatingPaddedAndFullBatchesMatchesStandard) {
  SKIP_WITHOUT_GPU();
  Config cfg = config_of("[12, 16]", kLstm2, "persist_alternating");
  cfg.device = Device::Cuda;
  cfg.plan.precision = Precision::Fp16;
  const Params init = random_params(cfg.model, 5, 0.2);
  Config persist = cfg;
  persist.plan.algo = RnnAlgo::PersistStatic;
  Rng r1(1), r2(1);
  auto s = make_engine(cfg, init, r1);
  auto p = make_engine(persist, init, r2);
  const std::vector<int32_t> lens = {12, 9, 12, 3, 7, 12, 1, 10, 12, 12, 5, 12, 8, 12, 2, 11};
  for (int i = 0; i < 5; ++i) {
    const bool padded = i % 2 == 1;
    const Batch b = random_batch(cfg, 16, 12, 40 + i, padded ? lens : std::vector<int32_t>{});
    Tensor ps, pp;
    s->gradients(b, &ps, nullptr);
    p->gradients(b, &pp, nullptr);
    const std::string what = "batch " + std::to_string(i) + (padded ? " (padded)" : " (full)");
    expect_near_all(pp, ps, padded ? 0.0 : 1e-2 * max_abs(ps), 0.0, what + " output");
    const std::vector<Param*> gs = s->host_params().all(), gp = p->host_params().all();
    for (size_t k = 0; k < gs.size(); ++k)
      expect_near_all(gp[k]->grad, gs[k]->grad, padded ? 0.0 : 1e-2 * max_abs(gs[k]->grad) + 1e-7, 0.0,
                      what + " gradient of " + gs[k]->name);
  }
}

TEST(Precision, Fp16SkipsAnOverflowingStepAndTrainsLikeFp32) {
  SKIP_WITHOUT_GPU();
  Config cfg = config_of("[12, 16]", kLstm2, "fp16_train");
  cfg.device = Device::Cuda;
  // SGD: its update is proportional to the gradient, so a wrong or missing unscale shows (Adam's is not).
  cfg.train.optimizer.kind = OptimizerKind::SGD;
  cfg.train.optimizer.momentum = 0.9;
  cfg.train.optimizer.learning_rate = 0.05;
  const Params init = random_params(cfg.model, 11, 0.2);
  Config half = cfg;
  half.plan.precision = Precision::Fp16;
  Rng r1(2), r2(2);
  auto f32 = make_engine(cfg, init, r1);
  auto f16 = make_engine(half, init, r2);

  // Targets near FLT_MAX: the scaled loss gradient overflows in float, so the step must be skipped;
  // the next step trains. (A separate engine: the skipped step still counts as an optimizer iteration.)
  {
    Rng r3(2);
    auto skip = make_engine(half, init, r3);
    Batch huge = random_batch(cfg, 16, 12, 1);
    for (float& v : huge.y.data) v = 3e38f;
    const Tensor before = skip->host_params().all()[0]->value;
    skip->train_step(huge, 0.05, {});
    expect_near_all(skip->host_params().all()[0]->value, before, 0.0, 0.0, "weights after a skipped fp16 step");
    skip->train_step(random_batch(cfg, 16, 12, 2), 0.05, {});
    const Tensor& after = skip->host_params().all()[0]->value;
    double moved = 0.0;
    for (int64_t k = 0; k < after.numel(); ++k) {
      ASSERT_TRUE(std::isfinite(after[k])) << "weight " << k << " after the step that follows a skipped one";
      moved = std::max(moved, static_cast<double>(std::fabs(after[k] - before[k])));
    }
    EXPECT_GT(moved, 0.0) << "the step after a skipped one updates the weights";
  }

  double l32 = 0, l16 = 0, first = 0;
  for (int s = 0; s < 30; ++s) {
    const Batch b = random_batch(cfg, 16, 12, 100 + s % 4);
    l32 = f32->train_step(b, 0.05, {}).mean();
    l16 = f16->train_step(b, 0.05, {}).mean();
    if (s == 0) first = l32;
  }
  EXPECT_LT(l32, first) << "the fp32 run learns";
  EXPECT_NEAR(l16, l32, 0.05 * l32) << "fp16 with loss scaling ends near fp32";
  std::printf("fp16 training: first loss %.5g, after 30 steps fp32 %.5g, fp16 %.5g\n", first, l32, l16);
}

}  // namespace
}  // namespace rnntrain
