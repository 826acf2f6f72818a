// Training checkpoints and weight files. A checkpoint is a Keras legacy full-model .h5 that Keras'
// load_model opens compiled: model_config, training_config, /model_weights (layer_names,
// weight_names, Keras order and shapes), and in a /rnntrain group Keras ignores, the optimizer's
// variables (/rnntrain/optimizer_weights: iteration, learning_rate and every slot, in Keras 3's order
// and names) and rnntrain's resume state. Not at the root, where Keras writes them: Keras 3.15's
// legacy loader then builds the optimizer over no variables and `fit` fails (docs/keras.md has the
// recipe that restores them in Keras). Written to a temporary file and renamed.
#pragma once
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "io/keras_train.h"
#include "model/params.h"

namespace rnntrain {

// Everything besides weights that a resumed run needs to continue exactly.
struct ResumeState {
  int64_t epoch = 0;       // epochs completed
  int64_t iterations = 0;  // optimizer steps taken
  // The learning rate of the next step (the schedule's value now; Keras' optimizer holds it), when
  // known; files store train.optimizer.learning_rate otherwise.
  std::optional<double> learning_rate;
  // Read from a file Keras wrote: no epoch count (epoch 0) and no state of rnntrain's; the trainer
  // derives the epoch from the iterations, as Keras' initial_epoch would continue.
  bool keras = false;
  Rng::State rng{};        // the trainer's stream (shuffling and dropout)
  std::vector<double> schedule, early_stopping, checkpoint;  // their state() vectors
  std::string history_json;  // the history so far
  std::string config_yaml;   // the effective config that produced it
  // A run stopped inside an epoch (by a signal): the steps done of epoch `epoch` + 1 (0: none, the
  // run stopped between epochs), the RNG state that epoch's shuffle started from, and its running
  // sums {loss sum, loss count, then each metric's total and count}.
  int64_t step = 0;
  Rng::State epoch_rng{};
  std::vector<double> partial;
  // How that epoch's batches were drawn (plan_epoch's settings: batch_size, shuffle, bucketing,
  // bucket_window) and how many of its samples were trained: a resume with other settings goes on
  // from that sample (absent from older files: 0, taken from the config).
  struct Drawn {
    int64_t batch_size = 0, bucket_window = 0, samples = 0;
    bool shuffle = true, bucketing = false;
  } drawn;
  // The training data the run saw: rows and a 64-bit fingerprint of its inputs and targets (0, 0
  // when unknown), so that a resume can tell when the data changed.
  uint64_t data_rows = 0, data_hash = 0;
};

void save_checkpoint(const std::string& path, const ModelSpec& model, const Params& params,
                     const OptimizerSlots& slots, const ResumeState& state);

// Reads weights into params (positional over weighted layers, as Keras' topological load), with
// layer-count and shape checks that name the layer. Accepts a checkpoint and every Keras format
// (legacy .h5 full or weights-only, .weights.h5, .keras; CuDNNLSTM/CuDNNGRU weights converted).
void load_weights(const std::string& path, const ModelSpec& model, Params& params);

// Whether path is an HDF5 file with optimizer variables: an rnntrain checkpoint or export, or a
// compiled model Keras saved as .h5.
bool has_optimizer_state(const std::string& path);

// Reads weights, optimizer slots (restored in place, in Keras' order) and the resume state. A Keras-
// written full-model .h5 with optimizer_weights (model.save of a compiled model) resumes too: `keras`
// set, the file's iteration count and learning rate, a fresh RNG stream and no history.
ResumeState load_checkpoint(const std::string& path, const ModelSpec& model, Params& params,
                            const OptimizerSlots& slots);

}  // namespace rnntrain
