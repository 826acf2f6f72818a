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
#include <optional>
#include <sstream>

#include "core/error.h"
#include "core/files.h"
#include "core/log.h"
#include "core/signals.h"
#include "dist/comm.h"
#include "io/checkpoint.h"
#include "spec/parse.h"
#include "train/autotune.h"
#include "train/batching.h"
#include "train/memory.h"
#include "train/observers.h"
#include "train/progress.h"
#include "train/tensorboard.h"

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

static std::vector<std::unique_ptr<Metric>> make_metrics(const Config& cfg) {
  std::vector<std::unique_ptr<Metric>> out;
  const Shape shape = infer_shapes(cfg.model).back().out;
  for (const auto& m : cfg.train.metrics) out.push_back(make_metric(m, cfg.train.loss, shape));
  return out;
}

static std::vector<Metric*> raw(const std::vector<std::unique_ptr<Metric>>& ms) {
  std::vector<Metric*> out;
  for (const auto& m : ms) out.push_back(m.get());
  return out;
}

// The loss's sum and count, then each metric's state(): a resume state's `partial`.
static std::vector<double> metric_state(const std::vector<Metric*>& ms, double sum, double count) {
  std::vector<double> t{sum, count};
  for (const Metric* m : ms) {
    const std::vector<double> s = m->state();
    t.insert(t.end(), s.begin(), s.end());
  }
  return t;
}

static size_t metric_state_size(const std::vector<Metric*>& ms) {
  size_t n = 2;
  for (const Metric* m : ms) n += m->state_size();
  return n;
}

// Why a resume state's running sums (metric_state()'s layout) cannot be the `steps` steps of `samples`
// samples (0: not recorded, then at most steps x batch_size) they claim to be; "" when they can.
static std::string partial_problem(const std::vector<Metric*>& ms, const std::vector<double>& t, int64_t steps,
                                   int64_t samples, int64_t batch_size) {
  for (size_t i = 0; i < t.size(); ++i)
    if (!std::isfinite(t[i])) return fmt::format("its running sum {} is {}", i, t[i]);
  if (t[0] < 0.0 || t[1] < 0.0) return fmt::format("its loss sum {} over {} samples is negative", t[0], t[1]);
  if (samples > 0 ? t[1] != static_cast<double>(samples) : t[1] > static_cast<double>(steps * batch_size))
    return samples > 0 ? fmt::format("its loss counts {} samples where its {} steps trained {}", t[1], steps, samples)
                       : fmt::format("its loss counts {} samples for {} steps of at most {}", t[1], steps, batch_size);
  size_t at = 2;
  for (const Metric* m : ms) {
    if (!m->state_ok(t.data() + at)) return fmt::format("metric {}'s running sums are negative", m->name());
    at += m->state_size();
  }
  return "";
}

// Adds metric_state()'s metric part to the metrics.
static void merge_metric_state(const std::vector<Metric*>& ms, const std::vector<double>& t) {
  size_t at = 2;
  for (Metric* m : ms) {
    m->merge(t.data() + at);
    at += m->state_size();
  }
}

// Under data parallelism: the loss sums and the metrics' totals summed across the ranks, so every
// rank holds the one-process values (up to the order of the sums). Otherwise nothing.
static void reduce_metrics(const std::vector<Metric*>& ms, double* sum, double* count) {
  Comm& comm = Comm::world();
  if (!comm.distributed()) return;
  std::vector<double> t = metric_state(ms, sum ? *sum : 0.0, count ? *count : 0.0);
  comm.allreduce_sum(t.data(), static_cast<int64_t>(t.size()));
  if (sum) *sum = t[0];
  if (count) *count = t[1];
  for (Metric* m : ms) m->reset();
  merge_metric_state(ms, t);
}

