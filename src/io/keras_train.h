// Training settings and optimizer state in Keras' terms: the legacy .h5 `training_config` (with which
// Keras compiles a loaded model before restoring `optimizer_weights`), the Keras 3 `compile_config`
// read back into a TrainSpec, and Keras 3's order of optimizer variables. Not the model (keras_model.h).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/h5.h"
#include "io/keras_model.h"
#include "model/params.h"

namespace rnntrain {

// An optimizer's slots: "<slot>/<i>" (Keras' slot name, the parameter's index in Params::all()) and
// the tensor, in the optimizer's order.
using OptimizerSlots = std::vector<std::pair<std::string, Tensor*>>;

// What a compiled Keras model holds besides the model: the compile arguments and the optimizer's
// variables now.
struct KerasTraining {
  TrainSpec train;             // optimizer, loss, metrics, schedule
  double learning_rate = 0.0;  // of the next step: what the file stores for constant and per-epoch schedules
  int64_t iterations = 0;      // optimizer steps taken
  OptimizerSlots slots;        // every slot of train.optimizer over the model's parameters
};

// {"loss", "metrics", "weighted_metrics", "loss_weights", "optimizer_config"} for a legacy .h5.
// The learning rate is Keras' schedule object for schedules Keras has per optimizer step
// (exponential, cosine), else the current rate (step and reduce_on_plateau are callbacks in Keras).
// Metrics Keras does not have (perplexity) are left out.
Json training_config_json(const KerasTraining& t);
// Whether Keras can compile a legacy .h5's model with optimizer kind k: Keras 3.15's legacy loader
// resolves optimizers through keras.optimizers.ALL_OBJECTS, which lacks Lamb, and then raises (for its
// own files too). Where it cannot, rnntrain writes no training_config, so that load_model gives the
// model uncompiled instead of failing; the optimizer's state is still in /rnntrain (docs/keras.md).
bool legacy_h5_compiles(OptimizerKind k);
// The `compile_config` of a .keras config.json, with the same content.
Json compile_config_json(const KerasTraining& t);

// The optimizer's variables in Keras 3's order (iteration, learning_rate unless a schedule sets it,
// then the slots): for a legacy .h5, an optimizer_weights group under `g` with weight_names (Keras
// 3's variable names, which need the model), as Keras' legacy_h5_format reads it from the group it
// is given; for a Keras 3 weights file, /optimizer/vars/<i>.
void write_legacy_optimizer(const h5::Group& g, const ModelSpec& model, const Params& params, const KerasTraining& t);
void write_keras3_optimizer(const h5::Group& root, const KerasTraining& t);

// Optimizer (with its schedule, where rnntrain has Keras' schedule), loss and metrics from a legacy
// training_config or a Keras 3 compile_config; std::nullopt when the JSON has neither. What does not
// map is logged, naming it and what rnntrain does instead, and left at rnntrain's default.
std::optional<TrainSpec> train_from_keras_json(const nlohmann::json& j, const std::string& file);

// Keras' lowercase optimizer name ("adam", "sgd", ...): the scope of its variable names.
const char* keras_optimizer_name(OptimizerKind k);

// rnntrain's optimizer slots ("momentum/3": slot kind, then the parameter's index) in Keras 3's
// variable order: one list per slot kind in creation order, except that Adam creates momentum and
// velocity together, interleaved per parameter. Slots already listed parameter by parameter (the
// per-tensor kinds: a kind comes again after another) are in Keras' order as they are. Returns
// indices into `slot_names`.
std::vector<size_t> keras_slot_order(const std::vector<std::string>& slot_names);

}  // namespace rnntrain
