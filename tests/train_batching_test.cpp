// Epoch batches with and without length bucketing (train.bucketing):
// - every sample exactly once per epoch, batches of at most batch_size, the same plan from the same
//   RNG state (what resume relies on) and another from another;
// - bucketed batches hold sequences of similar length, are trimmed to their longest one (rounded up
//   onto few lengths, for CUDA graphs), the longest batch first, and cut the padding share of a
//   long-tailed length distribution; without bucketing the plan is the shuffled order cut in turn;
// - lengths come from a lengths dataset, Embedding mask_zero tokens or a Masking value; without any,
//   bucketing is a config error naming what to add;
// - trimming drops the padded tail of inputs and per-step targets only;
// - training with bucketing gives the losses of training without it when a batch holds every sample
//   (only the composition of batches may differ), on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "backend_helpers.h"
#include "spec/parse.h"
#include "backend/engine.h"
#include "dist/comm.h"
#include "test_util.h"
#include "train/batching.h"
#include "train/run.h"
#include "train/trainer.h"

using namespace rnntrain;

namespace {

std::vector<int32_t> long_tailed(int64_t n, int32_t T, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) {  // mostly short, some long: a rough log-normal
    double v = 1.0;
    for (int k = 0; k < 4; ++k) v *= 0.5 + 1.5 * (static_cast<double>(rng.below(1000)) / 1000.0);
    out.push_back(std::clamp(static_cast<int32_t>(8.0 * v), 1, T));
  }
  return out;
}

TrainSpec spec(int64_t bs, bool bucketing, int64_t window = 4) {
  TrainSpec t;
  t.batch_size = bs, t.bucketing = bucketing, t.bucket_window = window;
  return t;
}

void expect_each_row_once(const std::vector<EpochBatch>& plan, int64_t n, int64_t bs) {
  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (const EpochBatch& b : plan) {
    EXPECT_LE(static_cast<int64_t>(b.rows.size()), bs);
    EXPECT_FALSE(b.rows.empty());
    for (int64_t r : b.rows) ++seen.at(static_cast<size_t>(r));
  }
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "row " << i;
  EXPECT_EQ(static_cast<int64_t>(plan.size()), (n + bs - 1) / bs) << "as many steps as without bucketing";
}

}  // namespace

TEST(Batching, BucketedEpochsCoverEverySampleOnceAndAreReproducible) {
  const int64_t n = 1003, bs = 16, T = 60;
  const std::vector<int32_t> lens = long_tailed(n, T, 3);
  Rng a(9), b(9), c(10);
  const auto pa = plan_epoch(spec(bs, true), n, lens, true, a);
  const auto pb = plan_epoch(spec(bs, true), n, lens, true, b);
  const auto pc = plan_epoch(spec(bs, true), n, lens, true, c);
  expect_each_row_once(pa, n, bs);
  expect_each_row_once(pc, n, bs);
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_EQ(pa[i].rows, pb[i].rows) << "the same RNG state, the same batches";
  EXPECT_NE(pa[0].rows, pc[0].rows) << "another seed, other batches";
  EXPECT_EQ(a.state(), b.state()) << "the same draws from the stream that dropout uses next";
  // Each batch is trimmed to its longest sequence, rounded onto the few lengths bucket_steps gives;
  // the batch with the most steps x rows goes first (buffers reach their size on step one).
  for (const EpochBatch& e : pa) {
    int32_t longest = 0;
    for (int64_t r : e.rows) longest = std::max(longest, lens[r]);
    EXPECT_EQ(e.steps, bucket_steps(longest));
    EXPECT_GE(pa[0].steps * static_cast<int64_t>(pa[0].rows.size()), e.steps * static_cast<int64_t>(e.rows.size()));
  }
}

