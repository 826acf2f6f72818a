// Model weights in Keras' two HDF5 layouts: legacy (layer_names / weight_names, as in model.save('x.h5')
// and save_weights('x.h5')) and Keras 3 (layers/<class>/.../vars/<i>, as in x.weights.h5 and inside
// .keras). Reading yields the stored layers in order; assign_weights puts them into Params as Keras'
// topological load does, converting CuDNNLSTM/CuDNNGRU weights. Not file formats or configs (keras_file.h).
#pragma once
#include <string>
#include <vector>

#include "io/h5.h"
#include "model/params.h"

namespace rnntrain {

// One layer's weights as a file holds them, in Keras order.
struct StoredLayer {
  std::string name;                // the layer's name or group path in the file (for messages)
  std::vector<std::string> names;  // each weight's name or path in the file
  std::vector<Tensor> values;
};

// Legacy layout under g (the root of a weights-only file, or /model_weights): the layers that have
// weights, in layer_names order (chunked layer_names0, layer_names1, ... accepted).
std::vector<StoredLayer> read_legacy_weights(const h5::Group& g);
// Writes layer_names, backend, keras_version and one group per layer (every layer, weighted or not),
// datasets at TF-style paths ("lstm/lstm_cell/kernel:0"), and an empty top_level_model_weights.
void write_legacy_weights(const h5::Group& g, const ModelSpec& model, const Params& params,
                          const std::string& keras_version);

// Keras 3 layout: each weighted layer of `model` at its class-based path (layers/lstm, layers/lstm_1,
// ...; the layer's name is not used). Missing groups and extra weighted layers are DataErrors.
std::vector<StoredLayer> read_keras3_weights(const h5::Group& root, const ModelSpec& model);
// Writes every layer's vars groups (with their name attributes) and the model's /vars.
void write_keras3_weights(const h5::Group& root, const ModelSpec& model, const Params& params);

// Pairs the k-th stored layer with the k-th layer of `model` that has weights, and copies the values
// in. CuDNNLSTM ([8H] bias) and CuDNNGRU ([6H] bias) weights are converted. DataError naming `file`,
// the layer, the weight and both shapes on any mismatch; params are left unchanged then.
void assign_weights(const std::string& file, const std::vector<StoredLayer>& stored, const ModelSpec& model,
                    Params& params);

// A possibly chunked string-list attribute: `name`, or name0, name1, ... as Keras writes long lists.
std::vector<std::string> read_name_list(const h5::Group& g, const std::string& name);
// Writes a string-list attribute, split into name0, name1, ... when it exceeds Keras' 64512-byte limit.
void write_name_list(const h5::Group& g, const std::string& name, const std::vector<std::string>& values);

}  // namespace rnntrain
