// CpuModel forward against values computed here, independently, from the cell equations
// (docs keras-hdf5.md section 3) with plain loops in double: LSTM, GRU (both variants), SimpleRNN,
// activations, masking and carried-over state, go_backwards, Bidirectional merges, Dense softmax,
// Embedding mask_zero, the mask handed to the loss, and the errors a user can trigger.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "backend/cpu/cpu_math.h"
#include "backend/cpu/cpu_model.h"
#include "backend_helpers.h"
#include "backend_reference.h"
#include "core/error.h"

namespace rnntrain {
namespace {

using namespace rnntrain::testing;

constexpr double kAtol = 2e-6;  // expect_close: |cpu - ref| <= kAtol + kRtol * |ref|
constexpr double kRtol = 2e-5;

void expect_close(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  expect_close_to(got, want, kAtol, kRtol, what);
}

constexpr int64_t B = 2, I = 3, H = 4;

// Distinct offsets per gate block on top of the random biases, so swapped gates cannot agree.
void offset_gate_blocks(Param& bias, int64_t H) {
  for (int64_t k = 0; k < bias.value.numel(); ++k) bias.value[k] += 0.2f * static_cast<float>((k / H) % 4) - 0.3f;
}

struct Built {
  ModelSpec spec;
  Params params;
};

Built build(std::vector<LayerSpec> layers, int64_t T, uint64_t seed = 17) {
  layers.insert(layers.begin(), input_layer({T, I}));
  Built b;
  b.spec = model_of(std::move(layers));
  b.params = random_params(b.spec, seed);
  for (LayerParams& lp : b.params.layers)
    for (Param& p : lp.params)
      if (p.name.size() >= 4 && p.name.substr(p.name.size() - 4) == "bias") offset_gate_blocks(p, H);
  return b;
}

RefRnn ref_of(const Built& m, size_t layer, size_t first = 0, bool go_backwards = false, bool zero_masked = false) {
  const LayerSpec& l = m.spec.layers[layer];
  const LayerSpec* r = l.kind == LayerKind::Bidirectional ? l.inner.get() : &l;
  const auto& ps = m.params.layers[layer].params;
  return RefRnn{r, &ps[first], &ps[first + 1], r->use_bias ? &ps[first + 2] : nullptr, go_backwards, zero_masked};
}

Tensor input(int64_t T, uint64_t seed = 5) {
  Rng r(seed);
  return random_tensor({B, T, I}, r);
}

Tensor run(Built& m, const Tensor& x, const std::vector<int32_t>* lengths = nullptr, Tensor* out_mask = nullptr) {
  CpuModel model(m.spec, m.params);
  Rng rng(1);
  return model.forward(x, lengths, false, rng, nullptr, out_mask);
}

struct CellCase {
  LayerKind kind;
  bool reset_after;
  int64_t T;
};

void PrintTo(const CellCase& c, std::ostream* os) {
  *os << layer_kind_name(c.kind) << (c.reset_after ? "" : " reset_after=false") << " T=" << c.T;
}

class CellForward : public ::testing::TestWithParam<CellCase> {};

TEST_P(CellForward, MatchesTheEquations) {
  const CellCase& c = GetParam();
  LayerSpec l = recurrent(c.kind, H, true);
  l.reset_after = c.reset_after;
  Built m = build({l}, c.T);
  const Tensor x = input(c.T);
  expect_close(run(m, x), ref_rnn(ref_of(m, 1), x, {}), "return_sequences output");
  m.spec.layers[1].return_sequences = false;
  LayerSpec last = m.spec.layers[1];
  expect_close(run(m, x), ref_rnn(RefRnn{&last, &m.params.layers[1].params[0], &m.params.layers[1].params[1],
                                         &m.params.layers[1].params[2], false, false},
                                  x, {}),
               "last output");
}

INSTANTIATE_TEST_SUITE_P(Cells, CellForward,
                         ::testing::Values(CellCase{LayerKind::LSTM, true, 1}, CellCase{LayerKind::LSTM, true, 2},
                                           CellCase{LayerKind::GRU, true, 1}, CellCase{LayerKind::GRU, true, 2},
                                           CellCase{LayerKind::GRU, false, 1}, CellCase{LayerKind::GRU, false, 2},
                                           CellCase{LayerKind::SimpleRNN, true, 1},
                                           CellCase{LayerKind::SimpleRNN, true, 2}),
                         [](const auto& i) {
                           std::string n = layer_kind_name(i.param.kind);
                           if (i.param.kind == LayerKind::GRU) n += i.param.reset_after ? "_after" : "_before";
                           return n + "_T" + std::to_string(i.param.T);
                         });

TEST(CellForward, OtherActivationsAndNoBias) {
  struct A {
    LayerKind kind;
    Activation act, ract;
    bool use_bias, reset_after;
  };
  const A cases[] = {{LayerKind::LSTM, Activation::Tanh, Activation::HardSigmoid, true, true},
                     {LayerKind::LSTM, Activation::Relu, Activation::HardSigmoidKeras2, true, true},
                     {LayerKind::GRU, Activation::Tanh, Activation::HardSigmoidKeras2, true, false},
                     {LayerKind::GRU, Activation::Linear, Activation::Sigmoid, false, true},
                     {LayerKind::SimpleRNN, Activation::Relu, Activation::Sigmoid, true, true},
                     {LayerKind::SimpleRNN, Activation::Linear, Activation::Sigmoid, false, true},
                     {LayerKind::LSTM, Activation::Tanh, Activation::Sigmoid, false, true}};
  for (const A& a : cases) {
    SCOPED_TRACE(::testing::Message() << layer_kind_name(a.kind) << " " << activation_name(a.act) << "/"
                                      << activation_name(a.ract) << " use_bias " << a.use_bias);
    LayerSpec l = recurrent(a.kind, H, true);
    l.activation = a.act;
    l.recurrent_activation = a.ract;
    l.use_bias = a.use_bias;
    l.reset_after = a.reset_after;
    Built m = build({l}, 3);
    ASSERT_EQ(m.params.layers[1].params.size(), a.use_bias ? 3u : 2u);
    const Tensor x = input(3);
    expect_close(run(m, x), ref_rnn(ref_of(m, 1), x, {}), "output");
  }
}

TEST(CellForward, GoBackwardsReturnsTheReversedProcessingOrder) {
  for (LayerKind k : {LayerKind::LSTM, LayerKind::GRU, LayerKind::SimpleRNN}) {
    SCOPED_TRACE(layer_kind_name(k));
    LayerSpec l = recurrent(k, H, true);
    l.go_backwards = true;
    Built m = build({l}, 3);
    const Tensor x = input(3);
    const Tensor y = run(m, x);
    expect_close(y, ref_rnn(ref_of(m, 1, 0, true), x, {}), "go_backwards output");
    // Step 0 of the output has seen only the last input step: a forward run over x[:, T-1] alone.
    Built one = m;
    one.spec.layers[0].shape = {1, I};
    one.spec.layers[1].go_backwards = false;
    Tensor last({B, 1, I});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < I; ++i) last[b * I + i] = x[(b * 3 + 2) * I + i];
    const Tensor y1 = run(one, last);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j)
        EXPECT_FLOAT_EQ(y[(b * 3 + 0) * H + j], y1[b * H + j]) << "sample " << b << " unit " << j;
  }
}

