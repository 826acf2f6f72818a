// Keras files as a whole (see keras_file.h): format detection by content, export through a temporary
// file, import of full models, weights from any format. The .keras archive's model.weights.h5 goes
// through a private temporary file because the HDF5 layer opens paths.
#include "io/keras_file.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "core/sizes.h"
#include "core/error.h"
#include "core/files.h"
#include "core/log.h"
#include "io/checkpoint.h"
#include "io/h5.h"
#include "io/keras_model.h"
#include "io/keras_train.h"
#include "io/keras_weights.h"
#include "io/zip.h"
#include "spec/shapes.h"

namespace fs = std::filesystem;

namespace rnntrain {

namespace {

constexpr uint64_t kMaxWeightsMember = uint64_t(4) << 30;  // Keras refuses larger members too

bool ends_with(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[s.size() - suffix.size() + i])) != suffix[i]) return false;
  return true;
}

bool is_zip(const std::string& path) {
  if (!special_file(path).empty()) return false;
  std::ifstream in(path, std::ios::binary);
  char sig[4] = {};
  // A local file header, or the end record of an empty archive.
  return in.read(sig, 4) && sig[0] == 'P' && sig[1] == 'K' && ((sig[2] == 3 && sig[3] == 4) || (sig[2] == 5 && sig[3] == 6));
}

// A file in the temporary folder, removed when this goes out of scope.
class TempFile {
 public:
  TempFile() {
    static std::atomic<int> counter{0};
    path_ = (fs::temp_directory_path() / fmt::format("rnntrain-keras-{}-{}-{}.h5", ::getpid(), counter++,
                                                     std::chrono::steady_clock::now().time_since_epoch().count()))
                .string();
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw RuntimeError(fmt::format("cannot write {}: check free space in the temporary folder", path));
}

// nlohmann's message without its "[json.exception.parse_error.101] " prefix, at most 100 characters.
std::string json_reason(const nlohmann::json::exception& e) {
  std::string s = e.what();
  if (!s.empty() && s[0] == '[' && s.find("] ") != std::string::npos) s.erase(0, s.find("] ") + 2);
  return s.size() > 100 ? s.substr(0, 100) + "..." : s;
}

// Deeper than any Keras config (about 10 levels): refused while parsing, before anything that
// walks the tree recursively (copies, dump) sees it.
constexpr int kMaxJsonDepth = 100;

nlohmann::json parse_json(const std::string& text, const std::string& file, const std::string& what) {
  auto depth_guard = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth)
      throw DataError(fmt::format("{}: {} nests lists or objects deeper than {} levels (e.g. Bidirectional or "
                                  "TimeDistributed inside each other); no Keras model is that deep, so the file is "
                                  "damaged or crafted", file, what, kMaxJsonDepth));
    return true;
  };
  try {
    return nlohmann::json::parse(text, depth_guard);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}: {} is not valid JSON ({}); the file is damaged", file, what, json_reason(e)));
  }
}

// The .keras archive's members that rnntrain reads.
struct KerasArchive {
  nlohmann::json config;
  std::string keras_version = kKeras3Version;
  TempFile weights;  // model.weights.h5, extracted
};

void open_archive(const std::string& path, KerasArchive& a, bool need_config) {
  ZipReader z(path);
  if (!z.has("model.weights.h5")) {
    const bool npz = z.has("model.weights.npz");
    throw DataError(fmt::format("{}: no model.weights.h5 in this archive{}; is it a .keras file written by Keras 3?",
                                path, npz ? " (its weights are in the npz format, which rnntrain does not read)" : ""));
  }
  if (z.size("model.weights.h5") > kMaxWeightsMember)
    throw DataError(fmt::format("{}: model.weights.h5 declares {} bytes; refusing members over 4 GiB", path,
                                z.size("model.weights.h5")));
  if (need_config) {
    if (!z.has("config.json")) throw DataError(fmt::format("{}: no config.json in this archive; is it a .keras file?", path));
    a.config = parse_json(z.read("config.json"), path, "config.json");
  }
  if (z.has("metadata.json")) {
    nlohmann::json meta = parse_json(z.read("metadata.json"), path, "metadata.json");
    if (meta.is_object() && meta.contains("keras_version") && meta["keras_version"].is_string())
      a.keras_version = meta["keras_version"].get<std::string>();
  }
  write_bytes(a.weights.path(), z.read("model.weights.h5"));
}

// What an HDF5 file holds.
enum class H5Kind { LegacyWeights, LegacyFull, Keras3 };

