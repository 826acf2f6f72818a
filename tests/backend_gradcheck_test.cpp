// Central finite-difference checks of CpuModel::backward for every layer kind and option: the loss is
// L = sum(w * y) with a random w (computed in double from the float outputs), plus the activity
// regularizers' penalty, every parameter entry
// and every input feature is perturbed by +-eps. Also the Dropout layer's contract.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "backend/cpu/cpu_model.h"
#include "backend_helpers.h"

namespace rnntrain {
namespace {

using namespace rnntrain::testing;

// Pass when |fd - analytic| <= kAtol + kRtol * max(|fd|, |analytic|). eps 3e-3 keeps the float
// round-off of the difference quotient near 1e-5; truncation error is ~eps^2.
constexpr double kEps = 3e-3;
constexpr double kRtol = 1e-2;
constexpr double kAtol = 2e-4;
// At a kink (Case::kinks) the one-sided slopes carry O(eps) truncation error.
constexpr double kKinkAtol = 2e-3;
constexpr double kKinkRtol = 2e-2;

struct Case {
  ModelSpec model;
  Tensor x;
  std::vector<int32_t> lengths;  // empty = none
  bool training = false;         // dropout on, with the rng reseeded before every forward
  // x entries not to perturb (e.g. steps a Masking layer masks: there the output is not continuous).
  std::function<bool(int64_t)> skip_x;
  bool kinks = false;  // relu / hard_sigmoid: accept a one-sided match where [v-eps, v+eps] spans a corner
};

struct Worst {
  std::string what;
  double fd = 0, an = 0, excess = -1;  // excess = |fd-an| - allowed; > 0 fails
  int checked = 0;
};

void record(Worst& w, const std::string& what, double fd, double an) {
  const double allowed = kAtol + kRtol * std::max(std::fabs(fd), std::fabs(an));
  const double excess = std::fabs(fd - an) - allowed;
  ++w.checked;
  if (excess > w.excess) w = Worst{what, fd, an, excess, w.checked};
}

void gradcheck(Case c, uint64_t seed = 7) {
  Params params = random_params(c.model, seed);
  CpuModel model(c.model, params);
  const std::vector<int32_t>* lengths = c.lengths.empty() ? nullptr : &c.lengths;
  Rng rng(seed + 1);
  double activity = 0.0;  // the activity regularizers' penalty, part of the loss
  auto run = [&](ForwardContext* ctx) {
    rng.reseed(99);
    return model.forward(c.x, lengths, c.training, rng, ctx, nullptr, &activity);
  };
  ForwardContext ctx;
  const Tensor y = run(&ctx);
  Rng wr(seed + 2);
  const Tensor w = random_tensor(y.shape, wr);
  auto loss = [&]() {
    const Tensor yy = run(nullptr);
    double l = activity;
    for (int64_t k = 0; k < yy.numel(); ++k) l += static_cast<double>(w[k]) * yy[k];
    return l;
  };
  params.zero_grad();
  const Tensor dx = model.backward(ctx, w);

  Worst worst;
  int kinks = 0;
  auto probe = [&](float& v, double analytic, const std::string& what) {
    const float orig = v;
    v = static_cast<float>(orig + kEps);
    const float hi = v;
    const double lp = loss();
    v = static_cast<float>(orig - kEps);
    const float lo = v;
    const double lm = loss();
    v = orig;
    const double central = (lp - lm) / (static_cast<double>(hi) - lo);
    if (c.kinks && std::fabs(central - analytic) > kAtol + kRtol * std::fabs(analytic)) {
      // A relu / hard_sigmoid corner inside [v-eps, v+eps]: backward must match one one-sided slope.
      const double l0 = loss();
      const double up = (lp - l0) / (static_cast<double>(hi) - orig);
      const double down = (l0 - lm) / (static_cast<double>(orig) - lo);
      const double best = std::fabs(up - analytic) < std::fabs(down - analytic) ? up : down;
      if (std::fabs(best - analytic) <= kKinkAtol + kKinkRtol * std::fabs(analytic)) {
        ++kinks;
        record(worst, what + " (one-sided, at a kink)", analytic, analytic);
        return;
      }
    }
    record(worst, what, central, analytic);
  };
  for (size_t li = 0; li < params.layers.size(); ++li) {
    for (Param& p : params.layers[li].params) {
      for (int64_t k = 0; k < p.value.numel(); ++k)
        probe(p.value[k], p.grad[k], params.layers[li].layer + "/" + p.name + "[" + std::to_string(k) + "]");
    }
  }
  if (c.model.layers[0].shape.size() == 2) {
    ASSERT_EQ(dx.shape, c.x.shape) << "dx must have the input's shape";
    for (int64_t k = 0; k < c.x.numel(); ++k) {
      if (c.skip_x && c.skip_x(k)) continue;
      probe(c.x[k], dx[k], "x[" + std::to_string(k) + "]");
    }
  } else {
    EXPECT_TRUE(dx.empty()) << "token-id inputs have no gradient";
  }
  ASSERT_GT(worst.checked, 0);
  EXPECT_LE(kinks * 4, worst.checked) << kinks << " of " << worst.checked
                                      << " entries sat on a kink: too many to trust";
  EXPECT_LE(worst.excess, 0.0) << "worst of " << worst.checked << " entries: " << worst.what
                               << " finite-difference=" << worst.fd << " backward=" << worst.an
                               << " (tolerance " << kAtol << " + " << kRtol << "*|g|)";
}

constexpr int64_t B = 2, T = 4, I = 3, H = 3;

Case features_case(std::vector<LayerSpec> layers, uint64_t xseed = 3) {
  Case c;
  layers.insert(layers.begin(), input_layer({T, I}));
  c.model = model_of(std::move(layers));
  Rng r(xseed);
  c.x = random_tensor({B, T, I}, r);
  return c;
}

LayerSpec rnn(LayerKind kind, bool seq, bool backwards = false, bool reset_after = true) {
  LayerSpec l = recurrent(kind, H, seq);
  l.go_backwards = backwards;
  l.reset_after = reset_after;
  return l;
}

// One recurrent layer in every combination the brief lists.
struct RnnParam {
  LayerKind kind;
  bool reset_after, seq, backwards, lengths;
};

std::string rnn_name(const ::testing::TestParamInfo<RnnParam>& i) {
  const RnnParam& p = i.param;
  std::string n = layer_kind_name(p.kind);
  if (p.kind == LayerKind::GRU) n += p.reset_after ? "_after" : "_before";
  n += p.seq ? "_seq" : "_last";
  if (p.backwards) n += "_backwards";
  if (p.lengths) n += "_lengths";
  return n;
}

void PrintTo(const RnnParam& p, std::ostream* os) {
  *os << layer_kind_name(p.kind) << " reset_after=" << p.reset_after << " return_sequences=" << p.seq
      << " go_backwards=" << p.backwards << " lengths=" << p.lengths;
}

class RecurrentGrad : public ::testing::TestWithParam<RnnParam> {};

TEST_P(RecurrentGrad, MatchesFiniteDifferences) {
  const RnnParam& p = GetParam();
  Case c = features_case({rnn(p.kind, p.seq, p.backwards, p.reset_after)});
  if (p.lengths) c.lengths = {4, 2};
  gradcheck(c);
}

std::vector<RnnParam> all_rnn_params() {
  std::vector<RnnParam> out;
  const std::pair<LayerKind, bool> kinds[] = {
      {LayerKind::LSTM, true}, {LayerKind::GRU, true}, {LayerKind::GRU, false}, {LayerKind::SimpleRNN, true}};
  for (auto [kind, ra] : kinds)
    for (bool seq : {true, false})
      for (bool bw : {false, true})
        for (bool len : {false, true}) out.push_back({kind, ra, seq, bw, len});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cells, RecurrentGrad, ::testing::ValuesIn(all_rnn_params()), rnn_name);

// Steps that no row of the batch uses (the time loops skip them whole, GEMM included): the last one
// by lengths, the first in processing order with go_backwards, and a hole a Masking layer makes in
// every row.
TEST(Gradcheck, StepsNoRowUses) {
  for (LayerKind k : {LayerKind::LSTM, LayerKind::GRU, LayerKind::SimpleRNN})
    for (bool reset_after : {true, false}) {
      if (k != LayerKind::GRU && !reset_after) continue;
      for (bool bw : {false, true}) {
        SCOPED_TRACE(::testing::Message() << layer_kind_name(k) << " reset_after " << reset_after << " go_backwards " << bw);
        Case c = features_case({rnn(k, true, bw, reset_after)});
        c.lengths = {3, 1};
        gradcheck(c);
        Case h = features_case({masking(0.0), rnn(k, true, bw, reset_after)});
        for (int64_t b = 0; b < B; ++b)
          for (int64_t i = 0; i < I; ++i) h.x[(b * T + 1) * I + i] = 0.0f;  // step 1 of every row
        h.skip_x = [](int64_t e) { return (e / I) % T == 1; };
        gradcheck(h);
      }
    }
}

TEST(Gradcheck, BidirectionalEveryMergeMode) {
  for (MergeMode m : {MergeMode::Concat, MergeMode::Sum, MergeMode::Mul, MergeMode::Ave}) {
    for (bool seq : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "merge_mode " << static_cast<int>(m) << " return_sequences " << seq);
      Case c = features_case({bidirectional(rnn(LayerKind::LSTM, seq), m)});
      c.lengths = {3, 4};
      gradcheck(c);
    }
  }
}

TEST(Gradcheck, BidirectionalGruAndSimpleRnnMasked) {
  for (LayerKind k : {LayerKind::GRU, LayerKind::SimpleRNN}) {
    SCOPED_TRACE(layer_kind_name(k));
    Case c = features_case({bidirectional(rnn(k, true), MergeMode::Concat)});
    c.lengths = {2, 4};
    gradcheck(c);
  }
}

TEST(Gradcheck, EmbeddingMaskZeroIntoLstm) {
  Case c;
  c.model = model_of({input_layer({T}), embedding(6, 3, true), rnn(LayerKind::LSTM, true)});
  c.x = Tensor({B, T});
  const float ids[] = {3, 1, 0, 5, 0, 2, 4, 4};  // zeros are masked steps (one leading)
  for (int k = 0; k < B * T; ++k) c.x[k] = ids[k];
  gradcheck(c);
}

TEST(Gradcheck, MaskingIntoGru) {
  Case c = features_case({masking(0.0), rnn(LayerKind::GRU, true)});
  for (int64_t i = 0; i < I; ++i) {
    c.x[(0 * T + 1) * I + i] = 0.0f;  // sample 0 step 1: a hole
    c.x[(1 * T + 0) * I + i] = 0.0f;  // sample 1 step 0: left padding
  }
  c.skip_x = [](int64_t k) {
    const int64_t step = k / I;
    return step == 0 * T + 1 || step == 1 * T + 0;
  };
  gradcheck(c);
}

TEST(Gradcheck, DenseLinearAndSoftmaxOnLastState) {
  for (Activation a : {Activation::Linear, Activation::Softmax, Activation::Tanh}) {
    SCOPED_TRACE(activation_name(a));
    gradcheck(features_case({rnn(LayerKind::SimpleRNN, false), dense(4, a)}));
  }
}

// The activations whose derivative needs the pre-activation (Dense keeps it), on a sequence and on
// the last state.
TEST(Gradcheck, DenseWithEveryActivationOfTheInput) {
  for (Activation a : {Activation::Gelu, Activation::GeluApproximate, Activation::Elu, Activation::Selu,
                       Activation::Softplus, Activation::Softsign, Activation::Silu}) {
    SCOPED_TRACE(activation_name(a));
    Case c = features_case({rnn(LayerKind::GRU, true), time_distributed(dense(4, a)), dense(3, a)});
    c.kinks = a == Activation::Elu || a == Activation::Selu || a == Activation::Softsign;  // second-derivative jumps at 0
    gradcheck(c);
  }
}

// The layers around the recurrent stacks (issue 36), each setting that changes the math.
TEST(Gradcheck, Conv1DEveryPaddingStrideAndDilation) {
  struct C {
    Padding pad;
    int64_t k, s, d;
  };
  for (C c : {C{Padding::Valid, 2, 1, 1}, C{Padding::Same, 3, 1, 1}, C{Padding::Same, 2, 2, 1},
              C{Padding::Causal, 2, 1, 2}, C{Padding::Same, 2, 1, 2}, C{Padding::Causal, 3, 2, 1}}) {
    SCOPED_TRACE(::testing::Message() << "padding " << int(c.pad) << " kernel " << c.k << " strides " << c.s
                                      << " dilation " << c.d);
    gradcheck(features_case({conv1d(4, c.k, c.pad, c.s, c.d, Activation::Tanh), rnn(LayerKind::GRU, true)}));
  }
  LayerSpec nobias = conv1d(3, 2, Padding::Same, 1, 1, Activation::Silu);
  nobias.use_bias = false;
  gradcheck(features_case({nobias}));
}

TEST(Gradcheck, PoolingsLocalAndGlobal) {
  for (LayerKind k : {LayerKind::MaxPooling1D, LayerKind::AveragePooling1D})
    for (Padding pad : {Padding::Valid, Padding::Same}) {
      SCOPED_TRACE(::testing::Message() << layer_kind_name(k) << " padding " << int(pad));
      Case c = features_case({rnn(LayerKind::LSTM, true), pooling1d(k, 3, pad, 1), pooling1d(k, 2, pad)});
      c.kinks = k == LayerKind::MaxPooling1D;
      gradcheck(c);
    }
  for (LayerKind k : {LayerKind::GlobalAveragePooling1D, LayerKind::GlobalMaxPooling1D})
    for (bool keep : {false, true}) {
      SCOPED_TRACE(::testing::Message() << layer_kind_name(k) << " keepdims " << keep);
      LayerSpec g = layer_of(k);
      g.keepdims = keep;
      Case c = features_case({rnn(LayerKind::GRU, true), g, dense(2)});
      c.lengths = {4, 2};  // the mean counts the steps the mask keeps; the max takes every step
      c.kinks = k == LayerKind::GlobalMaxPooling1D;
      gradcheck(c);
    }
}

TEST(Gradcheck, LayerNormalizationFlattenActivationAndSpatialDropout) {
  for (bool center : {true, false})
    for (bool scale : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "center " << center << " scale " << scale);
      LayerSpec ln = layer_of(LayerKind::LayerNormalization);
      ln.center = center, ln.scale = scale;
      gradcheck(features_case({rnn(LayerKind::LSTM, true), ln, rnn(LayerKind::GRU, false)}));
    }
  gradcheck(features_case({activation_layer(Activation::Softmax), layer_of(LayerKind::Flatten), dense(3, Activation::Gelu)}));
  gradcheck(features_case({activation_layer(Activation::Silu), rnn(LayerKind::SimpleRNN, true),
                           activation_layer(Activation::Softplus)}));
  LayerSpec sd = layer_of(LayerKind::SpatialDropout1D);
  sd.rate = 0.5;
  Case c = features_case({rnn(LayerKind::GRU, true), sd, time_distributed(dropout(0.3)), dense(2)});
  c.training = true;  // fixed masks: the rng is reseeded before every forward
  gradcheck(c);
}

