// init_params and fill_init: Keras weight names, shapes and order for every layer kind (checked
// against infer_shapes' counts), initialiser ranges and statistics, orthogonality, unit_forget_bias,
// and determinism from the seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/error.h"
#include "model/params.h"
#include "spec/shapes.h"

namespace rnntrain {
namespace {

LayerSpec layer(LayerKind kind, const std::string& name) {
  LayerSpec l;
  l.kind = kind;
  l.name = name;
  return l;
}

LayerSpec rnn(LayerKind kind, const std::string& name, int64_t units, bool seq) {
  LayerSpec l = layer(kind, name);
  l.units = units;
  l.return_sequences = seq;
  return l;
}

// Every weighted layer kind once, in a valid stack: [T=5, F=3] features.
ModelSpec every_layer() {
  ModelSpec m;
  LayerSpec in = layer(LayerKind::Input, "input");
  in.shape = {5, 3};
  m.layers.push_back(in);
  m.layers.push_back(layer(LayerKind::Masking, "masking"));
  LayerSpec bi = layer(LayerKind::Bidirectional, "bidirectional");
  bi.inner = std::make_shared<LayerSpec>(rnn(LayerKind::LSTM, "lstm", 4, true));
  m.layers.push_back(bi);
  m.layers.push_back(rnn(LayerKind::GRU, "gru", 6, true));
  LayerSpec gru_before = rnn(LayerKind::GRU, "gru_1", 5, true);
  gru_before.reset_after = false;
  m.layers.push_back(gru_before);
  m.layers.push_back(rnn(LayerKind::SimpleRNN, "simple_rnn", 7, true));
  LayerSpec drop = layer(LayerKind::Dropout, "dropout");
  drop.rate = 0.5;
  m.layers.push_back(drop);
  LayerSpec td = layer(LayerKind::TimeDistributed, "time_distributed");
  LayerSpec inner_dense = rnn(LayerKind::Dense, "dense", 8, false);
  inner_dense.activation = Activation::Linear;
  td.inner = std::make_shared<LayerSpec>(inner_dense);
  m.layers.push_back(td);
  LayerSpec nobias = rnn(LayerKind::LSTM, "lstm_1", 3, false);
  nobias.use_bias = false;
  m.layers.push_back(nobias);
  LayerSpec out = rnn(LayerKind::Dense, "dense_1", 2, false);
  out.activation = Activation::Softmax;
  m.layers.push_back(out);
  return m;
}

std::vector<std::string> names(const LayerParams& lp) {
  std::vector<std::string> n;
  for (const Param& p : lp.params) n.push_back(p.name);
  return n;
}

TEST(InitParams, ShapesAndCountsMatchShapeInference) {
  const ModelSpec m = every_layer();
  Rng rng(1);
  Params p = init_params(m, rng);
  const std::vector<LayerShape> shapes = infer_shapes(m);
  ASSERT_EQ(p.layers.size(), m.layers.size());
  int64_t total = 0;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    int64_t n = 0;
    for (const Param& q : p.layers[i].params) {
      EXPECT_EQ(q.grad.shape, q.value.shape) << m.layers[i].name << "/" << q.name;
      for (float g : q.grad.data) ASSERT_EQ(g, 0.0f) << m.layers[i].name << "/" << q.name << " grad starts at 0";
      n += q.value.numel();
    }
    EXPECT_EQ(p.layers[i].layer, m.layers[i].name);
    EXPECT_EQ(n, shapes[i].params) << "layer " << m.layers[i].name;
    total += n;
  }
  EXPECT_EQ(p.count(), total);
  EXPECT_EQ(p.all().size(), 6u + 3u + 3u + 3u + 2u + 2u + 2u);

  using S = std::vector<std::string>;
  EXPECT_EQ(names(p.layers[2]), (S{"forward/kernel", "forward/recurrent_kernel", "forward/bias", "backward/kernel",
                                   "backward/recurrent_kernel", "backward/bias"}));
  EXPECT_EQ(p.layers[2].params[0].value.shape, (Shape{3, 16}));
  EXPECT_EQ(p.layers[2].params[4].value.shape, (Shape{4, 16}));
  EXPECT_EQ(p.layers[3].params[0].value.shape, (Shape{8, 18})) << "GRU after a concat Bidirectional(4)";
  EXPECT_EQ(p.layers[3].params[2].value.shape, (Shape{2, 18})) << "GRU reset_after bias";
  EXPECT_EQ(p.layers[4].params[2].value.shape, (Shape{15})) << "GRU reset_after=false bias";
  EXPECT_EQ(p.layers[5].params[1].value.shape, (Shape{7, 7}));
  EXPECT_EQ(p.layers[5].params[2].value.shape, (Shape{7}));
  EXPECT_EQ(names(p.layers[7]), (S{"kernel", "bias"}));
  EXPECT_EQ(p.layers[7].params[0].value.shape, (Shape{7, 8}));
  EXPECT_EQ(names(p.layers[8]), (S{"kernel", "recurrent_kernel"})) << "use_bias false: no bias";
  EXPECT_TRUE(p.layers[1].params.empty() && p.layers[6].params.empty() && p.layers[0].params.empty());

