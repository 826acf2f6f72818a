// The files of a run directory besides checkpoints (run_dir.cpp): paths, data_meta.json, the resume
// check and the temporaries a killed run left.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "spec/config.h"

namespace rnntrain {

// A path from the config, resolved against the config file's folder (absolute paths unchanged).
std::string resolve_path(const Config& cfg, const std::string& path);
// The config with every file path made absolute: what a run directory's config.yaml holds, so that
// `--resume RUN_DIR` finds the data from anywhere.
Config with_absolute_paths(const Config& cfg);

// Reads <dir>/data_meta.json if present (empty meta otherwise); read_meta_file reads one file.
DataMeta read_meta(const std::string& dir);
DataMeta read_meta_file(const std::string& path);

// Refuses (UsageError) to resume a run with another model or optimizer than the one that wrote it,
// whose config.yaml is then_yaml (read from path).
void check_resumable(const Config& cfg, const std::string& then_yaml, const std::string& path);

// A new run's directory: refused (UsageError, with the commands that continue or replace it) when it
// holds a run's checkpoints or history (config.yaml, data_meta.json and train.log alone are a start
// that ended before its first checkpoint), unless `overwrite`. Changes nothing; returns whether there
// are files of a run there that a ReplacedRun must set aside.
bool claim_run_dir(const std::string& run_dir, bool overwrite);

// --overwrite, once the new start has been checked as far as it can be (config, data, shapes,
// memory, the weights it starts from): the earlier run's files (checkpoints, history, config.yaml,
// data_meta.json, train.log and rnntrain's TensorBoard event files; nothing else of the folder) are
// moved into RUN/.replaced. commit() removes them once the new run has written a checkpoint;
// destroyed before that (the start failed), it removes the new run's files and puts them back.
class ReplacedRun {
 public:
  explicit ReplacedRun(std::string run_dir);
  ~ReplacedRun();
  ReplacedRun(const ReplacedRun&) = delete;
  ReplacedRun& operator=(const ReplacedRun&) = delete;
  void commit();

 private:
  std::string dir_;
  std::vector<std::filesystem::path> moved_;
  std::vector<std::string> folders_;  // of tensorboard/ and its two, those that were there
  bool committed_ = false;
};

// What a killed --overwrite left (RUN/.replaced): without a checkpoint of the new run, the earlier run
// is put back (said in the log); with one, the set-aside files are removed. Nothing when there is none.
void recover_replaced_run(const std::string& run_dir);

// Removes the temporaries of the files a run writes (last.h5.tmp, history.csv.tmp, ...) that a killed
// run left behind; they are never complete, and the files they were for are intact.
void remove_stale_temporaries(const std::string& run_dir);

}  // namespace rnntrain
