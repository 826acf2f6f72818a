// Data parallelism as one strategy (docs/distributed.md): every decision a training run makes across
// the ranks of a launched world, and nothing else. A process that runs alone is a world of one,
// where each decision is the identity, so the trainer reads the same either way and never sees a
// Comm. The CLI reads the world once and hands it down.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"
#include "model/metrics.h"
#include "model/params.h"
#include "spec/config.h"
#include "train/batching.h"

namespace rnntrain {

class Comm;

class DataParallel {
 public:
  explicit DataParallel(Comm& world) : comm_(world) {}

  bool root() const;         // the rank that writes the run directory, prints and times autotune's candidates
  bool distributed() const;  // more than one rank
  Comm* engine_ranks() const;  // what the engine sums its gradients over: the world when launched, else null

  // cfg as this rank's engines run it: under data parallelism train.threads 0 (every core) becomes the
  // rank's share of its machine's cores. Ranks on one machine share its cores, and more threads than
  // cores spin against each other at every barrier (2 ranks of 2 threads on 2 cores: 20x slower); a
  // launcher that binds each rank to cores (Open MPI's default, srun --cpus-per-task) sets the limit.
  Config for_engine(Config cfg) const;
  // Rank 0's plan (its autotune's choice, made alone) for every rank.
  void agree_plan(PlanSpec& plan) const;
  // The stream the engine draws dropout masks from: the trainer's own in a world of one; under data
  // parallelism one per rank, reseeded every step (seed_step) from the epoch's key, the step and the
  // rank, so that the trainer's stream (every rank's shuffle) is never drawn from by dropout and a
  // resumed run draws the same masks again.
  Rng& dropout_stream(Rng& trainer) { return distributed() ? rank_dropout_ : trainer; }
  void begin_epoch(const Rng::State& epoch_rng) { epoch_key_ = epoch_rng[0] ^ (epoch_rng[3] * 0xbf58476d1ce4e5b9ull); }
  void seed_step(int64_t step);

  // This rank's part of an epoch's global batch (all of it in a world of one).
  EpochBatch share(const EpochBatch& global) const;
  // The batches evaluate() takes: every size-th from this rank's (all in a world of one).
  int64_t first_batch() const;
  int64_t batch_stride() const;
  // A signal seen by any rank (0: none) stops every rank after the same step: every rank asks equally often.
  int agree_stop(int signal) const;
  // The loss sums and the metrics' totals summed across the ranks, so that every rank holds the
  // one-process values (up to the order of the sums).
  void reduce_metrics(const std::vector<Metric*>& ms, double* sum, double* count) const;
  // A resumed epoch's running sums are merged into one rank's metrics only: reduce_metrics adds the rest.
  bool holds_resumed_sums() const { return root(); }
  // Every rank starts from rank 0's weights, however each came by its own: whether any were received.
  bool broadcast(Params& params) const;
  // Waits until every rank gets here (after rank 0 has put a killed --overwrite back, say).
  void barrier() const;
  // "train.batch_size 64 is the global batch: ..." for the log; "" in a world of one.
  std::string describe_batch(int64_t batch_size) const;

 private:
  Comm& comm_;
  Rng rank_dropout_{0};
  uint64_t epoch_key_ = 0;
};

// The loss sum and count, then each metric's state(): what reduce_metrics sums, and a resume state's
// `partial`.
std::vector<double> metric_state(const std::vector<Metric*>& ms, double sum, double count);
// Adds metric_state()'s metric part to the metrics.
void merge_metric_state(const std::vector<Metric*>& ms, const std::vector<double>& t);

}  // namespace rnntrain