TEST(Gradcheck, DenseAndTimeDistributedOnSequences) {
  gradcheck(features_case({dense(4, Activation::Softmax)}));
  gradcheck(features_case({rnn(LayerKind::GRU, true), time_distributed(dense(4, Activation::Sigmoid))}));
}

TEST(Gradcheck, StackOfTwoRecurrentLayers) {
  Case c = features_case({rnn(LayerKind::LSTM, true), rnn(LayerKind::GRU, false), dense(2)});
  c.lengths = {3, 4};
  gradcheck(c);
  gradcheck(features_case({rnn(LayerKind::GRU, true, false, false), rnn(LayerKind::SimpleRNN, true, true)}));
}

// Keras' activity regularizers: the penalty on each regularized output (divided by the batch size)
// is part of the loss; masked steps' outputs count (a carried state, or 0 in a Bidirectional).
TEST(Gradcheck, ActivityRegularizersOnEveryKindOfLayer) {
  LayerSpec lstm = rnn(LayerKind::LSTM, true), gru = rnn(LayerKind::GRU, true, false, false), d = dense(2);
  lstm.activity_regularizer = {0.0, 0.3};
  gru.activity_regularizer = {0.05, 0.2};
  d.activity_regularizer = {0.0, 0.5};
  Case c = features_case({masking(0.0), lstm, bidirectional(gru, MergeMode::Concat), d});
  for (int64_t i = 0; i < I; ++i) c.x[(1 * T + 3) * I + i] = 0.0f;  // sample 1's last step is masked
  c.skip_x = [](int64_t k) { return k / I == 1 * T + 3; };
  c.kinks = true;  // |y| at 0
  gradcheck(c);
  Case t;
  LayerSpec e = embedding(6, 3, true), s = rnn(LayerKind::SimpleRNN, false);
  e.activity_regularizer = {0.0, 0.4};
  s.activity_regularizer = {0.0, 0.1};
  t.model = model_of({input_layer({T}), e, s});
  t.x = Tensor({B, T});
  const float ids[] = {3, 1, 0, 5, 2, 2, 4, 0};
  for (int k = 0; k < B * T; ++k) t.x[k] = ids[k];
  gradcheck(t);
}

