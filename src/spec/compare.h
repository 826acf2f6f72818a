// Models compared setting by setting (for --resume), and the typed key autotuning caches its choice
// under: what a measured plan depends on, each setting read from the structs, not from emitted text.
#pragma once
#include <string>
#include <vector>

#include "spec/config.h"

namespace rnntrain {

// One setting of a layer and its value, written exactly ("units", "64"; "kernel_initializer",
// "orthogonal(1)"); a wrapped layer's settings are keyed "layer.units".
struct Setting {
  std::string key, value;
  bool operator==(const Setting&) const = default;
};

// Every setting of a layer (its kind and name first), source positions aside.
std::vector<Setting> layer_settings(const LayerSpec& l);

// Where `now` differs from `then`: "layer 2 ('lstm'): units is 32, was 64", "3 layers, was 4", or ""
// when they are the same model (init_from and source positions aside).
std::string model_difference(const ModelSpec& then, const ModelSpec& now);

// What autotuning's measured choice depends on: the model, the optimizer and loss (their kernels
// are part of the step), the plan settings the config leaves open, the batch shape and the GPU.
struct AutotuneKey {
  ModelSpec model;
  OptimizerSpec optimizer;
  LossSpec loss;
  PlanSpec plan;
  int64_t batch = 0, timesteps = 0;
  std::string gpu;  // the GPU, its driver and cuDNN
  bool inference = false;  // timed forward-only (eval, predict) rather than training steps
  // Every setting, one "key=value" per line: the cache stores its hash, stable across builds and
  // machines (FNV-1a), as 16 hex digits.
  std::string text() const;
  std::string hash() const;
};

}  // namespace rnntrain