// Few batch shapes (a GPU captures a CUDA graph per shape), and little padding added for it.
TEST(Batching, BucketStepsAreFewAndCloseAboveTheLongest) {
  EXPECT_EQ(bucket_steps(0), 1) << "a batch of empty sequences keeps one step";
  std::set<int64_t> shapes;
  for (int64_t longest = 1; longest <= 2000; ++longest) {
    const int64_t s = bucket_steps(longest);
    EXPECT_GE(s, std::max<int64_t>(longest, 1));
    EXPECT_LE(s - longest, longest / 8) << "at most 1/8 more steps, longest " << longest;
    if (longest <= 400) shapes.insert(std::min<int64_t>(s, 400));
  }
  EXPECT_LE(shapes.size(), 53u) << "batch shapes of an Input with up to 400 steps";
}

TEST(Batching, BucketingGroupsSimilarLengthsAndCutsPadding) {
  const int64_t n = 2000, bs = 32, T = 80;
  const std::vector<int32_t> lens = long_tailed(n, T, 5);
  Rng r1(1), r2(1);
  const auto plain = plan_epoch(spec(bs, false), n, lens, false, r1);
  const auto bucketed = plan_epoch(spec(bs, true, 16), n, lens, true, r2);
  const double p0 = padding_share(plain, lens, T), p1 = padding_share(bucketed, lens, T);
  std::printf("padding share: %.3f without bucketing, %.3f with (window of 16 batches)\n", p0, p1);
  EXPECT_GT(p0, 0.5) << "a long-tailed distribution padded to T";
  EXPECT_LT(p1, 0.25 * p0);
  // Batches are shuffled across buckets: not in length order.
  bool rising = true;
  for (size_t i = 1; i < bucketed.size(); ++i) rising = rising && bucketed[i].steps >= bucketed[i - 1].steps;
  EXPECT_FALSE(rising);
}

TEST(Batching, WithoutBucketingTheShuffledOrderIsCutInTurn) {
  const int64_t n = 50, bs = 8;
  Rng rng(4), ref(4);
  const auto plan = plan_epoch(spec(bs, false), n, {}, false, rng);
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[ref.below(static_cast<uint64_t>(i) + 1)]);
  std::vector<int64_t> got;
  for (const EpochBatch& b : plan) {
    EXPECT_EQ(b.steps, 0);
    got.insert(got.end(), b.rows.begin(), b.rows.end());
  }
  EXPECT_EQ(got, order);
  TrainSpec t = spec(bs, false);
  t.shuffle = false;
  Rng r3(4);
  EXPECT_EQ(plan_epoch(t, n, {}, false, r3)[1].rows, (std::vector<int64_t>{8, 9, 10, 11, 12, 13, 14, 15}));
}

