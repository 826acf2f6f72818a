// The legacy CuDNNLSTM / CuDNNGRU weight layout <-> Keras' LSTM / GRU layout, both ways, as Keras 2's
// loader converts it (tf-keras hdf5_format._convert_rnn_weights). Shapes only tell them apart: a
// CuDNNLSTM bias is [8H] (input and recurrent biases), a CuDNNGRU bias [6H]. Gate order is unchanged
// (LSTM i,f,c,o; GRU z,r,h). Not the cuDNN backend's own parameter packing.
#pragma once
#include "core/tensor.h"

namespace rnntrain::cudnn_compat {

// Kernel [I, G*H]: each gate block's row-major buffer holds cuDNN's [H, I] matrix in the CuDNN layers.
Tensor kernel_from_cudnn(const Tensor& kc, int gates);
Tensor kernel_to_cudnn(const Tensor& k, int gates);
// Recurrent kernel [H, G*H]: each [H, H] gate block is transposed (its own inverse).
Tensor recurrent_from_cudnn(const Tensor& rc, int gates);
inline Tensor recurrent_to_cudnn(const Tensor& r, int gates) { return recurrent_from_cudnn(r, gates); }
// LSTM bias: [8H] -> [4H] as the sum of the two halves; back as two halves of 0.5*b.
Tensor lstm_bias_from_cudnn(const Tensor& bc);
Tensor lstm_bias_to_cudnn(const Tensor& b);
// GRU bias: [6H] -> [2, 3H] (row 0 input bias, row 1 recurrent bias), and back. Same values.
Tensor gru_bias_from_cudnn(const Tensor& bc);
Tensor gru_bias_to_cudnn(const Tensor& b);

}  // namespace rnntrain::cudnn_compat