EvalResult evaluate(Engine& engine, const Config& cfg, const Dataset& data) {
  auto metrics = make_metrics(cfg);
  auto ms = raw(metrics);
  const Comm& comm = Comm::world();
  const int64_t n = data.size(), bs = cfg.train.batch_size;
  double sum = 0.0, count = 0.0;
  std::vector<int64_t> rows;
  for (int64_t b = comm.rank() * bs; b < n; b += bs * comm.size()) {  // each rank every size-th batch
    rows.resize(std::min(bs, n - b));
    std::iota(rows.begin(), rows.end(), b);
    LossValue lv = engine.eval_step(data.gather(rows), ms);
    sum += lv.mean() * rows.size();  // as Keras' loss tracker: batch means weighted by batch size
    count += rows.size();
  }
  reduce_metrics(ms, &sum, &count);
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
  if (!cfg.train.class_weight.empty() && !cfg.data.train->sample_weight.empty())
    throw ConfigError(fmt::format("{}: train.class_weight and data.train.sample_weight are both set; Keras takes one "
                                  "of them: fold the class weights into the sample weights, or drop one",
                                  cfg.path));
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

namespace {

// The settings a stopped epoch's batches were drawn with, for a file that does not record them (written
// before they were): the stopping run's config, which the checkpoint holds; else today's.
ResumeState::Drawn drawn_by(const std::string& config_yaml, const std::string& path, const TrainSpec& now) {
  TrainSpec t = now;
  try {
    t = parse_config(config_yaml, path).train;
  } catch (const std::exception& e) {
    log_warn("{}: its config does not parse today ({}); the stopped epoch is taken as drawn with train.batch_size {}",
             path, e.what(), now.batch_size);
  }
  return {t.batch_size, t.bucket_window, 0, t.shuffle, t.bucketing};
}

// A resume on other training data than the run stopped on: refused inside an epoch (its remaining
// batches index rows that are not the ones the epoch began with: samples would be skipped or
// repeated); said at an epoch's end, where the next epoch simply draws from the new data.
void check_resumed_data(const ResumeState& st, const Dataset& d, uint64_t hash, const std::string& run_dir) {
  const auto rows = static_cast<uint64_t>(d.size());
  if (st.data_rows == 0 || (st.data_rows == rows && st.data_hash == hash)) return;
  const std::string what = st.data_rows != rows
                               ? fmt::format("{} training samples, where the run had {}", rows, st.data_rows)
                               : fmt::format("other values than the run's ({} samples, fingerprint {:016x}, was {:016x})",
                                             rows, hash, st.data_hash);
  if (st.step > 0)
    throw UsageError(fmt::format(
        "--resume {}: last.h5 stopped inside epoch {} ({} steps done), but the training data ({}) now hold {}: the "
        "epoch cannot go on where it stopped without skipping or repeating samples. Resume with the data the run was "
        "trained on, or start a new run from its weights: rnntrain train CONFIG --weights {}/last.h5",
        run_dir, st.epoch + 1, st.step, d.source, what, run_dir));
  log_warn("--resume {}: the training data ({}) hold {}; training goes on with them from epoch {}", run_dir, d.source,
           what, st.epoch + 1);
}

// One epoch's steps as they ended: the running loss sums, the steps and samples done, and the
// learning rate of the last step.
struct EpochSteps {
  double sum = 0.0, count = 0.0, lr = 0.0, secs = 0.0;
  int64_t done = 0;
};

}  // namespace

TrainResult train(const Config& cfg, const TrainOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<LayerShape> shapes = infer_shapes(cfg.model);
  const bool resuming = !opt.resume_dir.empty();
  const std::string run_dir = resuming ? opt.resume_dir : cfg.output.dir;
  // The run's log, train.log: what stderr shows (Info and above, whatever -q says), with times.
  // An --overwrite touches the directory only once the new start has been checked: until then its
  // log lines wait in memory, and the earlier run stays as it is.
  std::optional<LogFile> log_file;
  bool replacing = false;  // --overwrite of a directory that holds a run's files
  if (Comm::world().root()) {
    recover_replaced_run(run_dir);
    if (!resuming) replacing = claim_run_dir(run_dir, opt.overwrite) && opt.overwrite;
    if (replacing) {
      log_file.emplace();
    } else {
      if (!resuming) fs::create_directories(run_dir);
      if (fs::is_directory(run_dir)) log_file.emplace((fs::path(run_dir) / "train.log").string());
    }
  }

  const std::string last_path = (fs::path(run_dir) / "last.h5").string();
  if (resuming) {  // before anything else is read: what resumes is last.h5 and the run's own config
    if (!fs::exists(last_path))
      throw UsageError(fmt::format("--resume {}: no last.h5 in that folder; pass the run directory of an earlier "
                                   "`rnntrain train`", run_dir));
    const std::string run_cfg_path = (fs::path(run_dir) / "config.yaml").string();
    if (fs::exists(run_cfg_path)) check_resumable(cfg, read_text(run_cfg_path), run_cfg_path);
  }

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
  // Under data parallelism every rank draws the same shuffle from `rng`, and its dropout masks from a
  // stream of its own, seeded each step from the epoch's starting state, the step and its rank: `rng`
  // itself is not drawn from, and a resumed run draws the same masks again.
  Comm& comm = Comm::world();
  Rng rank_dropout(0);
  uint64_t epoch_key = 0;
  check_memory(cfg, data.train.x.dim(1), true);
  // A resumed run's weights come from last.h5 alone: model.init_from (the start of the first run,
  // which may be gone since) is not read again.
  Params init = resuming ? fresh_params(cfg) : initial_params(cfg, opt.weights);
  // The plan the engine runs (autotune decides here); the run directory records it, not "auto".
  // Under data parallelism rank 0 alone times the candidates, and every rank runs its choice.
  Config tune_cfg = cfg;
  tune_cfg.plan.autotune = cfg.plan.autotune && comm.root();
  Config run_cfg = resolve_plan(tune_cfg, init, data.train.x.dim(1));
  run_cfg.plan.autotune = false;
  if (comm.distributed()) {
    int chosen[3] = {static_cast<int>(run_cfg.plan.fuse), static_cast<int>(run_cfg.plan.precision),
                     static_cast<int>(run_cfg.plan.algo)};
    comm.broadcast(chosen, sizeof chosen);
    run_cfg.plan.fuse = static_cast<FuseMode>(chosen[0]);
    run_cfg.plan.precision = static_cast<Precision>(chosen[1]);
    run_cfg.plan.algo = static_cast<RnnAlgo>(chosen[2]);
  }
  auto engine = make_engine(run_cfg, std::move(init), comm.distributed() ? rank_dropout : rng,
                            comm.launched() ? &comm : nullptr);
  // Everything a start can check has been: the earlier run is set aside (removed at the first
  // checkpoint, put back if this run stops before it).
  std::optional<ReplacedRun> replaced;
  if (replacing) {
    replaced.emplace(run_dir);
    log_file->open((fs::path(run_dir) / "train.log").string());
  }
  auto checkpointed = [&] {  // the new run has a checkpoint: the earlier one can go
    if (replaced && (fs::exists(last_path) || fs::exists(fs::path(run_dir) / "best.h5"))) replaced->commit();
  };
  Optimizer& optimizer = engine->optimizer();
  OptimizerSlots slots;
  for (const NamedTensor& s : optimizer.slots()) slots.emplace_back(s.name, s.tensor);
  TrainResult result;
  result.run_dir = run_dir;

  // What acts after each epoch, in this order (observers.h).
  ScheduleObserver schedule(cfg.train.schedule, cfg.train.optimizer.learning_rate, cfg.train.metrics);
  std::optional<EarlyStoppingObserver> early;
  if (cfg.train.early_stopping) early.emplace(*cfg.train.early_stopping, cfg.train.metrics, *engine);
  // The state a checkpoint written now resumes from: the epoch-level part; the trainer adds the rest.
  const uint64_t data_hash = data_fingerprint(data.train);
  std::vector<EpochObserver*> observers;
  auto state_now = [&](int64_t epochs_done) {
    ResumeState st;
    st.epoch = epochs_done;
    st.data_rows = static_cast<uint64_t>(data.train.size()), st.data_hash = data_hash;
    st.iterations = optimizer.iterations();
    st.learning_rate = schedule.lr(st.iterations);
    st.rng = rng.state();
    for (const EpochObserver* o : observers) o->save_state(st);
    st.history_json = result.history.to_json();
    st.config_yaml = emit_config(run_cfg);
    return st;
  };
  // Divergence stops the run before anything non-finite is written; the checkpoints on disk stay.
  const CheckpointObserver* ckpt_view = nullptr;
  auto diverged = [&](const std::string& where, const std::string& what) {
    const std::string& good = ckpt_view->last_good();
    return RuntimeError(fmt::format(
        "{}: {}. Training stopped before saving anything non-finite; {}. Lower train.optimizer.learning_rate, set "
        "clipnorm, or check the data for extreme values", where, what,
        good.empty() ? "no checkpoint had been written yet" : "the last good checkpoint is " + good));
  };
  // The parameters to save, checked first: nothing non-finite is ever written.
  auto finite_params = [&](const std::string& where) -> Params& {
    Params& params = engine->host_params();
    if (const std::string p = params.first_nonfinite(); !p.empty())
      throw diverged(where, "the weights are inf or NaN (first: " + p + ")");
    return params;
  };
  const std::string& monitor = cfg.train.checkpoint.monitor;
  const bool val_monitor = monitor.rfind("val_", 0) == 0;
  CheckpointObserver checkpoints(cfg, data.val || !val_monitor ? monitor : monitor.substr(4),
                                 {(fs::path(run_dir) / "best.h5").string(), last_path,
                                  (fs::path(run_dir) / "early_stopping_best.h5").string()},
                                 slots, early ? &*early : nullptr, state_now, finite_params, comm.root());
  ckpt_view = &checkpoints;
  {  // what "better" means for each monitored value: mode auto follows the metric (monitor_is_max)
    auto better = [&](const std::string& m, MonitorMode mode) {
      return fmt::format("{} ({} is better)", m, monitor_is_max(m, mode, cfg.train.metrics) ? "higher" : "lower");
    };
    std::string line = "best.h5 by " + better(data.val || !val_monitor ? monitor : monitor.substr(4),
                                                cfg.train.checkpoint.mode);
    if (early) line += ", early_stopping by " + better(cfg.train.early_stopping->monitor, cfg.train.early_stopping->mode);
    if (cfg.train.schedule.kind == ScheduleKind::ReduceOnPlateau)
      line += ", reduce_on_plateau by " + better(cfg.train.schedule.monitor, cfg.train.schedule.mode);
    log_info("{}", line);
  }
  HistoryObserver history(result.history, run_dir);
  observers = {&schedule};
  if (early) observers.push_back(&*early);
  observers.push_back(&checkpoints);  // one rank writes the run directory: every rank holds the same weights
  if (comm.root()) observers.push_back(&history);
  std::optional<TensorBoardObserver> tensorboard;
  if (comm.root() && cfg.output.tensorboard >= 0) {
    tensorboard.emplace(run_dir, cfg.output.tensorboard);
    observers.push_back(&*tensorboard);
  }

  const int64_t n = data.train.size(), bs = cfg.train.batch_size;
  int64_t steps = (n + bs - 1) / bs;
  if (cfg.train.steps_per_epoch > 0) steps = std::min(steps, cfg.train.steps_per_epoch);
  int64_t start_epoch = 0;
  ResumeState resumed;  // where a resumed run starts: its epoch, and inside it (st.step > 0) its step
  bool finished = false;  // a resumed run that had nothing left to train
  auto metrics = make_metrics(cfg);  // the epochs' metrics; a resume state's sums are checked against them
  auto ms = raw(metrics);
  if (resuming) {
    ResumeState st = load_checkpoint(last_path, cfg.model, engine->host_params(), slots);
    if (st.epoch < 0 || st.epoch > 100000000 || st.iterations < 0 || st.step < 0 ||
        (st.step > 0 && st.partial.size() != metric_state_size(ms)))
      throw DataError(fmt::format("{}: the resume state is damaged (epoch {}, step {}, optimizer step {}); start a new "
                                  "run from its weights with --weights instead", last_path, st.epoch, st.step,
                                  st.iterations));
    check_resumed_data(st, data.train, data_hash, run_dir);
    if (st.step > 0 && st.drawn.batch_size == 0) st.drawn = drawn_by(st.config_yaml, last_path, cfg.train);
    if (st.step > 0)
      if (const std::string why = partial_problem(ms, st.partial, st.step, st.drawn.samples,
                                                  st.drawn.batch_size);
          !why.empty())
        throw DataError(fmt::format("{}: the state of the epoch it stopped in is damaged ({}); resume from an "
                                    "earlier checkpoint, or start a new run from its weights with --weights",
                                    last_path, why));
    if (st.keras) {  // Keras' files count optimizer steps, not epochs: go on as fit(initial_epoch=...) would
      st.epoch = st.iterations / steps;
      log_info("{}: no epoch count (a file Keras wrote), optimizer step {}: {} epochs of {} steps done", last_path,
               st.iterations, st.epoch, steps);
      if (st.iterations % steps)
        log_warn("{}: its {} optimizer steps are not a whole number of epochs of {} steps (train.batch_size {}, {} "
                 "samples); epoch {} is trained in full", last_path, st.iterations, steps, bs, n, st.epoch + 1);
    }
    engine->params_changed();
    optimizer.set_iterations(st.iterations);
    rng.set_state(st.step > 0 ? st.epoch_rng : st.rng);  // inside an epoch: its shuffle draws again first
    for (EpochObserver* o : observers) o->load_state(st);
    if (early) early->set_best_from((fs::path(run_dir) / "early_stopping_best.h5").string(), cfg.model);
    result.history = History::from_json(st.history_json);
    if (comm.root()) history.write();
    start_epoch = result.epochs_done = st.epoch;
    const bool stopped = early && early->early().stopped();
    finished = stopped || start_epoch >= cfg.train.epochs;
    if (stopped)
      log_warn("{} stopped early at epoch {}: nothing to do. To train further, start a new run from its weights: "
               "rnntrain train CONFIG --weights {}/final.h5", run_dir, st.epoch, run_dir);
    else if (finished)
      log_warn("{} already has {} epochs and train.epochs is {}: nothing to do (raise train.epochs to go on)",
               run_dir, start_epoch, cfg.train.epochs);
    // A run killed after its last epoch's last.h5 and before final.h5 is finished here.
    if (finished && fs::exists((fs::path(run_dir) / "final.h5").string())) return result;
    result.stopped_early = stopped;
    log_info("resuming {} at epoch {}{} (optimizer step {})", run_dir, start_epoch + 1,
             st.step > 0 ? fmt::format(" step {}", st.step + 1) : "", st.iterations);
    checkpoints.set_last_good(fmt::format("{} (epoch {})", last_path, start_epoch));
    resumed = std::move(st);
  }
  if (comm.distributed()) {  // every rank starts from rank 0's weights, however each came by its own
    for (Param* p : engine->host_params().all())
      comm.broadcast(p->value.ptr(), static_cast<int64_t>(sizeof(float)) * p->value.numel());
    engine->params_changed();
  }
  if (comm.root()) {
    fs::create_directories(run_dir);
    remove_stale_temporaries(run_dir);
    write_text((fs::path(run_dir) / "config.yaml").string(), emit_config(with_absolute_paths(run_cfg)));
    if (!meta.empty()) write_text((fs::path(run_dir) / "data_meta.json").string(), meta.to_json());
  }

  log_info("train: {} samples, {} steps of {} per epoch, validation: {} samples, device {}", n, steps, bs,
           data.val ? data.val->size() : 0, engine->device_name());
  if (comm.distributed())
    log_info("train.batch_size {} is the global batch: {} ranks take {}{} sequences of each", bs, comm.size(),
             bs / comm.size(), bs % comm.size() ? fmt::format(" or {}", bs / comm.size() + 1) : "");

  // The signal that stops training (0: none), agreed by every rank: under data parallelism a signal
  // may reach the ranks at different steps (or only one of them), and they must all stop after the
  // same step or wait forever in mismatched collectives. Every rank asks equally often.
  int stopped_by = 0;
  auto agree_stop = [&] {
    stopped_by = comm.distributed() ? comm.max(stop_signal()) : stop_signal();
    return stopped_by != 0;
  };

  // One epoch's training steps from step `first` on, with `so_far` from the steps before it (a resumed
  // epoch); the metrics hold their totals. Ends early when a signal arrives (stopped_by says which).
  std::vector<EpochBatch> plan;
  const bool async = engine->traits().async_steps;
  std::optional<Progress> progress;  // the epoch's
  // The progress line's values: the loss, the metrics, then those of the validation when given.
  auto shown_of = [&](const EpochSteps& e, const Logs* val) {
    Shown shown{{"loss", e.count > 0 ? e.sum / e.count : 0.0}};
    for (auto* m : ms) shown.emplace_back(m->name(), m->result());
    for (size_t i = 0, n = shown.size(); val && i < n; ++i)
      if (auto it = val->find("val_" + shown[i].first); it != val->end()) shown.emplace_back(it->first, it->second);
    return shown;
  };
  int64_t epoch_steps = steps;  // this epoch's: `steps` but in a resumed epoch whose batches were cut anew
  auto train_steps = [&](int64_t epoch, EpochSteps so_far) {
    EpochSteps e = so_far;
    int64_t seen = rows_of(plan, e.done);  // samples of the steps whose loss has been seen
    progress.emplace(epoch, cfg.train.epochs, epoch_steps, opt.progress && comm.root());
    e.lr = schedule.lr(optimizer.iterations());
    // The run's step of this epoch's first step, for TensorBoard: nothing is in flight here, and a
    // resumed epoch's optimizer has taken its steps done already (whatever batches they were).
    const int64_t step0 = optimizer.iterations() - e.done;
    auto take = [&](const LossValue& lv) {
      const std::string where = fmt::format("epoch {} step {}", epoch + 1, e.done + 1);
      if (!std::isfinite(lv.sum)) throw diverged(where, fmt::format("the loss is {}", lv.sum));
      if (!lv.params_finite) {
        const std::string p = engine->host_params().first_nonfinite();
        throw diverged(where, fmt::format("the optimizer update made the weights inf or NaN{}",
                                          p.empty() ? "" : " (first: " + p + ")"));
      }
      const auto rows = static_cast<double>(plan[e.done].rows.size());
      e.sum += lv.mean() * rows;  // as Keras' loss tracker: batch means weighted by size
      e.count += rows;
      seen += static_cast<int64_t>(rows);
      ++e.done;
      const Shown shown = shown_of(e, nullptr);
      progress->update(e.done, seen, shown);
      if (tensorboard) tensorboard->on_step(step0 + e.done, shown, e.lr);
    };
    // With asynchronous steps (a GPU) the next batch is gathered on a second thread while this one
    // enqueues the step.
    auto gather = [&](int64_t s) {
      EpochBatch mine = plan[s];
      if (comm.distributed()) {
        const Share sh = share_of(static_cast<int64_t>(plan[s].rows.size()), comm.rank(), comm.size());
        mine = {{plan[s].rows.begin() + sh.first, plan[s].rows.begin() + sh.first + sh.count}, plan[s].steps};
      }
      Batch b = gather_batch(data.train, mine, y_has_time);
      if (!cfg.train.class_weight.empty())
        weigh_classes(b, cfg.train.class_weight, loss_info(cfg.train.loss.kind).targets == Targets::Labels,
                      shapes.back().out.back());
      return b;
    };
    const int64_t first = e.done;
    std::future<Batch> next;
    if (async && first < epoch_steps) next = std::async(std::launch::async, gather, first);
    bool stop = false;
    for (int64_t s = first; s < epoch_steps && !(stop = agree_stop()); ++s) {
      Batch batch = async ? next.get() : gather(s);
      if (async && s + 1 < epoch_steps) next = std::async(std::launch::async, gather, s + 1);
      e.lr = schedule.lr(optimizer.iterations());
      if (comm.distributed())
        rank_dropout.reseed(epoch_key ^ (0x94d049bb133111ebull * static_cast<uint64_t>(s + 1)) ^
                            (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(comm.rank() + 1)));
      // The GPU runs ahead: losses and metrics are read back as its steps finish.
      engine->enqueue_train_step(batch, e.lr, ms);
      for (const LossValue& lv : engine->collect_losses(false)) take(lv);
    }
    if (next.valid()) next.wait();  // a gather still running reads `plan`
    if (!stop) agree_stop();  // a signal after the last step stops the run before validation
    for (const LossValue& lv : engine->collect_losses(true)) take(lv);
    e.secs = progress->seconds();
    return e;
  };

  StopOnSignals signals;  // from here a signal stops training after the current step, saved
  for (int64_t epoch = start_epoch; !finished && epoch < cfg.train.epochs; ++epoch) {
    const Rng::State epoch_rng = rng.state();
    epoch_key = epoch_rng[0] ^ (epoch_rng[3] * 0xbf58476d1ce4e5b9ull);
    // The epoch's batches depend only on the RNG state and the settings they are drawn with: a
    // resumed epoch draws them again as the stopped run did, and goes on from its sample.
    const bool resumed_epoch = epoch == start_epoch && resumed.step > 0;
    ResumeState::Drawn drawn{bs, cfg.train.bucket_window, 0, cfg.train.shuffle, cfg.train.bucketing};
    if (resumed_epoch) drawn = resumed.drawn;
    TrainSpec draw = cfg.train;
    draw.batch_size = drawn.batch_size, draw.bucket_window = drawn.bucket_window;
    draw.shuffle = drawn.shuffle, draw.bucketing = drawn.bucketing;
    plan = plan_epoch(draw, n, lengths, trim, rng);
    epoch_steps = steps;
    for (auto* m : ms) m->reset();
    EpochSteps so_far;
    if (resumed_epoch) {  // stopped inside this epoch: go on from its sample
      rng.set_state(resumed.rng);
      int64_t drawn_steps = (n + drawn.batch_size - 1) / drawn.batch_size;
      if (cfg.train.steps_per_epoch > 0) drawn_steps = std::min(drawn_steps, cfg.train.steps_per_epoch);
      plan.resize(static_cast<size_t>(std::min<int64_t>(drawn_steps, static_cast<int64_t>(plan.size()))));
      const int64_t samples = drawn.samples > 0 ? drawn.samples : rows_of(plan, resumed.step);
      ResumedEpoch r = resume_epoch(std::move(plan), samples, bs, drawn.batch_size == bs, lengths, trim);
      plan = std::move(r.batches);
      if (r.recut) {
        epoch_steps = static_cast<int64_t>(plan.size());
        log_info("epoch {} was stopped after {} of its {} samples, drawn in batches of {}: it goes on from sample {} "
                 "in {} batches of {}", epoch + 1, samples, rows_of(plan, epoch_steps), drawn.batch_size, samples + 1,
                 epoch_steps - r.done, bs);
      }
      resumed.step = r.done;
      so_far.done = std::min(resumed.step, epoch_steps);
      so_far.sum = resumed.partial[0], so_far.count = resumed.partial[1];
      if (comm.root()) merge_metric_state(ms, resumed.partial);  // every rank's totals: one holds them, reduce_metrics sums
    }
    const EpochSteps e = train_steps(epoch, so_far);
    reduce_metrics(ms, nullptr, nullptr);
    if (stopped_by) {  // stopped inside the epoch: last.h5 holds this very step
      progress->finish(e.done, shown_of(e, nullptr));
      ResumeState st = state_now(epoch);
      if (e.done > 0) {
        st.step = e.done;
        st.epoch_rng = epoch_rng;
        st.partial = metric_state(ms, e.sum, e.count);
        st.drawn = drawn;
        st.drawn.samples = rows_of(plan, e.done);
      } else {
        st.rng = epoch_rng;  // nothing of this epoch done: it starts over, shuffle included
      }
      if (comm.root()) {
        save_checkpoint(last_path, cfg.model, finite_params(fmt::format("epoch {} step {}", epoch + 1, e.done)), slots,
                        st);
        history.write();
      }
      checkpointed();
      result.signal = stopped_by;
      result.signal_step = e.done;
      break;
    }

    Logs logs{{"loss", e.sum / e.count}, {"learning_rate", e.lr}};
    for (auto* m : ms) logs[m->name()] = m->result();
    if (data.val) {
      EvalResult ev = evaluate(*engine, cfg, *data.val);
      if (!std::isfinite(ev.loss)) throw diverged(fmt::format("epoch {}", epoch + 1), fmt::format("val_loss is {}", ev.loss));
      logs["val_loss"] = ev.loss;
      for (const auto& [k, v] : ev.metrics) logs["val_" + k] = v;
    }
    std::string line = fmt::format("epoch={}/{}", epoch + 1, cfg.train.epochs);
    for (const auto& [k, v] : logs)  // the learning rate in one format however small it gets
      line += fmt::format(" {}={}", k, k == "learning_rate" ? fmt::format("{:.6g}", v) : format_metric(v));
    if (!lengths.empty()) {  // the share of computed steps that were padding
      plan.resize(static_cast<size_t>(epoch_steps));
      line += fmt::format(" padding={:.3f}", padding_share(plan, lengths, data.train.x.dim(1)));
    }
    progress->finish(e.done, shown_of(e, &logs));
    if (progress->on_tty()) log_to_file(LogLevel::Info, fmt::format("{} s={:.2f}", line, e.secs));
    else log_info("{} s={:.2f}", line, e.secs);
    result.history.epochs.push_back(logs);

    bool stop = false;
    for (EpochObserver* o : observers) o->on_epoch_end(epoch, logs, &stop);
    checkpointed();
    result.epochs_done = epoch + 1;
    if (stop) {
      const EarlyStopping& es = early->early();
      log_info("early stopping at epoch {}: '{}' has not improved for {} epochs (best at epoch {})", epoch + 1,
               es.spec().monitor, es.wait(), es.best_epoch() + 1);
      result.stopped_early = true;
      break;
    }
  }
  if (result.signal) {  // not finished: no final.h5, and last.h5 is where to go on from
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return result;
  }
  if (early) early->restore_best();
  ResumeState fin;  // the end of the run: no schedule or callback state to go on from; the optimizer's, for Keras
  fin.epoch = result.epochs_done;
  fin.iterations = optimizer.iterations();
  fin.learning_rate = schedule.lr(fin.iterations);
  fin.rng = rng.state();
  fin.history_json = result.history.to_json();
  fin.config_yaml = emit_config(cfg);
  if (comm.root()) save_checkpoint((fs::path(run_dir) / "final.h5").string(), cfg.model, engine->host_params(), slots, fin);
  if (replaced) replaced->commit();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace rnntrain