TEST(Batching, LengthsComeFromTheDataOrTheModelsMask) {
  Config tokens = parse_config(
      "model:\n  layers: [{type: Input, shape: [null]}, {type: Embedding, input_dim: 9, output_dim: 4, mask_zero: true}, "
      "{type: LSTM, units: 4}]\n", "t.yaml");
  Config masking = parse_config(
      "model:\n  layers: [{type: Input, shape: [null, 2]}, {type: Masking, mask_value: -1.0}, {type: LSTM, units: 4}]\n",
      "m.yaml");
  Config plain = parse_config("model:\n  layers: [{type: Input, shape: [null, 2]}, {type: LSTM, units: 4}]\n", "p.yaml");
  Dataset ids;
  ids.x = Tensor({3, 5});
  const float rows[3][5] = {{3, 4, 0, 0, 0}, {1, 0, 2, 0, 0}, {5, 5, 5, 5, 5}};  // a zero inside does not end it
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 5; ++t) ids.x[b * 5 + t] = rows[b][t];
  EXPECT_EQ(sample_lengths(ids, tokens.model), (std::vector<int32_t>{2, 3, 5}));
  Dataset feats;
  feats.x = Tensor({2, 3, 2});
  feats.x.data = {1, -1, -1, -1, -1, -1, 0, 0, 0, -1, -1, -1};
  EXPECT_EQ(sample_lengths(feats, masking.model), (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(sample_lengths(feats, plain.model).empty());
  feats.lengths = {3, 1};
  EXPECT_EQ(sample_lengths(feats, plain.model), (std::vector<int32_t>{3, 1})) << "a lengths dataset comes first";

  plain.train.bucketing = true;
  const std::string why = bucketing_blocker(plain, {});
  EXPECT_HAS(why, "p.yaml");
  EXPECT_HAS(why, "train.bucketing");
  EXPECT_HAS(why, "lengths");
  EXPECT_EQ(bucketing_blocker(plain, {3, 1}), "");
}

TEST(Batching, TrimmingKeepsTheFirstStepsOfInputsAndPerStepTargets) {
  Dataset d;
  d.x = Tensor({2, 4, 1});
  d.x.data = {1, 2, 3, 4, 5, 6, 7, 8};
  d.y = Tensor({2, 4});
  d.y.data = {10, 20, 30, 40, 50, 60, 70, 80};
  d.lengths = {2, 3};
  d.w = Tensor({2, 4});
  d.w.data = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
  EpochBatch e{{1, 0}, 3};
  Batch b = gather_batch(d, e, true);
  EXPECT_EQ(b.w.data, (std::vector<float>{0.5f, 0.6f, 0.7f, 0.1f, 0.2f, 0.3f})) << "per-step sample weights";
  EXPECT_EQ(b.x.shape, (Shape{2, 3, 1}));
  EXPECT_EQ(b.x.data, (std::vector<float>{5, 6, 7, 1, 2, 3}));
  EXPECT_EQ(b.y.data, (std::vector<float>{50, 60, 70, 10, 20, 30}));
  EXPECT_EQ(b.lengths, (std::vector<int32_t>{3, 2}));
  Dataset last = d;
  last.y.data = {1, 2, 3, 4, 5, 6, 7, 8};  // [B, K] with K == T by chance
  EXPECT_EQ(gather_batch(last, e, false).y.shape, (Shape{2, 4})) << "one target per sample: not trimmed";
  EXPECT_EQ(gather_batch(d, EpochBatch{{}, 3}, true).x.shape, (Shape{0, 3, 1}))
      << "an empty share (a data-parallel rank's part of a batch smaller than the ranks)";
}

TEST(Batching, ATrimmedBatchGivesTheUntrimmedLossAndGradients) {
  // Masked steps change nothing, so dropping the padded tail must not either (CPU backend; the
  // output per step is compared where it exists).
  for (bool per_step : {false, true}) {
    Config cfg = parse_config(std::string("model:\n  layers: [{type: Input, shape: [null]}, {type: Embedding, input_dim: 9, "
                                          "output_dim: 6, mask_zero: true}, {type: Bidirectional, layer: {type: GRU, "
                                          "units: 5, return_sequences: true}}, {type: LSTM, units: 7") +
                                  (per_step ? ", return_sequences: true}, {type: TimeDistributed, layer: {type: Dense, "
                                              "units: 3}}]\n"
                                            : "}, {type: Dense, units: 3}]\n"),
                              "trim.yaml");
    cfg.device = Device::Cpu;
    Rng r1(1), r2(1);
    const Params init = rnntrain::testing::random_params(cfg.model, 3, 0.4);
    auto e1 = make_engine(cfg, init, r1);
    auto e2 = make_engine(cfg, init, r2);
    Dataset d;
    const int64_t B = 4, T = 12;
    d.x = Tensor({B, T});
    d.lengths = {5, 9, 2, 7};
    Rng rng(8);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < d.lengths[b]; ++t) d.x[b * T + t] = static_cast<float>(1 + rng.below(8));
    d.y = per_step ? rnntrain::testing::random_tensor({B, T, 3}, rng) : rnntrain::testing::random_tensor({B, 3}, rng);
    const Batch full = gather_batch(d, EpochBatch{{0, 1, 2, 3}, 0}, per_step);
    const Batch cut = gather_batch(d, EpochBatch{{0, 1, 2, 3}, 9}, per_step);
    ASSERT_EQ(cut.x.shape, (Shape{B, 9}));
    Tensor pf, pc;
    const double lf = e1->gradients(full, &pf, nullptr).mean(), lc = e2->gradients(cut, &pc, nullptr).mean();
    EXPECT_NEAR(lc, lf, 1e-6 * std::fabs(lf)) << (per_step ? "per-step" : "last-step") << " loss";
    const std::vector<Param*> gf = e1->host_params().all(), gc = e2->host_params().all();
    for (size_t i = 0; i < gf.size(); ++i)
      for (int64_t k = 0; k < gf[i]->grad.numel(); ++k)
        ASSERT_NEAR(gc[i]->grad[k], gf[i]->grad[k], 1e-6 + 1e-5 * std::fabs(gf[i]->grad[k])) << gf[i]->name << " " << k;
  }
}

