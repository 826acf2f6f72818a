// What spec/optimizers.h declares beyond its descriptors.
#include "spec/optimizers.h"

#include "core/error.h"

namespace rnntrain {

std::optional<OptimizerKind> optimizer_named(const std::string& name) {
  auto bare = [](std::string s) {
    std::erase(s, '_');
    return s;
  };
  for (const OptimizerInfo* o : Optimizers::infos)
    if (bare(name) == bare(o->name)) return o->kind;
  return std::nullopt;
}

OptimizerSpec optimizer_defaults(OptimizerKind k) {
  const OptimizerInfo& info = optimizer_info(k);
  OptimizerSpec o;
  o.kind = k;
  o.learning_rate = info.learning_rate;
  o.weight_decay = info.weight_decay;
  for (int i = 0; i < info.num_keys; ++i) {
    const OptimizerKey& key = info.keys[i];
    if (key.number) o.*key.number = key.fallback;
    else o.*key.flag = key.fallback != 0;
  }
  return o;
}

void check_clipping(const OptimizerSpec& o) {
  if (o.clipnorm.has_value() + o.clipvalue.has_value() + o.global_clipnorm.has_value() > 1)
    throw ConfigError("train.optimizer: only one of clipnorm, clipvalue and global_clipnorm can be set (as in "
                      "Keras); remove the others");
}

int keras_interleaved_slots(const std::vector<std::string>& kinds) {
  for (const OptimizerInfo* info : Optimizers::infos) {
    const SlotKinds sk = optimizer_slot_kinds(optimizer_defaults(info->kind));
    if (sk.together < 2 || kinds.size() < static_cast<size_t>(sk.together)) continue;
    bool same = true;
    for (int i = 0; i < sk.together; ++i) same = same && kinds[i] == sk.at[i].name;
    if (same) return sk.together;
  }
  return 1;
}

}  // namespace rnntrain