TEST(Masking, MaskedStepsCarryTheStateOver) {
  const int64_t T = 5;
  for (LayerKind k : {LayerKind::LSTM, LayerKind::GRU, LayerKind::SimpleRNN}) {
    SCOPED_TRACE(layer_kind_name(k));
    Built m = build({masking(0.0), recurrent(k, H, true)}, T);
    Tensor x = input(T);
    // sample 0: a hole at step 2; sample 1: leading step 0 and trailing step 4 masked.
    const std::vector<int> mask = {1, 1, 0, 1, 1, 0, 1, 1, 1, 0};
    for (int64_t s = 0; s < B * T; ++s)
      if (!mask[s])
        for (int64_t i = 0; i < I; ++i) x[s * I + i] = 0.0f;
    Tensor out_mask;
    const Tensor y = run(m, x, nullptr, &out_mask);
    expect_close(y, ref_rnn(ref_of(m, 2), x, mask), "masked output");
    for (int64_t j = 0; j < H; ++j) {
      EXPECT_EQ(y[(0 * T + 2) * H + j], y[(0 * T + 1) * H + j]) << "hole: the previous output repeats";
      EXPECT_EQ(y[(1 * T + 0) * H + j], 0.0f) << "before the first used step the output is 0";
      EXPECT_EQ(y[(1 * T + 4) * H + j], y[(1 * T + 3) * H + j]) << "trailing padding repeats the last output";
    }
    ASSERT_EQ(out_mask.shape, (Shape{B, T}));
    for (int64_t s = 0; s < B * T; ++s) EXPECT_EQ(out_mask[s], static_cast<float>(mask[s])) << "mask entry " << s;
  }
}

