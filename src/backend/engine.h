// The backend interface the trainer drives: one model, its loss and its optimizer on one device.
// A training step is forward, loss, backward, clipping and the optimizer update; the trainer never
// sees activations. Parameters are exchanged in the canonical host layout (model/params.h).
// The CPU engine is in cpu/engine_cpu.cpp, the CUDA one in cuda/cuda_engine.cpp; make_engine
// (engine_registry.cpp) picks one.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/batch.h"
#include "model/params.h"
#include "model/loss.h"
#include "model/metrics.h"
#include "model/optimizer.h"
#include "plan/plan.h"

namespace rnntrain {

class Comm;

// What an engine can do, for the trainer and tools (they never test its name).
struct EngineTraits {
  bool async_steps = false;    // enqueue_train_step returns before the step has run (a device queue)
  bool device_memory = false;  // its buffers live in device memory, counted by device_peak_mib()
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string device_name() const = 0;  // for logs: "cpu", "cuda (NVIDIA H200 ...)"
  virtual EngineTraits traits() const { return {}; }
  // The model it runs, resolved once (spec, shapes, plan, weight offsets): what callers read instead
  // of inferring shapes or planning again.
  virtual const ResolvedModel& model() const = 0;
  // One optimizer step on the batch; updates the metrics with the batch's predictions.
  virtual LossValue train_step(const Batch& batch, double lr, const std::vector<Metric*>& metrics) = 0;
  // The same step without waiting for a device: the metrics are updated, and the loss handed to
  // collect_losses(), once the device has finished the step (metrics are read before any later
  // step's). collect_losses() returns the losses of the steps enqueued since its last call, oldest
  // first: those finished, or all of them when wait. The metrics must live until their steps are
  // collected. The defaults run train_step() at once.
  virtual void enqueue_train_step(const Batch& batch, double lr, const std::vector<Metric*>& metrics) {
    done_.push_back(train_step(batch, lr, metrics));
  }
  virtual std::vector<LossValue> collect_losses(bool wait) {
    (void)wait;
    return std::exchange(done_, {});
  }
  // Loss and metrics without updating anything (inference mode: no dropout).
  virtual LossValue eval_step(const Batch& batch, const std::vector<Metric*>& metrics) = 0;
  // Model output for the batch's inputs (inference mode).
  virtual Tensor predict(const Batch& batch) = 0;
  // Parameters and optimizer state in the canonical host layout. A device engine copies them back
  // from the device in host_params() and to the device in params_changed().
  virtual Params& host_params() = 0;
  virtual void params_changed() = 0;
  virtual Optimizer& optimizer() = 0;
  // For tests and tools: forward in training mode, the loss and backward, with no clipping, no
  // weight regularizers (activity regularizers' gradients are part of backward; their penalty is not in
  // the loss) and no update. The gradients land in host_params()'s grads (values
  // unchanged); pred and dx (when not null) receive the output and the gradient w.r.t. feature
  // inputs (empty for token ids).
  virtual LossValue gradients(const Batch& batch, Tensor* pred, Tensor* dx) = 0;

 private:
  std::vector<LossValue> done_;  // the default enqueue_train_step's results
};

// Builds the engine for cfg.device: cpu; cuda (a UsageError saying why when this build has no CUDA
// backend or no GPU is visible); auto takes the GPU when one is usable. Takes the initial
// parameters; `dropout_rng` is the trainer's stream for dropout masks (its state is checkpointed) and
// must outlive the engine; cfg is copied. With `ranks` (a launched world, docs/distributed.md) each
// training step is this rank's share of a global batch: the loss and the gradients are the global
// batch's, summed across the ranks (MPI on the CPU, NCCL on GPUs, one GPU per process).
// Defined in engine_registry.cpp, the one file outside backend/cuda that knows CUDA exists.
std::unique_ptr<Engine> make_engine(const Config& cfg, Params params, Rng& dropout_rng, Comm* ranks = nullptr);

// "" when the CUDA backend can run here; otherwise why not (no CUDA in this build, no GPU visible).
std::string gpu_unavailable_reason();
// Whether make_engine(cfg) builds the CUDA engine: cfg.device is not cpu and a GPU is usable.
bool trains_on_gpu(const Config& cfg);
// The GPU, driver, runtime and cuDNN versions in one line ("" without a usable GPU).
std::string gpu_description();
// The most device memory (MiB) the GPU engines' buffers held at once since reset_device_peak()
// (cuDNN's and cuBLAS' handles not counted); -1 without the CUDA backend.
double device_peak_mib();
void reset_device_peak();
// Free GPU memory in bytes; -1 without a usable GPU.
int64_t gpu_free_bytes();
// Training steps replayed as CUDA graphs in this process so far (plan.graphs); 0 without the CUDA backend.
int64_t gpu_graph_steps();
int64_t gpu_graph_captures();  // of those, the ones that captured the graph
// Stack forward passes run by rnntrain's wavefront kernels in this process so far (plan.algo:
// wavefront; stacks they cannot run count nothing); 0 without the CUDA backend.
int64_t gpu_wavefront_passes();
int64_t gpu_wavefront2_passes();  // of them, those on the second design's forward kernel
int64_t gpu_wavefront2_backward_passes();  // stack backward passes on the second design's backward kernel

// How cfg.device runs the resolved model, for `rnntrain plan`: on a usable GPU, the planner's GPU plan
// (plan/gpu_plan.h: masks, split bidirectional stacks, own kernels; with plan.precision or plan.algo
// auto, the plan for bf16 and the wavefront kernels, which autotune measures against cuDNN); on the
// CPU, which stacks run on oneDNN and which on the reference ops, and why.
std::string describe_execution(const Config& cfg, const ResolvedModel& model);
// The CPU libraries' settings that only the environment gives, set before they load: re-executes the
// program with them (backend/cpu/blas_env.h). Call first in main().
void configure_cpu_libraries(char** argv);
// The CPU BLAS's thread count and build configuration, for reports.
int blas_threads();
std::string blas_config();
// The CPU engine (engine_cpu.cpp), whatever cfg.device says.
std::unique_ptr<Engine> make_cpu_engine(const Config& cfg, Params params, Rng& dropout_rng, Comm* ranks = nullptr);

}  // namespace rnntrain