H5Kind h5_kind(const h5::Group& root) {
  if (root.has_attr("layer_names") || root.has_attr("layer_names0")) return H5Kind::LegacyWeights;
  if (root.has_group("model_weights")) return H5Kind::LegacyFull;
  if (root.has_group("layers") || root.has_group("vars")) return H5Kind::Keras3;
  throw DataError(fmt::format("{}: an HDF5 file without Keras weights (no layer_names attribute, /model_weights or "
                              "/layers group); pass a checkpoint or a file written by Keras (model.save, "
                              "save_weights)", root.file()));
}

// The model's layers fit together (the messages name the file and the layer: the reader sets each
// layer's loc to the file) and its parameters fit in memory, before they are allocated.
void check_fits(const ModelSpec& m, const std::string& file) {
  std::vector<LayerShape> shapes;
  try {
    shapes = infer_shapes(m);
  } catch (const ConfigError& e) {
    throw DataError(fmt::format("{} (the model in this file does not fit together in rnntrain)", e.what()));
  }
  double bytes = 0;
  for (const LayerShape& s : shapes) bytes += static_cast<double>(s.params) * sizeof(float);
  if (bytes > static_cast<double>(memory_limit_bytes()))
    throw DataError(fmt::format("{}: the model has {} of parameters, more than this machine's memory ({}); the file "
                                "is damaged or the model is too large for rnntrain here", file, bytes_str(bytes),
                                bytes_str(static_cast<double>(memory_limit_bytes()))));
}

// Runs `read` on the archive's extracted model.weights.h5; messages name the archive's member,
// not the temporary file.
template <typename F>
void in_member(const KerasArchive& a, const std::string& path, F read) {
  try {
    read();
  } catch (const DataError& e) {
    std::string m = e.what();
    const std::string tmp = a.weights.path(), shown = path + ":model.weights.h5";
    for (size_t p = m.find(tmp); p != std::string::npos; p = m.find(tmp, p + shown.size())) m.replace(p, tmp.size(), shown);
    throw DataError(m);
  }
}

}  // namespace

const char* keras_format_name(KerasFormat f) {
  switch (f) {
    case KerasFormat::LegacyH5: return "legacy .h5";
    case KerasFormat::WeightsH5: return ".weights.h5";
    case KerasFormat::KerasZip: return ".keras";
  }
  return "?";
}

KerasFormat keras_format_for_output(const std::string& path) {
  if (ends_with(path, ".keras")) return KerasFormat::KerasZip;
  if (ends_with(path, ".weights.h5")) return KerasFormat::WeightsH5;
  if (ends_with(path, ".h5") || ends_with(path, ".hdf5")) return KerasFormat::LegacyH5;
  throw UsageError(fmt::format("-o {}: the suffix says which format to write: .h5 (legacy full model, Keras 2 and 3), "
                               ".keras (Keras 3 archive) or .weights.h5 (Keras 3 weights only)", path));
}

void export_keras(const std::string& path, const ModelSpec& model, const Params& params,
                  const KerasTraining* training) {
  const KerasFormat f = keras_format_for_output(path);
  const std::string version = keras_version_for(model);
  if (version == kKeras2Version) {
    if (f == KerasFormat::KerasZip)
      throw DataError(fmt::format("{}: the model uses hard_sigmoid_keras2 (0.2x+0.5), which Keras 3 does not have; "
                                  "export to a legacy .h5 for Keras 2, or use hard_sigmoid", path));
    log_warn("{}: the model uses hard_sigmoid_keras2: Keras 2 reads 'hard_sigmoid' as 0.2x+0.5, Keras 3 as x/6+0.5", path);
  }
  if (f == KerasFormat::KerasZip) {
    TempFile w;
    {
      h5::File h = h5::File::create(w.path());
      write_keras3_weights(h.root(), model, params);
      if (training) write_keras3_optimizer(h.root(), *training);
      h.flush();
    }
    std::vector<std::pair<std::string, std::string>> members;
    std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%d@%H:%M:%S", std::localtime(&now));
    members.emplace_back("metadata.json", Json{{"keras_version", kKeras3Version}, {"date_saved", date}}.dump());
    Json config = model_to_keras_json(model, KerasJsonStyle::Keras3);
    if (training) config["compile_config"] = compile_config_json(*training);
    members.emplace_back("config.json", config.dump());
    members.emplace_back("model.weights.h5", read_text(w.path()));
    write_atomically(path, [&](const std::string& tmp) { write_zip(tmp, members, false); });
  } else {
    write_atomically(path, [&](const std::string& tmp) {
      h5::File h = h5::File::create(tmp);
      h5::Group root = h.root();
      if (f == KerasFormat::WeightsH5) {
        write_keras3_weights(root, model, params);
      } else {
        root.set_attr("keras_version", version);
        root.set_attr("backend", std::string("tensorflow"));
        root.set_attr("model_config", model_to_keras_json(model, KerasJsonStyle::Legacy).dump());
        if (training && legacy_h5_compiles(training->train.optimizer.kind))
          root.set_attr("training_config", training_config_json(*training).dump());
        else if (training)
          log_warn("{}: Keras 3 cannot compile a legacy .h5 model with the {} optimizer (it raises, for its own files "
                   "too), so this file loads uncompiled: compile it in Keras, or export .keras, which keeps it",
                   path, optimizer_info(training->train.optimizer.kind).keras_class);
        write_legacy_weights(root.create_group("model_weights"), model, params, version);
        if (training) write_legacy_optimizer(root.create_group("rnntrain"), model, params, *training);
      }
      h.flush();
    });
  }
  log_info("exported {} ({}) with {} parameters", path, keras_format_name(f), params.count());
}

