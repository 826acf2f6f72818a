// The files of a run directory besides checkpoints (run_dir.cpp): paths, data_meta.json, the resume
// check and the temporaries a killed run left.
#pragma once
#include <string>

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
// that ended before its first checkpoint); with `overwrite` the run's files and log are removed
// instead (other files stay).
void claim_run_dir(const std::string& run_dir, bool overwrite);

// Removes the temporaries of the files a run writes (last.h5.tmp, history.csv.tmp, ...) that a killed
// run left behind; they are never complete, and the files they were for are intact.
void remove_stale_temporaries(const std::string& run_dir);

}  // namespace rnntrain