TEST(Gradcheck, NoBias) {
  for (LayerKind k : {LayerKind::LSTM, LayerKind::GRU, LayerKind::SimpleRNN}) {
    for (bool ra : {true, false}) {
      if (k != LayerKind::GRU && !ra) continue;
      SCOPED_TRACE(::testing::Message() << layer_kind_name(k) << " reset_after " << ra);
      LayerSpec r = rnn(k, true, false, ra);
      r.use_bias = false;
      LayerSpec d = dense(2);
      d.use_bias = false;
      gradcheck(features_case({r, d}));
    }
  }
}

TEST(Gradcheck, OtherActivations) {
  struct A {
    LayerKind kind;
    Activation act, ract;
  };
  const A cases[] = {{LayerKind::LSTM, Activation::Tanh, Activation::HardSigmoid},
                     {LayerKind::GRU, Activation::Tanh, Activation::HardSigmoidKeras2},
                     {LayerKind::LSTM, Activation::Relu, Activation::Sigmoid},
                     {LayerKind::SimpleRNN, Activation::Relu, Activation::Sigmoid},
                     {LayerKind::GRU, Activation::Linear, Activation::HardSigmoid}};
  for (const A& a : cases) {
    SCOPED_TRACE(::testing::Message() << layer_kind_name(a.kind) << " " << activation_name(a.act) << "/"
                                      << activation_name(a.ract));
    LayerSpec r = rnn(a.kind, true);
    r.activation = a.act;
    r.recurrent_activation = a.ract;
    Case c = features_case({r});
    c.kinks = true;
    gradcheck(c);
  }
}

