// Keras model JSON <-> ModelSpec: the `model_config` of a legacy .h5 and the `config.json` of a
// .keras archive, both ways. Reading refuses Lambda, custom and unsupported layers by name (nothing
// from a file is ever run) and reads "hard_sigmoid" by the Keras version that wrote the file. Not
// the weights (keras_weights.h) and not the training settings (keras_train.h).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spec/config.h"

namespace rnntrain {

using Json = nlohmann::ordered_json;

// The keras_version rnntrain writes: Keras 3's, or Keras 2's when the model uses Keras 2's
// hard_sigmoid (the name means 0.2x+0.5 only to a Keras 2 reader).
constexpr const char* kKeras3Version = "3.15.1";
constexpr const char* kKeras2Version = "2.15.0";
std::string keras_version_for(const ModelSpec& model);

// Which Keras wrote a file; decides what "hard_sigmoid" means. `file` is used in messages.
struct KerasOrigin {
  std::string file;
  std::string keras_version = "1";  // "1" when the file does not say (Keras' own convention)
  bool keras2() const { return keras_version.empty() || keras_version[0] < '3'; }
};

// Legacy: the root `model_config` of an .h5 (loads in Keras 3 and in tf-keras: batch_input_shape,
// string dtypes, no seed/time_major). Keras3: the `config.json` of a .keras archive.
enum class KerasJsonStyle { Legacy, Keras3 };
Json model_to_keras_json(const ModelSpec& model, KerasJsonStyle style);

// Keras class of a layer as stored in files ("LSTM", "InputLayer", ...).
const char* keras_class_name(LayerKind k);

// The rnntrain model of a Keras Sequential, or of a Functional model that is a single chain from one
// input to one output. CuDNNLSTM/CuDNNGRU become LSTM/GRU (their weights are converted on load).
// Throws DataError naming the file and the layers it cannot take.
ModelSpec model_from_keras_json(const nlohmann::json& config, const KerasOrigin& origin);

}  // namespace rnntrain
