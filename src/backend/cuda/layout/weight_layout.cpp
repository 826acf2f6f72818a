// Keras <-> cuDNN weight placement (see weight_layout.h): index maps built once per stack, used for
// loading and saving parameters and optimizer slots. No per-step repacking uses this.
#include "backend/cuda/layout/weight_layout.h"

#include <fmt/format.h>

#include "core/error.h"
#include "spec/cells.h"

namespace rnntrain::cuda {

namespace {

const CudnnSlot& slot_of(const CudnnLayout& L, int64_t pl, int id, int64_t rows, int64_t cols, bool need_bias) {
  if (pl >= static_cast<int64_t>(L.slots.size()) || id >= static_cast<int>(L.slots[pl].size()))
    throw RuntimeError(fmt::format("internal: the cuDNN weight layout has no pseudo-layer {} linear layer {}", pl, id));
  const CudnnSlot& s = L.slots[pl][id];
  const bool bad_m = s.m_off < 0 || s.rows != rows || s.cols != cols || s.m_off + rows * cols > L.size;
  const bool bad_b = need_bias && (s.b_off < 0 || s.b_rows != rows || s.b_off + rows > L.size);
  if (bad_m || bad_b)
    throw RuntimeError(fmt::format("cuDNN put pseudo-layer {} linear layer {} at matrix {}x{} (offset {}), bias {} "
                                   "(offset {}); rnntrain expects {}x{} with a bias of {}: this cuDNN version lays "
                                   "weights out differently; use device: cpu and report it",
                                   pl, id, s.rows, s.cols, s.m_off, s.b_rows, s.b_off, rows, cols, rows));
  return s;
}

}  // namespace

KerasPlacement place_keras(const CudnnLayout& L, int64_t layer, int64_t dir) {
  const CellTraits& cell = cell_traits(L.cell);
  const int G = cell.gates;
  const int64_t H = L.hidden, GH = G * H;
  const int64_t in = layer == 0 ? L.input : L.dirs * H;
  const int64_t pl = layer * L.dirs + dir;
  KerasPlacement p;
  p.kernel.resize(in * GH);
  p.recurrent.resize(H * GH);
  const bool two_biases = cell.two_biases != nullptr;  // the cuDNN stack runs the flag at its fused value
  p.bias.resize(two_biases ? 2 * GH : GH);
  for (int g = 0; g < G; ++g) {
    const int cg = cell.cudnn_gate[g];
    const CudnnSlot& w = slot_of(L, pl, cg, H, in, true);
    const CudnnSlot& r = slot_of(L, pl, G + cg, H, H, true);
    // Keras kernel[c][g*H + row] is cuDNN W_g[row][c]: the per-gate transpose.
    for (int64_t c = 0; c < in; ++c)
      for (int64_t row = 0; row < H; ++row) p.kernel[c * GH + g * H + row] = w.m_off + row * in + c;
    for (int64_t c = 0; c < H; ++c)
      for (int64_t row = 0; row < H; ++row) p.recurrent[c * GH + g * H + row] = r.m_off + row * H + c;
    for (int64_t row = 0; row < H; ++row) {
      p.bias[g * H + row] = w.b_off + row;                       // input bias (the only one for LSTM, SimpleRNN)
      if (two_biases) p.bias[GH + g * H + row] = r.b_off + row;  // GRU: Keras bias row 1 is the recurrent bias
    }
  }
  return p;
}

void mark_trained(const CudnnLayout& L, std::vector<uint8_t>& trained) {
  trained.assign(static_cast<size_t>(L.size), 0);
  for (int64_t l = 0; l < L.layers; ++l)
    for (int64_t d = 0; d < L.dirs; ++d) {
      const KerasPlacement p = place_keras(L, l, d);
      for (const auto* v : {&p.kernel, &p.recurrent, &p.bias})
        for (int64_t i : *v) trained[i] = 1;
    }
}

CudnnLayout packed_layout(LayerKind cell, int64_t layers, int64_t dirs, int64_t input, int64_t hidden, int64_t gap) {
  CudnnLayout L;
  L.cell = cell, L.layers = layers, L.dirs = dirs, L.input = input, L.hidden = hidden;
  const int G = cell_traits(cell).gates;
  int64_t off = 0;
  L.slots.assign(layers * dirs, std::vector<CudnnSlot>(2 * G));
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t d = 0; d < dirs; ++d) {
      auto& s = L.slots[l * dirs + d];
      const int64_t in = l == 0 ? input : dirs * hidden;
      for (int id = 0; id < 2 * G; ++id) {
        const int64_t cols = id < G ? in : hidden;
        s[id].m_off = off, s[id].rows = hidden, s[id].cols = cols;
        off += hidden * cols + (id == G - 1 || id == 2 * G - 1 ? gap : 0);
      }
      for (int id = 0; id < 2 * G; ++id) {
        s[id].b_off = off, s[id].b_rows = hidden;
        off += hidden + (id == 2 * G - 1 ? gap : 0);
      }
    }
  L.size = off;
  return L;
}

}  // namespace rnntrain::cuda