class BatchingTrain : public ScratchTest {
 protected:
  BatchingTrain() : ScratchTest("batching") {}
};

TEST_F(BatchingTrain, OneBatchOfEverySampleTrainsTheSameWithAndWithoutBucketing) {
  // Full-batch steps: bucketing changes only the order inside the batch and trims its padded tail,
  // which the mask makes irrelevant: the same losses, to rounding.
  const std::string yaml = R"(model:
  layers:
    - {type: Input, shape: [null]}
    - {type: Embedding, input_dim: 9, output_dim: 8, mask_zero: true}
    - {type: GRU, units: 12, return_sequences: true}
    - {type: LSTM, units: 8}
    - {type: Dense, units: 8}
data:
  train: {format: synthetic, task: classify, samples: 96, timesteps: 30, seed: 4}
train:
  epochs: 3
  batch_size: 96
  threads: 1
  optimizer: {type: adam, learning_rate: 0.01}
  loss: {type: sparse_categorical_crossentropy, from_logits: true}
device: cpu
)";
  Config off = parse_config(yaml, path("c.yaml"));
  Config on = off;
  on.train.bucketing = true;
  off.output.dir = path("off"), on.output.dir = path("on");
  TrainOptions o;
  o.progress = false;
  DataParallel dp(Comm::world());
  const TrainResult a = train(off, o, dp), b = train(on, o, dp);
  ASSERT_EQ(a.history.epochs.size(), 3u);
  ASSERT_EQ(b.history.epochs.size(), 3u);
  for (size_t e = 0; e < 3; ++e)
    EXPECT_NEAR(b.history.epochs[e].at("loss"), a.history.epochs[e].at("loss"), 1e-5 * a.history.epochs[e].at("loss"))
        << "epoch " << e + 1;
}

// Keras' class_weight per output position: the label, the one-hot argmax, or the rounded 0/1
// target picks the class; classes not listed weigh 1.
TEST(Batching, ClassWeightsWeighEachPositionByItsTargetsClass) {
  const std::map<int64_t, double> cw = {{0, 0.5}, {2, 3.0}};
  Batch sparse;
  sparse.x = Tensor({2, 3, 1});
  sparse.y = Tensor({2, 3});
  sparse.y.data = {0, 1, 2, 2, 2, 0};
  weigh_classes(sparse, cw, true, 3);
  EXPECT_EQ(sparse.w.shape, (Shape{2, 3}));
  EXPECT_EQ(sparse.w.data, (std::vector<float>{0.5f, 1.0f, 3.0f, 3.0f, 3.0f, 0.5f}));
  Batch onehot;
  onehot.x = Tensor({2, 3, 1});
  onehot.y = Tensor({2, 3});
  onehot.y.data = {0, 0, 1, 0.9f, 0.1f, 0};
  weigh_classes(onehot, cw, false, 3);
  EXPECT_EQ(onehot.w.shape, (Shape{2}));
  EXPECT_EQ(onehot.w.data, (std::vector<float>{3.0f, 0.5f}));
  Batch binary;
  binary.x = Tensor({3, 3, 1});
  binary.y = Tensor({3, 1});
  binary.y.data = {0.2f, 0.8f, 1.0f};
  weigh_classes(binary, {{0, 0.25}, {1, 4.0}}, false, 1);
  EXPECT_EQ(binary.w.data, (std::vector<float>{0.25f, 4.0f, 4.0f}));
}

