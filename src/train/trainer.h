// What training, evaluation and prediction share over in-memory datasets, driving an Engine: the data
// a config names, the initial parameters, the metrics, evaluate() and predict_all(). The training run
// itself (train(): the epochs, the run directory) is run.h's.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "train/callbacks.h"
#include "backend/engine.h"
#include "train/data_parallel.h"

namespace rnntrain {

struct EvalResult {
  double loss = 0.0;
  std::vector<std::pair<std::string, double>> metrics;
  int64_t samples = 0;
};

// Under data parallelism every rank evaluates its share of the batches; each gets the totals.
EvalResult evaluate(Engine& engine, const Config& cfg, const Dataset& data, const DataParallel& dp);
Tensor predict_all(Engine& engine, const Dataset& data, int64_t batch_size);

// Rows of data.train that train when data.validation_split holds out the rest (Keras' rule).
int64_t training_rows(const Config& cfg, int64_t n);
// Loads a data source of the config, resolving its path.
Dataset load_data(const Config& cfg, const DataSource& src, DataMeta& meta, double holdout_fraction = 0.0);
// The config's train.metrics, fresh.
std::vector<std::unique_ptr<Metric>> make_metrics(const Config& cfg);
// The metrics as the engines take them.
std::vector<Metric*> raw(const std::vector<std::unique_ptr<Metric>>& ms);
// Parameters initialised from the seed (Keras' initialisers), nothing loaded.
Params fresh_params(const Config& cfg);
// Parameters initialised from the seed, then loaded from `weights` (or model.init_from) if given.
// Loaded weights holding inf or NaN (a diverged run's) are a DataError unless allow_nonfinite.
Params initial_params(const Config& cfg, const std::string& weights, bool allow_nonfinite = false);

}  // namespace rnntrain
