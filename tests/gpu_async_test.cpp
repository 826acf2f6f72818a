// Enqueued (asynchronous) training steps on the GPU do what synchronous ones do: the same losses in
// the same order and the same final weights, with more steps in flight than the loss queue holds
// (the queue-full path), masked batches of changing lengths, and a larger batch late in the run (the
// double-buffered uploads grow, the cached cuDNN descriptors change). Skips without a GPU.
#include <gtest/gtest.h>

#include "gpu_helpers.h"

namespace rnntrain {
namespace {

using namespace rnntrain::testing;

TEST(AsyncSteps, EnqueuedStepsGiveTheSameLossesAndWeightsAsSynchronousOnes) {
  SKIP_WITHOUT_GPU();
  Config cfg = config_of("[9, 4]",
                         "[{type: LSTM, units: 16, return_sequences: true}, {type: LSTM, units: 16, return_sequences: "
                         "true}, {type: TimeDistributed, layer: {type: Dense, units: 2}}]",
                         "async");
  cfg.device = Device::Cuda;
  cfg.train.optimizer.global_clipnorm = 0.5;
  const Params init = random_params(cfg.model, 4, 0.3);
  Rng r1(3), r2(3);
  auto sync = make_engine(cfg, init, r1);
  auto async = make_engine(cfg, init, r2);
  std::vector<Batch> batches;
  for (int s = 0; s < 20; ++s) {
    const int64_t B = s < 14 ? 5 : 7;  // a larger batch late in the run: device buffers grow
    std::vector<int32_t> lens;
    if (s % 3 == 1) lens = B == 5 ? std::vector<int32_t>{9, 4, 7, 1, 9} : std::vector<int32_t>{3, 9, 9, 6, 2, 9, 5};
    batches.push_back(random_batch(cfg, B, 9, 50 + s, lens));
  }
  std::vector<double> want, got;
  for (const Batch& b : batches) want.push_back(sync->train_step(b, 1e-2, {}).mean());
  // The first 12 enqueued before any is collected (more than the 8 in flight: the queue-full path),
  // then one collect per step.
  for (size_t i = 0; i < batches.size(); ++i) {
    async->enqueue_train_step(batches[i], 1e-2, {});
    if (i >= 12)
      for (const LossValue& l : async->collect_losses(false)) got.push_back(l.mean());
  }
  for (const LossValue& l : async->collect_losses(true)) got.push_back(l.mean());
  ASSERT_EQ(got.size(), want.size()) << "every enqueued step's loss is collected once";
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6 * std::fabs(want[i])) << "step " << i + 1;
  EXPECT_TRUE(async->collect_losses(true).empty());
  EXPECT_EQ(async->optimizer().iterations(), 20);
  const std::vector<Param*> ps = sync->host_params().all(), pa = async->host_params().all();
  for (size_t i = 0; i < ps.size(); ++i) expect_near_all(pa[i]->value, ps[i]->value, 1e-6, 1e-5, ps[i]->name);
}

}  // namespace
}  // namespace rnntrain
