// The subcommands: train, eval, predict and plan.
#include "cli/commands.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "core/signals.h"
#include "dist/comm.h"
#include "io/keras_file.h"
#include "spec/parse.h"
#include "backend/engine.h"
#include "plan/plan.h"
#include "spec/shapes.h"
#include "train/autotune.h"
#include "train/memory.h"
#include "train/run.h"
#include "train/run_dir.h"
#include "train/trainer.h"

namespace fs = std::filesystem;

namespace rnntrain {

Config load_config_args(const std::vector<std::string>& args, const std::string& resume_dir) {
  std::string path;
  std::vector<std::string> overrides;
  for (const auto& s : args) {
    if (path.empty() && overrides.empty() && s.find('=') == std::string::npos) path = s;
    else if (s.find('=') != std::string::npos) overrides.push_back(s);
    else throw UsageError(fmt::format("'{}': expected KEY=VALUE after the config file (e.g. train.epochs=3)", s));
  }
  if (path.empty()) {
    if (resume_dir.empty()) throw UsageError("missing the config file: rnntrain <command> CONFIG.yaml [KEY=VALUE ...]");
    path = (fs::path(resume_dir) / "config.yaml").string();
    if (!fs::exists(path))
      throw UsageError(fs::is_directory(resume_dir)
                           ? fmt::format("--resume {}: the folder holds no run to resume (no config.yaml; a training "
                                         "whose start failed leaves only train.log there): train again without --resume",
                                         resume_dir)
                           : fmt::format("--resume {}: no such run directory", resume_dir));
  }
  if (fs::is_directory(path)) {  // a run directory: the config it was trained with
    const std::string dir = path;
    path = (fs::path(dir) / "config.yaml").string();
    if (!fs::exists(path))
      throw UsageError(fmt::format("{} is a folder without config.yaml: pass a config file, or the run directory of an "
                                   "earlier `rnntrain train`", dir));
  }
  if (!fs::exists(path)) throw UsageError(fmt::format("{}: no such config file", path));
  if (is_keras_file(path))
    throw UsageError(fmt::format("{} is a Keras file (HDF5 or a .keras archive), not a YAML config. Turn it into one "
                                 "with `rnntrain import {} -o model.yaml` (a config and its weights), then use model.yaml",
                                 path, path));
  return load_config(path, overrides);
}

std::string weights_to_use(const CommandArgs& a, const Config& cfg) {
  if (!a.weights.empty()) return a.weights;
  const std::string first = a.args.empty() ? "" : a.args[0];
  if (!first.empty() && fs::is_directory(first)) {
    const std::string best = (fs::path(first) / "best.h5").string();
    if (!fs::exists(best))
      throw UsageError(fmt::format("{}: the run has no best.h5 (no epoch ended with its monitored value); pass "
                                   "--weights with one of its other checkpoints ({}/final.h5, {}/last.h5)", first,
                                   first, first));
    log_info("weights: {} (the run's best checkpoint; --weights picks another)", best);
    return best;
  }
  if (cfg.model.init_from) {
    const std::string w = resolve_path(cfg, *cfg.model.init_from);
    log_info("weights: {} (the config's model.init_from; --weights picks another)", w);
    return w;
  }
  throw UsageError(fmt::format("no weights to use: pass --weights CHECKPOINT, name them in the config "
                               "(model.init_from), or pass a run directory instead of {} (its best.h5 is used)",
                               cfg.path));
}

int cmd_train(const CommandArgs& a) {
  if (!a.resume.empty() && !a.weights.empty())
    throw UsageError("--resume continues a run with its own weights; --weights starts a new run from others: use one of them");
  if (!a.resume.empty() && a.overwrite)
    throw UsageError("--resume continues the run in its directory; --overwrite replaces a run: use one of them");
  DataParallel dp(*a.world);
  if (!a.resume.empty()) {  // a killed --overwrite is rolled back before the run's config is read
    if (dp.root()) recover_replaced_run(a.resume);
    dp.barrier();  // the other ranks read the config after that
  }
  Config cfg = load_config_args(a.args, a.resume);
  TrainOptions opt;
  opt.resume_dir = a.resume;
  opt.weights = a.weights;
  opt.overwrite = a.overwrite;
  opt.progress = a.progress;
  TrainResult r = train(cfg, opt, dp);
  nlohmann::ordered_json j;
  j["run_dir"] = r.run_dir;
  j["epochs"] = r.epochs_done;
  j["stopped_early"] = r.stopped_early;
  if (r.signal) j["interrupted"] = {{"signal", signal_name(r.signal)}, {"epoch", r.epochs_done + 1}, {"step", r.signal_step}};
  j["seconds"] = r.seconds;
  if (!r.history.epochs.empty())
    for (const auto& [k, v] : r.history.epochs.back()) j["final"][k] = v;
  if (dp.root()) std::printf("%s\n", j.dump().c_str());  // one result line for the run
  if (!r.signal) return 0;
  const std::string where = r.signal_step > 0 ? fmt::format("at epoch {} after step {}", r.epochs_done + 1, r.signal_step)
                                              : fmt::format("after epoch {}", r.epochs_done);
  log_warn("stopped by {} {}; {}/last.h5 holds this point. To go on: rnntrain train --resume {}", signal_name(r.signal),
           where, r.run_dir, r.run_dir);
  return 128 + r.signal;
}

// Arrays (.npy, .npz, .h5) for a model trained on CSV data: taken in the data's units, as the CSV
// file was, and scaled with the run's fitted scaling, inputs per feature column and targets per
// target column (predict undoes the latter on its forecasts).
// Padded steps stay as they are: those past a sequence's length, and under a Masking layer right
// after the Input the steps that are all its mask_value (csv_sequences pads with 0 after scaling).
static void scale_as_csv(Dataset& d, const DataMeta& meta, const ModelSpec& model, const std::string& what) {
  const auto cols = static_cast<int64_t>(meta.shift.size());
  if (d.x.rank() < 2 || d.x.dim(-1) != cols)
    throw DataError(fmt::format("{}: the model was trained on CSV data of {} feature columns, scaled per column "
                                "(data_meta.json), and these inputs have shape {}; give [samples, steps, {}] in the "
                                "data's units, or pass --scaled for inputs scaled already",
                                what, cols, shape_str(d.x.shape), cols));
  const LayerSpec* masking = model.layers.size() > 1 && model.layers[1].kind == LayerKind::Masking ? &model.layers[1]
                                                                                                   : nullptr;
  const int64_t N = d.x.dim(0), T = d.x.rank() > 2 ? d.x.dim(1) : 1;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t t = 0; t < T; ++t) {
      float* step = d.x.ptr() + (n * T + t) * cols;
      if (!d.lengths.empty() && t >= d.lengths[static_cast<size_t>(n)]) continue;
      if (masking && std::all_of(step, step + cols, [&](float v) { return v == static_cast<float>(masking->mask_value); }))
        continue;
      for (int64_t j = 0; j < cols; ++j) step[j] = static_cast<float>((step[j] - meta.shift[j]) / meta.scale[j]);
    }
  const auto tc = static_cast<int64_t>(meta.target_shift.size());
  if (!d.y.empty() && tc > 0) {
    if (d.y.dim(-1) % tc != 0)
      throw DataError(fmt::format("{}: the targets have {} values per sample, not a multiple of the {} target columns "
                                  "the CSV scaling has; pass --scaled for targets scaled already",
                                  what, d.y.dim(-1), tc));
    for (int64_t i = 0; i < d.y.numel(); ++i) {
      const size_t j = static_cast<size_t>((i % d.y.dim(-1)) % tc);
      d.y[i] = static_cast<float>((d.y[i] - meta.target_shift[j]) / meta.target_scale[j]);
    }
  }
  log_info("{}: taken in the data's units and scaled as the run's CSV data (--scaled: already scaled)", what);
}

