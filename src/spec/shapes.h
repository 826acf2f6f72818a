// Shape inference over a ModelSpec: each layer's input and output shape (without the batch
// dimension, -1 for None), whether a mask flows out of it, and its parameter count. Pure; throws
// ConfigError naming the layer and its file:line when two layers do not fit together.
#pragma once
#include <vector>

#include "spec/cells.h"

namespace rnntrain {

struct LayerShape {
  Shape in, out;          // without batch; -1 = None
  bool mask_in = false;   // a mask reaches this layer
  bool mask_out = false;  // this layer passes (or makes) a mask
  int64_t params = 0;
  size_t weights = 0;  // its weight tensors (kernel, recurrent_kernel, bias, ...), as Params holds them
};

// One entry per model layer, in order (entry 0 is the Input layer).
std::vector<LayerShape> infer_shapes(const ModelSpec& model);

// One line per layer that drops a mask reaching it (spec/layers.h: MaskRule::Drop), as Keras drops it
// with a warning: the layers after it see the padded steps too.
std::vector<std::string> dropped_masks(const ModelSpec& model, const std::vector<LayerShape>& shapes);

// Parameter count of one recurrent layer (LSTM, GRU, SimpleRNN) with `input` features.
int64_t recurrent_params(const LayerSpec& l, int64_t input);

// Checks a batch against the Input layer: x [B, T] token ids or [B, T, F] features. DataError
// naming the layer and what to fix.
void check_input_batch(const LayerSpec& in, const Tensor& x);

}  // namespace rnntrain
