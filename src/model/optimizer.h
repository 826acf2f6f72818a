// Keras 3 optimizers (spec/optimizers.h: SGD, Adam, AdamW, RMSprop, Adagrad) over host parameters,
// with Keras' clipping (one of: clipnorm per variable, global_clipnorm over all, clipvalue elementwise). State (slots and the iteration count) is exposed for checkpoints.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/chunks.h"
#include "model/params.h"

namespace rnntrain {

struct NamedTensor {
  // "<slot>/<i>": Keras' slot name and the parameter's index in Params::all() order, e.g.
  // "momentum/3", "velocity/3", "velocity_hat/3", "average_gradient/3", "accumulator/3".
  std::string name;
  Tensor* tensor;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Clips the gradients in place as configured, applies the weight decay (p -= lr*wd*p, any kind,
  // when weight_decay > 0), then updates every parameter with learning rate lr; iterations += 1.
  virtual void step(double lr) = 0;
  int64_t iterations() const { return iterations_; }
  void set_iterations(int64_t n) { iterations_ = n; }
  // Every slot tensor, in a fixed order; checkpoints save and restore them in place.
  virtual std::vector<NamedTensor> slots() = 0;
  // Where step() may run its elementwise updates, chunks of the parameters' elements, on several
  // threads (core/chunks.h; the CPU engine's BLAS threads); null: here. The same bits either way.
  void set_chunks(const ChunkRunner* run) { chunks_ = run; }

 protected:
  int64_t iterations_ = 0;
  const ChunkRunner* chunks_ = nullptr;
};

// The parameters must outlive the optimizer. Throws ConfigError when more than one of clipnorm,
// clipvalue and global_clipnorm is set (Keras refuses that too). paths: the parameters' Keras
// variable paths (model/params.h: keras_variable_paths), which Muon reads; their names when empty.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec, std::vector<Param*> params,
                                          const std::vector<std::string>& paths = {});

// The kinds whose update is not elementwise (spec/optimizers.h: kPerTensor), from model/per_tensor_optimizers.cpp.
std::unique_ptr<Optimizer> make_tensor_optimizer(const OptimizerSpec& spec, std::vector<Param*> params,
                                                 const std::vector<std::string>& paths);

// Keras' decoupled weight decay of one parameter in place: p -= p * lr * wd (nothing when wd <= 0).
void decay_weights(Tensor& value, double lr, double wd);

// Gradient clipping in place, shared with the trainer's tests: returns the global norm before clipping
// where clipnorm or global_clipnorm is set, else 0 (no norm is summed).
double clip_gradients(const OptimizerSpec& spec, const std::vector<Param*>& params);

}  // namespace rnntrain
