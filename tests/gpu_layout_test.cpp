// Keras <-> cuDNN weight placement (backend/cuda/layout), without a GPU: on layouts packed the way
// cuDNN packs them, every Keras element has its own slot, values survive the round trip, and the
// gate pre-activations computed the cuDNN way (W_g x + R_g h + b_Wg + b_Rg) equal Keras' x@K + h@U + b
// for each gate, which checks the per-gate transposes, the GRU gate swap and the bias placement.
#include <gtest/gtest.h>

#include <set>

#include "backend/cuda/layout/weight_layout.h"
#include "core/error.h"
#include "core/rng.h"

using namespace rnntrain;
using namespace rnntrain::cuda;

namespace {

struct LayoutCase {
  LayerKind cell;
  int64_t layers, dirs;
};

std::string case_name(const LayoutCase& c) {
  return std::string(layer_kind_name(c.cell)) + "_L" + std::to_string(c.layers) + "_D" + std::to_string(c.dirs);
}

class Layout : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(Layout, EveryKerasElementHasItsOwnSlotAndRoundTrips) {
  const LayoutCase c = GetParam();
  const int64_t I = 5, H = 3;
  const CudnnLayout L = packed_layout(c.cell, c.layers, c.dirs, I, H, 7);
  const int G = cell_traits(c.cell).gates;
  std::set<int64_t> seen;
  int64_t keras_total = 0;
  Rng rng(7);
  std::vector<float> flat(L.size, 0.0f);
  std::vector<std::vector<float>> values;
  std::vector<KerasPlacement> places;
  for (int64_t l = 0; l < c.layers; ++l)
    for (int64_t d = 0; d < c.dirs; ++d) {
      places.push_back(place_keras(L, l, d));
      const KerasPlacement& p = places.back();
      const int64_t in = l == 0 ? I : c.dirs * H;
      EXPECT_EQ(p.kernel.size(), static_cast<size_t>(in * G * H));
      EXPECT_EQ(p.recurrent.size(), static_cast<size_t>(H * G * H));
      EXPECT_EQ(p.bias.size(), static_cast<size_t>((c.cell == LayerKind::GRU ? 2 : 1) * G * H));
      for (const auto* v : {&p.kernel, &p.recurrent, &p.bias}) {
        std::vector<float> vals;
        for (int64_t i : *v) {
          ASSERT_TRUE(i >= 0 && i < L.size) << "index " << i << " outside the weight space of " << L.size;
          EXPECT_TRUE(seen.insert(i).second) << "two Keras elements share weight-space index " << i;
          vals.push_back(static_cast<float>(rng.uniform(-1, 1)));
          flat[i] = vals.back();
        }
        values.push_back(vals);
        keras_total += static_cast<int64_t>(v->size());
      }
    }
  // Round trip: gather back what was scattered.
  size_t k = 0;
  for (const KerasPlacement& p : places)
    for (const auto* v : {&p.kernel, &p.recurrent, &p.bias}) {
      for (size_t j = 0; j < v->size(); ++j) ASSERT_EQ(flat[(*v)[j]], values[k][j]) << "tensor " << k << " element " << j;
      ++k;
    }
  // Untrained: the frozen recurrent biases (LSTM, SimpleRNN) and the gaps.
  std::vector<uint8_t> trained;
  mark_trained(L, trained);
  int64_t n_trained = 0;
  for (uint8_t t : trained) n_trained += t;
  EXPECT_EQ(n_trained, keras_total);
  const int64_t frozen_biases = c.cell == LayerKind::GRU ? 0 : c.layers * c.dirs * G * H;
  const int64_t gaps = c.layers * c.dirs * 3 * 7;
  EXPECT_EQ(L.size - keras_total, frozen_biases + gaps);
}

// Gate pre-activations from the weight space, cuDNN's way, equal Keras' for every gate (Keras order).
TEST_P(Layout, CudnnGateMathEqualsKerasGateMath) {
  const LayoutCase c = GetParam();
  const int64_t I = 4, H = 3, G = cell_traits(c.cell).gates, GH = G * H;
  const CudnnLayout L = packed_layout(c.cell, 1, 1, I, H, 2);
  const KerasPlacement p = place_keras(L, 0, 0);
  Rng rng(11);
  auto rnd = [&](size_t n) {
    std::vector<double> v(n);
    for (double& x : v) x = rng.uniform(-1, 1);
    return v;
  };
  const std::vector<double> K = rnd(I * GH), U = rnd(H * GH), b = rnd(p.bias.size()), x = rnd(I), h = rnd(H);
  std::vector<double> flat(L.size, 0.0);
  for (size_t i = 0; i < K.size(); ++i) flat[p.kernel[i]] = K[i];
  for (size_t i = 0; i < U.size(); ++i) flat[p.recurrent[i]] = U[i];
  for (size_t i = 0; i < b.size(); ++i) flat[p.bias[i]] = b[i];
  for (int g = 0; g < G; ++g) {
    const int cg = cell_traits(c.cell).cudnn_gate[g];
    const CudnnSlot& w = L.slots[0][cg];
    const CudnnSlot& r = L.slots[0][G + cg];
    for (int64_t row = 0; row < H; ++row) {
      // Keras: input part x@K[:, g] + b_x, recurrent part h@U[:, g] (+ b_h for GRU).
      double keras_in = b[g * H + row], keras_rec = c.cell == LayerKind::GRU ? b[GH + g * H + row] : 0.0;
      for (int64_t i = 0; i < I; ++i) keras_in += x[i] * K[i * GH + g * H + row];
      for (int64_t j = 0; j < H; ++j) keras_rec += h[j] * U[j * GH + g * H + row];
      // cuDNN: W_g[row] . x + b_W, R_g[row] . h + b_R.
      double cudnn_in = flat[w.b_off + row], cudnn_rec = flat[r.b_off + row];
      for (int64_t i = 0; i < I; ++i) cudnn_in += flat[w.m_off + row * I + i] * x[i];
      for (int64_t j = 0; j < H; ++j) cudnn_rec += flat[r.m_off + row * H + j] * h[j];
      EXPECT_NEAR(cudnn_in, keras_in, 1e-12) << "gate " << g << " row " << row << " (input side)";
      EXPECT_NEAR(cudnn_rec, keras_rec, 1e-12) << "gate " << g << " row " << row << " (recurrent side)";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, Layout,
                         ::testing::Values(LayoutCase{LayerKind::LSTM, 1, 1}, LayoutCase{LayerKind::LSTM, 3, 2},
                                           LayoutCase{LayerKind::GRU, 1, 1}, LayoutCase{LayerKind::GRU, 2, 2},
                                           LayoutCase{LayerKind::SimpleRNN, 2, 1},
                                           LayoutCase{LayerKind::SimpleRNN, 1, 2}),
                         [](const auto& info) { return case_name(info.param); });

TEST(Layout, GruSwapsUpdateAndResetGates) {
  EXPECT_EQ(cell_traits(LayerKind::GRU).cudnn_gate[0], 1);  // Keras z -> cuDNN z (id 1)
  EXPECT_EQ(cell_traits(LayerKind::GRU).cudnn_gate[1], 0);  // Keras r -> cuDNN r (id 0)
  EXPECT_EQ(cell_traits(LayerKind::GRU).cudnn_gate[2], 2);
  for (int g = 0; g < 4; ++g) EXPECT_EQ(cell_traits(LayerKind::LSTM).cudnn_gate[g], g);
}

TEST(Layout, UnexpectedShapesAreRefusedWithTheSlot) {
  CudnnLayout L = packed_layout(LayerKind::LSTM, 1, 1, 4, 3, 0);
  L.slots[0][2].cols = 5;
  try {
    place_keras(L, 0, 0);
    FAIL() << "a wrong matrix shape was accepted";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("linear layer 2"), std::string::npos) << e.what();
  }
}

}  // namespace
