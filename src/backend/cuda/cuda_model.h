// The CUDA backend's model: the planner's stages as device stages (cuDNN stacks, generic RNNs, other
// layers), the flat parameter store, and forward/backward over a batch. Forward keeps what backward
// needs inside the stages; outputs stay on the device. Not the loss or the optimizer: session.cpp.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/param_store.h"
#include "backend/cuda/stage.h"
#include "plan/plan.h"

namespace rnntrain::cuda {

class CudaModel {
 public:
  // Places and uploads `params` (canonical Keras layout; not kept) for `model` (kept by reference: it
  // must outlive this; its plan made for plan.fuse). plan: the stacks' precision and algorithm (not
  // auto: the autotuner resolves those before an engine is built).
  CudaModel(Gpu& gpu, const ResolvedModel& model, const PlanSpec& plan, Params& params, uint64_t seed);
  ~CudaModel();

  // A batch's inputs on the device: x (and the length mask), uploaded after the host checks that the
  // stages rely on (input shape, lengths, token ids).
  struct Input {
    DevTensor x;
    MaskState mask;
    const Batch* batch = nullptr;
  };
  // x: [B, T, F] features or [B, T] token ids; b.lengths optional. The memory stays valid until the
  // upload after next (double-buffered: the next batch uploads while this one runs).
  Input upload(const Batch& b);
  // Draws the dropout seed of the next training forward from rng and uploads it on the stream (once
  // per training step, outside any graph capture; nothing is drawn when the model has no dropout).
  void new_seed(Rng& rng);
  // Returns the output on the device ([B, K] or [B, T, K]), valid until the next forward. Training
  // uses the seed of the last new_seed().
  DevTensor forward(const Input& in, bool training);
  DevTensor forward(const Batch& b, bool training) { return forward(upload(b), training); }
  // Whether a training step on a given shape is the same GPU work for every batch (dropout masks
  // come from the device seed), so that it can be captured as a CUDA graph: a model that makes no
  // mask from the data, or one whose masks run at full length (full_length()).
  bool capturable() const { return capturable_; }
  // Masked batches (lengths, Masking or mask_zero as the first layer) run the cuDNN stacks over every
  // step with the masks applied around them from device lengths, when no other layer makes a mask
  // and no cuDNN stack is bidirectional. Then batches with lengths are captured too.
  bool full_length() const { return full_length_; }
  // The mask reaching the output, when the output has a time axis and a mask reaches it.
  MaskState& out_mask() { return out_mask_; }
  // dy: gradient of the last output. Adds into store().g(); returns dx for feature inputs when asked.
  // grads_ready(first), when given, is called as each stage's backward is enqueued (last stage first):
  // store().g() from `first` on is then final, for work that overlaps the rest of backward.
  // dy_scale: the device float dy is multiplied by (the loss scale; null: 1), which the gradients
  // backward adds of its own (activity regularizers) take too.
  DevTensor backward(const DevTensor& dy, bool need_input_grad,
                     const std::function<void(int64_t first)>& grads_ready = {}, const float* dy_scale = nullptr);
  // The activity regularizers' penalty of the last forward (CpuModel::forward), a device double;
  // null when the model has none.
  const double* activity_penalty() const { return activity_sum_.get(); }
  // Per stage, its parameters' [first, first + n) in store() (stage order is offset order).
  const std::vector<std::pair<int64_t, int64_t>>& param_ranges() const { return ranges_; }

  ParamStore& store() { return store_; }
  const std::string& summary() const { return summary_; }  // one line per stage, for the log

 private:
  Gpu& gpu_;
  const ModelSpec& spec_;
  ParamStore store_;
  std::vector<std::unique_ptr<DeviceStage>> stages_;
  std::vector<std::string> names_;  // per stage, for the profiler
  std::vector<Regularizer> activity_;  // per stage: the activity regularizer on its output
  std::vector<DevTensor> outs_;        // per stage: its output in the last forward
  DeviceBuffer<double> activity_sum_{"activity penalty"};  // allocated when a stage has an activity regularizer
  std::vector<std::pair<int64_t, int64_t>> ranges_;  // per stage, its parameters' [first, first + n) in store_
  bool token_input_ = false;
  bool capturable_ = true;
  bool full_length_ = false;
  bool cudnn_ = false;  // the model has a cuDNN stack
  bool stacks_see_masks_ = true;  // GpuPlan::stacks_see_masks
  const LayerSpec* mask_first_ = nullptr;  // the first layer, when it makes a mask (Masking, mask_zero)
  bool dropout_ = false;  // the model draws dropout masks in training
  StepValues seed_{gpu_, sizeof(uint64_t), "dropout seed"};
  Uploader x_up_{gpu_};  // the batch's inputs
  DeviceBuffer<uint8_t> mask_{"batch mask"};
  MaskState out_mask_;
  std::string summary_;
};


}  // namespace rnntrain::cuda
