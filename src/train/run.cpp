// The training run (run.h): opening a fresh or resumed run, its epochs, its end.
#include "train/run.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <future>

#include "core/error.h"
#include "core/files.h"
#include "core/signals.h"
#include "io/checkpoint.h"
#include "spec/parse.h"
#include "train/autotune.h"
#include "train/memory.h"

namespace fs = std::filesystem;

namespace rnntrain {

namespace {

size_t metric_state_size(const std::vector<Metric*>& ms) {
  size_t n = 2;
  for (const Metric* m : ms) n += m->state_size();
  return n;
}

// Why a resume state's running sums (metric_state()'s layout) cannot be the `steps` steps of `samples`
// samples (0: not recorded, then at most steps x batch_size) they claim to be; "" when they can.
std::string partial_problem(const std::vector<Metric*>& ms, const std::vector<double>& t, int64_t steps,
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

}  // namespace

TrainingRun::TrainingRun(const Config& cfg, const TrainOptions& opt, DataParallel& dp)
    : cfg_(cfg), opt_(opt), dp_(dp), shapes_(infer_shapes(cfg.model)) {
  state_.rng = Rng(cfg.train.seed ^ 0x7261696eull);
  resuming_ = !opt.resume_dir.empty();
  run_dir_ = resuming_ ? opt.resume_dir : cfg.output.dir;
  last_path_ = (fs::path(run_dir_) / "last.h5").string();
  open_directory();
  load_data_and_engine();
  make_observers();
  if (resuming_) resume();
  if (complete_) return;
  if (dp_.broadcast(engine_->host_params())) engine_->params_changed();
  write_run_files();
  log_info("train: {} samples, {} steps of {} per epoch, validation: {} samples, device {}", n_, steps_, batch_size_,
           data_.val ? data_.val->size() : 0, engine_->device_name());
  if (const std::string line = dp_.describe_batch(batch_size_); !line.empty()) log_info("{}", line);
  for (const std::string& line : dropped_masks(engine_->model().spec, engine_->model().shapes)) log_warn("{}", line);
}

TrainingRun::~TrainingRun() = default;

// The run's log, train.log: what stderr shows (Info and above, whatever -q says), with times. An
// --overwrite touches the directory only once the new start has been checked: until then its log
// lines wait in memory, and the earlier run stays as it is. A resume reads last.h5 and the run's own
// config before anything else.
void TrainingRun::open_directory() {
  if (dp_.root()) {
    recover_replaced_run(run_dir_);
    if (!resuming_) replacing_ = claim_run_dir(run_dir_, opt_.overwrite) && opt_.overwrite;
    if (replacing_) {
      log_file_.emplace();
    } else {
      if (!resuming_) fs::create_directories(run_dir_);
      if (fs::is_directory(run_dir_)) log_file_.emplace((fs::path(run_dir_) / "train.log").string());
    }
  }
  if (resuming_) {
    if (!fs::exists(last_path_))
      throw UsageError(fmt::format("--resume {}: no last.h5 in that folder; pass the run directory of an earlier "
                                   "`rnntrain train`", run_dir_));
    const std::string run_cfg_path = (fs::path(run_dir_) / "config.yaml").string();
    if (fs::exists(run_cfg_path)) check_resumable(cfg_, read_text(run_cfg_path), run_cfg_path);
  }
}

void TrainingRun::load_data_and_engine() {
  meta_ = resuming_ ? read_meta(run_dir_) : DataMeta{};
  if (!cfg_.data.train)
    throw ConfigError(fmt::format("{}: data.train is missing; training needs a data source (see docs/config.md)", cfg_.path));
  if (!cfg_.train.class_weight.empty() && !cfg_.data.train->sample_weight.empty())
    throw ConfigError(fmt::format("{}: train.class_weight and data.train.sample_weight are both set; Keras takes one "
                                  "of them: fold the class weights into the sample weights, or drop one",
                                  cfg_.path));
  // CSV scaling is fitted on the rows that train, not on those validation_split holds out.
  data_.train = load_data(cfg_, *cfg_.data.train, meta_, cfg_.data.validation ? 0.0 : cfg_.data.validation_split);
  if (cfg_.data.validation) {
    data_.val = load_data(cfg_, *cfg_.data.validation, meta_);
  } else if (cfg_.data.validation_split > 0) {
    const int64_t n = data_.train.size(), n_train = training_rows(cfg_, n);
    data_.val = data_.train.slice(n_train, n);
    data_.val->source += " (validation split)";
    data_.train = data_.train.slice(0, n_train);
  }
  check_dataset(data_.train, cfg_.model, shapes_, cfg_.train.loss);
  if (data_.val) check_dataset(*data_.val, cfg_.model, shapes_, cfg_.train.loss);

  lengths_ = sample_lengths(data_.train, cfg_.model);
  if (const std::string why = bucketing_blocker(cfg_, lengths_); !why.empty()) throw ConfigError(why);
  // Bucketed batches keep only their longest sequence's steps, where the Input lets the length vary.
  trim_ = cfg_.train.bucketing && cfg_.model.layers[0].shape[0] < 0;
  if (cfg_.train.bucketing && !trim_)
    log_info("train.bucketing: the Input ({}) fixes {} timesteps, so batches are grouped by length but not trimmed "
             "(shape: [null, ...] lets them be)", cfg_.model.layers[0].loc.str(), cfg_.model.layers[0].shape[0]);
  y_has_time_ = shapes_.back().out.size() >= 2;  // the model outputs a sequence: targets per step
  data_hash_ = data_fingerprint(data_.train);
  n_ = data_.train.size(), batch_size_ = cfg_.train.batch_size;
  steps_ = (n_ + batch_size_ - 1) / batch_size_;
  if (cfg_.train.steps_per_epoch > 0) steps_ = std::min(steps_, cfg_.train.steps_per_epoch);

  check_memory(cfg_, data_.train.x.dim(1), true);
  // A resumed run's weights come from last.h5 alone: model.init_from (the start of the first run,
  // which may be gone since) is not read again.
  Params init = resuming_ ? fresh_params(cfg_) : initial_params(cfg_, opt_.weights);
  // The plan the engine runs (autotune decides here); the run directory records it, not "auto".
  // Under data parallelism rank 0 alone times the candidates, and every rank runs its choice.
  Config tune_cfg = dp_.for_engine(cfg_);
  tune_cfg.plan.autotune = cfg_.plan.autotune && dp_.root();
  run_cfg_ = resolve_plan(tune_cfg, init, data_.train.x.dim(1));
  run_cfg_.plan.autotune = false;
  run_cfg_.train.threads = cfg_.train.threads;  // config.yaml records the setting, not one rank's share
  dp_.agree_plan(run_cfg_.plan);
  engine_ = make_engine(dp_.for_engine(run_cfg_), std::move(init), dp_.dropout_stream(state_.rng), dp_.engine_ranks());
  // Everything a start can check has been: the earlier run is set aside (removed at the first
  // checkpoint, put back if this run stops before it).
  if (replacing_) {
    replaced_.emplace(run_dir_);
    log_file_->open((fs::path(run_dir_) / "train.log").string());
  }
  for (const NamedTensor& s : engine_->optimizer().slots()) slots_.emplace_back(s.name, s.tensor);
  metrics_ = make_metrics(cfg_);
  ms_ = raw(metrics_);
}

void TrainingRun::make_observers() {
  schedule_.emplace(cfg_.train.schedule, cfg_.train.optimizer.learning_rate, cfg_.train.metrics);
  if (cfg_.train.early_stopping) early_.emplace(*cfg_.train.early_stopping, cfg_.train.metrics, *engine_);
  const std::string& monitor = cfg_.train.checkpoint.monitor;
  const bool val_monitor = monitor.rfind("val_", 0) == 0;
  const std::string best_by = data_.val || !val_monitor ? monitor : monitor.substr(4);
  checkpoints_.emplace(cfg_, best_by,
                       CheckpointObserver::Paths{(fs::path(run_dir_) / "best.h5").string(), last_path_,
                                                 (fs::path(run_dir_) / "early_stopping_best.h5").string()},
                       slots_, early_ ? &*early_ : nullptr, *this, dp_.root());
  {  // what "better" means for each monitored value: mode auto follows the metric (monitor_is_max)
    auto better = [&](const std::string& m, MonitorMode mode) {
      return fmt::format("{} ({} is better)", m, monitor_is_max(m, mode, cfg_.train.metrics) ? "higher" : "lower");
    };
    std::string line = "best.h5 by " + better(best_by, cfg_.train.checkpoint.mode);
    if (early_) line += ", early_stopping by " + better(cfg_.train.early_stopping->monitor, cfg_.train.early_stopping->mode);
    if (cfg_.train.schedule.kind == ScheduleKind::ReduceOnPlateau)
      line += ", reduce_on_plateau by " + better(cfg_.train.schedule.monitor, cfg_.train.schedule.mode);
    log_info("{}", line);
  }
  history_.emplace(state_.history, run_dir_);
  observers_ = {&*schedule_};
  if (early_) observers_.push_back(&*early_);
  observers_.push_back(&*checkpoints_);  // one rank writes the run directory: every rank holds the same weights
  if (dp_.root()) observers_.push_back(&*history_);
  if (dp_.root() && cfg_.output.tensorboard >= 0) {
    tensorboard_.emplace(run_dir_, cfg_.output.tensorboard);
    observers_.push_back(&*tensorboard_);
  }
}

void TrainingRun::resume() {
  Optimizer& optimizer = engine_->optimizer();
  ResumeState st = load_checkpoint(last_path_, cfg_.model, engine_->host_params(), slots_);
  if (st.epoch < 0 || st.epoch > 100000000 || st.iterations < 0 || st.step < 0 ||
      (st.step > 0 && st.partial.size() != metric_state_size(ms_)))
    throw DataError(fmt::format("{}: the resume state is damaged (epoch {}, step {}, optimizer step {}); start a new "
                                "run from its weights with --weights instead", last_path_, st.epoch, st.step,
                                st.iterations));
  check_resumed_data(st, data_.train, data_hash_, run_dir_);
  if (st.step > 0 && st.drawn.batch_size == 0) st.drawn = drawn_by(st.config_yaml, last_path_, cfg_.train);
  if (st.step > 0)
    if (const std::string why = partial_problem(ms_, st.partial, st.step, st.drawn.samples, st.drawn.batch_size);
        !why.empty())
      throw DataError(fmt::format("{}: the state of the epoch it stopped in is damaged ({}); resume from an "
                                  "earlier checkpoint, or start a new run from its weights with --weights",
                                  last_path_, why));
  if (st.keras) {  // Keras' files count optimizer steps, not epochs: go on as fit(initial_epoch=...) would
    st.epoch = st.iterations / steps_;
    log_info("{}: no epoch count (a file Keras wrote), optimizer step {}: {} epochs of {} steps done", last_path_,
             st.iterations, st.epoch, steps_);
    if (st.iterations % steps_)
      log_warn("{}: its {} optimizer steps are not a whole number of epochs of {} steps (train.batch_size {}, {} "
               "samples); epoch {} is trained in full", last_path_, st.iterations, steps_, batch_size_, n_,
               st.epoch + 1);
  }
  engine_->params_changed();
  optimizer.set_iterations(st.iterations);
  state_.rng.set_state(st.step > 0 ? st.epoch_rng : st.rng);  // inside an epoch: its shuffle draws again first
  for (EpochObserver* o : observers_) o->load_state(st);
  if (early_) early_->set_best_from((fs::path(run_dir_) / "early_stopping_best.h5").string(), cfg_.model);
  state_.history = History::from_json(st.history_json);
  if (dp_.root()) history_->write();
  start_epoch_ = state_.epochs_done = st.epoch;
  const bool stopped = early_ && early_->early().stopped();
  finished_ = stopped || start_epoch_ >= cfg_.train.epochs;
  if (stopped)
    log_warn("{} stopped early at epoch {}: nothing to do. To train further, start a new run from its weights: "
             "rnntrain train CONFIG --weights {}/final.h5", run_dir_, st.epoch, run_dir_);
  else if (finished_)
    log_warn("{} already has {} epochs and train.epochs is {}: nothing to do (raise train.epochs to go on)", run_dir_,
             start_epoch_, cfg_.train.epochs);
  // A run killed after its last epoch's last.h5 and before final.h5 is finished here.
  if (finished_ && fs::exists((fs::path(run_dir_) / "final.h5").string())) {
    complete_ = true;
    return;
  }
  state_.stopped_early = stopped;
  log_info("resuming {} at epoch {}{} (optimizer step {})", run_dir_, start_epoch_ + 1,
           st.step > 0 ? fmt::format(" step {}", st.step + 1) : "", st.iterations);
  state_.last_good = fmt::format("{} (epoch {})", last_path_, start_epoch_);
  resumed_ = std::move(st);
}

void TrainingRun::write_run_files() {
  if (!dp_.root()) return;
  fs::create_directories(run_dir_);
  remove_stale_temporaries(run_dir_);
  write_text((fs::path(run_dir_) / "config.yaml").string(), emit_config(with_absolute_paths(run_cfg_)));
  if (!meta_.empty()) write_text((fs::path(run_dir_) / "data_meta.json").string(), meta_.to_json());
}

ResumeState TrainingRun::resume_state(int64_t epochs_done) const {
  ResumeState st;
  st.epoch = epochs_done;
  st.data_rows = static_cast<uint64_t>(data_.train.size()), st.data_hash = data_hash_;
  st.iterations = engine_->optimizer().iterations();
  st.learning_rate = schedule_->lr(st.iterations);
  st.rng = state_.rng.state();
  for (const EpochObserver* o : observers_) o->save_state(st);
  st.history_json = state_.history.to_json();
  st.config_yaml = emit_config(run_cfg_);
  return st;
}

// Divergence stops the run before anything non-finite is written; the checkpoints on disk stay.
RuntimeError TrainingRun::diverged(const std::string& where, const std::string& what) const {
  const std::string& good = state_.last_good;
  return RuntimeError(fmt::format(
      "{}: {}. Training stopped before saving anything non-finite; {}. Lower train.optimizer.learning_rate, set "
      "clipnorm, or check the data for extreme values", where, what,
      good.empty() ? "no checkpoint had been written yet" : "the last good checkpoint is " + good));
}

Params& TrainingRun::finite_params(const std::string& where) {
  Params& params = engine_->host_params();
  if (const std::string p = params.first_nonfinite(); !p.empty())
    throw diverged(where, "the weights are inf or NaN (first: " + p + ")");
  return params;
}

void TrainingRun::checkpointed() {  // the new run has a checkpoint: the earlier one can go
  if (replaced_ && (fs::exists(last_path_) || fs::exists(fs::path(run_dir_) / "best.h5"))) replaced_->commit();
}

// The signal that stops training (0: none), agreed by every rank: under data parallelism a signal may
// reach the ranks at different steps (or only one of them), and they must all stop after the same
// step or wait forever in mismatched collectives.
bool TrainingRun::agree_stop() {
  stopped_by_ = dp_.agree_stop(stop_signal());
  return stopped_by_ != 0;
}

// The progress line's values: the loss, the metrics, then those of the validation when given.
Shown TrainingRun::shown_of(const EpochSteps& e, const Logs* val) const {
  Shown shown{{"loss", e.count > 0 ? e.sum / e.count : 0.0}};
  for (auto* m : ms_) shown.emplace_back(m->name(), m->result());
  for (size_t i = 0, n = shown.size(); val && i < n; ++i)
    if (auto it = val->find("val_" + shown[i].first); it != val->end()) shown.emplace_back(it->first, it->second);
  return shown;
}

// The epoch's batches depend only on the RNG state and the settings they are drawn with: a resumed
// epoch draws them again as the stopped run did, and goes on from its sample.
TrainingRun::EpochSteps TrainingRun::plan_epoch_batches(int64_t epoch, ResumeState::Drawn& drawn) {
  const bool resumed_epoch = epoch == start_epoch_ && resumed_.step > 0;
  drawn = {batch_size_, cfg_.train.bucket_window, 0, cfg_.train.shuffle, cfg_.train.bucketing};
  if (resumed_epoch) drawn = resumed_.drawn;
  TrainSpec draw = cfg_.train;
  draw.batch_size = drawn.batch_size, draw.bucket_window = drawn.bucket_window;
  draw.shuffle = drawn.shuffle, draw.bucketing = drawn.bucketing;
  plan_ = plan_epoch(draw, n_, lengths_, trim_, state_.rng);
  epoch_steps_ = steps_;
  for (auto* m : ms_) m->reset();
  EpochSteps so_far;
  if (!resumed_epoch) return so_far;
  // Stopped inside this epoch: go on from its sample.
  state_.rng.set_state(resumed_.rng);
  int64_t drawn_steps = (n_ + drawn.batch_size - 1) / drawn.batch_size;
  if (cfg_.train.steps_per_epoch > 0) drawn_steps = std::min(drawn_steps, cfg_.train.steps_per_epoch);
  plan_.resize(static_cast<size_t>(std::min<int64_t>(drawn_steps, static_cast<int64_t>(plan_.size()))));
  const int64_t samples = drawn.samples > 0 ? drawn.samples : rows_of(plan_, resumed_.step);
  ResumedEpoch r = resume_epoch(std::move(plan_), samples, batch_size_, drawn.batch_size == batch_size_, lengths_, trim_);
  plan_ = std::move(r.batches);
  if (r.recut) {
    epoch_steps_ = static_cast<int64_t>(plan_.size());
    log_info("epoch {} was stopped after {} of its {} samples, drawn in batches of {}: it goes on from sample {} in {} "
             "batches of {}", epoch + 1, samples, rows_of(plan_, epoch_steps_), drawn.batch_size, samples + 1,
             epoch_steps_ - r.done, batch_size_);
  }
  resumed_.step = r.done;
  so_far.done = std::min(resumed_.step, epoch_steps_);
  so_far.sum = resumed_.partial[0], so_far.count = resumed_.partial[1];
  if (dp_.holds_resumed_sums()) merge_metric_state(ms_, resumed_.partial);
  return so_far;
}

// One epoch's training steps from step so_far.done on, with `so_far` from the steps before it (a
// resumed epoch); the metrics hold their totals. Ends early when a signal arrives (stopped_by_ says which).
TrainingRun::EpochSteps TrainingRun::train_steps(int64_t epoch, EpochSteps so_far) {
  Optimizer& optimizer = engine_->optimizer();
  const bool async = engine_->traits().async_steps;
  EpochSteps e = so_far;
  int64_t seen = rows_of(plan_, e.done);  // samples of the steps whose loss has been seen
  progress_.emplace(epoch, cfg_.train.epochs, epoch_steps_, opt_.progress && dp_.root());
  e.lr = schedule_->lr(optimizer.iterations());
  // The run's step of this epoch's first step, for TensorBoard: nothing is in flight here, and a
  // resumed epoch's optimizer has taken its steps done already (whatever batches they were).
  const int64_t step0 = optimizer.iterations() - e.done;
  auto take = [&](const LossValue& lv) {
    const std::string where = fmt::format("epoch {} step {}", epoch + 1, e.done + 1);
    if (!std::isfinite(lv.sum)) throw diverged(where, fmt::format("the loss is {}", lv.sum));
    if (!lv.params_finite) {
      const std::string p = engine_->host_params().first_nonfinite();
      throw diverged(where, fmt::format("the optimizer update made the weights inf or NaN{}",
                                        p.empty() ? "" : " (first: " + p + ")"));
    }
    const auto rows = static_cast<double>(plan_[e.done].rows.size());
    e.sum += lv.mean() * rows;  // as Keras' loss tracker: batch means weighted by size
    e.count += rows;
    seen += static_cast<int64_t>(rows);
    ++e.done;
    const Shown shown = shown_of(e, nullptr);
    progress_->update(e.done, seen, shown);
    if (tensorboard_) tensorboard_->on_step(step0 + e.done, shown, e.lr);
  };
  // With asynchronous steps (a GPU) the next batch is gathered on a second thread while this one
  // enqueues the step.
  auto gather = [&](int64_t s) {
    Batch b = gather_batch(data_.train, dp_.share(plan_[s]), y_has_time_);
    if (!cfg_.train.class_weight.empty())
      weigh_classes(b, cfg_.train.class_weight, loss_info(cfg_.train.loss.kind).targets == Targets::Labels,
                    shapes_.back().out.back());
    return b;
  };
  const int64_t first = e.done;
  std::future<Batch> next;
  if (async && first < epoch_steps_) next = std::async(std::launch::async, gather, first);
  bool stop = false;
  for (int64_t s = first; s < epoch_steps_ && !(stop = agree_stop()); ++s) {
    Batch batch = async ? next.get() : gather(s);
    if (async && s + 1 < epoch_steps_) next = std::async(std::launch::async, gather, s + 1);
    e.lr = schedule_->lr(optimizer.iterations());
    dp_.seed_step(s);
    // The GPU runs ahead: losses and metrics are read back as its steps finish.
    engine_->enqueue_train_step(batch, e.lr, ms_);
    for (const LossValue& lv : engine_->collect_losses(false)) take(lv);
  }
  if (next.valid()) next.wait();  // a gather still running reads `plan_`
  if (!stop) agree_stop();  // a signal after the last step stops the run before validation
  for (const LossValue& lv : engine_->collect_losses(true)) take(lv);
  e.secs = progress_->seconds();
  return e;
}

// Stopped inside the epoch: last.h5 holds this very step.
void TrainingRun::save_stopped(int64_t epoch, const EpochSteps& e, const Rng::State& epoch_rng,
                               const ResumeState::Drawn& drawn) {
  progress_->finish(e.done, shown_of(e, nullptr));
  ResumeState st = resume_state(epoch);
  if (e.done > 0) {
    st.step = e.done;
    st.epoch_rng = epoch_rng;
    st.partial = metric_state(ms_, e.sum, e.count);
    st.drawn = drawn;
    st.drawn.samples = rows_of(plan_, e.done);
  } else {
    st.rng = epoch_rng;  // nothing of this epoch done: it starts over, shuffle included
  }
  if (dp_.root()) {
    save_checkpoint(last_path_, cfg_.model, finite_params(fmt::format("epoch {} step {}", epoch + 1, e.done)), slots_,
                    st);
    history_->write();
  }
  checkpointed();
  state_.signal = stopped_by_;
  state_.signal_step = e.done;
}

// The epoch's logs (validation included), logged.
Logs TrainingRun::epoch_logs(int64_t epoch, const EpochSteps& e) {
  Logs logs{{"loss", e.sum / e.count}, {"learning_rate", e.lr}};
  for (auto* m : ms_) logs[m->name()] = m->result();
  if (data_.val) {
    EvalResult ev = evaluate(*engine_, cfg_, *data_.val, dp_);
    if (!std::isfinite(ev.loss)) throw diverged(fmt::format("epoch {}", epoch + 1), fmt::format("val_loss is {}", ev.loss));
    logs["val_loss"] = ev.loss;
    for (const auto& [k, v] : ev.metrics) logs["val_" + k] = v;
  }
  std::string line = fmt::format("epoch={}/{}", epoch + 1, cfg_.train.epochs);
  for (const auto& [k, v] : logs)  // the learning rate in one format however small it gets
    line += fmt::format(" {}={}", k, k == "learning_rate" ? fmt::format("{:.6g}", v) : format_metric(v));
  if (!lengths_.empty()) {  // the share of computed steps that were padding
    plan_.resize(static_cast<size_t>(epoch_steps_));
    line += fmt::format(" padding={:.3f}", padding_share(plan_, lengths_, data_.train.x.dim(1)));
  }
  progress_->finish(e.done, shown_of(e, &logs));
  if (progress_->on_tty()) log_to_file(LogLevel::Info, fmt::format("{} s={:.2f}", line, e.secs));
  else log_info("{} s={:.2f}", line, e.secs);
  return logs;
}

bool TrainingRun::run_epoch() {
  if (finished_ || complete_ || state_.epochs_done >= cfg_.train.epochs) return false;
  const int64_t epoch = state_.epochs_done;
  const Rng::State epoch_rng = state_.rng.state();
  dp_.begin_epoch(epoch_rng);
  ResumeState::Drawn drawn;
  const EpochSteps so_far = plan_epoch_batches(epoch, drawn);
  const EpochSteps e = train_steps(epoch, so_far);
  dp_.reduce_metrics(ms_, nullptr, nullptr);
  if (stopped_by_) {
    save_stopped(epoch, e, epoch_rng, drawn);
    return false;
  }
  const Logs logs = epoch_logs(epoch, e);
  state_.history.epochs.push_back(logs);
  bool stop = false;
  for (EpochObserver* o : observers_) o->on_epoch_end(epoch, logs, &stop);
  checkpointed();
  state_.epochs_done = epoch + 1;
  if (stop) {
    const EarlyStopping& es = early_->early();
    log_info("early stopping at epoch {}: '{}' has not improved for {} epochs (best at epoch {})", epoch + 1,
             es.spec().monitor, es.wait(), es.best_epoch() + 1);
    state_.stopped_early = true;
    return false;
  }
  return true;
}

TrainResult TrainingRun::finish() {
  TrainResult result;
  result.run_dir = run_dir_;
  result.history = state_.history;
  result.epochs_done = state_.epochs_done;
  result.stopped_early = state_.stopped_early;
  result.signal = state_.signal;
  result.signal_step = state_.signal_step;
  if (!complete_ && !state_.signal) {  // not stopped by a signal: final.h5 (last.h5 is where a stopped run goes on)
    if (early_) early_->restore_best();
    ResumeState fin;  // the end of the run: no schedule or callback state to go on from; the optimizer's, for Keras
    fin.epoch = state_.epochs_done;
    fin.iterations = engine_->optimizer().iterations();
    fin.learning_rate = schedule_->lr(fin.iterations);
    fin.rng = state_.rng.state();
    fin.history_json = state_.history.to_json();
    fin.config_yaml = emit_config(cfg_);
    if (dp_.root())
      save_checkpoint((fs::path(run_dir_) / "final.h5").string(), cfg_.model, engine_->host_params(), slots_, fin);
    if (replaced_) replaced_->commit();
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  return result;
}

TrainResult train(const Config& cfg, const TrainOptions& opt, DataParallel& dp) {
  TrainingRun run(cfg, opt, dp);
  StopOnSignals signals;  // from here a signal stops training after the current step, saved
  while (run.run_epoch()) {
  }
  return run.finish();
}

}  // namespace rnntrain