  ModelSpec e;
  LayerSpec in = layer(LayerKind::Input, "input");
  in.shape = {9};
  e.layers.push_back(in);
  LayerSpec emb = layer(LayerKind::Embedding, "embedding");
  emb.input_dim = 50;
  emb.output_dim = 6;
  e.layers.push_back(emb);
  Params pe = init_params(e, rng);
  ASSERT_EQ(pe.layers[1].params.size(), 1u);
  EXPECT_EQ(pe.layers[1].params[0].name, "embeddings");
  EXPECT_EQ(pe.layers[1].params[0].value.shape, (Shape{50, 6}));
  for (float v : pe.layers[1].params[0].value.data) ASSERT_TRUE(v >= -0.05f && v <= 0.05f) << v;
}

TEST(InitParams, DeterministicFromTheSeed) {
  const ModelSpec m = every_layer();
  Rng a(42), b(42), c(43);
  Params pa = init_params(m, a), pb = init_params(m, b), pc = init_params(m, c);
  const auto xa = pa.all(), xb = pb.all(), xc = pc.all();
  bool differs = false;
  for (size_t k = 0; k < xa.size(); ++k) {
    ASSERT_EQ(xa[k]->value.data, xb[k]->value.data) << "weight " << k << " (" << xa[k]->name << ")";
    differs = differs || xa[k]->value.data != xc[k]->value.data;
  }
  EXPECT_TRUE(differs) << "another seed gives other weights";
}

TEST(InitParams, UnitForgetBias) {
  ModelSpec m;
  LayerSpec in = layer(LayerKind::Input, "input");
  in.shape = {4, 2};
  m.layers.push_back(in);
  const int64_t H = 5;
  LayerSpec l = rnn(LayerKind::LSTM, "lstm", H, false);
  l.bias_initializer = {InitKind::Constant, 0.25};
  m.layers.push_back(l);
  Rng rng(3);
  Params p = init_params(m, rng);
  const Tensor& b = p.layers[1].params[2].value;
  ASSERT_EQ(b.shape, (Shape{4 * H}));
  for (int64_t j = 0; j < 4 * H; ++j) EXPECT_EQ(b[j], (j >= H && j < 2 * H) ? 1.0f : 0.25f) << "bias[" << j << "]";
  m.layers[1].unit_forget_bias = false;
  Params q = init_params(m, rng);
  for (int64_t j = 0; j < 4 * H; ++j) EXPECT_EQ(q.layers[1].params[2].value[j], 0.25f) << "bias[" << j << "]";
}

// Mean and standard deviation of t's entries.
void moments(const Tensor& t, double& mean, double& sd) {
  double s = 0, s2 = 0;
  for (float v : t.data) s += v;
  mean = s / t.numel();
  for (float v : t.data) s2 += (v - mean) * (v - mean);
  sd = std::sqrt(s2 / t.numel());
}

TEST(FillInit, UniformFamiliesStayInTheirKerasLimits) {
  struct U {
    InitKind kind;
    double limit;  // for a [200, 300] kernel
  };
  const double fi = 200, fo = 300;
  const U cases[] = {{InitKind::GlorotUniform, std::sqrt(6.0 / (fi + fo))},
                     {InitKind::HeUniform, std::sqrt(6.0 / fi)},
                     {InitKind::LecunUniform, std::sqrt(3.0 / fi)}};
  Rng rng(9);
  for (const U& u : cases) {
    Tensor t({200, 300});
    fill_init(t, Initializer{u.kind}, rng);
    double mx = 0, mean, sd;
    for (float v : t.data) mx = std::max(mx, std::fabs(static_cast<double>(v)));
    moments(t, mean, sd);
    EXPECT_LE(mx, u.limit) << "kind " << static_cast<int>(u.kind);
    EXPECT_GE(mx, 0.99 * u.limit) << "the range is used up to the limit";
    EXPECT_NEAR(sd, u.limit / std::sqrt(3.0), 0.01 * u.limit) << "uniform standard deviation";
    EXPECT_NEAR(mean, 0.0, 0.01 * u.limit);
  }
  Tensor r({100, 100});
  fill_init(r, Initializer{InitKind::RandomUniform, -0.05, 0.05}, rng);
  for (float v : r.data) ASSERT_TRUE(v >= -0.05f && v <= 0.05f) << v;
}

TEST(FillInit, NormalFamiliesHaveKerasStandardDeviations) {
  const double fi = 200, fo = 300;
  Rng rng(10);
  Tensor t({200, 300});
  double mean, sd;
  fill_init(t, Initializer{InitKind::GlorotNormal}, rng);
  moments(t, mean, sd);
  const double want = std::sqrt(2.0 / (fi + fo));  // truncated at 2 sigma of sqrt(2/(fi+fo))/0.8796...
  EXPECT_NEAR(sd, want, 0.02 * want);
  double mx = 0;
  for (float v : t.data) mx = std::max(mx, std::fabs(static_cast<double>(v)));
  EXPECT_LE(mx, 2.0 * want / 0.87962566103423978 * (1 + 1e-6)) << "truncated at two standard deviations";
  fill_init(t, Initializer{InitKind::HeNormal}, rng);
  moments(t, mean, sd);
  EXPECT_NEAR(sd, std::sqrt(2.0 / fi), 0.02 * std::sqrt(2.0 / fi));
  fill_init(t, Initializer{InitKind::RandomNormal, 0.5, 0.05}, rng);
  moments(t, mean, sd);
  EXPECT_NEAR(mean, 0.5, 0.002);
  EXPECT_NEAR(sd, 0.05, 0.002);
  fill_init(t, Initializer{InitKind::Ones}, rng);
  EXPECT_EQ(t[123], 1.0f);
  fill_init(t, Initializer{InitKind::Constant, -2.5}, rng);
  EXPECT_EQ(t[7], -2.5f);
  fill_init(t, Initializer{InitKind::Zeros}, rng);
  EXPECT_EQ(t[7], 0.0f);
}

// max |A A^T - gain^2 I| over a [r, c] tensor with r <= c (rows orthonormal), else A^T A.
double orthogonality_error(const Tensor& a, double gain) {
  const int64_t r = a.dim(0), c = a.dim(1);
  const bool rows = r <= c;
  const int64_t n = rows ? r : c, len = rows ? c : r;
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double d = 0;
      for (int64_t k = 0; k < len; ++k)
        d += rows ? static_cast<double>(a[i * c + k]) * a[j * c + k] : static_cast<double>(a[k * c + i]) * a[k * c + j];
      worst = std::max(worst, std::fabs(d - (i == j ? gain * gain : 0.0)));
    }
  }
  return worst;
}

