// The data formats: their kind and one descriptor row each (kDataFormats: names, the path suffixes
// that imply it, its keys in a data source, where its files are named, and what the training run's
// data_meta.json keeps for it). The parser, the emitter, the loaders' messages (data/dataset.cpp),
// `eval`/`predict`'s --data and the run directory's absolute paths read the table. Adding a data
// format: docs/contributing.md.
#pragma once
#include <optional>
#include <string>

#include "spec/descriptor.h"

namespace rnntrain {

// Every format; kDataFormats lists them in this order, which is the order of configs and messages.
enum class DataFormat { Hdf5, Npy, Npz, Csv, CsvSequences, Text, Synthetic };

// Where a source names its files: in `path`; in `inputs`, `targets`, `lengths` and `sample_weight`
// (one .npy file each, `path` another name for `inputs`); or nowhere (generated).
enum class DataFiles { Path, PerArray, None };
// What a run keeps in data_meta.json for the format, without which eval and predict cannot read it
// as training did: nothing, the columns' scaling (csv), or the vocabulary (text).
enum class DataMetaKind { None, Scaling, Vocabulary };

struct DataFormatInfo {
  DataFormat kind;
  const char* name;             // in configs and messages
  const char* const* aliases;   // also accepted in configs (null-terminated), never written
  const char* const* suffixes;  // path suffixes (lower case) that imply it; the first format listing one wins
  const char* const* keys;      // its keys in a data source map, `format` included (null-terminated)
  DataFiles files;
  DataMetaKind meta;
};

namespace data_format_table {
constexpr const char* kNone[] = {nullptr};
constexpr const char* kH5[] = {"h5", nullptr};
constexpr const char* kHdf5Suffixes[] = {".h5", ".hdf5", nullptr};
constexpr const char* kNpySuffixes[] = {".npy", nullptr};
constexpr const char* kNpzSuffixes[] = {".npz", nullptr};
constexpr const char* kCsvSuffixes[] = {".csv", nullptr};
constexpr const char* kTextSuffixes[] = {".txt", nullptr};
constexpr const char* kArrayKeys[] = {"format", "path", "inputs", "targets", "lengths", "sample_weight", nullptr};
constexpr const char* kCsvKeys[] = {"format", "path", "window", "horizon", "stride", "features", "targets", "scaling",
                                    nullptr};
constexpr const char* kSequenceKeys[] = {"format", "path", "id", "features", "targets", "scaling", nullptr};
constexpr const char* kTextKeys[] = {"format", "path", "seq_len", nullptr};
constexpr const char* kSyntheticKeys[] = {"format", "task", "samples", "timesteps", "seed", nullptr};

constexpr DataFormatInfo kDataFormats[] = {
    {DataFormat::Hdf5, "hdf5", kH5, kHdf5Suffixes, kArrayKeys, DataFiles::Path, DataMetaKind::None},
    {DataFormat::Npy, "npy", kNone, kNpySuffixes, kArrayKeys, DataFiles::PerArray, DataMetaKind::None},
    {DataFormat::Npz, "npz", kNone, kNpzSuffixes, kArrayKeys, DataFiles::Path, DataMetaKind::None},
    {DataFormat::Csv, "csv", kNone, kCsvSuffixes, kCsvKeys, DataFiles::Path, DataMetaKind::Scaling},
    {DataFormat::CsvSequences, "csv_sequences", kNone, kCsvSuffixes, kSequenceKeys, DataFiles::Path,
     DataMetaKind::Scaling},
    {DataFormat::Text, "text", kNone, kTextSuffixes, kTextKeys, DataFiles::Path, DataMetaKind::Vocabulary},
    {DataFormat::Synthetic, "synthetic", kNone, kNone, kSyntheticKeys, DataFiles::None, DataMetaKind::None},
};
}  // namespace data_format_table

// One row per DataFormat, in its order.
using data_format_table::kDataFormats;

static_assert(rows_in_kind_order(kDataFormats, static_cast<int>(DataFormat::Synthetic) + 1),
              "kDataFormats has one row per DataFormat, in its order");

constexpr const DataFormatInfo& data_format_info(DataFormat f) { return kDataFormats[static_cast<int>(f)]; }

// The format a path's suffix implies, in any case (.h5 .hdf5 -> hdf5, .npy, .npz, .csv, .txt -> text).
std::optional<DataFormat> data_format_from_path(const std::string& path);
// Whether a path's suffix is one of the format's (a .csv is csv and csv_sequences data).
bool data_format_takes(DataFormat f, const std::string& path);
// The suffixes of every format, for messages: ".h5 .hdf5 .npy .npz .csv .txt".
std::string data_suffixes();

}  // namespace rnntrain
