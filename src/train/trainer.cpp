// evaluate / predict over an Engine, and what a run starts from (trainer.h).
#include "train/trainer.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "core/error.h"
#include "core/files.h"
#include "core/log.h"
#include "io/checkpoint.h"
#include "train/data_parallel.h"
#include "train/run_dir.h"

namespace fs = std::filesystem;

namespace rnntrain {

Dataset load_data(const Config& cfg, const DataSource& src, DataMeta& meta, double holdout_fraction) {
  return load_source(src, fs::path(cfg.path).parent_path().string(), meta, holdout_fraction);
}

int64_t training_rows(const Config& cfg, int64_t n) {
  // As Keras' train_validation_split: the first floor(n * (1 - split)) rows train.
  const auto n_train = static_cast<int64_t>(std::floor(n * (1.0 - cfg.data.validation_split)));
  if (n_train < 1 || n_train >= n)
    throw ConfigError(fmt::format("{}: data.validation_split {} of {} samples leaves no training or no validation data",
                                  cfg.path, cfg.data.validation_split, n));
  return n_train;
}

Params fresh_params(const Config& cfg) {
  Rng init_rng(cfg.train.seed);
  return init_params(cfg.model, init_rng);
}

Params initial_params(const Config& cfg, const std::string& weights, bool allow_nonfinite) {
  Params params = fresh_params(cfg);
  std::string w = weights.empty() && cfg.model.init_from ? resolve_path(cfg, *cfg.model.init_from) : weights;
  if (!w.empty()) {
    load_weights(w, cfg.model, params);
    const std::string bad = params.first_nonfinite();
    if (!bad.empty() && !allow_nonfinite)
      throw DataError(fmt::format("{}: the weights hold inf or NaN (first: {}), as a diverged run's do; use an earlier "
                                  "checkpoint{}", w, bad, weights.empty() ? "" : ", or pass --allow-nonfinite to use them anyway"));
    if (!bad.empty()) log_warn("{}: the weights hold inf or NaN (first: {}); used as asked (--allow-nonfinite)", w, bad);
    log_info("weights loaded from {}", w);
  }
  return params;
}

std::vector<std::unique_ptr<Metric>> make_metrics(const Config& cfg) {
  std::vector<std::unique_ptr<Metric>> out;
  const Shape shape = infer_shapes(cfg.model).back().out;
  for (const auto& m : cfg.train.metrics) out.push_back(make_metric(m, cfg.train.loss, shape));
  return out;
}

std::vector<Metric*> raw(const std::vector<std::unique_ptr<Metric>>& ms) {
  std::vector<Metric*> out;
  for (const auto& m : ms) out.push_back(m.get());
  return out;
}

EvalResult evaluate(Engine& engine, const Config& cfg, const Dataset& data, const DataParallel& dp) {
  auto metrics = make_metrics(cfg);
  auto ms = raw(metrics);
  const int64_t n = data.size(), bs = cfg.train.batch_size;
  double sum = 0.0, count = 0.0;
  std::vector<int64_t> rows;
  for (int64_t b = dp.first_batch() * bs; b < n; b += bs * dp.batch_stride()) {
    rows.resize(std::min(bs, n - b));
    std::iota(rows.begin(), rows.end(), b);
    LossValue lv = engine.eval_step(data.gather(rows), ms);
    sum += lv.mean() * rows.size();  // as Keras' loss tracker: batch means weighted by batch size
    count += rows.size();
  }
  dp.reduce_metrics(ms, &sum, &count);
  EvalResult r;
  r.loss = count > 0 ? sum / count : std::nan("");
  for (auto* m : ms) r.metrics.emplace_back(m->name(), m->result());
  r.samples = n;
  return r;
}

Tensor predict_all(Engine& engine, const Dataset& data, int64_t batch_size) {
  Tensor out;
  const int64_t n = data.size();
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < n; b += batch_size) {
    rows.resize(std::min(batch_size, n - b));
    std::iota(rows.begin(), rows.end(), b);
    Tensor p = engine.predict(data.gather(rows));
    if (out.shape.empty()) {
      out.shape = p.shape;
      out.shape[0] = n;
      out.data.reserve(shape_numel(out.shape));
    }
    out.data.insert(out.data.end(), p.data.begin(), p.data.end());
  }
  return out;
}

}  // namespace rnntrain
