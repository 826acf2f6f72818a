// Training settings and optimizer state in Keras' terms: the legacy .h5 `training_config` (with which
// Keras compiles a loaded model before restoring `optimizer_weights`), the Keras 3 `compile_config`
// read back into a TrainSpec, and Keras 3's order of optimizer variables. Not the model (keras_model.h).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/keras_model.h"

namespace rnntrain {

// {"loss", "metrics", "weighted_metrics", "loss_weights", "optimizer_config"} for a legacy .h5.
Json training_config_json(const TrainSpec& train);

// Optimizer and loss (and simple metrics) from a legacy training_config or a Keras 3 compile_config;
// std::nullopt when the JSON has neither. What does not map is logged and left at rnntrain's default.
std::optional<TrainSpec> train_from_keras_json(const nlohmann::json& j, const std::string& file);

// Keras' lowercase optimizer name ("adam", "sgd", ...): the scope of its variable names.
const char* keras_optimizer_name(OptimizerKind k);

// rnntrain's optimizer slots ("momentum/3": slot kind, then the parameter's index) in Keras 3's
// variable order: one list per slot kind in creation order, except that Adam creates momentum and
// velocity together, interleaved per parameter. Returns indices into `slot_names`.
std::vector<size_t> keras_slot_order(const std::vector<std::string>& slot_names);

}  // namespace rnntrain
