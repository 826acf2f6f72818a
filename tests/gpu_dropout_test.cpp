// Dropout on the GPU, where the CPU cannot be the reference (the masks come from a device RNG and
// from cuDNN): a Dropout layer drops at its rate and scales the kept values by 1/(1-rate) in forward
// and backward; input, recurrent and cuDNN inter-layer dropout are active in training only; and the
// same seed gives the same masks (runs are reproducible). Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdio>

#include "gpu_helpers.h"

namespace rnntrain {
namespace {

using namespace rnntrain::testing;

TEST(GpuDropout, DropoutLayerDropsAtTheRateAndScalesForwardAndBackward) {
  SKIP_WITHOUT_GPU();
  Config cfg = config_of("[50, 40]", "[{type: Dropout, rate: 0.3}]", "dropout");
  cfg.device = Device::Cuda;
  Rng rng(3);
  auto gpu = make_engine(cfg, random_params(cfg.model, 1), rng);
  const Batch b = random_batch(cfg, 8, 50, 4);
  Tensor pred, dx;
  gpu->gradients(b, &pred, &dx);
  ASSERT_EQ(pred.shape, b.x.shape);
  int64_t zeros = 0, bad = -1;
  const float scale = static_cast<float>(1.0 / 0.7);
  const int64_t n = pred.numel();
  for (int64_t i = 0; i < n; ++i) {
    const bool dropped = pred[i] == 0.0f;
    zeros += dropped;
    // Kept: x / (1 - rate), and the gradient passes with the same scale; dropped: no gradient.
    const float want_dx = dropped ? 0.0f : 2.0f * (pred[i] - b.y[i]) / static_cast<float>(n) * scale;
    if (!dropped && std::fabs(pred[i] - b.x[i] * scale) > 1e-6f * std::fabs(b.x[i] * scale)) bad = i;
    if (std::fabs(dx[i] - want_dx) > 1e-6f * (std::fabs(want_dx) + 1e-6f)) bad = i;
  }
  EXPECT_EQ(bad, -1) << "element " << bad << ": x " << b.x[bad] << " pred " << pred[bad] << " dx " << dx[bad];
  const double frac = static_cast<double>(zeros) / static_cast<double>(n);
  EXPECT_NEAR(frac, 0.3, 0.02) << zeros << " of " << n << " dropped";
  std::printf("dropout rate=0.3 dropped_fraction=%.4f of %lld\n", frac, static_cast<long long>(n));
  const Tensor eval = gpu->predict(b);
  expect_near_all(eval, b.x, 0.0, 0.0, "inference output (no dropout)");
}

// SpatialDropout1D drops a channel of a sequence for every step at once (Keras' noise shape [B, 1, C]),
// a new mask every step.
TEST(GpuDropout, SpatialDropoutDropsWholeChannelsAtTheRate) {
  SKIP_WITHOUT_GPU();
  Config cfg = config_of("[20, 50]", "[{type: SpatialDropout1D, rate: 0.4}]", "spatial");
  cfg.device = Device::Cuda;
  Rng rng(3);
  auto gpu = make_engine(cfg, random_params(cfg.model, 1), rng);
  const Batch b = random_batch(cfg, 40, 20, 4);
  Tensor pred, dx;
  gpu->gradients(b, &pred, &dx);
  ASSERT_EQ(pred.shape, b.x.shape);
  const int64_t B = 40, T = 20, C = 50;
  const float scale = static_cast<float>(1.0 / 0.6);
  int64_t dropped = 0, mixed = 0;
  for (int64_t i = 0; i < B; ++i)
    for (int64_t c = 0; c < C; ++c) {
      int64_t zeros = 0;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t k = (i * T + t) * C + c;
        const bool z = pred[k] == 0.0f && dx[k] == 0.0f;
        zeros += z;
        if (!z && std::fabs(pred[k] - b.x[k] * scale) > 1e-6f * std::fabs(b.x[k] * scale)) ++mixed;
      }
      dropped += zeros == T;
      mixed += zeros != 0 && zeros != T;
    }
  EXPECT_EQ(mixed, 0) << "a channel is either dropped for every step or kept (scaled by 1/(1-rate)) for every step";
  const double frac = static_cast<double>(dropped) / static_cast<double>(B * C);
  EXPECT_NEAR(frac, 0.4, 0.05) << dropped << " of " << B * C << " channels dropped";
  std::printf("spatial dropout rate=0.4 dropped_channels=%.4f of %lld\n", frac, static_cast<long long>(B * C));
  // The model's only dropout: the next step still draws a new mask.
  Tensor next;
  gpu->gradients(b, &next, nullptr);
  EXPECT_NE(next.data, pred.data) << "two training steps dropped the same channels";
  expect_near_all(gpu->predict(b), b.x, 0.0, 0.0, "inference output (no dropout)");
}

struct DropCase {
  std::string name, layers;
};

void PrintTo(const DropCase& c, std::ostream* os) { *os << c.name; }

class RecurrentDropout : public ::testing::TestWithParam<DropCase> {};

TEST_P(RecurrentDropout, ActiveInTrainingOnlyAndReproducibleFromTheSeed) {
  SKIP_WITHOUT_GPU();
  Config cfg = config_of("[12, 6]", GetParam().layers, GetParam().name);
  cfg.device = Device::Cuda;
  const Params p = random_params(cfg.model, 8);
  Rng r1(77), r2(77);
  auto a = make_engine(cfg, p, r1);
  auto b = make_engine(cfg, p, r2);
  const Batch batch = random_batch(cfg, 16, 12, 5, {12, 9, 12, 4, 12, 12, 7, 12, 12, 1, 12, 12, 3, 12, 12, 11});
  Tensor pa, pb;
  a->gradients(batch, &pa, nullptr);
  b->gradients(batch, &pb, nullptr);
  expect_near_all(pb, pa, 1e-6, 1e-5, "same seed, same training output");
  const std::vector<Param*> ga = a->host_params().all(), gb = b->host_params().all();
  for (size_t i = 0; i < ga.size(); ++i) expect_near_all(gb[i]->grad, ga[i]->grad, 1e-6, 1e-4, "same seed, same gradient");
  const Tensor eval = a->predict(batch);
  double diff = 0.0;
  for (int64_t i = 0; i < eval.numel(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(eval[i] - pa[i])));
  EXPECT_GT(diff, 1e-3) << "the training output equals the inference output: dropout was not applied";
  // A second training pass draws new masks.
  Tensor pa2;
  a->gradients(batch, &pa2, nullptr);
  double diff2 = 0.0;
  for (int64_t i = 0; i < pa.numel(); ++i) diff2 = std::max(diff2, static_cast<double>(std::fabs(pa2[i] - pa[i])));
  EXPECT_GT(diff2, 1e-3) << "two training passes drew the same masks";
  std::printf("dropout case=%s train_vs_eval_max_diff=%.3g pass1_vs_pass2_max_diff=%.3g\n", GetParam().name.c_str(),
              diff, diff2);
}

INSTANTIATE_TEST_SUITE_P(
    All, RecurrentDropout,
    ::testing::Values(
        DropCase{"cudnn_inter_layer", "[{type: LSTM, units: 16, return_sequences: true}, {type: Dropout, rate: 0.4}, "
                                      "{type: LSTM, units: 16, return_sequences: true}]"},
        DropCase{"cudnn_input_dropout", "[{type: GRU, units: 16, dropout: 0.4, return_sequences: true}, {type: GRU, "
                                        "units: 16, return_sequences: true}]"},
        DropCase{"generic_recurrent_dropout", "[{type: LSTM, units: 16, recurrent_dropout: 0.4, dropout: 0.2, "
                                              "return_sequences: true}]"},
        DropCase{"bidirectional_input_dropout", "[{type: Bidirectional, layer: {type: GRU, units: 8, dropout: 0.4, "
                                                "return_sequences: true}}, {type: Bidirectional, layer: {type: GRU, "
                                                "units: 8, return_sequences: true}}]"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rnntrain