ImportedKeras import_keras(const std::string& path) {
  ImportedKeras out;
  Rng rng(0);
  if (!is_zip(path) && ends_with(path, ".keras") && fs::exists(path))
    throw DataError(fmt::format("{}: not a zip archive, so not a .keras file (Keras writes those with model.save); "
                                "the file is damaged or was renamed", path));
  if (is_zip(path)) {
    KerasArchive a;
    open_archive(path, a, true);
    out.keras_version = a.keras_version;
    out.model = model_from_keras_json(a.config, KerasOrigin{path, a.keras_version});
    check_fits(out.model, path);
    if (a.config.is_object() && a.config.contains("compile_config"))
      out.train = train_from_keras_json(a.config["compile_config"], path);
    out.params = init_params(out.model, rng);
    in_member(a, path, [&] {
      h5::File h = h5::File::open(a.weights.path());
      assign_weights(path, read_keras3_weights(h.root(), out.model), out.model, out.params);
    });
    return out;
  }
  h5::File h = h5::File::open(path);
  h5::Group root = h.root();
  if (!root.has_attr("model_config"))
    throw DataError(fmt::format("{}: no model_config attribute: this is a weights-only file (save_weights), which "
                                "holds no model. Import a full model (model.save('m.h5') or 'm.keras'), or load these "
                                "weights into a config with --weights", path));
  out.keras_version = root.has_attr("keras_version") ? root.attr_string("keras_version") : "1";
  const nlohmann::json cfg = parse_json(root.attr_string("model_config"), path, "model_config");
  out.model = model_from_keras_json(cfg, KerasOrigin{path, out.keras_version});
  check_fits(out.model, path);
  if (root.has_attr("training_config"))
    out.train = train_from_keras_json(parse_json(root.attr_string("training_config"), path, "training_config"), path);
  out.params = init_params(out.model, rng);
  if (!root.has_group("model_weights"))
    throw DataError(fmt::format("{}: no /model_weights group: the file holds a model but no weights", path));
  assign_weights(path, read_legacy_weights(root.group("model_weights")), out.model, out.params);
  return out;
}

void load_keras_weights(const std::string& path, const ModelSpec& model, Params& params) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw DataError(fmt::format("{}: no such weights file. Check the path (relative paths in a config are relative "
                                "to the config file's folder).", path));
  if (is_zip(path)) {
    KerasArchive a;
    open_archive(path, a, false);
    in_member(a, path, [&] {
      h5::File h = h5::File::open(a.weights.path());
      assign_weights(path, read_keras3_weights(h.root(), model), model, params);
    });
    return;
  }
  if (const std::string kind = special_file(path); !kind.empty() && kind != "a folder")
    throw DataError(fmt::format("{}: is {}, not a weights file; pass a checkpoint, a Keras .h5, .weights.h5 or "
                                ".keras file", path, kind));
  if (!fs::is_directory(path, ec) && !h5::is_hdf5(path))
    throw DataError(fmt::format("{}: neither an HDF5 file nor a .keras archive; pass a checkpoint, a Keras .h5, "
                                ".weights.h5 or .keras file", path));
  h5::File h = h5::File::open(path);
  h5::Group root = h.root();
  switch (h5_kind(root)) {
    case H5Kind::LegacyWeights: assign_weights(path, read_legacy_weights(root), model, params); break;
    case H5Kind::LegacyFull: assign_weights(path, read_legacy_weights(root.group("model_weights")), model, params); break;
    case H5Kind::Keras3: assign_weights(path, read_keras3_weights(root, model), model, params); break;
  }
}

bool is_keras_file(const std::string& path) { return is_zip(path) || h5::is_hdf5(path); }

}  // namespace rnntrain
