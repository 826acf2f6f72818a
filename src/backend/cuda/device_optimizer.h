// Keras 3 optimizers on the device: one kernel over the flat parameter buffer per step, with Keras'
// clipping (clipnorm per variable, global_clipnorm, clipvalue) and weight decay. The slots live on
// the device in the parameter buffer's layout, with host copies in Keras layout for checkpoints.
// Mirrors train/optimizer.cpp (same slot names and order, same float32 arithmetic).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/param_store.h"
#include "spec/config.h"

namespace rnntrain::cuda {

class DeviceOptimizer {
 public:
  // params: the host parameters (shapes for the host slot tensors); not kept.
  DeviceOptimizer(Gpu& gpu, ParamStore& store, const OptimizerSpec& spec, Params& params);

  // One update with learning rate lr at optimizer step t (1-based), from the store's gradients.
  void step(double lr, int64_t t);

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
  DeviceBuffer<double> sums_{"gradient norms"};
  DeviceBuffer<float> factors_{"clipping factors"};
};

}  // namespace rnntrain::cuda
