// Keras <-> cuDNN weight placement, the one place that knows both layouts: for each element of a
// Keras layer's kernel [I, G*H], recurrent_kernel [H, G*H] and bias, its index in a cuDNN stack's
// weight space. Gate order (Keras LSTM i,f,c,o = cuDNN; Keras GRU z,r,h -> cuDNN r,z,h), the
// per-gate transposes (cuDNN matrices are row-major [H rows][in cols]) and the biases (LSTM and
// SimpleRNN: Keras bias -> cuDNN input bias, the recurrent bias stays frozen at zero; GRU: row 0 ->
// input bias, row 1 -> recurrent bias). Pure host code: the offsets come from cudnnGetRNNWeightParams.
#pragma once
#include <cstdint>
#include <vector>

#include "spec/cells.h"

namespace rnntrain::cuda {

// One gate matrix and its bias inside a weight space, in floats from its start; -1 = absent.
struct CudnnSlot {
  int64_t m_off = -1, rows = 0, cols = 0;  // matrix [rows][cols], row-major
  int64_t b_off = -1, b_rows = 0;          // bias [b_rows]
  bool operator==(const CudnnSlot&) const = default;
};

// A stack's weight space as cuDNN laid it out: slots[pseudo_layer][lin_layer_id], pseudo layer = l*D + d.
struct CudnnLayout {
  LayerKind cell = LayerKind::LSTM;  // LSTM, GRU or SimpleRNN
  int64_t layers = 0, dirs = 1, input = 0, hidden = 0;
  int64_t size = 0;  // floats in the weight space
  std::vector<std::vector<CudnnSlot>> slots;
};

// Where the elements of one Keras layer direction live, each vector in Keras element order.
struct KerasPlacement {
  std::vector<int64_t> kernel;     // [I_l * G*H]; I_l = input for layer 0, else D*H
  std::vector<int64_t> recurrent;  // [H * G*H]
  std::vector<int64_t> bias;       // [G*H], or [2 * 3H] for GRU (reset_after)
};

// Throws RuntimeError when the layout does not have the shapes this stack needs.
KerasPlacement place_keras(const CudnnLayout& layout, int64_t layer, int64_t dir);

// Every weight-space element that a Keras weight maps to is trained; the others (LSTM and SimpleRNN
// recurrent biases, alignment gaps) stay zero. Marks the trained ones in `trained` (size layout.size).
void mark_trained(const CudnnLayout& layout, std::vector<uint8_t>& trained);

// A layout packed the way cuDNN packs it (per pseudo layer: the matrices, then the biases), with
// `gap` unused floats after each block. For tests and for checking the real one.
CudnnLayout packed_layout(LayerKind cell, int64_t layers, int64_t dirs, int64_t input, int64_t hidden, int64_t gap);

}  // namespace rnntrain::cuda