// The data for eval and predict: --data replaces the path of data.test (else validation, else
// train) and keeps its other keys while the format stays; an .npy --data holds inputs only, so eval
// takes its targets from --targets (never the config's, which belong to other inputs). The training
// run's data_meta.json (next to the weights, or --meta) supplies CSV scaling and the text vocabulary
// (into *meta_out when given). Without targets (predict) a CSV's windows run to its last row.
static Dataset eval_data(const Config& cfg, const CommandArgs& a, bool need_targets, DataMeta* meta_out = nullptr) {
  const DataSource* tmpl = cfg.data.test ? &*cfg.data.test : cfg.data.validation ? &*cfg.data.validation
                           : cfg.data.train ? &*cfg.data.train : nullptr;
  if (!tmpl && a.data.empty())
    throw ConfigError(fmt::format("{}: no data to use: pass --data FILE or set data.test in the config", cfg.path));
  DataSource src;
  if (tmpl) src = *tmpl;
  if (!a.data.empty()) {
    const auto f = data_format_from_path(a.data);
    if (!f && !tmpl)
      throw UsageError(fmt::format("--data {}: cannot tell the format from the suffix ({})", a.data, data_suffixes()));
    if (f && !data_format_takes(src.format, a.data)) {  // another format: the template's dataset names do not apply
      const DataSource defaults;
      src.format = *f;
      src.inputs = defaults.inputs;
      src.targets = defaults.targets;
      src.lengths = "";
    }
    src.path = fs::absolute(a.data).string();
    if (data_format_info(src.format).files == DataFiles::PerArray) {
      src.inputs = src.path;
      if (!a.targets.empty()) src.targets = fs::absolute(a.targets).string();
      else if (need_targets)
        throw UsageError(fmt::format("--data {} holds inputs only: pass their targets with --targets FILE.npy (the "
                                     "config's targets belong to other inputs)", a.data));
    }
  }
  if (!a.targets.empty() && (a.data.empty() || data_format_info(src.format).files != DataFiles::PerArray))
    throw UsageError(fmt::format("--targets {} goes with an .npy --data (inputs and targets in two files); {}", a.targets,
                                 a.data.empty() ? "pass --data too" : "this --data holds its targets itself"));
  if (!need_targets) src.targets = "", src.forecast = true;
  const std::string meta_dir = a.meta.empty() ? fs::path(a.weights).parent_path().string() : "";
  DataMeta meta = a.meta.empty() ? read_meta(meta_dir) : read_meta_file(a.meta);
  const DataFormatInfo& format = data_format_info(src.format);
  const bool csv = format.meta == DataMetaKind::Scaling;
  if (meta.empty() && format.meta != DataMetaKind::None)
    throw UsageError(fmt::format("{} data needs the training run's {} (data_meta.json), and there is none in '{}'; "
                                 "pass --meta RUN_DIR/data_meta.json", format.name,
                                 csv ? "scaling" : "vocabulary", meta_dir.empty() ? "." : meta_dir));
  Dataset d = load_data(cfg, src, meta);
  if (!csv && !meta.shift.empty() && !a.scaled && !a.data.empty()) scale_as_csv(d, meta, cfg.model, a.data);
  if (tmpl == &*cfg.data.train && !cfg.data.test && !cfg.data.validation && a.data.empty() && cfg.data.validation_split > 0) {
    log_info("evaluating the validation split of data.train (its last {} of rows)", cfg.data.validation_split);
    d = d.slice(training_rows(cfg, d.size()), d.size());
  }
  check_dataset(d, cfg.model, infer_shapes(cfg.model), cfg.train.loss, need_targets);
  if (meta_out) *meta_out = meta;
  return d;
}