TEST(Masking, LengthsGiveTheLastUnmaskedState) {
  const int64_t T = 4;
  const std::vector<int32_t> lengths = {4, 2};
  Built seq = build({recurrent(LayerKind::LSTM, H, true)}, T);
  Built last = seq;
  last.spec.layers[1].return_sequences = false;
  const Tensor x = input(T);
  Tensor out_mask;
  const Tensor ys = run(seq, x, &lengths, &out_mask);
  const Tensor yl = run(last, x, &lengths);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < H; ++j)
      EXPECT_EQ(yl[b * H + j], ys[(b * T + lengths[b] - 1) * H + j]) << "sample " << b << " unit " << j;
  const std::vector<int> mask = {1, 1, 1, 1, 1, 1, 0, 0};
  expect_close(ys, ref_rnn(ref_of(seq, 1), x, mask), "lengths-masked output");
  ASSERT_EQ(out_mask.shape, (Shape{B, T})) << "a lengths mask reaches a sequence output";
  for (int64_t s = 0; s < B * T; ++s) EXPECT_EQ(out_mask[s], static_cast<float>(mask[s]));
  Tensor none({1});
  run(last, x, &lengths, &none);
  EXPECT_TRUE(none.empty()) << "no mask for an output without a time axis";
}

TEST(Masking, MaskingLayerZeroesMaskedInputsWithNonZeroValue) {
  const int64_t T = 3;
  Built m = build({masking(-1.0), time_distributed(dense(H))}, T);
  Tensor x = input(T);
  for (int64_t i = 0; i < I; ++i) x[(1 * T + 1) * I + i] = -1.0f;  // sample 1 step 1: all mask_value
  x[(0 * T + 0) * I + 0] = -1.0f;                                    // one feature only: not masked
  Tensor out_mask;
  const Tensor y = run(m, x, nullptr, &out_mask);
  const Param& bias = m.params.layers[2].params[1];
  for (int64_t j = 0; j < H; ++j) EXPECT_FLOAT_EQ(y[(1 * T + 1) * H + j], bias.value[j]) << "masked input is zeroed";
  ASSERT_EQ(out_mask.numel(), B * T);
  EXPECT_EQ(out_mask[0], 1.0f);
  EXPECT_EQ(out_mask[1 * T + 1], 0.0f);
}

