// The Keras interchange subcommands: `export` (config + weights -> .h5, .keras or .weights.h5) and
// `import` (a Keras full model -> a config plus a weights file, ready for eval, predict or train).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "core/files.h"
#include "core/log.h"
#include "io/checkpoint.h"
#include "io/keras_file.h"
#include "model/optimizer.h"
#include "spec/parse.h"
#include "train/run_dir.h"
#include "train/trainer.h"

namespace fs = std::filesystem;

namespace rnntrain {

// The export is compiled with the config's training settings. The optimizer's state (its step, the
// learning rate now, the slots) comes from --weights when that is a checkpoint whose optimizer fits
// train.optimizer; otherwise it is a fresh optimizer's.
// The CSV scaling a model was trained under, for Keras users, as <output stem>.scaling.json next to
// the export: each feature and target column's name, shift and scale, the window and horizon, and
// the recipe (docs/keras.md). Returns its path, or "" when the run had no CSV scaling.
static std::string export_scaling(const CommandArgs& a, const Config& cfg) {
  const std::string meta_path =
      a.meta.empty() ? (fs::path(a.weights).parent_path() / "data_meta.json").string() : a.meta;
  const DataSource* csv = cfg.data.train && cfg.data.train->format == DataFormat::Csv ? &*cfg.data.train : nullptr;
  if (!fs::exists(meta_path)) {
    if (csv && csv->scaling != Scaling::None)
      log_warn("the model was trained on scaled CSV data, but there is no {} to export its scaling from: pass --meta "
               "RUN_DIR/data_meta.json so that Keras users can scale their data as the model expects",
               meta_path);
    return "";
  }
  const DataMeta meta = read_meta_file(meta_path);
  auto identity = [](const std::vector<double>& shift, const std::vector<double>& scale) {
    for (size_t i = 0; i < shift.size(); ++i)
      if (shift[i] != 0.0 || scale[i] != 1.0) return false;
    return true;
  };
  if (identity(meta.shift, meta.scale) && identity(meta.target_shift, meta.target_scale)) return "";  // none
  auto columns = [](const std::vector<std::string>& names, const std::vector<double>& shift,
                    const std::vector<double>& scale, const std::vector<std::string>& fallback) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (size_t i = 0; i < shift.size(); ++i) {
      const std::string name = i < names.size()      ? names[i]
                               : i < fallback.size() && fallback.size() == shift.size() ? fallback[i]
                                                                                        : fmt::format("column {}", i);
      out.push_back({{"column", name}, {"shift", shift[i]}, {"scale", scale[i]}});
    }
    return out;
  };
  nlohmann::ordered_json r;
  r["about"] = "The model was trained on CSV data scaled per column: it reads x_scaled = (x - shift) / scale of each "
               "feature column, and predicts y_scaled, from which y = y_scaled * scale + shift for each target column. "
               "Outputs are horizon steps of the target columns, step after step. See rnntrain's docs/keras.md.";
  r["features"] = columns(meta.columns, meta.shift, meta.scale, csv ? csv->features : std::vector<std::string>{});
  r["targets"] = columns(meta.target_columns, meta.target_shift, meta.target_scale,
                         csv ? csv->target_columns : std::vector<std::string>{});
  if (csv) r["window"] = csv->window, r["horizon"] = csv->horizon;
  const fs::path out = fs::path(a.output).parent_path() / (fs::path(a.output).stem().string() + ".scaling.json");
  write_text(out.string(), r.dump(2) + "\n");
  log_info("wrote {}: the CSV scaling to apply to the data in Keras (docs/keras.md)", out.string());
  return out.string();
}

