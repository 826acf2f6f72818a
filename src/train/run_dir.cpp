// The files of a run directory besides checkpoints: the config's paths made absolute, text files
// written atomically, data_meta.json, the check that a resumed run is the same model, and the
// temporaries a killed run left. Used by the trainer and the commands; no training here.
#include "train/run_dir.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/files.h"
#include "core/log.h"
#include "io/checkpoint.h"
#include "spec/compare.h"
#include "spec/parse.h"

namespace fs = std::filesystem;

namespace rnntrain {

std::string resolve_path(const Config& cfg, const std::string& path) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  const fs::path base = fs::path(cfg.path).parent_path();
  return (base / path).lexically_normal().string();
}

Config with_absolute_paths(const Config& cfg) {
  Config out = cfg;
  auto fix = [&](std::string& p) {
    if (!p.empty()) p = fs::absolute(resolve_path(cfg, p)).lexically_normal().string();
  };
  for (auto* src : {&out.data.train, &out.data.validation, &out.data.test}) {
    if (!*src) continue;
    fix((*src)->path);
    if ((*src)->format == DataFormat::Npy) {
      fix((*src)->inputs);
      fix((*src)->targets);
      fix((*src)->lengths);
    }
  }
  if (out.model.init_from) fix(*out.model.init_from);
  return out;
}

DataMeta read_meta_file(const std::string& path) {
  if (!fs::is_regular_file(path))
    throw UsageError(fmt::format("{}: no such file; pass the data_meta.json of the training run", path));
  return DataMeta::from_json(read_text(path), path);
}

DataMeta read_meta(const std::string& dir) {
  const std::string p = (fs::path(dir) / "data_meta.json").string();
  return fs::exists(p) ? read_meta_file(p) : DataMeta{};
}

void check_resumable(const Config& cfg, const std::string& then_yaml, const std::string& path) {
  Config then = parse_config(then_yaml, path);
  if (const std::string diff = model_difference(then.model, cfg.model); !diff.empty())
    throw UsageError(fmt::format("--resume: the model differs from the one the run was trained with ({}); resume with "
                                 "the run's own config, or start a new run with --weights",
                                 diff));
  if (then.train.optimizer.kind != cfg.train.optimizer.kind)
    throw UsageError("--resume: train.optimizer.type differs from the run's; its optimizer state cannot be carried over. "
                     "Start a new run with --weights RUN/last.h5 to change optimizers");
}

namespace {
// Every file a run writes in its directory.
constexpr const char* kRunFiles[] = {"last.h5", "best.h5", "final.h5", "early_stopping_best.h5", "history.json",
                                     "history.csv", "config.yaml", "data_meta.json"};
}  // namespace

void claim_run_dir(const std::string& run_dir, bool overwrite) {
  // A run is its checkpoints and history; config.yaml, data_meta.json and train.log alone are a start
  // killed or failed before its first checkpoint, which a new start replaces.
  std::vector<std::string> found;
  for (const char* f : kRunFiles)
    if (fs::exists(fs::path(run_dir) / f)) found.push_back(f);
  std::string list;
  for (const std::string& f : found)
    if (f != "config.yaml" && f != "data_meta.json") list += (list.empty() ? "" : ", ") + f;
  if (list.empty()) return;
  if (!overwrite && !fs::exists(fs::path(run_dir) / "last.h5"))  // killed before its first last.h5
    throw UsageError(fmt::format("{} holds an earlier run ({}) that never wrote last.h5, so it cannot be resumed; "
                                 "nothing was changed. Replace it with --overwrite, or train into another directory "
                                 "(output.dir=...)", run_dir, list));
  if (!overwrite)
    throw UsageError(fmt::format("{} holds an earlier run ({}); nothing was changed. Continue it with `rnntrain train "
                                 "--resume {}`, replace it with --overwrite, or train into another directory "
                                 "(output.dir=...)", run_dir, list, run_dir));
  found.insert(found.end(), {"train.log", "tensorboard"});  // the earlier run's log and event files
  for (const std::string& f : found) {
    std::error_code ec;
    fs::remove_all(fs::path(run_dir) / f, ec);
    if (ec) throw RuntimeError(fmt::format("--overwrite: cannot remove {}: {}", (fs::path(run_dir) / f).string(), ec.message()));
  }
  log_warn("--overwrite: removed the earlier run in {} ({})", run_dir, list);
}

void remove_stale_temporaries(const std::string& run_dir) {
  for (const char* f : kRunFiles) {
    const fs::path tmp = fs::path(run_dir) / (std::string(f) + ".tmp");
    std::error_code ec;
    if (fs::remove(tmp, ec)) log_info("removed {}, left by an interrupted run (the file it was for is intact)", tmp.string());
  }
}

}  // namespace rnntrain