// The engine of eval and predict: the checkpoint's weights, the plan resolved (autotune: from its
// cache or measured, on forward-only steps) for the data's timesteps. rng must outlive it.
static std::unique_ptr<Engine> inference_engine(const Config& cfg, const CommandArgs& a, const Dataset& d, Rng& rng) {
  check_memory(cfg, d.x.dim(1), false);
  Params init = initial_params(cfg, a.weights, a.allow_nonfinite);
  const Config run_cfg = resolve_plan(cfg, init, d.x.dim(1), Workload::Inference);  // before init is moved into the engine
  return make_engine(run_cfg, std::move(init), rng);
}

int cmd_eval(const CommandArgs& given) {
  Config cfg = load_config_args(given.args);
  CommandArgs a = given;
  a.weights = weights_to_use(given, cfg);
  Dataset d = eval_data(cfg, a, true);
  Rng rng(cfg.train.seed);
  const DataParallel dp(*a.world);
  auto engine = inference_engine(dp.for_engine(cfg), a, d, rng);
  EvalResult r = evaluate(*engine, cfg, d, dp);  // under mpirun the ranks share the batches
  if (!dp.root()) return 0;
  if (a.json) {
    nlohmann::ordered_json j;
    j["loss"] = r.loss;
    j["metrics"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : r.metrics) j["metrics"][k] = v;
    j["samples"] = r.samples;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("samples: %lld\nloss: %.6g\n", (long long)r.samples, r.loss);
    for (const auto& [k, v] : r.metrics) std::printf("%s: %.6g\n", k.c_str(), v);
  }
  return 0;
}

