// A training run as an object (Keras' fit, Marian's Train::run): open() it, fresh or resumed, run its
// epochs one at a time, finish() it. It owns the run's state (RunState), which its checkpoints save
// and its observers read; data parallelism is a DataParallel it is handed, which decides everything
// that crosses ranks. train() (trainer.h) is the loop over it.
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/engine.h"
#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "train/batching.h"
#include "train/data_parallel.h"
#include "train/observers.h"
#include "train/progress.h"
#include "train/run_dir.h"
#include "train/tensorboard.h"
#include "train/trainer.h"

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


// Keras' fit: a TrainingRun's epochs. Writes the run directory (config.yaml, data_meta.json,
// history.csv/json, last.h5, best.h5, final.h5). Under data parallelism every rank calls it: dp makes
// every decision across the ranks.
TrainResult train(const Config& cfg, const TrainOptions& opt, DataParallel& dp);

// Where a run stands: what its observers read and its checkpoints save (with their own parts).
struct RunState {
  int64_t epochs_done = 0;
  Rng rng{0};                 // the trainer's stream: shuffles (and dropout in a world of one)
  History history;
  std::string last_good;      // the newest checkpoint that holds finite weights ("" before the first)
  bool stopped_early = false;
  int signal = 0;             // the signal that stopped the run inside or after an epoch (0: none)
  int64_t signal_step = 0;    // the steps of epoch epochs_done + 1 done by then
};

class TrainingRun final : public CheckpointSource {
 public:
  // Opens the run: claims (or, resuming, checks) its directory, loads the data, resolves the plan,
  // builds the engine and the observers, and on --resume restores last.h5's state. Everything a start
  // can check is checked before an --overwrite touches the directory.
  TrainingRun(const Config& cfg, const TrainOptions& opt, DataParallel& dp);
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  // Trains the next epoch (or the rest of a stopped one), validates, logs and asks the observers;
  // false once the run has ended: its epochs done, stopped early, or stopped by a signal (last.h5
  // then holds the very step).
  bool run_epoch();
  // Ends the run: the best weights restored (early stopping), final.h5 written; a run a signal
  // stopped writes nothing more.
  TrainResult finish();

  const RunState& state() const { return state_; }
  ResumeState resume_state(int64_t epochs_done) const override;
  Params& finite_params(const std::string& where) override;
  void set_last_good(std::string checkpoint) override { state_.last_good = std::move(checkpoint); }

 private:
  struct Splits {
    Dataset train;
    std::optional<Dataset> val;
  };
  // One epoch's steps as they ended: the running loss sums, the steps and samples done, and the
  // learning rate of the last step.
  struct EpochSteps {
    double sum = 0.0, count = 0.0, lr = 0.0, secs = 0.0;
    int64_t done = 0;
  };

  void open_directory();
  void load_data_and_engine();
  void make_observers();
  void resume();
  void write_run_files();
  // The epoch's batches: drawn from the RNG, or, for a stopped epoch, drawn again and gone on from.
  EpochSteps plan_epoch_batches(int64_t epoch, ResumeState::Drawn& drawn);
  EpochSteps train_steps(int64_t epoch, EpochSteps so_far);
  void save_stopped(int64_t epoch, const EpochSteps& e, const Rng::State& epoch_rng, const ResumeState::Drawn& drawn);
  Logs epoch_logs(int64_t epoch, const EpochSteps& e);
  Shown shown_of(const EpochSteps& e, const Logs* val) const;
  RuntimeError diverged(const std::string& where, const std::string& what) const;
  bool agree_stop();
  void checkpointed();

  const Config& cfg_;
  const TrainOptions& opt_;
  DataParallel& dp_;
  const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  const std::vector<LayerShape> shapes_;
  RunState state_;
  std::string run_dir_, last_path_;
  bool resuming_ = false, replacing_ = false;
  std::optional<LogFile> log_file_;

  DataMeta meta_;
  Splits data_;
  uint64_t data_hash_ = 0;
  std::vector<int32_t> lengths_;
  bool trim_ = false, y_has_time_ = false;
  int64_t n_ = 0, batch_size_ = 0, steps_ = 0;

  Config run_cfg_;  // cfg with the plan the engine runs (autotune's choice)
  std::unique_ptr<Engine> engine_;
  std::optional<ReplacedRun> replaced_;
  OptimizerSlots slots_;
  std::vector<std::unique_ptr<Metric>> metrics_;  // the epochs' metrics
  std::vector<Metric*> ms_;

  // What acts after each epoch, in this order (observers.h).
  std::optional<ScheduleObserver> schedule_;
  std::optional<EarlyStoppingObserver> early_;
  std::optional<CheckpointObserver> checkpoints_;
  std::optional<HistoryObserver> history_;
  std::optional<TensorBoardObserver> tensorboard_;
  std::vector<EpochObserver*> observers_;

  int64_t start_epoch_ = 0;  // the first epoch this process trains
  ResumeState resumed_;  // a resumed run's start: its epoch, and inside it (step > 0) its step
  bool finished_ = false;  // nothing (more) to train
  bool complete_ = false;  // a resumed run that had finished, final.h5 included: finish() writes nothing
  int stopped_by_ = 0;     // the signal agreed by every rank (0: none)
  std::vector<EpochBatch> plan_;
  int64_t epoch_steps_ = 0;  // this epoch's: steps_, but in a resumed epoch whose batches were cut anew
  std::optional<Progress> progress_;
};

}  // namespace rnntrain