TEST(Gradcheck, RecurrentDropoutWithFixedMasks) {
  // Training with the rng reseeded before every forward: the same dropout masks each time, so the
  // function is smooth and backward must match it, masks included.
  for (LayerKind k : {LayerKind::LSTM, LayerKind::GRU, LayerKind::SimpleRNN}) {
    for (bool ra : {true, false}) {
      if (k != LayerKind::GRU && !ra) continue;
      SCOPED_TRACE(::testing::Message() << layer_kind_name(k) << " reset_after " << ra);
      LayerSpec r = rnn(k, true, false, ra);
      r.dropout = 0.3;
      r.recurrent_dropout = 0.4;
      Case c = features_case({r, dropout(0.25), rnn(LayerKind::SimpleRNN, false)});
      c.training = true;
      c.lengths = {4, 3};
      gradcheck(c);
    }
  }
}

TEST(Dropout, RecurrentDropoutActsInTrainingOnly) {
  // Each of dropout and recurrent_dropout alone changes the training output and not inference.
  for (LayerKind k : {LayerKind::LSTM, LayerKind::GRU, LayerKind::SimpleRNN}) {
    for (bool on_input : {true, false}) {
      SCOPED_TRACE(::testing::Message() << layer_kind_name(k) << (on_input ? " dropout" : " recurrent_dropout"));
      LayerSpec r = rnn(k, true);
      (on_input ? r.dropout : r.recurrent_dropout) = 0.5;
      Case c = features_case({r});
      Params params = random_params(c.model, 2);
      CpuModel model(c.model, params);
      Rng a(1), b(2), d(3);
      const Tensor infer1 = model.forward(c.x, nullptr, false, a);
      const Tensor infer2 = model.forward(c.x, nullptr, false, b);
      const Tensor train = model.forward(c.x, nullptr, true, d);
      EXPECT_EQ(infer1.data, infer2.data) << "inference must not draw dropout masks";
      double diff = 0.0;
      for (int64_t i = 0; i < train.numel(); ++i) diff = std::max(diff, std::fabs(double(train[i]) - infer1[i]));
      EXPECT_GT(diff, 1e-3) << "training output equals inference output: the dropout was not applied";
    }
  }
}