int cmd_predict(const CommandArgs& given) {
  if (!given.world->root()) return 0;  // under mpirun rank 0 writes them all
  Config cfg = load_config_args(given.args);
  CommandArgs a = given;
  a.weights = weights_to_use(given, cfg);
  DataMeta meta;
  Dataset d = eval_data(cfg, a, false, &meta);
  Rng rng(cfg.train.seed);
  auto engine = inference_engine(cfg, a, d, rng);
  Tensor pred = predict_all(*engine, d, cfg.train.batch_size);
  // CSV forecasts in the data's units: each output (horizon step h, target column j at h * Tc + j)
  // unscaled with its column's fitted shift and scale.
  const size_t tc = meta.target_shift.size();
  if (!a.scaled && tc > 0 && meta.target_scale.size() == tc) {
    if (pred.dim(-1) % static_cast<int64_t>(tc) != 0)
      throw DataError(fmt::format("the model predicts {} values per window, not a multiple of the {} target columns the "
                                  "CSV scaling has; pass --scaled to write them as the model outputs them",
                                  pred.dim(-1), tc));
    for (int64_t i = 0; i < pred.numel(); ++i) {
      const size_t j = static_cast<size_t>(i % pred.dim(-1)) % tc;
      pred[i] = static_cast<float>(pred[i] * meta.target_scale[j] + meta.target_shift[j]);
    }
    log_info("predictions in the data's units (the CSV target scaling undone; --scaled keeps the model's)");
  }
  write_predictions(a.output, pred);
  log_info("wrote {} predictions of shape {} to {}", d.size(), shape_str(pred.shape), a.output);
  return 0;
}

static std::string with_commas(int64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

int cmd_plan(const CommandArgs& a) {
  Config cfg = load_config_args(a.args);
  const ResolvedModel m = resolve_model(cfg.model, cfg.plan.fuse);
  const std::vector<LayerShape>& shapes = m.shapes;
  const std::string rule(80, '_'), dbl(80, '=');
  std::printf("Model: %s\n%s\n", cfg.path.c_str(), rule.c_str());
  std::printf(" %-40s %-26s %10s\n%s\n", "Layer (type)", "Output Shape", "Param #", dbl.c_str());
  int64_t total = 0;
  for (size_t i = 0; i < cfg.model.layers.size(); ++i) {
    const LayerSpec& l = cfg.model.layers[i];
    std::string type = layer_kind_name(l.kind);
    if (l.inner) type += fmt::format("({})", layer_kind_name(l.inner->kind));
    Shape out{-1};
    out.insert(out.end(), shapes[i].out.begin(), shapes[i].out.end());
    std::printf(" %-40s %-26s %10s\n", fmt::format("{} ({})", l.name, type).c_str(), shape_str(out).c_str(),
                with_commas(shapes[i].params).c_str());
    total += shapes[i].params;
  }
  std::printf("%s\n Total params: %s (%s)\n Trainable params: %s\n Non-trainable params: 0\n%s\n", dbl.c_str(),
              with_commas(total).c_str(), fmt::format("{:.2f} KB", total * 4 / 1024.0).c_str(), with_commas(total).c_str(),
              rule.c_str());
  std::printf("%s", describe_plan(m).c_str());
  std::printf("%s", describe_execution(cfg, m).c_str());
  for (const std::string& line : dropped_masks(cfg.model, shapes)) std::printf("mask: %s\n", line.c_str());
  return 0;
}

}  // namespace rnntrain
