// The CUDA model's internal stage interface: one stage per planner stage (a cuDNN stack, a generic
// recurrent layer, or one other layer). forward() keeps what backward() needs inside the stage and
// returns a view of its own output buffer; backward() returns a view of its own input-gradient
// buffer. Views stay valid until the stage's next forward. Not public API (CudaModel is).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/gpu.h"
#include "backend/cuda/param_store.h"
#include "core/batch.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "plan/gpu_plan.h"
#include "spec/config.h"

namespace rnntrain::cuda {

// A device array with a shape; does not own its memory.
struct DevTensor {
  float* ptr = nullptr;
  Shape shape;
  int64_t numel() const { return shape.empty() ? 0 : shape_numel(shape); }
  int64_t dim(int i) const { return shape[i < 0 ? shape.size() + i : i]; }
};

// The [B, T] step mask reaching a stage (1 = the step is used), on the device with a lazily made
// host copy. A stage that changes it writes a buffer of its own, so earlier stages' views stay valid.
struct MaskState {
  const uint8_t* dev = nullptr;  // null: no mask
  int64_t B = 0, T = 0;
  std::shared_ptr<std::vector<uint8_t>> host;  // null until someone needs it
  // The upload computed the mask of the model's first layer (Masking, or Embedding with mask_zero)
  // from the host batch: that layer keeps it instead of making its own (CudaModel::upload).
  bool includes_first = false;
  bool present() const { return dev != nullptr; }
  const std::vector<uint8_t>& on_host(Gpu& gpu);
  void clear() { *this = MaskState(); }
};

// The lengths of a right-padded [B, T] mask (each sample's steps before its first masked one).
// Throws a DataError starting with `what` when a sample has an unmasked step after a masked one:
// cuDNN takes lengths, not masks.
std::vector<int32_t> mask_lengths(const std::vector<uint8_t>& m, int64_t B, int64_t T, const std::string& what);

struct RunInfo {
  bool training = false;
  const uint64_t* seed = nullptr;  // training: the step's dropout seed, on the device
  uint64_t* sites = nullptr;       // dropout calls so far in this forward: each takes the next site
  const Batch* batch = nullptr;    // the host batch (token ids for Embedding's checks)
  uint64_t next_site() const { return (*sites)++; }
};

class DeviceStage {
 public:
  virtual ~DeviceStage() = default;
  // Phase 1 of ParamStore: reserve device space for this stage's parameters.
  virtual void reserve(ParamStore& store) = 0;
  // Phase 3 (after ParamStore::allocate): say where each of its parameters lives.
  virtual void place(ParamStore& store) = 0;
  // Host checks of a batch that forward() relies on (token ids in range). Run for every batch before
  // its upload, also when the step is a replayed CUDA graph and forward() is not called.
  virtual void check(const Batch&) const {}
  virtual DevTensor forward(const DevTensor& x, MaskState& mask, const RunInfo& run) = 0;
  // dy: gradient of forward's output. Adds into the store's gradients; returns dx (ptr null when
  // need_dx is false or the input has no gradient).
  virtual DevTensor backward(const DevTensor& dy, bool need_dx) = 0;
};

// What every stage builder gets.
struct StageEnv {
  Gpu& gpu;
  ParamStore& store;
  uint64_t seed;  // the run's seed, for cuDNN's dropout states
  Precision precision = Precision::Fp32;  // of the cuDNN stacks (never Auto here)
  RnnAlgo algo = RnnAlgo::Standard;       // of the cuDNN stacks (never Auto here)
  // Masked batches run the unidirectional cuDNN stacks over every step, with the masks applied
  // around the calls from device lengths, so that a masked step can be captured as a CUDA graph
  // (GpuPlan::full_length, plan/gpu_plan.h, decides).
  bool full_length = false;
};

// A layer's activation over rows of n (Dense, Conv1D; basic_stages.cpp): y = act(y + bias), softmax
// along the rows, the pre-activation kept in pre where act_grad_from_input(act); and d loss / d pre from
// dy: dy itself when linear, else written to d (from y, or from pre where the derivative needs it).
void bias_activate(Gpu& gpu, Activation act, float* y, const float* bias, int64_t rows, int64_t n,
                   DeviceBuffer<float>& pre);
const float* activation_grad(Gpu& gpu, Activation act, const float* y, const float* pre, const float* dy, int64_t rows,
                             int64_t n, DeviceBuffer<float>& d);

// Builders, one per stage kind (basic_stages.cpp, cudnn_stack.cpp, generic_rnn.cpp). `first_param`
// is the Params::all() index of the layer's first weight.
std::unique_ptr<DeviceStage> make_embedding_stage(const StageEnv& env, const LayerSpec& l, size_t first_param);
std::unique_ptr<DeviceStage> make_masking_stage(const StageEnv& env, const LayerSpec& l);
std::unique_ptr<DeviceStage> make_dropout_stage(const StageEnv& env, const LayerSpec& l);
// owner: the Dense, or the TimeDistributed wrapping it (d = *owner.inner).
std::unique_ptr<DeviceStage> make_dense_stage(const StageEnv& env, const LayerSpec& owner, const LayerSpec& d, int64_t input,
                                        size_t first_param);
// Conv1D, the 1D and global poolings, LayerNormalization, Flatten, SpatialDropout1D and Activation
// (sequence_stages.cpp); `input`: the features a step has.
std::unique_ptr<DeviceStage> make_sequence_stage(const StageEnv& env, const LayerSpec& l, int64_t input,
                                                 size_t first_param);
// One LSTM/GRU/SimpleRNN or Bidirectional layer that cuDNN cannot run (generic_rnn.cpp).
std::unique_ptr<DeviceStage> make_generic_rnn_stage(const StageEnv& env, const LayerSpec& l, int64_t input, size_t first_param);
// Consecutive recurrent layers (Dropout layers between them included, in model order) as one cuDNN
// RNN (cudnn_stack.cpp). first_params: the first weight's index of each recurrent layer.
// `how`: the planner's decision on the own kernels (plan/gpu_plan.h).
std::unique_ptr<DeviceStage> make_cudnn_stack_stage(const StageEnv& env, const std::vector<const LayerSpec*>& layers,
                                              int64_t input, const std::vector<size_t>& first_params,
                                              const GpuStagePlan& how);
// One Bidirectional LSTM/GRU layer (no dropout) as two unidirectional cuDNN stacks at full length,
// the backward one on each sequence reversed within its length (split_bidirectional.cpp): how a
// bidirectional stack runs when masked steps are captured (StageEnv::full_length).
std::unique_ptr<DeviceStage> make_split_bidirectional_stage(const StageEnv& env, const LayerSpec& l, int64_t input,
                                                            size_t first_param, const GpuStagePlan& how);

}  // namespace rnntrain::cuda