// The user trial's case: a run stopped inside an epoch and resumed with another train.batch_size
// (206 steps of 16 done, 188 steps of 32 in the new epoch) trained the rest of nothing. Cut anew, the
// rest of the epoch trains each untrained sample exactly once, in the order the epoch drew them,
// across any number of stops with other batch sizes, bucketed or not.
TEST(Batching, AResumeWithAnotherBatchSizeTrainsEachRemainingSampleOnce) {
  const int64_t n = 6000, T = 60;
  const std::vector<int32_t> lens = long_tailed(n, T, 4);
  for (bool bucketing : {false, true}) {
    Rng rng(11);
    const std::vector<EpochBatch> drawn = plan_epoch(spec(16, bucketing), n, lens, bucketing, rng);
    std::vector<int64_t> order;  // the epoch's rows in batch order
    for (const EpochBatch& b : drawn) order.insert(order.end(), b.rows.begin(), b.rows.end());
    // Stopped after 206 steps of 16, resumed with 32: the rest is (6000 - 3296) / 32 -> 85 batches.
    ResumedEpoch r = resume_epoch(drawn, rows_of(drawn, 206), 32, false, lens, bucketing);
    EXPECT_TRUE(r.recut);
    EXPECT_EQ(r.done, 206) << "the trained batches are kept as drawn";
    EXPECT_EQ(static_cast<int64_t>(r.batches.size()), 206 + (n - 206 * 16 + 31) / 32);
    std::vector<int64_t> got;
    for (const EpochBatch& b : r.batches) {
      EXPECT_LE(b.rows.size(), 32u);
      got.insert(got.end(), b.rows.begin(), b.rows.end());
    }
    EXPECT_EQ(got, order) << "every sample once, in the drawn order";
    // Stopped again 40 steps later (3296 + 1280 samples), resumed with 24: 4576 trained.
    const int64_t trained = rows_of(r.batches, r.done + 40);
    ResumedEpoch again = resume_epoch(drawn, trained, 24, false, lens, bucketing);
    EXPECT_EQ(rows_of(again.batches, again.done), trained);
    got.clear();
    for (size_t b = static_cast<size_t>(again.done); b < again.batches.size(); ++b)
      got.insert(got.end(), again.batches[b].rows.begin(), again.batches[b].rows.end());
    EXPECT_EQ(got, std::vector<int64_t>(order.begin() + trained, order.end())) << "the untrained rest, each once";
    for (size_t b = static_cast<size_t>(again.done); bucketing && b < again.batches.size(); ++b) {
      int32_t longest = 0;
      for (int64_t row : again.batches[b].rows) longest = std::max(longest, lens[row]);
      EXPECT_EQ(again.batches[b].steps, bucket_steps(longest)) << "batches cut anew are trimmed as drawn ones";
    }
    // The same batch size at a batch boundary: exactly the drawn epoch, as a resume always was.
    ResumedEpoch same = resume_epoch(drawn, rows_of(drawn, 100), 16, true, lens, bucketing);
    EXPECT_FALSE(same.recut);
    EXPECT_EQ(same.done, 100);
    ASSERT_EQ(same.batches.size(), drawn.size());
    for (size_t b = 0; b < drawn.size(); ++b) EXPECT_EQ(same.batches[b].rows, drawn[b].rows);
  }
}

TEST(Batching, TheDataFingerprintSeesAnyChangedValue) {
  Dataset d;
  d.x = Tensor({4, 3, 2});
  d.y = Tensor({4, 1});
  for (int64_t i = 0; i < d.x.numel(); ++i) d.x[i] = 0.25f * static_cast<float>(i);
  const uint64_t h = data_fingerprint(d);
  EXPECT_EQ(h, data_fingerprint(d));
  Dataset other = d;
  other.x[17] += 1e-6f;
  EXPECT_NE(h, data_fingerprint(other));
  other = d;
  other.y[3] = 1.0f;
  EXPECT_NE(h, data_fingerprint(other));
  other = d;
  other.x.shape = {4, 2, 3};  // the same values in another shape
  EXPECT_NE(h, data_fingerprint(other));
}
