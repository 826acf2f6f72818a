// Settings of every optimizer descriptor (spec/optimizers.h), for the tests that sweep them all: Keras'
// defaults, the flags turned (amsgrad, nesterov, centered: each slot layout), and every key off its
// default, in range; of every loss descriptor (spec/losses.h); and of every cell (spec/cells.h). A new
// optimizer, loss or cell is swept by these tests without a line of its own there.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "spec/cells.h"
#include "spec/config.h"

namespace rnntrain::testing {

inline std::vector<std::pair<std::string, OptimizerSpec>> optimizer_variants() {
  std::vector<std::pair<std::string, OptimizerSpec>> out;
  for (const OptimizerInfo* info : Optimizers::infos) {
    const OptimizerSpec defaults = optimizer_defaults(info->kind);
    OptimizerSpec flags = defaults, all = defaults;
    for (int i = 0; i < info->num_keys; ++i) {
      const OptimizerKey& k = info->keys[i];
      if (k.flag) {
        flags.*k.flag = all.*k.flag = k.fallback == 0;
      } else {
        const bool unit = k.range == KeyRange::Unit || k.range == KeyRange::UnitOpen;
        // Muon's Newton-Schulz coefficients move 10%: doubled, the iteration diverges.
        const bool ns = std::string(k.name).rfind("muon_", 0) == 0;
        all.*k.number = unit ? (k.fallback == 0.5 ? 0.25 : 0.5) : ns ? 1.1 * k.fallback : 2 * k.fallback + 0.01;
        if (k.range == KeyRange::Count) all.*k.number = k.fallback + 1;
      }
    }
    all.learning_rate = 2 * defaults.learning_rate;
    all.weight_decay = defaults.weight_decay + 0.01;
    out.emplace_back(std::string(info->name) + "_defaults", defaults);
    out.emplace_back(std::string(info->name) + "_flags", flags);
    out.emplace_back(std::string(info->name) + "_all", all);
  }
  return out;
}

// Every loss descriptor (spec/losses.h) with its settings at their defaults and off them.
inline std::vector<std::pair<std::string, LossSpec>> loss_variants() {
  std::vector<std::pair<std::string, LossSpec>> out;
  for (const LossInfo* info : Losses::infos) {
    const LossSpec defaults = loss_defaults(info->kind);
    LossSpec all = defaults;
    for (int i = 0; i < info->num_keys; ++i) {
      const LossKey& k = info->keys[i];
      if (k.flag) all.*k.flag = k.fallback == 0;
      else all.*k.number = k.range == KeyRange::UnitOpen ? 0.25 : 2 * k.fallback + 0.5;
    }
    out.emplace_back(std::string(info->name) + "_defaults", defaults);
    out.emplace_back(std::string(info->name) + "_all", all);
  }
  return out;
}

// Every cell as a config layer entry: its defaults, each flag turned, and its activations off their
// defaults (relu; hard_sigmoid gates where it has a recurrent_activation).
inline std::vector<std::pair<std::string, std::string>> cell_variants() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const CellTraits& c : cells()) {
    const std::string head = std::string("{type: ") + c.keras_class + ", units: 3";
    out.emplace_back(std::string(c.snake) + "_defaults", head + "}");
    for (const CellFlag& f : c.flags)
      out.emplace_back(std::string(c.snake) + "_" + f.name,
                       head + ", " + f.name + ": " + (LayerSpec{}.*f.field ? "false" : "true") + "}");
    out.emplace_back(std::string(c.snake) + "_activations",
                     head + ", activation: relu" + (c.recurrent_activation ? ", recurrent_activation: hard_sigmoid" : "") + "}");
  }
  return out;
}

}  // namespace rnntrain::testing
