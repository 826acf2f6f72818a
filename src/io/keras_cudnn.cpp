// CuDNNLSTM / CuDNNGRU weight conversion (see keras_cudnn.h): plain index arithmetic on host tensors.
#include "io/keras_cudnn.h"

namespace rnntrain::cudnn_compat {

namespace {

// For each gate block g of a [R, G*H] matrix: the block's row-major buffer F (R*H values) read as an
// [H, R] matrix and transposed (from cuDNN), or the block transposed and written as F (to cuDNN).
Tensor convert(const Tensor& in, int gates, bool to_cudnn) {
  const int64_t rows = in.dim(0), h = in.dim(1) / gates, cols = in.dim(1);
  Tensor out(in.shape);
  for (int g = 0; g < gates; ++g) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < h; ++j) {
        // Keras block element K[i][j] <-> flat position p = j*rows + i of the CuDNN block buffer.
        const int64_t p = j * rows + i;
        const int64_t keras_at = i * cols + g * h + j, cudnn_at = (p / h) * cols + g * h + p % h;
        if (to_cudnn) out[cudnn_at] = in[keras_at];
        else out[keras_at] = in[cudnn_at];
      }
    }
  }
  return out;
}

}  // namespace

Tensor kernel_from_cudnn(const Tensor& kc, int gates) { return convert(kc, gates, false); }
Tensor kernel_to_cudnn(const Tensor& k, int gates) { return convert(k, gates, true); }

Tensor recurrent_from_cudnn(const Tensor& rc, int gates) {
  const int64_t h = rc.dim(0), cols = rc.dim(1);
  Tensor out(rc.shape);
  for (int g = 0; g < gates; ++g)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < h; ++j) out[i * cols + g * h + j] = rc[j * cols + g * h + i];
  return out;
}

Tensor lstm_bias_from_cudnn(const Tensor& bc) {
  const int64_t n = bc.numel() / 2;
  Tensor b({n});
  for (int64_t i = 0; i < n; ++i) b[i] = bc[i] + bc[n + i];
  return b;
}

Tensor lstm_bias_to_cudnn(const Tensor& b) {
  const int64_t n = b.numel();
  Tensor bc({2 * n});
  for (int64_t i = 0; i < n; ++i) bc[i] = bc[n + i] = 0.5f * b[i];
  return bc;
}

Tensor gru_bias_from_cudnn(const Tensor& bc) {
  Tensor b({2, bc.numel() / 2});
  b.data = bc.data;
  return b;
}

Tensor gru_bias_to_cudnn(const Tensor& b) {
  Tensor bc({b.numel()});
  bc.data = b.data;
  return bc;
}

}  // namespace rnntrain::cudnn_compat
