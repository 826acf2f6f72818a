// Keras 3 optimizers (SGD with momentum/nesterov, Adam, AdamW, RMSprop, Adagrad) over host
// parameters, with Keras' clipping order: clipnorm per variable, clipvalue elementwise,
// global_clipnorm over all. State (slots and the iteration count) is exposed for checkpoints.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/params.h"

namespace rnntrain {

struct NamedTensor {
  std::string name;  // e.g. "m/3" (slot m of the 4th parameter, in Params::all() order)
  Tensor* tensor;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Clips the gradients as configured, then updates every parameter with learning rate lr.
  virtual void step(double lr) = 0;
  int64_t iterations() const { return iterations_; }
  void set_iterations(int64_t n) { iterations_ = n; }
  // Every slot tensor, in a fixed order; checkpoints save and restore them in place.
  virtual std::vector<NamedTensor> slots() = 0;

 protected:
  int64_t iterations_ = 0;
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec, std::vector<Param*> params);

// Gradient clipping, shared with the trainer's tests: returns the global norm before clipping.
double clip_gradients(const OptimizerSpec& spec, const std::vector<Param*>& params);

}  // namespace rnntrain
