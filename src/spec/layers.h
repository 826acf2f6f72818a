// The layers besides the recurrent cells (spec/cells.h): one row each in kLayers (spec/layers.cpp), in
// the order configs and messages list them. Read by the config's layer types, keys and default names,
// by shape inference's masks and by the Keras reader and writer's class names; what a layer computes
// and which settings it has is written where it is used (shapes.cpp, params.cpp, the backends' layers,
// keras_model_read.cpp and keras_model_write.cpp).
#pragma once
#include <span>

#include "spec/config.h"

namespace rnntrain {

// What becomes of a mask that reaches the layer: Keras 3's supports_masking and compute_mask.
enum class MaskRule {
  Keep,     // passed on unchanged
  Make,     // one of its own (Masking; Embedding with mask_zero: infer_shapes says when)
  Consume,  // used, and none passed on (GlobalAveragePooling1D's masked mean)
  Drop,     // not supported: dropped, as Keras drops it (with a warning), and the steps it masked are computed
};

struct LayerTraits {
  LayerKind kind;
  const char* keras_class;            // the config type and Keras class name: "Conv1D"
  const char* snake;                  // default layer names and Keras 3 weight paths: "conv1d"
  std::span<const char* const> keys;  // its config keys, type and name first
  MaskRule mask;
  bool before_cells;  // configs list it before the cells (Input, Embedding, Masking)
};

std::span<const LayerTraits> layer_table();
// The row of kind k; null for the recurrent cells (find_cell, spec/cells.h).
const LayerTraits* find_layer(LayerKind k);
// Whether a layer of kind k passes no mask on (MaskRule Consume or Drop).
bool ends_mask(LayerKind k);

// A 1D window of `size` steps, dilated by `dilation`, moved by `strides` over `steps` steps (-1: not
// known until the data comes): the output steps and the zeros padded on the left (Keras: valid no
// padding, same ceil(steps / strides) outputs with the odd zero on the right, causal all on the left).
struct Window {
  int64_t out = 0, pad_left = 0;
};
Window window_1d(int64_t steps, int64_t size, int64_t strides, int64_t dilation, Padding padding);
// The window of layer l (Conv1D: kernel_size dilated; a 1D pooling: pool_size) over a batch of T steps;
// DataError naming the layer where a valid window does not fit.
Window layer_window(const LayerSpec& l, int64_t T);

}  // namespace rnntrain
