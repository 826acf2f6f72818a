// Keras 3 optimizers on the device: one kernel over the flat parameter buffer per step, with Keras'
// clipping (clipnorm per variable, global_clipnorm, clipvalue) and weight decay. The slots live on
// the device in the parameter buffer's layout, with host copies in Keras layout for checkpoints.
// Slots and update rule are the kind's descriptor's (spec/optimizers/*.h), as in model/optimizer.cpp,
// so both backends have the same slots and the same float32 arithmetic. Nothing in a step
// waits for the host: clipping factors are computed on the device. With a dynamic loss scale (fp16
// stacks) the gradients arrive multiplied by it; step() unscales them and skips the update when any
// is not finite, then adjusts the scale, all on the device. Keras' weight regularizers add their
// gradients (after unscaling, before clipping) and their penalty there too; Keras' weight
// constraints project the updated weights (a kernel summing each slice's squares, one applying the
// rule). Lamb's trust ratio is a second stage over per-variable sums; the kinds whose update is per
// tensor (Adafactor, Muon) run in TensorOptimizer instead of the elementwise kernel.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/param_store.h"
#include "backend/cuda/per_tensor_optimizers.h"
#include "spec/constraint_rule.h"
#include "spec/config.h"

namespace rnntrain::cuda {

class DeviceOptimizer {
 public:
  // params: the host parameters (shapes for the host slot tensors); not kept. regs, constraints: each
  // parameter's weight regularizer and constraint (Params::all() order; model/params.h).
  // paths: the parameters' Keras variable paths (model/params.h), which Muon reads.
  DeviceOptimizer(Gpu& gpu, ParamStore& store, const OptimizerSpec& spec, Params& params,
                  const std::vector<Regularizer>& regs, const std::vector<Constraint>& constraints,
                  const std::vector<std::string>& paths);
  DeviceOptimizer(const DeviceOptimizer&) = delete;
  DeviceOptimizer& operator=(const DeviceOptimizer&) = delete;

  // One update from the store's gradients, in two parts so that a step can be captured (CUDA graph):
  // set_step() copies the learning rate lr and the bias corrections of optimizer step t (1-based) to
  // the device on the stream (from pinned memory: the host does not wait); apply() enqueues the
  // kernels, which read them there, and sets the device double *nonfinite to 1 when an updated
  // parameter is inf or NaN (the caller zeroes it; null: not checked), and adds the regularizers'
  // penalty at the values before the update to the device double *penalty (the caller zeroes it).
  void set_step(double lr, int64_t t);
  void apply(double* nonfinite = nullptr, double* penalty = nullptr);
  // Enqueues the regularizers' penalty at the current values, added to *penalty (evaluation).
  void penalty(double* penalty);
  // Data parallelism: every rank's gradients are the same, but the sums behind the clipping factors
  // and Lamb's trust ratios add in an order that differs between ranks (atomics), so rank 0's are sent to all
  // (share(factors, n) on the stream) to keep the ranks' weights bit for bit the same.
  void share_clip_factors(std::function<void(float* factors, int64_t n)> share) { share_ = std::move(share); }

  // Turns on dynamic loss scaling (initial scale 2^15, doubled after 2000 finite steps). The loss
  // gradient must then be multiplied by *loss_scale() (a device float); null when off.
  void enable_loss_scale();
  const float* loss_scale() const { return scaled_ ? scale_.get() : nullptr; }

  // Host slot tensors, "<slot>/<i>" with i the Params::all() index; refreshed by download().
  std::vector<std::pair<std::string, Tensor*>> slots();
  void download();
  void upload();

 private:
  Gpu& gpu_;
  ParamStore& store_;
  OptimizerSpec spec_;
  struct Group {
    std::string name;
    std::vector<Tensor> host;  // one per parameter
    DeviceBuffer<float> dev{"optimizer slot"};
  };
  std::vector<Group> groups_;
  std::unique_ptr<TensorOptimizer> tensor_;  // the kinds whose update is per tensor (Adafactor); groups_ empty
  unsigned copy_slots_ = 0;  // bit k: slot k starts as the parameter (OptimizerSlot::from_value)
  DeviceBuffer<float> scratch_{"optimizer update"};  // Lamb's update before its trust ratio; else empty
  const int32_t* var_ids_ = nullptr;  // the store's, when clipping by norm or regularizing
  DeviceBuffer<float> regs_{"regularizer factors"};  // l1, l2 per variable; empty without regularizers
  // Constraints: each element's slice (-1: none), each slice's rule and sum of squares; empty without.
  DeviceBuffer<int32_t> slice_{"constraint slices"};
  DeviceBuffer<ConstraintRule> rules_{"constraint rules"};
  DeviceBuffer<double> slice_sums_{"constraint norms"};
  int64_t slices_ = 0;
  DeviceBuffer<double> sums_{"gradient norms"};
  DeviceBuffer<float> factors_{"clipping factors"};
  bool scaled_ = false;
  DeviceBuffer<float> scale_{"loss scale"};
  DeviceBuffer<int> scale_state_{"loss scale state"};  // [0]: finite steps in a row, [1]: non-finite flag
  StepValues sched_;  // set_step()'s StepScalars and decay (k::OptArgs::sched)
  std::function<void(float*, int64_t)> share_;  // clipping factors and trust ratios, rank 0's to all
};

}  // namespace rnntrain::cuda
