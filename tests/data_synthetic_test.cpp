// Tests of the synthetic tasks: shapes, determinism from the seed, and that each target is what
// data/README.md says it is, recomputed here from the inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "data/dataset.h"
#include "data/synthetic.h"

using namespace rnntrain;

namespace {

Dataset make(const std::string& task, int64_t samples, int64_t steps, uint64_t seed = 7) {
  DataSource src;
  src.format = DataFormat::Synthetic;
  src.task = task;
  src.samples = samples;
  src.timesteps = steps;
  src.seed = seed;
  DataMeta meta;
  return load_source(src, "", meta);
}

}  // namespace

TEST(SyntheticTest, EveryTaskIsDeterministicFromItsSeed) {
  for (const std::string& task : synthetic_tasks()) {
    Dataset a = make(task, 20, 12, 1), b = make(task, 20, 12, 1), c = make(task, 20, 12, 2);
    EXPECT_EQ(a.x.data, b.x.data) << task;
    EXPECT_EQ(a.y.data, b.y.data) << task;
    EXPECT_EQ(a.lengths, b.lengths) << task;
    EXPECT_NE(a.x.data, c.x.data) << task << ": another seed should give other data";
    EXPECT_EQ(a.size(), 20) << task;
  }
  EXPECT_EQ(make("adding", 0, 0).x.shape, (Shape{1000, 50, 2})) << "defaults: 1000 samples, the task's steps";
}

TEST(SyntheticTest, AddingTargetIsTheSumOfTheTwoMarkedValues) {
  const int64_t N = 200, T = 30;
  Dataset d = make("adding", N, T);
  ASSERT_EQ(d.x.shape, (Shape{N, T, 2}));
  ASSERT_EQ(d.y.shape, (Shape{N, 1}));
  for (int64_t n = 0; n < N; ++n) {
    double sum = 0.0;
    std::vector<int64_t> marks;
    for (int64_t t = 0; t < T; ++t) {
      const float v = d.x[(n * T + t) * 2], m = d.x[(n * T + t) * 2 + 1];
      ASSERT_TRUE(v >= 0.0f && v < 1.0f) << "value " << v << " at sample " << n << " step " << t;
      ASSERT_TRUE(m == 0.0f || m == 1.0f);
      if (m == 1.0f) marks.push_back(t), sum += v;
    }
    ASSERT_EQ(marks.size(), 2u) << "sample " << n;
    EXPECT_LT(marks[0], T / 2) << "one mark in the first half, sample " << n;
    EXPECT_GE(marks[1], T / 2) << "one mark in the second half, sample " << n;
    ASSERT_NEAR(d.y[n], sum, 1e-6) << "sample " << n;
  }
}

TEST(SyntheticTest, ParityTargetIsTheSumOfBitsModTwo) {
  const int64_t N = 100, T = 9;
  Dataset d = make("parity", N, T);
  ASSERT_EQ(d.x.shape, (Shape{N, T, 1}));
  int64_t odd = 0;
  for (int64_t n = 0; n < N; ++n) {
    int64_t ones = 0;
    for (int64_t t = 0; t < T; ++t) ones += static_cast<int64_t>(d.x[n * T + t]);
    ASSERT_EQ(d.y[n], static_cast<float>(ones % 2)) << "sample " << n;
    odd += ones % 2;
  }
  EXPECT_GT(odd, 30) << "both classes should occur";
  EXPECT_LT(odd, 70);
}

TEST(SyntheticTest, SineInputsAreNoisyWavesAndTargetsInRange) {
  const int64_t N = 50, T = 40;
  Dataset d = make("sine", N, T);
  ASSERT_EQ(d.x.shape, (Shape{N, T, 1}));
  ASSERT_EQ(d.y.shape, (Shape{N, 1}));
  double mean_sq = 0.0;
  for (float v : d.x.data) mean_sq += v * v;
  mean_sq /= static_cast<double>(d.x.numel());
  // sin^2 averages 1/2 over whole periods, the noise adds 0.01.
  EXPECT_NEAR(mean_sq, 0.51, 0.06);
  for (int64_t n = 0; n < N; ++n) EXPECT_LE(std::fabs(d.y[n]), 1.0f) << "noiseless sine value, sample " << n;
}