int cmd_export(const CommandArgs& given) {
  Config cfg = load_config_args(given.args);
  CommandArgs a = given;
  a.weights = weights_to_use(given, cfg);
  const KerasFormat f = keras_format_for_output(a.output);  // a usage error before any work
  Params params = initial_params(cfg, a.weights);
  std::unique_ptr<Optimizer> optimizer;
  KerasTraining kt{cfg.train, cfg.train.optimizer.learning_rate, 0, {}};
  auto fresh_optimizer = [&] {
    optimizer = make_optimizer(cfg.train.optimizer, params.all(), keras_variable_paths(cfg.model, params));
    kt.slots.clear();
    for (const NamedTensor& s : optimizer->slots()) kt.slots.emplace_back(s.name, s.tensor);
  };
  fresh_optimizer();
  if (!a.weights.empty() && has_optimizer_state(a.weights)) {
    try {
      const ResumeState st = load_checkpoint(a.weights, cfg.model, params, kt.slots);
      kt.iterations = st.iterations;
      kt.learning_rate = st.learning_rate.value_or(kt.learning_rate);
    } catch (const DataError& e) {
      log_warn("the optimizer state in {} is not exported ({}); the export holds a fresh {} optimizer", a.weights,
               e.what(), optimizer_name(cfg.train.optimizer.kind));
      fresh_optimizer();
    }
  }
  export_keras(a.output, cfg.model, params, &kt);
  nlohmann::ordered_json j;
  j["output"] = a.output;
  j["format"] = keras_format_name(f);
  j["params"] = params.count();
  if (const std::string recipe = export_scaling(a, cfg); !recipe.empty()) j["scaling"] = recipe;
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

// "runs/model.yaml" -> "runs/model_weights.h5" (next to the config, named after it).
static fs::path weights_path_for(const fs::path& config) {
  return config.parent_path() / (config.stem().string() + "_weights.h5");
}

int cmd_import(const CommandArgs& a) {
  if (a.args.size() != 1) throw UsageError("import takes one Keras file: rnntrain import model.h5|model.keras [-o config.yaml]");
  const std::string src = a.args[0];
  if (!fs::exists(src)) throw DataError(fmt::format("{}: no such file", src));
  if (!is_keras_file(src))
    throw DataError(fmt::format("{} is not a Keras file (Keras saves HDF5 .h5 files and .keras zip archives){}", src,
                                 fs::path(src).extension() == ".yaml" || fs::path(src).extension() == ".yml"
                                     ? "; it is a config: train it with `rnntrain train " + src + "`"
                                     : ""));
  fs::path out = a.output.empty() ? fs::path(src).replace_extension(".yaml") : fs::path(a.output);
  if (out.extension() != ".yaml" && out.extension() != ".yml")
    throw UsageError(fmt::format("-o {}: the config file must end in .yaml or .yml", out.string()));
  const fs::path weights = weights_path_for(out);
  std::error_code ec;
  if (fs::equivalent(weights, src, ec) || fs::equivalent(out, src, ec))
    throw UsageError(fmt::format("-o {}: would overwrite the Keras file {}; choose another name", out.string(), src));

  ImportedKeras k = import_keras(src);
  Config cfg;
  cfg.path = out.string();
  cfg.model = k.model;
  cfg.model.init_from = weights.filename().string();  // relative to the config's folder
  if (k.train) cfg.train = *k.train;
  cfg.output.dir = (fs::path("runs") / out.stem()).string();
  const std::string yaml = emit_config(cfg);
  try {
    parse_config(yaml, out.string());  // what rnntrain will read must be valid
  } catch (const ConfigError& e) {
    throw DataError(fmt::format("{}: the imported model is not a valid rnntrain config: {}", src, e.what()));
  }

  if (!out.parent_path().empty()) fs::create_directories(out.parent_path());
  export_keras(weights.string(), k.model, k.params);
  write_atomically(out.string(), [&](const std::string& tmp) {
    std::ofstream f(tmp, std::ios::binary);
    f << "# Imported by `rnntrain import` from " << src << " (Keras " << k.keras_version << ").\n" << yaml;
    f.close();
    if (!f) throw RuntimeError(fmt::format("cannot write {}: check the disk and the folder's permissions", tmp));
  });
  log_info("imported {} (Keras {}): {} layers, {} parameters -> {} and {}", src, k.keras_version,
           k.model.layers.size(), k.params.count(), out.string(), weights.string());
  log_info("next: rnntrain predict {} --weights {} --data INPUTS -o predictions.npy", out.string(), weights.string());
  nlohmann::ordered_json j;
  j["config"] = out.string();
  j["weights"] = weights.string();
  j["keras_version"] = k.keras_version;
  j["layers"] = k.model.layers.size();
  j["params"] = k.params.count();
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace rnntrain
