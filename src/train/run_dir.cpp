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
    if (data_format_info((*src)->format).files == DataFiles::PerArray) {
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
// Every file a run writes in its directory besides its log and TensorBoard events.
constexpr const char* kRunFiles[] = {"last.h5", "best.h5", "final.h5", "early_stopping_best.h5", "history.json",
                                     "history.csv", "config.yaml", "data_meta.json"};
constexpr const char* kAside = ".replaced";  // an --overwrite's earlier run, until the new one's first checkpoint

// The TensorBoard event files rnntrain wrote in the run directory (tensorboard.cpp names them
// events.out.tfevents.<time>.<host>.<pid>.rnntrain), relative to it; other files there are the user's.
std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const char* sub : {"train", "validation"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir / "tensorboard" / sub, ec)) {
      const std::string name = e.path().filename().string();
      if (e.is_regular_file(ec) && name.starts_with("events.out.tfevents.") && name.ends_with(".rnntrain"))
        out.push_back(fs::path("tensorboard") / sub / name);
    }
  }
  return out;
}

// What a run wrote in `dir`, relative to it: its files, train.log, its event files.
std::vector<fs::path> written_by_a_run(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const char* f : kRunFiles)
    if (fs::exists(dir / f)) out.push_back(f);
  if (fs::exists(dir / "train.log")) out.push_back("train.log");
  for (const fs::path& e : event_files(dir)) out.push_back(e);
  return out;
}

void move(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  fs::rename(from, to, ec);
  if (ec) throw RuntimeError(fmt::format("--overwrite: cannot move {} to {}: {}", from.string(), to.string(), ec.message()));
}

bool has_checkpoint(const fs::path& dir) { return fs::exists(dir / "last.h5") || fs::exists(dir / "best.h5"); }
}  // namespace

bool claim_run_dir(const std::string& run_dir, bool overwrite) {
  // A run is its checkpoints and history; config.yaml, data_meta.json and train.log alone are a start
  // killed or failed before its first checkpoint, which a new start replaces.
  std::vector<std::string> found;
  for (const char* f : kRunFiles)
    if (fs::exists(fs::path(run_dir) / f) && std::string(f) != "config.yaml" && std::string(f) != "data_meta.json")
      found.push_back(f);
  std::string list;
  for (const std::string& f : found) list += (list.empty() ? "" : ", ") + f;
  if (list.empty()) return fs::exists(run_dir) && !written_by_a_run(run_dir).empty();
  if (!overwrite && !fs::exists(fs::path(run_dir) / "last.h5"))  // killed before its first last.h5
    throw UsageError(fmt::format("{} holds an earlier run ({}) that never wrote last.h5, so it cannot be resumed; "
                                 "nothing was changed. Replace it with --overwrite, or train into another directory "
                                 "(output.dir=...)", run_dir, list));
  if (!overwrite)
    throw UsageError(fmt::format("{} holds an earlier run ({}); nothing was changed. Continue it with `rnntrain train "
                                 "--resume {}`, replace it with --overwrite, or train into another directory "
                                 "(output.dir=...)", run_dir, list, run_dir));
  return true;
}

// RUN/.replaced holds the earlier run once `kComplete` is in it: until then (a kill while it was being
// set aside) its files and those still in RUN are all the earlier run's. commit() renames it to
// `kDiscard` before removing it, so that a kill during the removal leaves nothing to put back.
constexpr const char* kComplete = ".complete";
constexpr const char* kDiscard = ".replaced.discard";

void move_back(const fs::path& aside, const fs::path& dir) {
  for (const fs::path& f : written_by_a_run(aside)) move(aside / f, dir / f);
  std::error_code ec;
  fs::remove_all(aside, ec);
}

void recover_replaced_run(const std::string& run_dir) {
  const fs::path dir(run_dir), aside = dir / kAside;
  std::error_code ec;
  fs::remove_all(dir / kDiscard, ec);
  if (!fs::is_directory(aside)) return;
  if (!fs::exists(aside / kComplete)) {  // stopped while the earlier run was set aside, or put back
    move_back(aside, dir);
  } else if (has_checkpoint(dir)) {  // the replacement had its first checkpoint: it only was not tidied up
    fs::remove_all(aside, ec);
    return;
  } else {  // stopped before the new run's first checkpoint: the new start's files go
    for (const fs::path& f : written_by_a_run(dir)) fs::remove(dir / f, ec);
    move_back(aside, dir);
  }
  log_warn("{}: an --overwrite was stopped before the new run's first checkpoint; the earlier run it was replacing "
           "is back in place", run_dir);
}

ReplacedRun::ReplacedRun(std::string run_dir) : dir_(std::move(run_dir)) {
  const fs::path dir(dir_), aside = dir / kAside;
  for (const char* d : {"tensorboard", "tensorboard/train", "tensorboard/validation"})
    if (fs::is_directory(dir / d)) folders_.push_back(d);
  try {
    for (const fs::path& f : written_by_a_run(dir)) {
      move(dir / f, aside / f);
      moved_.push_back(f);
    }
    write_text((aside / kComplete).string(), "the earlier run of this folder, set aside by rnntrain train --overwrite\n");
  } catch (...) {  // a full disk, say: what was moved goes back, and the start fails
    for (const fs::path& f : moved_) move(aside / f, dir / f);
    std::error_code ec;
    fs::remove_all(aside, ec);
    throw;
  }
  log_warn("--overwrite: the earlier run in {} is set aside in {} and removed once this run writes its first "
           "checkpoint (a start that fails before puts it back)", dir_, aside.string());
}

void ReplacedRun::commit() {
  if (committed_) return;
  committed_ = true;
  const fs::path dir(dir_);
  std::error_code ec;
  fs::rename(dir / kAside, dir / kDiscard, ec);
  if (!ec) fs::remove_all(dir / kDiscard, ec);
  if (ec) log_warn("--overwrite: cannot remove the earlier run set aside in {}/{}: {}", dir_, kAside, ec.message());
  else log_info("--overwrite: removed the earlier run of {} (the new one has its first checkpoint)", dir_);
}

ReplacedRun::~ReplacedRun() {
  if (committed_) return;
  try {  // the new start failed: its files go, the earlier run's come back
    const fs::path dir(dir_), aside = dir / kAside;
    std::error_code ec;
    for (const fs::path& f : written_by_a_run(dir)) fs::remove(dir / f, ec);
    remove_stale_temporaries(dir_);
    fs::remove(aside / kComplete, ec);  // from here a kill leaves files that are all the earlier run's
    move_back(aside, dir);
    for (const char* d : {"tensorboard/train", "tensorboard/validation", "tensorboard"})  // the new run's, if empty
      if (std::find(folders_.begin(), folders_.end(), d) == folders_.end()) fs::remove(dir / d, ec);
    log_warn("--overwrite: this run stopped before its first checkpoint; the earlier run in {} is back as it was", dir_);
  } catch (const std::exception& e) {
    log_error("--overwrite: could not put the earlier run back ({}); its files are in {}/{}, and the next `rnntrain "
              "train` of that folder puts them back", e.what(), dir_, kAside);
  }
}

void remove_stale_temporaries(const std::string& run_dir) {
  for (const char* f : kRunFiles) {
    const fs::path tmp = fs::path(run_dir) / (std::string(f) + ".tmp");
    std::error_code ec;
    if (fs::remove(tmp, ec)) log_info("removed {}, left by an interrupted run (the file it was for is intact)", tmp.string());
  }
}

}  // namespace rnntrain
