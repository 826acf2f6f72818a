// fit / evaluate / predict over an Engine, with checkpoints, history, early stopping and resume.
#include "train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "core/log.h"
#include "core/signals.h"
#include "io/checkpoint.h"
#include "spec/parse.h"
#include "train/autotune.h"
#include "train/batching.h"
#include "train/memory.h"
#include "train/progress.h"
#include "train/schedule.h"

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

Params initial_params(const Config& cfg, const std::string& weights, bool allow_nonfinite) {
  Rng init_rng(cfg.train.seed);
  Params params = init_params(cfg.model, init_rng);
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

static std::vector<std::unique_ptr<Metric>> make_metrics(const Config& cfg) {
  std::vector<std::unique_ptr<Metric>> out;
  for (const auto& m : cfg.train.metrics) out.push_back(make_metric(m, cfg.train.loss));
  return out;
}

static std::vector<Metric*> raw(const std::vector<std::unique_ptr<Metric>>& ms) {
  std::vector<Metric*> out;
  for (const auto& m : ms) out.push_back(m.get());
  return out;
}

EvalResult evaluate(Engine& engine, const Config& cfg, const Dataset& data) {
  auto metrics = make_metrics(cfg);
  auto ms = raw(metrics);
  const int64_t n = data.size(), bs = cfg.train.batch_size;
  double sum = 0.0, count = 0.0;
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < n; b += bs) {
    rows.resize(std::min(bs, n - b));
    std::iota(rows.begin(), rows.end(), b);
    LossValue lv = engine.eval_step(data.gather(rows), ms);
    sum += lv.mean() * rows.size();  // as Keras' loss tracker: batch means weighted by batch size
    count += rows.size();
  }
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

namespace {

struct Splits {
  Dataset train;
  std::optional<Dataset> val;
};

Splits load_splits(const Config& cfg, DataMeta& meta, const std::vector<LayerShape>& shapes) {
  if (!cfg.data.train)
    throw ConfigError(fmt::format("{}: data.train is missing; training needs a data source (see docs/config.md)", cfg.path));
  Splits s;
  // CSV scaling is fitted on the rows that train, not on those validation_split holds out.
  s.train = load_data(cfg, *cfg.data.train, meta, cfg.data.validation ? 0.0 : cfg.data.validation_split);
  if (cfg.data.validation) {
    s.val = load_data(cfg, *cfg.data.validation, meta);
  } else if (cfg.data.validation_split > 0) {
    const int64_t n = s.train.size(), n_train = training_rows(cfg, n);
    s.val = s.train.slice(n_train, n);
    s.val->source += " (validation split)";
    s.train = s.train.slice(0, n_train);
  }
  check_dataset(s.train, cfg.model, shapes, cfg.train.loss);
  if (s.val) check_dataset(*s.val, cfg.model, shapes, cfg.train.loss);
  return s;
}

}  // namespace

TrainResult train(const Config& cfg, const TrainOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<LayerShape> shapes = infer_shapes(cfg.model);
  const bool resuming = !opt.resume_dir.empty();
  const std::string run_dir = resuming ? opt.resume_dir : cfg.output.dir;

  DataMeta meta = resuming ? read_meta(run_dir) : DataMeta{};
  Splits data = load_splits(cfg, meta, shapes);
  const std::vector<int32_t> lengths = sample_lengths(data.train, cfg.model);
  if (const std::string why = bucketing_blocker(cfg, lengths); !why.empty()) throw ConfigError(why);
  // Bucketed batches keep only their longest sequence's steps, where the Input lets the length vary.
  const bool trim = cfg.train.bucketing && cfg.model.layers[0].shape[0] < 0;
  if (cfg.train.bucketing && !trim)
    log_info("train.bucketing: the Input ({}) fixes {} timesteps, so batches are grouped by length but not trimmed "
             "(shape: [null, ...] lets them be)", cfg.model.layers[0].loc.str(), cfg.model.layers[0].shape[0]);
  const bool y_has_time = shapes.back().out.size() >= 2;  // the model outputs a sequence: targets per step

  Rng rng(cfg.train.seed ^ 0x7261696eull);  // the trainer's stream: shuffling and dropout
  const std::string last_path = (fs::path(run_dir) / "last.h5").string();
  if (resuming && !fs::exists(last_path))
    throw UsageError(fmt::format("--resume {}: no last.h5 in that folder; pass the run directory of an earlier `rnntrain train`", run_dir));
  check_memory(cfg, data.train.x.dim(1), true);
  Params init = initial_params(cfg, resuming ? "" : opt.weights);
  // The plan the engine runs (autotune decides here); the run directory records it, not "auto".
  Config run_cfg = resolve_plan(cfg, init, data.train.x.dim(1));
  run_cfg.plan.autotune = false;
  auto engine = make_engine(run_cfg, std::move(init), rng);
  Optimizer& optimizer = engine->optimizer();
  Schedule schedule(cfg.train.schedule, cfg.train.optimizer.learning_rate);
  std::optional<EarlyStopping> early;
  if (cfg.train.early_stopping) early.emplace(*cfg.train.early_stopping);
  const std::string best_monitor = data.val ? cfg.train.checkpoint.monitor
                                   : (cfg.train.checkpoint.monitor.rfind("val_", 0) == 0 ? cfg.train.checkpoint.monitor.substr(4)
                                                                                          : cfg.train.checkpoint.monitor);
  BestTracker best(best_monitor, cfg.train.checkpoint.mode);

  const std::string best_path = (fs::path(run_dir) / "best.h5").string();
  TrainResult result;
  result.run_dir = run_dir;
  int64_t start_epoch = 0;
  OptimizerSlots slots;
  for (const NamedTensor& s : optimizer.slots()) slots.emplace_back(s.name, s.tensor);

  ResumeState resumed;  // where a resumed run starts: its epoch, and inside it (st.step > 0) its step
  bool finished = false;  // a resumed run that had nothing left to train
  if (resuming) {
    const std::string run_cfg = (fs::path(run_dir) / "config.yaml").string();
    if (fs::exists(run_cfg)) check_resumable(cfg, read_text(run_cfg), run_cfg);
    ResumeState st = load_checkpoint(last_path, cfg.model, engine->host_params(), slots);
    if (st.epoch < 0 || st.epoch > 100000000 || st.iterations < 0 || st.step < 0 ||
        (st.step > 0 && st.partial.size() != 2 + 2 * cfg.train.metrics.size()))
      throw DataError(fmt::format("{}: the resume state is damaged (epoch {}, step {}, optimizer step {}); start a new "
                                  "run from its weights with --weights instead", last_path, st.epoch, st.step,
                                  st.iterations));
    engine->params_changed();
    optimizer.set_iterations(st.iterations);
    rng.set_state(st.step > 0 ? st.epoch_rng : st.rng);  // inside an epoch: its shuffle draws again first
    schedule.set_state(st.schedule);
    best.set_state(st.checkpoint);
    if (early && !st.early_stopping.empty()) early->set_state(st.early_stopping);
    if (early && early->spec().restore_best_weights) {
      const std::string es_path = (fs::path(run_dir) / "early_stopping_best.h5").string();
      if (fs::exists(es_path)) {
        Params tmp = engine->host_params();
        load_weights(es_path, cfg.model, tmp);
        early->set_best_weights(copy_weights(tmp));
      }
    }
    result.history = History::from_json(st.history_json);
    start_epoch = result.epochs_done = st.epoch;
    finished = (early && early->stopped()) || start_epoch >= cfg.train.epochs;
    if (early && early->stopped())
      log_warn("{} stopped early at epoch {}: nothing to do. To train further, start a new run from its weights: "
               "rnntrain train CONFIG --weights {}/final.h5", run_dir, st.epoch, run_dir);
    else if (finished)
      log_warn("{} already has {} epochs and train.epochs is {}: nothing to do (raise train.epochs to go on)",
               run_dir, start_epoch, cfg.train.epochs);
    // A run killed after its last epoch's last.h5 and before final.h5 is finished here.
    if (finished && fs::exists((fs::path(run_dir) / "final.h5").string())) return result;
    result.stopped_early = early && early->stopped();
    log_info("resuming {} at epoch {}{} (optimizer step {})", run_dir, start_epoch + 1,
             st.step > 0 ? fmt::format(" step {}", st.step + 1) : "", st.iterations);
    resumed = std::move(st);
  }
  fs::create_directories(run_dir);
  remove_stale_temporaries(run_dir);
  write_text((fs::path(run_dir) / "config.yaml").string(), emit_config(with_absolute_paths(run_cfg)));
  if (!meta.empty()) write_text((fs::path(run_dir) / "data_meta.json").string(), meta.to_json());

  auto metrics = make_metrics(cfg);
  auto ms = raw(metrics);
  const int64_t n = data.train.size(), bs = cfg.train.batch_size;
  int64_t steps = (n + bs - 1) / bs;
  if (cfg.train.steps_per_epoch > 0) steps = std::min(steps, cfg.train.steps_per_epoch);
  log_info("train: {} samples, {} steps of {} per epoch, validation: {} samples, device {}", n, steps, bs,
           data.val ? data.val->size() : 0, engine->device_name());

  // The state a checkpoint written now resumes from: the epoch-level part; the trainer adds the rest.
  auto state_now = [&](int64_t epochs_done) {
    ResumeState st;
    st.epoch = epochs_done;
    st.iterations = optimizer.iterations();
    st.rng = rng.state();
    st.schedule = schedule.state();
    st.early_stopping = early ? early->state() : std::vector<double>{};
    st.checkpoint = best.state();
    st.history_json = result.history.to_json();
    st.config_yaml = emit_config(run_cfg);
    return st;
  };
  std::string last_good = resuming ? fmt::format("{} (epoch {})", last_path, start_epoch) : "";
  // Divergence stops the run before anything non-finite is written; the checkpoints on disk stay.
  auto diverged = [&](const std::string& where, const std::string& what) {
    return RuntimeError(fmt::format(
        "{}: {}. Training stopped before saving anything non-finite; {}. Lower train.optimizer.learning_rate, set "
        "clipnorm, or check the data for extreme values", where, what,
        last_good.empty() ? "no checkpoint had been written yet" : "the last good checkpoint is " + last_good));
  };
  // The parameters to save, checked first: nothing non-finite is ever written.
  auto finite_params = [&](const std::string& where) -> Params& {
    Params& params = engine->host_params();
    if (const std::string p = params.first_nonfinite(); !p.empty())
      throw diverged(where, "the weights are inf or NaN (first: " + p + ")");
    return params;
  };

  std::vector<EpochBatch> plan;
  const bool gpu = engine->device_name().rfind("cuda", 0) == 0;
  StopOnSignals signals;  // from here a signal stops training after the current step, saved
  for (int64_t epoch = start_epoch; !finished && epoch < cfg.train.epochs; ++epoch) {
    const Rng::State epoch_rng = rng.state();
    plan = plan_epoch(cfg.train, n, lengths, trim, rng);  // depends only on the RNG state: resume draws the same
    for (auto* m : ms) m->reset();
    Progress progress(epoch, cfg.train.epochs, steps, opt.progress);
    double sum = 0.0, count = 0.0;
    double lr = schedule.lr(optimizer.iterations());
    int64_t done = 0, seen = 0;  // steps whose loss has been seen, and their samples
    if (epoch == start_epoch && resumed.step > 0) {  // stopped inside this epoch: go on from its step
      rng.set_state(resumed.rng);
      done = std::min(resumed.step, steps);
      for (int64_t s = 0; s < done; ++s) seen += static_cast<int64_t>(plan[s].rows.size());
      sum = resumed.partial[0], count = resumed.partial[1];
      for (size_t j = 0; j < ms.size(); ++j) ms[j]->add(resumed.partial[2 + 2 * j], resumed.partial[3 + 2 * j]);
    }
    const int64_t first = done;
    auto take = [&](const LossValue& lv) {
      const std::string where = fmt::format("epoch {} step {}", epoch + 1, done + 1);
      if (!std::isfinite(lv.sum)) throw diverged(where, fmt::format("the loss is {}", lv.sum));
      if (!lv.params_finite) {
        const std::string p = engine->host_params().first_nonfinite();
        throw diverged(where, fmt::format("the optimizer update made the weights inf or NaN{}",
                                          p.empty() ? "" : " (first: " + p + ")"));
      }
      const auto rows = static_cast<double>(plan[done].rows.size());
      sum += lv.mean() * rows;  // as Keras' loss tracker: batch means weighted by size
      count += rows;
      seen += static_cast<int64_t>(rows);
      ++done;
      std::vector<std::pair<std::string, double>> shown{{"loss", sum / count}};
      for (auto* m : ms) shown.emplace_back(m->name(), m->result());
      progress.update(done, seen, shown);
    };
    // On a GPU the next batch is gathered on a second thread while this one enqueues the step.
    auto gather = [&](int64_t s) { return gather_batch(data.train, plan[s], y_has_time); };
    std::future<Batch> next;
    if (gpu && first < steps) next = std::async(std::launch::async, gather, first);
    for (int64_t s = first; s < steps && !stop_signal(); ++s) {
      Batch batch = gpu ? next.get() : gather(s);
      if (gpu && s + 1 < steps) next = std::async(std::launch::async, gather, s + 1);
      lr = schedule.lr(optimizer.iterations());
      // The GPU runs ahead: losses and metrics are read back as its steps finish.
      engine->enqueue_train_step(batch, lr, ms);
      for (const LossValue& lv : engine->collect_losses(false)) take(lv);
    }
    if (next.valid()) next.wait();  // a gather still running reads `plan`
    for (const LossValue& lv : engine->collect_losses(true)) take(lv);
    const double secs = progress.finish();
    if (stop_signal()) {  // stopped inside the epoch: last.h5 holds this very step
      ResumeState st = state_now(epoch);
      if (done > 0) {
        st.step = done;
        st.epoch_rng = epoch_rng;
        st.partial = {sum, count};
        for (auto* m : ms) st.partial.insert(st.partial.end(), {m->totals().first, m->totals().second});
      } else {
        st.rng = epoch_rng;  // nothing of this epoch done: it starts over, shuffle included
      }
      save_checkpoint(last_path, cfg.model, finite_params(fmt::format("epoch {} step {}", epoch + 1, done)), slots, st);
      write_text((fs::path(run_dir) / "history.json").string(), result.history.to_json());
      write_text((fs::path(run_dir) / "history.csv").string(), result.history.to_csv());
      result.signal = stop_signal();
      result.signal_step = done;
      break;
    }

    Logs logs{{"loss", sum / count}, {"learning_rate", lr}};
    for (auto* m : ms) logs[m->name()] = m->result();
    if (data.val) {
      EvalResult ev = evaluate(*engine, cfg, *data.val);
      if (!std::isfinite(ev.loss)) throw diverged(fmt::format("epoch {}", epoch + 1), fmt::format("val_loss is {}", ev.loss));
      logs["val_loss"] = ev.loss;
      for (const auto& [k, v] : ev.metrics) logs["val_" + k] = v;
    }
    std::string line = fmt::format("epoch={}/{}", epoch + 1, cfg.train.epochs);
    for (const auto& [k, v] : logs) line += fmt::format(" {}={}", k, format_metric(v));
    if (!lengths.empty()) {  // the share of computed steps that were padding
      plan.resize(static_cast<size_t>(steps));
      line += fmt::format(" padding={:.3f}", padding_share(plan, lengths, data.train.x.dim(1)));
    }
    log_info("{} s={:.2f}", line, secs);
    result.history.epochs.push_back(logs);

    const std::string msg = schedule.on_epoch_end(epoch, logs);
    if (!msg.empty()) log_info("{}", msg);
    bool stop = early && early->on_epoch_end(epoch, logs, engine->host_params());

    const bool new_best = best.on_epoch_end(logs);
    const ResumeState st = state_now(epoch + 1);
    Params& params = finite_params(fmt::format("epoch {}", epoch + 1));
    if (early && early->spec().restore_best_weights && early->best_weights() && early->best_epoch() == epoch) {
      save_checkpoint((fs::path(run_dir) / "early_stopping_best.h5").string(), cfg.model, params, {}, st);
    }
    if (new_best) {
      save_checkpoint(best_path, cfg.model, params, slots, st);
      last_good = fmt::format("{} (epoch {})", best_path, epoch + 1);
    }
    if (cfg.train.checkpoint.every_epoch || stop || epoch + 1 == cfg.train.epochs) {
      save_checkpoint(last_path, cfg.model, params, slots, st);
      last_good = fmt::format("{} (epoch {})", last_path, epoch + 1);
    }
    write_text((fs::path(run_dir) / "history.json").string(), result.history.to_json());
    write_text((fs::path(run_dir) / "history.csv").string(), result.history.to_csv());
    result.epochs_done = epoch + 1;
    if (stop) {
      log_info("early stopping at epoch {}: '{}' has not improved for {} epochs (best at epoch {})", epoch + 1,
               early->spec().monitor, early->wait(), early->best_epoch() + 1);
      result.stopped_early = true;
      break;
    }
  }
  if (result.signal) {  // not finished: no final.h5, and last.h5 is where to go on from
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return result;
  }
  // As Keras' EarlyStopping.on_train_end: restore the best weights whether or not training stopped early.
  if (early && early->spec().restore_best_weights && early->best_weights()) {
    set_weights(engine->host_params(), *early->best_weights());
    engine->params_changed();
    log_info("restored the weights of epoch {} (restore_best_weights); final.h5 holds them", early->best_epoch() + 1);
  }
  ResumeState fin;  // the end of the run: no optimizer, schedule or callback state to go on from
  fin.epoch = result.epochs_done;
  fin.iterations = optimizer.iterations();
  fin.rng = rng.state();
  fin.history_json = result.history.to_json();
  fin.config_yaml = emit_config(cfg);
  save_checkpoint((fs::path(run_dir) / "final.h5").string(), cfg.model, engine->host_params(), {}, fin);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace rnntrain