TEST(FillInit, OrthogonalIsOrthogonalOverTheWholeMatrix) {
  Rng rng(4);
  for (Shape s : {Shape{16, 64}, Shape{64, 16}, Shape{20, 20}, Shape{1, 8}}) {
    for (double gain : {1.0, 0.5}) {
      Tensor t(s);
      fill_init(t, Initializer{InitKind::Orthogonal, gain}, rng);
      EXPECT_LE(orthogonality_error(t, gain), 2e-6) << "shape " << shape_str(s) << " gain " << gain;
    }
  }
  // Each gate block of an LSTM recurrent kernel alone is not orthogonal: the whole [H, 4H] is.
  Tensor u({8, 32});
  fill_init(u, Initializer{InitKind::Orthogonal, 1.0}, rng);
  Tensor block({8, 8});
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t j = 0; j < 8; ++j) block[i * 8 + j] = u[i * 32 + j];
  EXPECT_GT(orthogonality_error(block, 1.0), 0.1) << "a gate block should not be orthogonal on its own";
}

TEST(FillInit, OrthogonalOnAVectorIsAConfigError) {
  ModelSpec m;
  LayerSpec in = layer(LayerKind::Input, "input");
  in.shape = {4, 2};
  m.layers.push_back(in);
  LayerSpec l = rnn(LayerKind::SimpleRNN, "simple_rnn", 3, false);
  l.bias_initializer = {InitKind::Orthogonal, 1.0};
  m.layers.push_back(l);
  Rng rng(1);
  try {
    init_params(m, rng);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("simple_rnn"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bias"), std::string::npos) << e.what();
  }
}

TEST(Params, ZeroGradClearsEveryGradient) {
  Rng rng(1);
  Params p = init_params(every_layer(), rng);
  for (Param* q : p.all()) q->grad.data.assign(q->grad.numel(), 3.0f);
  p.zero_grad();
  for (Param* q : p.all())
    for (float g : q->grad.data) ASSERT_EQ(g, 0.0f) << q->name;
}

}  // namespace
}  // namespace rnntrain