TEST(SyntheticTest, TokenTasksArePaddedVariableLengthSequences) {
  const int64_t N = 300, T = 16;
  Dataset copy = make("copy", N, T), cls = make("classify", N, T);
  for (const Dataset* d : {&copy, &cls}) {
    ASSERT_EQ(d->x.shape, (Shape{N, T}));
    ASSERT_EQ(d->y.shape, Shape{N});
    ASSERT_EQ(d->lengths.size(), static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) {
      const int64_t len = d->lengths[n];
      ASSERT_GE(len, T / 2);
      ASSERT_LE(len, T);
      for (int64_t t = 0; t < T; ++t) {
        const float id = d->x[n * T + t];
        if (t < len) {
          ASSERT_TRUE(id >= 1 && id <= kSyntheticTokens) << "token " << id << " sample " << n;
        } else {
          ASSERT_EQ(id, 0.0f) << "padding after the length, sample " << n << " step " << t;
        }
      }
    }
  }
  std::vector<int64_t> seen(kSyntheticTokens, 0);
  for (int64_t n = 0; n < N; ++n) {
    ASSERT_EQ(copy.y[n], copy.x[n * T] - 1) << "copy: the first token's class, sample " << n;
    std::vector<int64_t> count(kSyntheticTokens + 1, 0);
    for (int64_t t = 0; t < cls.lengths[n]; ++t) ++count[static_cast<size_t>(cls.x[n * T + t])];
    int64_t best = 1;
    for (int64_t k = 2; k <= kSyntheticTokens; ++k)
      if (count[k] > count[best]) best = k;
    ASSERT_EQ(cls.y[n], static_cast<float>(best - 1)) << "classify: the most frequent token, sample " << n;
    ++seen[static_cast<size_t>(copy.y[n])];
  }
  for (int64_t k = 0; k < kSyntheticTokens; ++k) EXPECT_GT(seen[k], 0) << "class " << k << " never occurs";
}

TEST(SyntheticTest, UnknownTaskIsAConfigErrorListingTheTasks) {
  try {
    make("addition", 10, 10);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'addition'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("adding, sine, parity, copy, classify"), std::string::npos) << msg;
  }
  EXPECT_THROW(make("adding", 10, 1), ConfigError) << "adding needs two steps";
}

TEST(SyntheticTest, SeedZeroWarnsThatEverySplitWouldGetTheSameSamples) {
  // Seed 0 is the default: a validation source without its own seed equals the training one.
  Dataset train = make("sine", 8, 10, 0);
  ::testing::internal::CaptureStderr();
  Dataset val = make("sine", 4, 10, 0);
  const std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warned.find("seed is 0"), std::string::npos) << "stderr was: " << warned;
  EXPECT_NE(warned.find("Set `seed:` to a different value on each split"), std::string::npos) << "stderr: " << warned;
  EXPECT_NE(warned.find("synthetic:sine"), std::string::npos) << "stderr: " << warned;
  // (What the warning is about: the 4 validation samples are the first 4 training ones.)
  EXPECT_TRUE(std::equal(val.x.data.begin(), val.x.data.end(), train.x.data.begin()));
  ::testing::internal::CaptureStderr();
  make("sine", 4, 10, 12);
  const std::string quiet = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(quiet.find("seed is 0"), std::string::npos) << "a seed was given, yet stderr says: " << quiet;
}

TEST(SyntheticTest, SizesBeyondMemoryAreAConfigErrorBeforeGenerating) {
  std::string msg;
  try {
    make("adding", 4000000000000LL, 50);
    ADD_FAILURE() << "generated 4e12 samples";
  } catch (const ConfigError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("more than this machine's memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fewer samples"), std::string::npos) << msg;
}
