// Loaders for data that is already arrays: HDF5 datasets, .npy files and .npz archives. Inputs are
// required; targets named by the default "y" may be absent (predict-only data), any other name must
// exist; lengths and sample weights are optional. Values of any integer or float type become float32.
#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "data/loaders.h"
#include "data/npy.h"
#include "io/h5.h"
#include "io/zip.h"

namespace rnntrain {

namespace fs = std::filesystem;

static const char* kDefaultTargets = "y";

// DataError unless `bytes` (what loading an array takes in memory; nullopt: more than 64 bits can
// count) fit in this machine's memory. `what` names the file and the array, `declared` what the
// file claims, `fix` what to do.
static void require_fits(std::optional<uint64_t> bytes, const std::string& what, const std::string& declared,
                         const std::string& fix) {
  const uint64_t limit = memory_limit_bytes();
  if (bytes && *bytes <= limit) return;
  throw DataError(fmt::format("{} declares {}: {} in memory, more than this machine has ({}). {}", what, declared,
                              bytes ? bytes_str(static_cast<double>(*bytes)) : "more bytes than 64 bits can count",
                              bytes_str(static_cast<double>(limit)), fix));
}

// Bytes of a float32 array of `shape`, or nullopt when that overflows.
static std::optional<uint64_t> float32_bytes(const Shape& shape) {
  const std::optional<int64_t> n = checked_numel(shape);
  if (!n || static_cast<uint64_t>(*n) > UINT64_MAX / sizeof(float)) return std::nullopt;
  return static_cast<uint64_t>(*n) * sizeof(float);
}

// ---- hdf5 --------------------------------------------------------------------------------------

Dataset load_hdf5(const DataSource& src, const std::string& base_dir) {
  const std::string path = source_path(src, base_dir, "hdf5");
  require_file(path, src);  // the same "no such file" message as the other formats
  h5::File f = h5::File::open(path);
  h5::Group root = f.root();
  auto missing = [&](const std::string& name, const char* key) {
    if (const std::string note = root.link_note(name); !note.empty())
      return DataError(fmt::format("{}: {} (`{}`{}).", path, note, key, config_at(src)));
    return DataError(fmt::format("{}: no dataset '{}' for `{}`{} (datasets in the file: {}). Set `{}` to the name of "
                                 "the dataset that holds them.", path, name, key, config_at(src),
                                 join_names(root.children()), key));
  };
  // The declared shape is checked against the machine's memory before the dataset is read: a damaged
  // or mistaken file must not ask for terabytes.
  auto read = [&](const std::string& name) {
    const Shape shape = root.shape(name);
    require_fits(float32_bytes(shape), fmt::format("{}: dataset '{}'", path, name),
                 fmt::format("shape {}", shape_str(shape)),
                 "The file is damaged or the dataset is not meant to be loaded whole: check its shape "
                 "(h5ls -r), or name another dataset.");
    return root.read(name);
  };
  Dataset d;
  d.source = path;
  if (!root.has_dataset(src.inputs)) throw missing(src.inputs, "inputs");
  d.x = read(src.inputs);
  d.x_name = fmt::format("dataset '{}'", src.inputs);
  if (!src.targets.empty()) {
    if (root.has_dataset(src.targets)) {
      d.y = read(src.targets);
      d.y_name = fmt::format("dataset '{}'", src.targets);
    } else if (src.targets != kDefaultTargets) {
      throw missing(src.targets, "targets");
    } else {
      log_debug("{}: no dataset 'y': loaded without targets", path);
    }
  }
  if (!src.lengths.empty()) {
    if (!root.has_dataset(src.lengths)) throw missing(src.lengths, "lengths");
    d.lengths = lengths_from(read(src.lengths), fmt::format("{}: dataset '{}'", path, src.lengths));
  }
  if (!src.sample_weight.empty()) {
    if (!root.has_dataset(src.sample_weight)) throw missing(src.sample_weight, "sample_weight");
    d.w = read(src.sample_weight);
    d.w_name = fmt::format("dataset '{}'", src.sample_weight);
  }
  return d;
}

// ---- npy ---------------------------------------------------------------------------------------

static Tensor read_npy(const std::string& path, const DataSource& src) {
  return parse_npy(read_file(path, src), path);
}

Dataset load_npy(const DataSource& src, const std::string& base_dir) {
  // inputs/targets/lengths are paths; a source that only gives `path` reads its inputs from there.
  std::string xin = src.inputs;
  if ((xin.empty() || xin == "x") && !src.path.empty()) xin = src.path;
  if (xin.empty())
    throw ConfigError(fmt::format("{}: an npy data source needs `inputs`: the .npy file of the inputs.",
                                  src.loc.str()));
  Dataset d;
  d.source = resolve_path(base_dir, xin);
  d.x = read_npy(d.source, src);
  d.x_name = "array";
  if (!src.targets.empty()) {
    const std::string ypath = resolve_path(base_dir, src.targets);
    std::error_code ec;
    if (src.targets != kDefaultTargets || fs::exists(ypath, ec)) {
      d.y = read_npy(ypath, src);
      d.y_name = fmt::format("array {}", ypath);
    }
  }
  if (!src.lengths.empty()) {
    const std::string lpath = resolve_path(base_dir, src.lengths);
    d.lengths = lengths_from(read_npy(lpath, src), lpath);
  }
  if (!src.sample_weight.empty()) {
    const std::string wpath = resolve_path(base_dir, src.sample_weight);
    d.w = read_npy(wpath, src);
    d.w_name = fmt::format("array {}", wpath);
  }
  return d;
}

// ---- npz ---------------------------------------------------------------------------------------

Dataset load_npz(const DataSource& src, const std::string& base_dir) {
  const std::string path = source_path(src, base_dir, "npz");
  require_file(path, src);
  ZipReader zip(path);
  // numpy.savez stores array "x" as member "x.npy".
  auto member = [&](const std::string& name) -> std::string {
    if (zip.has(name + ".npy")) return name + ".npy";
    if (zip.has(name)) return name;
    return "";
  };
  auto missing = [&](const std::string& name, const char* key) {
    std::vector<std::string> arrays;
    for (std::string n : zip.names()) {
      if (n.size() > 4 && n.compare(n.size() - 4, 4, ".npy") == 0) n.resize(n.size() - 4);
      arrays.push_back(n);
    }
    return DataError(fmt::format("{}: no array '{}' for `{}`{} (arrays in the file: {}). Set `{}` to the name of the "
                                 "array that holds them.", path, name, key, config_at(src), join_names(arrays), key));
  };
  // ZipReader::read checks the member's declared size against the archive and memory first.
  auto read = [&](const std::string& m) {
    return parse_npy(zip.read(m), path + ":" + m);
  };

  Dataset d;
  d.source = path;
  const std::string xm = member(src.inputs);
  if (xm.empty()) throw missing(src.inputs, "inputs");
  d.x = read(xm);
  d.x_name = fmt::format("array '{}'", src.inputs);
  if (!src.targets.empty()) {
    const std::string ym = member(src.targets);
    if (!ym.empty()) {
      d.y = read(ym);
      d.y_name = fmt::format("array '{}'", src.targets);
    } else if (src.targets != kDefaultTargets) {
      throw missing(src.targets, "targets");
    }
  }
  if (!src.lengths.empty()) {
    const std::string lm = member(src.lengths);
    if (lm.empty()) throw missing(src.lengths, "lengths");
    d.lengths = lengths_from(read(lm), fmt::format("{}: array '{}'", path, src.lengths));
  }
  if (!src.sample_weight.empty()) {
    const std::string wm = member(src.sample_weight);
    if (wm.empty()) throw missing(src.sample_weight, "sample_weight");
    d.w = read(wm);
    d.w_name = fmt::format("array '{}'", src.sample_weight);
  }
  return d;
}

}  // namespace rnntrain
