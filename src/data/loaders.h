// The loaders behind load_source, one per DataFormat, and the helpers they share. Internal to
// src/data: the rest of the program calls load_source (data/dataset.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/sizes.h"
#include "data/dataset.h"

namespace rnntrain {

// base_dir / path unless path is absolute or base_dir empty. (train/trainer.cpp has its own
// resolve_path(Config, path) with the same rule, against the config file's folder.)
std::string resolve_path(const std::string& base_dir, const std::string& path);

// The resolved `path` of a source; ConfigError at src.loc when it is empty. `format` for the message.
std::string source_path(const DataSource& src, const std::string& base_dir, const char* format);

// " (config entry at configs/x.yaml:12:5)" or "" when the source has no location.
std::string config_at(const DataSource& src);

// DataError naming the file and the config entry (src.loc) unless path is a readable file.
void require_file(const std::string& path, const DataSource& src);
// The whole file; DataError naming the file and the config entry (src.loc) when it cannot be read.
std::string read_file(const std::string& path, const DataSource& src);

// The sample counts of inputs, targets (when present) and lengths (when present) agree; DataError
// otherwise, with check_dataset's messages. load_source calls it before anything slices the rows.
void check_counts(const Dataset& d);

// "a, b, c" (or "none") for messages.
std::string join_names(const std::vector<std::string>& names);

// Lengths from a float tensor: 1-D, integral values. DataError naming `what` otherwise.
std::vector<int32_t> lengths_from(const Tensor& t, const std::string& what);

Dataset load_hdf5(const DataSource& src, const std::string& base_dir);
Dataset load_npy(const DataSource& src, const std::string& base_dir);
Dataset load_npz(const DataSource& src, const std::string& base_dir);
// holdout_fraction: see load_source; the scaling is fitted on the windows that are kept for training.
Dataset load_csv(const DataSource& src, const std::string& base_dir, DataMeta& meta, double holdout_fraction);
// Labelled sequences (DataSource::sequence_id): inputs padded to the longest, with lengths; the
// labels as targets; the feature scaling fitted on the sequences kept for training.
Dataset load_csv_sequences(const DataSource& src, const std::string& base_dir, DataMeta& meta, double holdout_fraction);
Dataset load_text(const DataSource& src, const std::string& base_dir, DataMeta& meta);

}  // namespace rnntrain
