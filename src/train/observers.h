// What the epoch loop notifies after each epoch, as Keras' callbacks and Marian's training
// observers: the learning-rate schedule, early stopping, the checkpoints and the history files.
// Each acts on the epoch's logs and keeps its own part of the state a checkpoint resumes from; the
// loop itself only trains, evaluates and asks them in order.
#pragma once
#include <optional>
#include <string>

#include "backend/engine.h"
#include "io/checkpoint.h"
#include "train/callbacks.h"
#include "train/schedule.h"

namespace rnntrain {

// What the checkpoints need of the run (TrainingRun, run.h): the state that a checkpoint written
// after `epochs_done` epochs resumes from, the weights to save (checked finite: throws, naming where),
// and where the newest checkpoint with finite weights is recorded.
class CheckpointSource {
 public:
  virtual ResumeState resume_state(int64_t epochs_done) const = 0;
  virtual Params& finite_params(const std::string& where) = 0;
  virtual void set_last_good(std::string checkpoint) = 0;

 protected:
  ~CheckpointSource() = default;
};

class EpochObserver {
 public:
  virtual ~EpochObserver() = default;
  // After an epoch's logs are complete (validation included); epoch counts from 0. Setting *stop
  // ends training after this epoch; the observers after this one see it.
  virtual void on_epoch_end(int64_t epoch, const Logs& logs, bool* stop) = 0;
  // Its part of the state that a checkpoint written now resumes from, and back on --resume.
  virtual void save_state(ResumeState& st) const { (void)st; }
  virtual void load_state(const ResumeState& st) { (void)st; }
};

// train.schedule: logs a changed learning rate; the loop reads lr() for each step.
class ScheduleObserver final : public EpochObserver {
 public:
  ScheduleObserver(const ScheduleSpec& spec, double base_lr, const std::vector<MetricSpec>& metrics)
      : schedule_(spec, base_lr, metrics) {}
  double lr(int64_t step) const { return schedule_.lr(step); }
  void on_epoch_end(int64_t epoch, const Logs& logs, bool* stop) override;
  void save_state(ResumeState& st) const override { st.schedule = schedule_.state(); }
  void load_state(const ResumeState& st) override { schedule_.set_state(st.schedule); }

 private:
  Schedule schedule_;
};

// train.early_stopping: stops training when the monitored value no longer improves; with
// restore_best_weights, keeps the best epoch's weights (early_stopping_best.h5 across a resume) and
// puts them back at the end of training.
class EarlyStoppingObserver final : public EpochObserver {
 public:
  EarlyStoppingObserver(const EarlyStoppingSpec& spec, const std::vector<MetricSpec>& metrics, Engine& engine)
      : early_(spec, metrics), engine_(engine) {}
  const EarlyStopping& early() const { return early_; }
  void on_epoch_end(int64_t epoch, const Logs& logs, bool* stop) override;
  void save_state(ResumeState& st) const override { st.early_stopping = early_.state(); }
  void load_state(const ResumeState& st) override;
  // The weights to restore at the end of training, if any: true when it restored them.
  bool restore_best();
  // Whether early_stopping_best.h5 should hold this epoch's weights.
  bool best_is(int64_t epoch) const {
    return early_.spec().restore_best_weights && early_.best_weights() && early_.best_epoch() == epoch;
  }
  void set_best_from(const std::string& path, const ModelSpec& model);

 private:
  EarlyStopping early_;
  Engine& engine_;
};

// best.h5 (the monitored value improved), last.h5 (every epoch, or the last one) and
// early_stopping_best.h5, each written with the state the run would resume from; nothing non-finite is
// ever written (the run checks the weights first and throws). Without `write` (the other ranks of a
// data-parallel run) it decides and checks alike but writes nothing. The run's last good checkpoint
// follows what it writes.
class CheckpointObserver final : public EpochObserver {
 public:
  struct Paths {
    std::string best, last, early_best;
  };
  CheckpointObserver(const Config& cfg, const std::string& monitor, Paths paths, const OptimizerSlots& slots,
                     const EarlyStoppingObserver* early, CheckpointSource& run, bool write)
      : cfg_(cfg), best_(monitor, cfg.train.checkpoint.mode, cfg.train.metrics), paths_(std::move(paths)),
        slots_(slots), early_(early), run_(run), write_(write) {}
  void on_epoch_end(int64_t epoch, const Logs& logs, bool* stop) override;
  void save_state(ResumeState& st) const override { st.checkpoint = best_.state(); }
  void load_state(const ResumeState& st) override { best_.set_state(st.checkpoint); }

 private:
  const Config& cfg_;
  BestTracker best_;
  Paths paths_;
  const OptimizerSlots& slots_;
  const EarlyStoppingObserver* early_;
  CheckpointSource& run_;
  bool write_;
};

// history.json and history.csv in the run directory, rewritten after every epoch, and on resuming from the
// checkpoint's history (a run killed between last.h5 and the history files left them one epoch behind).
class HistoryObserver final : public EpochObserver {
 public:
  HistoryObserver(const History& history, std::string run_dir) : history_(history), run_dir_(std::move(run_dir)) {}
  void on_epoch_end(int64_t, const Logs&, bool*) override { write(); }
  void write() const;

 private:
  const History& history_;
  std::string run_dir_;
};

}  // namespace rnntrain