// SpatialDropout1D drops a channel of a sequence for every step at once and scales the kept ones; in
// inference it is the identity.
TEST(Dropout, SpatialDropoutDropsWholeChannels) {
  LayerSpec sd = layer_of(LayerKind::SpatialDropout1D);
  sd.rate = 0.4;
  const int64_t b = 40, t = 20, c = 50;
  ModelSpec m = model_of({input_layer({t, c}), sd});
  Rng init(1);
  Params params = init_params(m, init);
  CpuModel model(m, params);
  Rng r(5);
  const Tensor x = random_tensor({b, t, c}, r);
  ForwardContext ctx;
  const Tensor y = model.forward(x, nullptr, true, r, &ctx);
  const Tensor dx = model.backward(ctx, x);  // dy = x: the gradient is scaled as the output
  int64_t dropped = 0, mixed = 0;
  for (int64_t i = 0; i < b; ++i)
    for (int64_t k = 0; k < c; ++k) {
      int64_t zeros = 0;
      for (int64_t s = 0; s < t; ++s) {
        const int64_t e = (i * t + s) * c + k;
        zeros += y[e] == 0.0f;
        if (y[e] != 0.0f && (std::fabs(y[e] - x[e] / 0.6f) > 1e-6f * std::fabs(y[e]) || dx[e] != y[e])) ++mixed;
      }
      dropped += zeros == t;
      mixed += zeros != 0 && zeros != t;
    }
  EXPECT_EQ(mixed, 0);
  EXPECT_NEAR(static_cast<double>(dropped) / (b * c), 0.4, 0.05);
  const Tensor eval = model.forward(x, nullptr, false, r, nullptr);
  for (int64_t k = 0; k < x.numel(); ++k) ASSERT_EQ(eval[k], x[k]) << "entry " << k;
}

