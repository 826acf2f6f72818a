// Tests of check_dataset: each kind of mismatch between data, model and loss is caught with a
// message that names the source and the array and says what to change; good data passes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "data/dataset.h"
#include "spec/shapes.h"
#include "test_util.h"

using namespace rnntrain;

namespace {

LayerSpec layer(LayerKind kind, const std::string& name) {
  LayerSpec l;
  l.kind = kind;
  l.name = name;
  return l;
}

// Input [T, F] -> LSTM(4, return_sequences = seq) -> Dense(K).
ModelSpec feature_model(int64_t T, int64_t F, int64_t K, bool seq = false) {
  ModelSpec m;
  LayerSpec in = layer(LayerKind::Input, "input");
  in.shape = {T, F};
  LayerSpec lstm = layer(LayerKind::LSTM, "lstm");
  lstm.units = 4;
  lstm.return_sequences = seq;
  LayerSpec dense = layer(LayerKind::Dense, "dense");
  dense.units = K;
  m.layers = {in, lstm, dense};
  return m;
}

// Input [T] -> Embedding(V, 3) -> LSTM(4, return_sequences) -> Dense(V): a character LM.
ModelSpec token_model(int64_t T, int64_t V) {
  ModelSpec m;
  LayerSpec in = layer(LayerKind::Input, "input");
  in.shape = {T};
  LayerSpec emb = layer(LayerKind::Embedding, "embedding");
  emb.input_dim = V;
  emb.output_dim = 3;
  LayerSpec lstm = layer(LayerKind::LSTM, "lstm");
  lstm.units = 4;
  lstm.return_sequences = true;
  LayerSpec dense = layer(LayerKind::Dense, "dense");
  dense.units = V;
  m.layers = {in, emb, lstm, dense};
  return m;
}

LossSpec loss_of(LossKind k) {
  LossSpec l;
  l.kind = k;
  return l;
}

// N samples of [T, F] features (values 0.1 * i) and sparse labels i % K.
Dataset features(int64_t N, int64_t T, int64_t F, int64_t K) {
  Dataset d;
  d.source = "data/train.h5";
  d.x_name = "dataset 'x'";
  d.y_name = "dataset 'y'";
  d.x = Tensor({N, T, F});
  for (int64_t i = 0; i < d.x.numel(); ++i) d.x[i] = 0.1f * static_cast<float>(i);
  d.y = Tensor({N});
  for (int64_t i = 0; i < N; ++i) d.y[i] = static_cast<float>(i % K);
  return d;
}

// The DataError message of check_dataset, or a test failure if it passes.
std::string failure(const Dataset& d, const ModelSpec& m, LossKind loss, bool need_targets = true) {
  try {
    check_dataset(d, m, infer_shapes(m), loss_of(loss), need_targets);
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "check_dataset accepted data it should reject";
  return "";
}

void passes(const Dataset& d, const ModelSpec& m, LossKind loss, bool need_targets = true) {
  try {
    check_dataset(d, m, infer_shapes(m), loss_of(loss), need_targets);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "rejected good data: " << e.what();
  }
}


constexpr auto kSparse = LossKind::SparseCategoricalCrossentropy;

}  // namespace

TEST(CheckTest, GoodDataPasses) {
  passes(features(6, 5, 2, 3), feature_model(5, 2, 3), kSparse);
  passes(features(6, 9, 2, 3), feature_model(-1, 2, 3), kSparse);  // None timesteps take any length
  Dataset d = features(6, 5, 2, 3);
  d.y = Tensor({6, 1}, 0.5f);
  passes(d, feature_model(5, 2, 1), LossKind::BinaryCrossentropy);
  passes(d, feature_model(5, 2, 1), LossKind::MSE);
  d.y = Tensor({6, 3});
  for (int n = 0; n < 6; ++n) d.y[n * 3 + n % 3] = 1.0f;
  passes(d, feature_model(5, 2, 3), LossKind::CategoricalCrossentropy);
  d.y = Tensor();
  passes(d, feature_model(5, 2, 3), kSparse, /*need_targets=*/false);
}

TEST(CheckTest, InputShapeMismatchesSayWhatTheModelExpects) {
  Dataset d = features(6, 5, 2, 3);
  d.x = Tensor({6, 10});
  std::string msg = failure(d, feature_model(5, 2, 3), kSparse);
  EXPECT_HAS(msg, "data/train.h5");
  EXPECT_HAS(msg, "dataset 'x'");
  EXPECT_HAS(msg, "(6, 10)");
  EXPECT_HAS(msg, "(None, 5, 2)");
  EXPECT_HAS(msg, "last axis of size 1");
  msg = failure(features(6, 5, 3, 3), feature_model(5, 2, 3), kSparse);
  EXPECT_HAS(msg, "features 3 vs 2");
  msg = failure(features(6, 7, 2, 3), feature_model(5, 2, 3), kSparse);
  EXPECT_HAS(msg, "timesteps 7 vs 5");
}

TEST(CheckTest, NonFiniteValuesAreLocated) {
  Dataset d = features(6, 5, 2, 3);
  d.x[(3 * 5 + 4) * 2 + 1] = std::numeric_limits<float>::quiet_NaN();
  std::string msg = failure(d, feature_model(5, 2, 3), kSparse);
  EXPECT_HAS(msg, "NaN");
  EXPECT_HAS(msg, "sample 3, position (4, 1)");
  EXPECT_HAS(msg, "dataset 'x'");
  d = features(6, 5, 2, 3);
  d.y[2] = std::numeric_limits<float>::infinity();
  msg = failure(d, feature_model(5, 2, 3), kSparse);
  EXPECT_HAS(msg, "Inf");
  EXPECT_HAS(msg, "targets (dataset 'y')");
  EXPECT_HAS(msg, "sample 2");
}

TEST(CheckTest, LabelsMustFitTheOutputAndTheLoss) {
  Dataset d = features(6, 5, 2, 3);
  d.y[4] = 3.0f;
  std::string msg = failure(d, feature_model(5, 2, 3), kSparse);
  EXPECT_HAS(msg, "label 3 at sample 4 is out of range");
  EXPECT_HAS(msg, "[0, 3)");
  d.y[4] = 1.5f;
  EXPECT_HAS(failure(d, feature_model(5, 2, 3), kSparse), "not an integer");
  // One-hot targets with the sparse loss, and labels with the categorical one.
  d.y = Tensor({6, 3});
  for (int n = 0; n < 6; ++n) d.y[n * 3] = 1.0f;
  EXPECT_HAS(failure(d, feature_model(5, 2, 3), kSparse), "look one-hot");
  d.y[4] = 0.5f;  // row 1 is (1, 0.5, 0)
  msg = failure(d, feature_model(5, 2, 3), LossKind::CategoricalCrossentropy);
  EXPECT_HAS(msg, "the row of sample 1 sums to 1.5");
  d = features(6, 5, 2, 3);
  EXPECT_HAS(failure(d, feature_model(5, 2, 3), LossKind::CategoricalCrossentropy), "sparse_categorical_crossentropy");
  d.y = Tensor({6, 1}, 1.0f);
  d.y[5] = 2.0f;
  msg = failure(d, feature_model(5, 2, 1), LossKind::BinaryCrossentropy);
  EXPECT_HAS(msg, "value 2 at sample 5");
  EXPECT_HAS(msg, "0/1");
  // Sequence output vs one target per sample, and the reverse.
  d = features(6, 5, 2, 3);
  EXPECT_HAS(failure(d, feature_model(5, 2, 3, /*seq=*/true), LossKind::MSE), "return_sequences: false");
  d.y = Tensor({6, 5, 3});
  EXPECT_HAS(failure(d, feature_model(5, 2, 3), LossKind::MSE), "return_sequences: true");
  d.y = Tensor({6, 4});
  EXPECT_HAS(failure(d, feature_model(5, 2, 3), LossKind::MSE), "units");
}

TEST(CheckTest, CountsAndLengthsMustAgree) {
  Dataset d = features(6, 5, 2, 3);
  d.y = Tensor({5});
  std::string msg = failure(d, feature_model(5, 2, 3), kSparse);
  EXPECT_HAS(msg, "have 5 samples but inputs (dataset 'x') have 6");
  d = features(6, 5, 2, 3);
  d.y = Tensor();
  EXPECT_HAS(failure(d, feature_model(5, 2, 3), kSparse), "no targets");
  d = features(6, 5, 2, 3);
  d.lengths = {5, 5, 1, 6, 2, 3};
  msg = failure(d, feature_model(5, 2, 3), kSparse);
  EXPECT_HAS(msg, "sequence length 6 of sample 3 is outside [1, 5]");
  d.lengths = {5, 0, 1, 5, 2, 3};
  EXPECT_HAS(failure(d, feature_model(5, 2, 3), kSparse), "length 0 of sample 1");
  d.lengths = {5, 5};
  EXPECT_HAS(failure(d, feature_model(5, 2, 3), kSparse), "2 sequence lengths for 6 samples");
}

// Sample weights: one per sample, or per sample and timestep for an output per timestep; finite, >= 0.
TEST(CheckTest, SampleWeightsMustFitTheOutputAndBeNonNegative) {
  Dataset d = features(6, 5, 2, 3);
  d.w = Tensor({6}, 1.0f);
  passes(d, feature_model(5, 2, 3), kSparse);
  d.w = Tensor({4}, 1.0f);
  EXPECT_HAS(failure(d, feature_model(5, 2, 3), kSparse), "sample weights (sample_weight) have 4 samples but inputs");
  d.w = Tensor({6, 5}, 1.0f);
  EXPECT_HAS(failure(d, feature_model(5, 2, 3), kSparse), "give one weight per sample, shape (6,).");
  d.y = Tensor({6, 5});
  passes(d, feature_model(5, 2, 3, true), kSparse);  // per timestep of an output per timestep
  d.w[7] = -1.0f;
  EXPECT_HAS(failure(d, feature_model(5, 2, 3, true), kSparse), "sample weight -1 at sample 1, position (2)");
  d.w[7] = std::nanf("");
  EXPECT_HAS(failure(d, feature_model(5, 2, 3, true), kSparse), "not a finite number >= 0");
}

TEST(CheckTest, TokenIdsMustBeIntegersBelowInputDim) {
  Dataset d;
  d.source = "data/text.txt";
  d.x_name = "character ids";
  d.y_name = "next-character ids";
  d.x = Tensor({2, 4});
  d.y = Tensor({2, 4});
  for (int i = 0; i < 8; ++i) d.x[i] = d.y[i] = static_cast<float>(i % 10);
  passes(d, token_model(4, 10), kSparse);
  passes(d, token_model(-1, 10), kSparse);
  d.x[6] = 12.0f;
  std::string msg = failure(d, token_model(4, 10), kSparse);
  EXPECT_HAS(msg, "token id 12 at sample 1, position (2) in inputs (character ids) is out of range");
  EXPECT_HAS(msg, "'embedding'");
  EXPECT_HAS(msg, "input_dim to at least 13");
  d.x[6] = 2.5f;
  EXPECT_HAS(failure(d, token_model(4, 10), kSparse), "not an integer");
  d.x[6] = 1.0f;
  d.y[7] = 10.0f;
  EXPECT_HAS(failure(d, token_model(4, 10), kSparse), "label 10 at sample 1, position (3)");
}

TEST(CheckTest, MessagesSpellTheLossAsTheConfigDoes) {
  // check_dataset and the train library share one loss_name: the spelling a user writes in train.loss
  // (model_loss_test checks every spelling).
  Dataset d = features(6, 5, 2, 3);
  d.y = Tensor({6, 4});
  const std::string msg = failure(d, feature_model(5, 2, 3), LossKind::MSE);
  EXPECT_HAS(msg, "loss mse expects targets of shape (None, 3)");
  EXPECT_HAS(failure(d, feature_model(5, 2, 3), LossKind::MAE), "loss mae expects");
}
