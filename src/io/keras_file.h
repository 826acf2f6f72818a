// Keras files as a whole: the legacy full-model .h5, the legacy weights-only .h5, the Keras 3
// .weights.h5 and the .keras archive. Export (written to a temporary file and renamed, so a failed
// export leaves an existing file untouched), import of full models, and loading weights from any of
// them into an rnntrain model. The layouts are keras_weights.h; the JSON is keras_model.h.
#pragma once
#include <optional>
#include <string>

#include "io/keras_train.h"
#include "model/params.h"

namespace rnntrain {

enum class KerasFormat { LegacyH5, WeightsH5, KerasZip };
const char* keras_format_name(KerasFormat f);  // "legacy .h5", ".weights.h5", ".keras"

// The format an output path asks for by its suffix (.keras, .weights.h5, .h5/.hdf5); UsageError otherwise.
KerasFormat keras_format_for_output(const std::string& path);

// Writes the model and its weights. LegacyH5: model_config + model_weights; WeightsH5: weights only;
// KerasZip: config.json, metadata.json and model.weights.h5. With `training`, the model is compiled
// as Keras saves a compiled one: LegacyH5 adds training_config and /optimizer_weights, KerasZip adds
// compile_config and /optimizer/vars (WeightsH5 holds weights only). DataError when the model cannot
// be expressed (hard_sigmoid_keras2 in a .keras).
void export_keras(const std::string& path, const ModelSpec& model, const Params& params,
                  const KerasTraining* training = nullptr);

struct ImportedKeras {
  ModelSpec model;
  Params params;                  // the file's weights (CuDNN layouts converted)
  std::optional<TrainSpec> train; // optimizer and loss, when the file has a training/compile config
  std::string keras_version;      // of the writer; "1" when the file does not say
};

// Whether the file is, by its first bytes, an HDF5 file (.h5, .weights.h5) or a zip archive
// (.keras): what Keras saves, and never a YAML config.
bool is_keras_file(const std::string& path);

// Reads a full model (.h5 with model_config, or .keras). DataError for weights-only files, models
// that are not a single chain, unsupported, Lambda or custom layers, and damaged files.
ImportedKeras import_keras(const std::string& path);

// Loads weights from any Keras or rnntrain file (checkpoint, legacy .h5 full or weights-only,
// .weights.h5, .keras), recognised by content, into `params` (positional over the layers that have
// weights, as Keras' load_weights). DataError naming the layer and both shapes on a mismatch.
void load_keras_weights(const std::string& path, const ModelSpec& model, Params& params);

}  // namespace rnntrain
