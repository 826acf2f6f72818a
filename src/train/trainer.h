// The epoch loop (Keras' fit), evaluation and prediction over in-memory datasets, driving an
// Engine. Owns run directories: config.yaml, data_meta.json, history.csv/json, last.h5, best.h5.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "train/callbacks.h"
#include "backend/engine.h"
#include "train/run_dir.h"

namespace rnntrain {

struct TrainOptions {
  std::string resume_dir;  // continue from <dir>/last.h5
  std::string weights;     // start from these weights (overrides model.init_from)
  bool overwrite = false;  // a new run may replace the run in output.dir (else that is refused)
  bool progress = true;
};

struct TrainResult {
  std::string run_dir;
  History history;
  int64_t epochs_done = 0;
  bool stopped_early = false;
  int signal = 0;          // SIGINT, SIGTERM or SIGHUP when a signal stopped training (last.h5 holds where)
  int64_t signal_step = 0;  // the steps of epoch epochs_done + 1 done by then
  double seconds = 0.0;
};

TrainResult train(const Config& cfg, const TrainOptions& opt);

struct EvalResult {
  double loss = 0.0;
  std::vector<std::pair<std::string, double>> metrics;
  int64_t samples = 0;
};

EvalResult evaluate(Engine& engine, const Config& cfg, const Dataset& data);
Tensor predict_all(Engine& engine, const Dataset& data, int64_t batch_size);

// Rows of data.train that train when data.validation_split holds out the rest (Keras' rule).
int64_t training_rows(const Config& cfg, int64_t n);
// Loads a data source of the config, resolving its path.
Dataset load_data(const Config& cfg, const DataSource& src, DataMeta& meta, double holdout_fraction = 0.0);
// Parameters initialised from the seed (Keras' initialisers), nothing loaded.
Params fresh_params(const Config& cfg);
// Parameters initialised from the seed, then loaded from `weights` (or model.init_from) if given.
// Loaded weights holding inf or NaN (a diverged run's) are a DataError unless allow_nonfinite.
Params initial_params(const Config& cfg, const std::string& weights, bool allow_nonfinite = false);

}  // namespace rnntrain