TEST(Bidirectional, MergeModesAndZeroMaskedOutputs) {
  const int64_t T = 4;
  const std::vector<int32_t> lengths = {4, 2};
  const std::vector<int> mask = {1, 1, 1, 1, 1, 1, 0, 0};
  for (bool seq : {true, false}) {
    for (MergeMode mode : {MergeMode::Concat, MergeMode::Sum, MergeMode::Mul, MergeMode::Ave}) {
      SCOPED_TRACE(::testing::Message() << "return_sequences " << seq << " merge " << static_cast<int>(mode));
      Built m = build({bidirectional(recurrent(LayerKind::GRU, H, seq), mode)}, T);
      const Tensor x = input(T);
      const std::vector<double> f = ref_rnn(ref_of(m, 1, 0, false, seq), x, mask);
      std::vector<double> bw = ref_rnn(ref_of(m, 1, 3, true, seq), x, mask);
      if (seq) {  // flip the backward output back to time order
        std::vector<double> flipped(bw.size());
        for (int64_t b = 0; b < B; ++b)
          for (int64_t t = 0; t < T; ++t)
            for (int64_t j = 0; j < H; ++j) flipped[(b * T + t) * H + j] = bw[(b * T + (T - 1 - t)) * H + j];
        bw = flipped;
      }
      const int64_t rows = static_cast<int64_t>(f.size()) / H;
      std::vector<double> want;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < H; ++j) {
          const double a = f[r * H + j], b = bw[r * H + j];
          if (mode == MergeMode::Concat) want.push_back(a);
          else if (mode == MergeMode::Sum) want.push_back(a + b);
          else if (mode == MergeMode::Mul) want.push_back(a * b);
          else want.push_back((a + b) / 2.0);
        }
        if (mode == MergeMode::Concat)
          for (int64_t j = 0; j < H; ++j) want.push_back(bw[r * H + j]);
      }
      const Tensor y = run(m, x, &lengths);
      expect_close(y, want, "merged output");
      if (seq && mode == MergeMode::Concat) {
        for (int64_t j = 0; j < 2 * H; ++j) EXPECT_EQ(y[(1 * T + 3) * 2 * H + j], 0.0f) << "masked step output is 0";
      }
    }
  }
}

TEST(Dense, SoftmaxOverTheLastAxis) {
  const int64_t T = 3, K = 5;
  Built m = build({dense(K, Activation::Softmax)}, T);
  const Tensor x = input(T);
  const Tensor y = run(m, x);
  ASSERT_EQ(y.shape, (Shape{B, T, K}));
  const Param& w = m.params.layers[1].params[0];
  const Param& b = m.params.layers[1].params[1];
  std::vector<double> want;
  for (int64_t r = 0; r < B * T; ++r) {
    std::vector<double> z(K);
    double mx = -1e300, sum = 0.0;
    for (int64_t k = 0; k < K; ++k) {
      z[k] = b.value[k];
      for (int64_t i = 0; i < I; ++i) z[k] += static_cast<double>(x[r * I + i]) * w.value[i * K + k];
      mx = std::max(mx, z[k]);
    }
    for (double& v : z) sum += std::exp(v - mx);
    for (double v : z) want.push_back(std::exp(v - mx) / sum);
    double row = 0.0;
    for (int64_t k = 0; k < K; ++k) row += y[r * K + k];
    EXPECT_NEAR(row, 1.0, 1e-6) << "row " << r << " sums to 1";
  }
  expect_close(y, want, "softmax output");
}

TEST(Embedding, LooksUpRowsAndMasksZeros) {
  const int64_t T = 4, V = 7, E = 3;
  ModelSpec spec = model_of({input_layer({T}), embedding(V, E, true), recurrent(LayerKind::SimpleRNN, H, true)});
  Params params = random_params(spec, 3);
  Tensor ids({B, T});
  const float v[] = {0, 3, 6, 0, 2, 2, 5, 1};
  for (int k = 0; k < B * T; ++k) ids[k] = v[k];
  const std::vector<int32_t> lengths = {4, 3};
  Tensor out_mask;
  CpuModel model(spec, params);
  Rng rng(1);
  ForwardContext ctx;
  const Tensor y = model.forward(ids, &lengths, false, rng, &ctx, &out_mask);
  const std::vector<int> mask = {0, 1, 1, 0, 1, 1, 1, 0};  // token 0 or past the length
  ASSERT_EQ(out_mask.shape, (Shape{B, T}));
  for (int k = 0; k < B * T; ++k) EXPECT_EQ(out_mask[k], static_cast<float>(mask[k])) << "mask entry " << k;
  // The RNN saw the embedding rows: a reference over the looked-up vectors.
  Tensor emb({B, T, E});
  const Param& table = params.layers[1].params[0];
  for (int k = 0; k < B * T; ++k)
    for (int64_t e = 0; e < E; ++e) emb[k * E + e] = table.value[static_cast<int64_t>(v[k]) * E + e];
  const LayerSpec& r = spec.layers[2];
  const auto& ps = params.layers[2].params;
  expect_close(y, ref_rnn(RefRnn{&r, &ps[0], &ps[1], &ps[2], false, false}, emb, mask), "output over embeddings");
  // Backward scatters into the used rows only; token ids have no gradient.
  params.zero_grad();
  Tensor dy(y.shape, 1.0f);
  EXPECT_TRUE(model.backward(ctx, dy).empty());
  for (int64_t e = 0; e < E; ++e) EXPECT_EQ(table.grad[4 * E + e], 0.0f) << "token 4 never occurs";
}

