// In-memory datasets and the loaders that fill them: HDF5, .npy, .npz, CSV time-series windows,
// plain text for character-level language models, and synthetic tasks. Every error names the
// file and the dataset (or column, or line) and says what to do.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/batch.h"
#include "core/rng.h"
#include "spec/config.h"
#include "spec/shapes.h"

namespace rnntrain {

struct Dataset {
  Tensor x;                      // [N, T, F] features or [N, T] token ids
  Tensor y;                      // [N, ...] targets (empty for predict-only data)
  std::vector<int32_t> lengths;  // empty, or N sequence lengths
  Tensor w;                      // empty, or sample weights: [N] or [N, T] (Keras' sample_weight)
  std::string source;            // "data/x.h5" for messages
  std::string x_name = "inputs", y_name = "targets", w_name = "sample_weight";  // for messages: "dataset 'x'", ...

  int64_t size() const { return x.shape.empty() ? 0 : x.shape[0]; }
  Batch gather(const std::vector<int64_t>& rows) const;  // rows in the given order
  Dataset slice(int64_t begin, int64_t end) const;       // rows [begin, end)
};

// What a loader learns from training data and later loads must reuse: the text vocabulary and the
// CSV scaling. Saved as data_meta.json in the run directory.
struct DataMeta {
  std::vector<std::string> vocab;  // text: index -> character (UTF-8 bytes); index 0 is reserved for padding
  std::vector<double> shift, scale;  // csv: x' = (x - shift) / scale per feature column
  std::vector<double> target_shift, target_scale;
  std::vector<std::string> columns, target_columns;  // csv: the columns' names (empty in files written before)
  std::string to_json() const;
  static DataMeta from_json(const std::string& text, const std::string& source);
  bool empty() const { return vocab.empty() && shift.empty(); }
};

// Loads one source. Relative paths are resolved against base_dir (the config file's folder).
// If meta is empty it is filled from this source (training data); otherwise it is applied.
// holdout_fraction: the last fraction of the samples that the caller will hold out for validation
// (data.validation_split, in [0, 1)); what is fitted here (CSV scaling) is fitted on the other
// samples only. The counts of inputs, targets and lengths are checked here, before any slicing.
// Every failure is a DataError (ConfigError for a bad config entry) naming the file.
Dataset load_source(const DataSource& src, const std::string& base_dir, DataMeta& meta,
                    double holdout_fraction = 0.0);

// Checks a dataset against the model's input and output shapes and the loss: rank and sizes,
// NaN or Inf in inputs, labels out of range, token ids >= input_dim, lengths out of range.
// Throws DataError naming the source and what to do.
void check_dataset(const Dataset& d, const ModelSpec& model, const std::vector<LayerShape>& shapes,
                   const LossSpec& loss, bool need_targets = true);

// Writes predictions: by suffix .npy, .h5 (dataset "predictions") or .csv (one row per sample,
// flattened). Written to a temporary file and renamed.
void write_predictions(const std::string& path, const Tensor& pred);

}  // namespace rnntrain
