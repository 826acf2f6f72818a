// The CPU backend's internal layer interface: one Op per model layer. forward() fills a Saved that
// backward() reads; activations themselves are kept by CpuModel. Not public API (CpuModel is).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "model/params.h"
#include "spec/config.h"

namespace rnntrain::cpu {

using Mask = std::vector<uint8_t>;  // [B, T], 1 = the step is used; empty = no mask

// What one layer keeps between forward and backward (dropout masks, recurrent tapes, ...).
struct Saved {
  virtual ~Saved() = default;
};

// The slot's Saved as S, created (or replaced) when it holds something else. Reusing a context
// across batches reuses its buffers.
template <typename S>
S& saved_as(std::unique_ptr<Saved>& slot) {
  if (!slot || !dynamic_cast<S*>(slot.get())) slot = std::make_unique<S>();
  return static_cast<S&>(*slot);
}

class Op {
 public:
  virtual ~Op() = default;
  // x: this layer's input ([B, T, F], [B, F] or token ids [B, T]). mask: on entry the [B, T] mask
  // reaching the layer (or empty), on return the mask it passes on. training enables dropout.
  virtual Tensor forward(LayerParams& p, const Tensor& x, Mask& mask, bool training, Rng& rng,
                         std::unique_ptr<Saved>& saved) = 0;
  // x, y: this layer's input and output of that forward; dy: gradient of y. Accumulates (+=) into
  // the parameters' grads and returns dx (empty for token ids).
  virtual Tensor backward(LayerParams& p, const Saved* saved, const Tensor& x, const Tensor& y, const Tensor& dy) = 0;
};

std::unique_ptr<Op> make_embedding(const LayerSpec& l);
std::unique_ptr<Op> make_masking(const LayerSpec& l);
std::unique_ptr<Op> make_dropout(const LayerSpec& l);
// l: the Dense itself, or the TimeDistributed wrapping it (d = *l.inner).
std::unique_ptr<Op> make_dense(const LayerSpec& l, const LayerSpec& d);
// math: who makes their GEMMs (recurrent.h: OpenBLAS, or the own engine in FP32 or bf16).
enum class RnnMath;
std::unique_ptr<Op> make_recurrent(const LayerSpec& l, RnnMath math);
std::unique_ptr<Op> make_bidirectional(const LayerSpec& l, RnnMath math);
// Conv1D, the 1D poolings, the global poolings, LayerNormalization, Flatten, SpatialDropout1D and
// Activation (sequence_layers.cpp).
std::unique_ptr<Op> make_sequence_layer(const LayerSpec& l);

// The k-th weight of layer l, checked against the shape the layer needs (RuntimeError otherwise:
// the parameters do not belong to this model).
Param& layer_param(const LayerSpec& l, LayerParams& p, size_t k, const Shape& shape);

}  // namespace rnntrain::cpu