TEST(Activations, FastSigmoidAndTanhAreAccurate) {
  double worst_s = 0.0, worst_t = 0.0, at_s = 0.0, at_t = 0.0;
  for (int k = -200000; k <= 200000; ++k) {
    const float x = static_cast<float>(k) * 1e-4f * (k % 7 == 0 ? 100.0f : 1.0f);
    const double es = std::fabs(cpu::sigmoid_f(x) - 1.0 / (1.0 + std::exp(-static_cast<double>(x))));
    const double rt = std::tanh(static_cast<double>(x));
    const double et = std::fabs(cpu::tanh_f(x) - rt) / std::max(std::fabs(rt), 1e-30);
    if (es > worst_s) worst_s = es, at_s = x;
    if (et > worst_t) worst_t = et, at_t = x;
  }
  EXPECT_LE(worst_s, 3e-7) << "sigmoid worst absolute error at x=" << at_s;
  EXPECT_LE(worst_t, 1e-6) << "tanh worst relative error at x=" << at_t;
}

// Formats values for failure messages: "[nan, 0.5, inf]".
std::string values_str(const float* v, int64_t n) {
  std::ostringstream os;
  os << "[";
  for (int64_t i = 0; i < n; ++i) os << (i ? ", " : "") << v[i];
  return os.str() + "]";
}

