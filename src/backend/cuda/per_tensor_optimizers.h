// The device update of the optimizers whose rule is not elementwise (spec/optimizers.h: kPerTensor;
// Adafactor, Muon): the clipped, decayed gradients and values are gathered into Keras layout (each
// parameter contiguous, row-major), updated there by whole parameters as model/per_tensor_optimizers.cpp
// does on the host (Muon's Newton-Schulz iteration with cuBLAS), and scattered back. Its state lives
// in Keras layout too. Its sums run in a fixed order, so data-parallel ranks stay bit for bit the
// same. DeviceOptimizer runs it in place of the elementwise kernel, after its loss-scale, regularizer
// and clipping stages; nothing waits for the host, so it is captured with the step.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/cuda/param_store.h"

namespace rnntrain::cuda {

class TensorOptimizer {
 public:
  // paths: the parameters' Keras variable paths (Muon's embedding rule).
  TensorOptimizer(Gpu& gpu, ParamStore& store, const OptimizerSpec& spec, Params& params,
                  const std::vector<std::string>& paths);
  // One update from the elementwise kernel's arguments (a.p, a.g, clipping, a.sched, a.skip, a.nonfinite).
  void apply(const k::OptArgs& a);
  // As the host optimizer lists them: Adafactor's r, c, velocity of each parameter; Muon's momentum
  // of each and velocity of its AdamW ones.
  std::vector<std::pair<std::string, Tensor*>> slots();
  void download();
  void upload();

 private:
  void newton_schulz(const k::TensorVar& t);
  struct Slot {
    std::string name;
    Tensor host;
    float* dev;
  };
  Gpu& gpu_;
  OptimizerSpec spec_;
  std::vector<Slot> slots_;
  std::vector<k::TensorVar> vars_;   // per parameter: where its elements and state are
  int64_t n_ = 0, nr_ = 0, nc_ = 0;  // Keras elements; Adafactor's r and c values
  DeviceBuffer<int64_t> pos_{"optimizer positions"};  // Keras element -> parameter store position
  DeviceBuffer<int32_t> var_{"optimizer variable ids"};
  DeviceBuffer<k::TensorVar> dvars_{"optimizer variables"};
  DeviceBuffer<float> g_{"optimizer gradients"}, p_{"optimizer values"};
  DeviceBuffer<float> s0_{"optimizer slot"}, s1_{"optimizer slot"};  // Adafactor: velocity; Muon: momentum, velocity
  DeviceBuffer<float> r_{"optimizer row moments"}, c_{"optimizer column moments"};
  DeviceBuffer<float> a_{"Newton-Schulz A"}, b_{"Newton-Schulz B"}, t_{"Newton-Schulz X"};
  DeviceBuffer<double> sums_{"optimizer norms"};  // per variable: sum p^2 (or x^2), sum u^2, sum r
};

}  // namespace rnntrain::cuda
