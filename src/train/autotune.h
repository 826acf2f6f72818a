// Plan candidates and their measurement: what `rnntrain bench` prints and what `plan.autotune` picks.
// A candidate is one way to run the model's cuDNN stacks (fused or per-layer, precision, algorithm);
// timing one builds an engine for it and runs complete training steps on one synthetic batch.
// Autotune caches its choice per GPU, cuDNN version, model, optimizer, loss and batch shape in a JSON
// file (plan.cache, default $XDG_CACHE_HOME/rnntrain/autotune.json, else ~/.cache/...).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/batch.h"
#include "core/rng.h"
#include "model/params.h"
#include "spec/config.h"

namespace rnntrain {

class Comm;

// What a candidate is timed on: complete training steps (train, bench), or forward-only steps as
// eval and predict run them (each one's loss read back before the next).
enum class Workload { Training, Inference };

struct PlanChoice {
  FuseMode fuse = FuseMode::Auto;
  Precision precision = Precision::Fp32;
  RnnAlgo algo = RnnAlgo::Standard;
  std::string name() const;  // "fused/fp16/persist_static", "per-layer/fp32/standard"
};

// Which candidates to consider; empty lists mean the defaults below.
struct CandidateFilter {
  std::vector<Precision> precisions;  // default: fp32, tf32, fp16, bf16 (only the configured one if not auto and autotuning)
  std::vector<RnnAlgo> algos;         // default: standard, plus persist_static and wavefront for fp16/bf16
};

// The GPU candidates for cfg: fused (plan.fuse auto) and, when its plan differs, per-layer (never),
// or only the one plan.fuse always / never pins; each with the filter's precisions and algorithms.
// cuDNN's persistent algorithms only where the model has no masks (they cannot run padded sequences);
// wavefront only in fp16 and bf16. Empty when the model has no cuDNN stack.
std::vector<PlanChoice> plan_candidates(const Config& cfg, const CandidateFilter& filter);

// One batch of the model's input shape: x features uniform in [-1, 1) or token ids in [1, input_dim);
// targets valid for the loss. min_length > 0: per-sequence lengths uniform in [min_length, T].
Batch synthetic_batch(const Config& cfg, int64_t T, int64_t min_length, Rng& rng);

struct Timing {
  std::vector<double> ms;  // ms/step of each repeat
  double median_ms = 0, last_loss = 0;
  double peak_device_mib = -1;  // -1: not known (CPU)
  double graph_share = 0;       // of the timed steps, the share run as CUDA graphs (plan.graphs)
  int64_t graph_captures = 0;   // of those, the steps that captured their graph
  std::string device;
  std::string error;  // not empty: the candidate failed (e.g. cuDNN does not support it); nothing else is set
};

// Builds an engine for cfg with `choice` applied and times training steps on `batches`, taken in turn
// (enqueued back to back, their losses collected, as `train` runs without metrics), or with
// Workload::Inference evaluation steps (forward and loss, as `eval` runs them): `warmup` untimed
// steps, then `repeats` loops of `steps` steps. Failures are returned in Timing::error. With `ranks`
// the steps are data-parallel (make_engine): every rank must time the same candidate at once.
Timing time_plan(const Config& cfg, const PlanChoice& choice, const Params& init, const std::vector<Batch>& batches,
                 int64_t warmup, int64_t repeats, int64_t steps, Comm* ranks = nullptr,
                 Workload workload = Workload::Training);

// cfg with plan.precision and plan.algo resolved (never auto) for a batch of T steps: on the CPU
// fp32/standard; with plan.autotune on a GPU the fastest candidate (plan.fuse included) for the
// workload (training for train, inference for eval and predict: a choice of its own), from the cache
// or measured now and cached; otherwise unchanged.
Config resolve_plan(const Config& cfg, const Params& init, int64_t T, Workload workload = Workload::Training);

double median(std::vector<double> v);

}  // namespace rnntrain
