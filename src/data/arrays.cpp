// Loaders for data that is already arrays: HDF5 datasets, .npy files and .npz archives. Inputs are
// required; targets named by the default "y" may be absent (predict-only data), any other name must
// exist; lengths are optional. Values of any integer or float type become float32.
#include <fmt/format.h>

#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "data/loaders.h"
#include "data/npy.h"
#include "io/h5.h"
#include "io/zip.h"

namespace rnntrain {

namespace fs = std::filesystem;

static const char* kDefaultTargets = "y";

// ---- hdf5 --------------------------------------------------------------------------------------

Dataset load_hdf5(const DataSource& src, const std::string& base_dir) {
  const std::string path = source_path(src, base_dir, "hdf5");
  require_file(path, src);  // the same "no such file" message as the other formats
  h5::File f = h5::File::open(path);
  h5::Group root = f.root();
  auto missing = [&](const std::string& name, const char* key) {
    return DataError(fmt::format("{}: no dataset '{}' for `{}`{} (datasets in the file: {}). Set `{}` to the name of "
                                 "the dataset that holds them.", path, name, key, config_at(src),
                                 join_names(root.children()), key));
  };
  Dataset d;
  d.source = path;
  if (!root.has_dataset(src.inputs)) throw missing(src.inputs, "inputs");
  d.x = root.read(src.inputs);
  d.x_name = fmt::format("dataset '{}'", src.inputs);
  if (!src.targets.empty()) {
    if (root.has_dataset(src.targets)) {
      d.y = root.read(src.targets);
      d.y_name = fmt::format("dataset '{}'", src.targets);
    } else if (src.targets != kDefaultTargets) {
      throw missing(src.targets, "targets");
    } else {
      log_debug("{}: no dataset 'y': loaded without targets", path);
    }
  }
  if (!src.lengths.empty()) {
    if (!root.has_dataset(src.lengths)) throw missing(src.lengths, "lengths");
    d.lengths = lengths_from(root.read(src.lengths), fmt::format("{}: dataset '{}'", path, src.lengths));
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
  auto read = [&](const std::string& m) { return parse_npy(zip.read(m), path + ":" + m); };

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
  return d;
}

}  // namespace rnntrain