TEST(Activations, NanPropagatesAndInfinitiesSaturate) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // Scalar versions.
  EXPECT_TRUE(std::isnan(cpu::sigmoid_f(nan))) << "sigmoid(NaN) = " << cpu::sigmoid_f(nan);
  EXPECT_TRUE(std::isnan(cpu::tanh_f(nan))) << "tanh(NaN) = " << cpu::tanh_f(nan);
  EXPECT_EQ(cpu::sigmoid_f(inf), 1.0f);
  EXPECT_NEAR(cpu::sigmoid_f(-inf), 0.0f, 1e-30f);
  EXPECT_GE(cpu::sigmoid_f(-inf), 0.0f);
  EXPECT_EQ(cpu::tanh_f(inf), 1.0f);
  EXPECT_EQ(cpu::tanh_f(-inf), -1.0f);

  // The array versions (vectorised loops): 37 values so that both the vector body and the scalar
  // tail see NaN, with ordinary values between them that must be unaffected.
  struct Case {
    Activation act;
    const char* name;
    float at_inf, at_minus_inf;
  };
  const Case cases[] = {{Activation::Sigmoid, "sigmoid", 1.0f, 0.0f},
                        {Activation::Tanh, "tanh", 1.0f, -1.0f},
                        {Activation::HardSigmoid, "hard_sigmoid", 1.0f, 0.0f},
                        {Activation::HardSigmoidKeras2, "hard_sigmoid_keras2", 1.0f, 0.0f},
                        {Activation::Relu, "relu", inf, 0.0f}};
  for (const Case& c : cases) {
    std::vector<float> v(37);
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25f * static_cast<float>(i % 9) - 1.0f;
    const std::vector<size_t> nans = {0, 5, 17, 35}, pinf = {3, 36}, minf = {8, 21};
    for (size_t i : nans) v[i] = nan;
    for (size_t i : pinf) v[i] = inf;
    for (size_t i : minf) v[i] = -inf;
    const std::vector<float> in = v;
    cpu::apply_act(c.act, v.data(), static_cast<int64_t>(v.size()));
    const std::string got = values_str(v.data(), static_cast<int64_t>(v.size()));
    for (size_t i = 0; i < v.size(); ++i) {
      if (std::find(nans.begin(), nans.end(), i) != nans.end())
        EXPECT_TRUE(std::isnan(v[i])) << c.name << "(NaN) at " << i << " gave " << v[i] << "; all: " << got;
      else if (std::find(pinf.begin(), pinf.end(), i) != pinf.end())
        EXPECT_EQ(v[i], c.at_inf) << c.name << "(+Inf) at " << i << "; all: " << got;
      else if (std::find(minf.begin(), minf.end(), i) != minf.end())
        EXPECT_NEAR(v[i], c.at_minus_inf, 1e-30f) << c.name << "(-Inf) at " << i << "; all: " << got;
      else
        EXPECT_TRUE(std::isfinite(v[i])) << c.name << "(" << in[i] << ") at " << i << "; all: " << got;
    }
  }

  // Softmax rows: a NaN anywhere makes its row NaN; -Inf gets probability 0; a +Inf gets all of it
  // (the limit); the other rows are untouched.
  const int64_t cols = 5;
  std::vector<float> rows = {0.5f, nan, 1.0f, 2.0f, -1.0f,   // NaN in the middle
                             nan,  0.0f, 1.0f, 2.0f, 3.0f,   // NaN first (it is also the running max)
                             -inf, 0.0f, 0.0f, -inf, 0.0f,   // masked-out entries
                             1.0f, inf,  0.0f, -inf, 2.0f,   // one +Inf
                             0.0f, 0.0f, 0.0f, 0.0f, 0.0f};  // ordinary
  cpu::softmax_rows(rows.data(), 5, cols);
  auto row = [&](int64_t r) { return values_str(rows.data() + r * cols, cols); };
  for (int64_t r : {0, 1})
    for (int64_t j = 0; j < cols; ++j)
      EXPECT_TRUE(std::isnan(rows[r * cols + j])) << "softmax row " << r << " with a NaN: " << row(r);
  const std::vector<float> masked = {0.0f, 1.0f / 3, 1.0f / 3, 0.0f, 1.0f / 3};
  const std::vector<float> one_inf = {0.0f, 1.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t j = 0; j < cols; ++j) {
    EXPECT_NEAR(rows[2 * cols + j], masked[j], 1e-6f) << "softmax with -Inf entries: " << row(2);
    EXPECT_NEAR(rows[3 * cols + j], one_inf[j], 1e-6f) << "softmax with a +Inf entry: " << row(3);
    EXPECT_NEAR(rows[4 * cols + j], 0.2f, 1e-6f) << "softmax of zeros: " << row(4);
  }
}

TEST(Errors, BadInputsAreNamed) {
  Built m = build({recurrent(LayerKind::LSTM, H, false)}, 3);
  CpuModel model(m.spec, m.params);
  Rng rng(1);
  EXPECT_THROW(model.forward(Tensor({B, 3, I + 1}), nullptr, false, rng), DataError) << "wrong feature count";
  const std::vector<int32_t> too_long = {3, 4};
  EXPECT_THROW(model.forward(input(3), &too_long, false, rng), DataError) << "length beyond T";
  ModelSpec es = model_of({input_layer({2}), embedding(5, 2, false), recurrent(LayerKind::GRU, H, false)});
  Params ep = random_params(es, 1);
  CpuModel em(es, ep);
  Tensor ids({1, 2});
  ids[1] = 5.0f;
  EXPECT_THROW(em.forward(ids, nullptr, false, rng), DataError) << "token id == input_dim";
  Params other = random_params(model_of({input_layer({3, I}), recurrent(LayerKind::GRU, H, false)}), 1);
  CpuModel wrong(m.spec, other);
  EXPECT_THROW(wrong.forward(input(3), nullptr, false, rng), RuntimeError) << "GRU weights in an LSTM";
}

}  // namespace
}  // namespace rnntrain
