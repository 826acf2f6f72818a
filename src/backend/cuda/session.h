// The CUDA backend as the training engine sees it: one model, its loss and its optimizer on the GPU.
// A step is forward, the loss and its gradient (own kernels), backward, clipping and the update;
// losses and metrics are summed on the device, and predictions come back to the host only when asked.
// The backend registry (backend/engine_registry.cpp) wraps this in the Engine interface; nothing else
// includes it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/batch.h"
#include "core/rng.h"
#include "model/params.h"
#include "plan/plan.h"
#include "spec/config.h"
#include "model/metrics.h"

namespace rnntrain {
class Comm;
}

namespace rnntrain::cuda {

// "" when a GPU and cuDNN 9 are usable here; otherwise why not, for the user.
std::string unavailable_reason();
// Free memory on the current GPU, in bytes (cudaMemGetInfo).
int64_t free_device_bytes();

struct StepLoss {
  double sum = 0.0, count = 0.0;  // as LossValue: sum of per-position losses, unmasked positions
  std::vector<double> metrics;    // per metric form of the step: its per-position values summed
  double metric_count = 0.0;      // the positions summed in metrics: count, or this rank's share of it
  bool params_finite = true;      // training steps: no trained parameter became inf or NaN in the update
  double penalty = 0.0;           // the weight regularizers' penalty (LossValue::penalty)
};

// Training steps run as CUDA graphs (captured or replayed) in this process so far (for tests and
// bench reports).
int64_t graph_steps();
// Of those, the steps that captured a graph (the rest replayed one).
int64_t graph_captures();

class Session {
 public:
  // params: canonical host parameters, uploaded now; the session keeps a reference for download().
  // With `ranks` (data parallelism, backend/cuda/nccl.h) a training step's batch is this rank's share
  // of the global batch: the loss gradient is scaled by 1 / the global batch's positions (summed
  // across the ranks on the device), and the gradients and the loss sum are summed across the ranks
  // before the update, all inside the step (and its CUDA graph). Every rank then takes the same update,
  // fp16 loss-scale skips included. A rank whose share is empty still takes part.
  Session(const Config& cfg, const ResolvedModel& model, Params& params, Comm* ranks = nullptr);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  std::string device_name() const;

  // One optimizer step at step t (1-based) with learning rate lr, enqueued without waiting for the
  // GPU: its loss, and the sums of `metrics` (computed on the device), are copied to host memory when
  // the GPU gets there, and collect() returns them. At most kInFlight steps wait to be collected;
  // enqueueing another first waits for the oldest (its result is kept for collect()).
  // With plan.graphs, a step on shapes an earlier step ran on (uncaptured, allocating nothing) is
  // captured as a CUDA graph and replayed from then on: the host then only checks the batch, uploads
  // it, the learning rate and the dropout seed, and launches the graph. Masked steps too, where the
  // model runs them at full length (CudaModel::full_length).
  static constexpr int kInFlight = 8;
  void enqueue_train_step(const Batch& b, double lr, int64_t t, Rng& rng, const std::vector<MetricForm>& metrics);
  // The results of enqueued steps, oldest first: those the GPU has finished, or all of them when wait.
  std::vector<StepLoss> collect(bool wait);
  // Inference mode (no dropout), no update; with plan.graphs replayed as CUDA graphs as training
  // steps are (a graph per kind of step and shape).
  StepLoss eval_step(const Batch& b, Tensor* pred, Tensor* mask);
  Tensor predict(const Batch& b);
  // Forward in training mode, loss and backward only: the gradients land in the params' grads (host);
  // dx (when not null) receives the gradient w.r.t. feature inputs (empty for token ids).
  StepLoss gradients(const Batch& b, Rng& rng, Tensor* pred, Tensor* dx);

  // Parameters and optimizer slots: device -> host params (and slots()), and back.
  void download();
  void upload();
  std::vector<std::pair<std::string, Tensor*>> slots();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rnntrain::cuda