TEST(Dropout, InferenceIsIdentity) {
  ModelSpec m = model_of({input_layer({T, I}), dropout(0.5)});
  Rng init(1);
  Params params = init_params(m, init);
  CpuModel model(m, params);
  Rng r(5);
  const Tensor x = random_tensor({B, T, I}, r);
  ForwardContext ctx;
  const Tensor y = model.forward(x, nullptr, false, r, &ctx);
  ASSERT_EQ(y.shape, x.shape);
  for (int64_t k = 0; k < x.numel(); ++k) ASSERT_EQ(y[k], x[k]) << "entry " << k;
  const Tensor dy = random_tensor(x.shape, r);
  const Tensor dx = model.backward(ctx, dy);
  for (int64_t k = 0; k < x.numel(); ++k) ASSERT_EQ(dx[k], dy[k]) << "entry " << k;
}

TEST(Dropout, TrainingGradientFollowsTheForwardMask) {
  const double rate = 0.3;
  const int64_t n = 4000;
  ModelSpec m = model_of({input_layer({n / 10, 10}), dropout(rate)});
  Rng init(1);
  Params params = init_params(m, init);
  CpuModel model(m, params);
  Rng r(5);
  Tensor x = random_tensor({1, n / 10, 10}, r, 0.5, 1.5);  // never zero, so y == 0 means dropped
  Rng drop(11);
  ForwardContext ctx;
  const Tensor y = model.forward(x, nullptr, true, drop, &ctx);
  const Tensor dy = random_tensor(x.shape, r);
  const Tensor dx = model.backward(ctx, dy);
  const float scale = static_cast<float>(1.0 / (1.0 - rate));
  int64_t dropped = 0;
  for (int64_t k = 0; k < n; ++k) {
    if (y[k] == 0.0f) {
      ++dropped;
      ASSERT_EQ(dx[k], 0.0f) << "entry " << k << " was dropped in forward but passes gradient";
    } else {
      ASSERT_FLOAT_EQ(y[k], x[k] * scale) << "entry " << k;
      ASSERT_FLOAT_EQ(dx[k], dy[k] * scale) << "entry " << k;
    }
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, rate, 0.03) << dropped << " of " << n << " dropped";
  // The same rng state draws the same mask.
  Rng again(11);
  const Tensor y2 = model.forward(x, nullptr, true, again);
  for (int64_t k = 0; k < n; ++k) ASSERT_EQ(y2[k], y[k]) << "entry " << k;
}

}  // namespace
}  // namespace rnntrain
