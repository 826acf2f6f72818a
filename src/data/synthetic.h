// Synthetic tasks generated in memory, deterministic from a seed: the adding problem, noisy sine
// forecasting, parity, and two variable-length token tasks (copy, classify). Shapes and suggested
// models are in data/README.md. Small, classic sanity tasks, not a benchmark suite.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace rnntrain {

// Token tasks use ids 1..kSyntheticTokens (0 pads) and have as many classes (label = id - 1).
constexpr int64_t kSyntheticTokens = 8;

// Generates src.task with src.samples rows (default 1000) of src.timesteps steps (default: the
// task's) from src.seed. ConfigError at src.loc for an unknown task or bad sizes (including sizes
// beyond this machine's memory). Logs a warning when src.seed is 0, the default: the same task and
// sizes then give the same samples on every split, so set a different `seed` on each.
Dataset make_synthetic(const DataSource& src);

// The task names, in documentation order.
std::vector<std::string> synthetic_tasks();

}  // namespace rnntrain
