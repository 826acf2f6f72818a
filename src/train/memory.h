// How much memory a model needs at least (its parameters, their gradients and optimizer slots, and
// one batch's activations), checked against what the machine has before anything is allocated: a
// model that cannot fit is one clear error, not an allocation failure after minutes of loading or a
// machine driven into swap. A lower bound, not a prediction of the peak.
#pragma once
#include <cstdint>
#include <string>

#include "spec/config.h"

namespace rnntrain {

struct MemoryNeed {
  double params = 0.0;       // parameter count
  double weights = 0.0;      // bytes: the values and their gradients
  double slots = 0.0;        // bytes: the optimizer's slots (training only)
  double activations = 0.0;  // bytes: one batch's layer outputs (and, training, the recurrent tapes and gradients)
  double total() const { return weights + slots + activations; }
};

// For batches of train.batch_size sequences of `timesteps` steps (<= 0: one step).
MemoryNeed estimate_memory(const Config& cfg, int64_t timesteps, bool training);

// RuntimeError naming the need and the limit when the model cannot fit: on the host for the CPU
// engine, on the GPU (its free memory) when the engine will run there.
void check_memory(const Config& cfg, int64_t timesteps, bool training);

}  // namespace rnntrain
