// The optimizers: their kind, their hyperparameters (OptimizerSpec) and one descriptor each
// (spec/optimizers/*.h: names, Keras class and config keys with defaults, slots, update rule).
// The parser, the emitter, the Keras reader and writer, the CPU optimizer (model/optimizer.cpp) and
// the device kernel (backend/cuda/kernels_train.cu) all read the descriptors; none of them names a
// kind. Adding an optimizer: docs/contributing.md. Plain C++17: the CUDA kernels include it too.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <string>
#include <vector>

#include "spec/descriptor.h"

namespace rnntrain {

// Every optimizer; the order of the list at the end of this file is the order configs list them in.
enum class OptimizerKind {
  SGD, Adam, AdamW, RMSprop, Adagrad, Lion, Adamax, Adadelta, Nadam, Ftrl, Lamb, ScheduleFreeAdamW, Adafactor, Muon
};

// Keras 3's hyperparameters, named as in Keras; a kind reads those its descriptor lists. The values
// here are Keras' defaults where the kinds agree; optimizer_defaults() gives a kind's own.
struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::Adam;
  double learning_rate = 0.001;
  double momentum = 0.0;  // SGD, RMSprop
  bool nesterov = false;
  double beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;
  bool amsgrad = false;
  double weight_decay = 0.0;
  double rho = 0.9;  // RMSprop
  bool centered = false;
  double initial_accumulator_value = 0.1;  // Adagrad, Ftrl
  double learning_rate_power = -0.5, l1 = 0.0, l2 = 0.0, l2_shrinkage = 0.0, beta = 0.0;  // Ftrl
  double warmup_steps = 0.0;  // ScheduleFreeAdamW: the learning rate rises linearly over these steps
  double beta_2_decay = -0.8, epsilon_1 = 1e-30, epsilon_2 = 1e-3, clip_threshold = 1.0;  // Adafactor
  bool relative_step = true;
  // Muon: Newton-Schulz coefficients and steps, the update's RMS scale, and the AdamW it runs on the
  // other weights (rate times adam_lr_ratio, its own weight decay; beta_1, beta_2 are its adam_beta_*).
  double muon_a = 3.4445, muon_b = -4.775, muon_c = 2.0315, ns_steps = 5, rms_rate = 0.2;
  double adam_lr_ratio = 1.0, adam_weight_decay = 0.004;
  bool exclude_embeddings = true;
  std::optional<double> clipnorm, clipvalue, global_clipnorm;  // at most one (Keras' rule)
};

// ---- the shape of a descriptor ----

// A hyperparameter of a kind: its name in configs and in Keras' optimizer config alike, the field
// it sets (number or flag), Keras' default for the kind, and its range.
struct OptimizerKey {
  const char* name;
  double OptimizerSpec::*number;
  bool OptimizerSpec::*flag;
  double fallback;
  KeyRange range;
};
constexpr OptimizerKey number_key(const char* name, double OptimizerSpec::*field, double fallback, KeyRange range) {
  return {name, field, nullptr, fallback, range};
}
constexpr OptimizerKey flag_key(const char* name, bool OptimizerSpec::*field, bool fallback) {
  return {name, nullptr, field, fallback ? 1.0 : 0.0, KeyRange::Flag};
}

struct OptimizerInfo {
  OptimizerKind kind;
  const char* name;         // in configs, and Keras' lower-case name (the scope of its variables)
  const char* keras_class;  // "Adam"
  const OptimizerKey* keys;  // besides learning_rate and weight_decay, which every kind has
  int num_keys;
  double learning_rate;  // Keras' defaults for the two
  double weight_decay;
  const char* keras_name;  // Keras' default optimizer name (its variables' scope) where it is not `name`
};
template <int N>
constexpr OptimizerInfo make_info(OptimizerKind kind, const char* name, const char* keras_class,
                                  const OptimizerKey (&keys)[N], double learning_rate, double weight_decay,
                                  const char* keras_name = nullptr) {
  return {kind, name, keras_class, keys, N, learning_rate, weight_decay, keras_name ? keras_name : name};
}

// The slots (optimizer state, one tensor per parameter) of a kind with given settings, in the order
// the update rule indexes them, with Keras' variable names and initial values.
struct OptimizerSlot {
  const char* name;
  float init;
  bool from_value;  // starts as a copy of the parameter, taken before the first step (Keras' build)
};
struct SlotKinds {
  static constexpr int kMax = 3;
  OptimizerSlot at[kMax] = {};
  int n = 0;
  // The first `together` slots Keras creates in one add_optimizer_variables call, so that its files
  // interleave them variable by variable (Adam's momentum and velocity); the rest come slot by slot.
  int together = 1;
  // A scalar Keras keeps after the slots, outside the optimizer's name scope (Nadam's u_product):
  // its name in Keras' files and its value after step t. Not state here: the rule has it from t.
  struct After {
    const char* name = nullptr;
    double (*value)(const OptimizerSpec&, int64_t t) = nullptr;
  } after;
  // Lamb's layer-wise trust ratio: the rule leaves its update u in s[n] (scratch, not state: the slot
  // array has room for it) and p is unchanged; then, per parameter, p -= r*lr*u with r = |p| / |u|
  // (1 when either norm is 0), the norms over the whole parameter.
  bool trust_ratio = false;
  void add(const char* name, float init = 0.0f) { at[n++] = {name, init, false}; }
  void add_copy(const char* name) { at[n++] = {name, 0.0f, true}; }
  int buffers() const { return n + (trust_ratio ? 1 : 0); }  // slots and scratch, one value per parameter each
};

// The numbers of one optimizer step that are the same for every element, computed once per step on
// the host in double: the learning rate, and up to three more that a kind's rule needs (Adam's
// bias-corrected step size, Nadam's momentum schedule, Ftrl's l2 term).
struct StepScalars {
  float lr = 0.0f;
  float k[3] = {};
};

// A descriptor D has: static constexpr OptimizerInfo info; static SlotKinds slots(const
// OptimizerSpec&); static StepScalars scalars(const OptimizerSpec&, double lr, int64_t t), the
// numbers of optimizer step t (1-based) at learning rate lr; and struct Rule, built from an
// OptimizerSpec, whose RNNTRAIN_HD operator()(float& p, float g, float* const* s, int64_t i, const
// StepScalars& sc) updates one element i: p its value, g its clipped gradient, s[k][i] its slot k.
// Weight decay and clipping are applied before, for every kind.
//
// A kind whose update is not elementwise (Adafactor's factored moments) has `static constexpr bool
// kPerTensor = true` and no Rule: both engines run it over whole parameters in Keras layout
// (model/per_tensor_optimizers.cpp, backend/cuda/per_tensor_optimizers.cpp). Its slots may then have other
// shapes than the parameter's (SlotKinds: rows, cols) and are listed variable by variable.
template <class D, class = void>
struct PerTensor : std::false_type {};
template <class D>
struct PerTensor<D, std::void_t<decltype(D::kPerTensor)>> : std::bool_constant<D::kPerTensor> {};

}  // namespace rnntrain

#include "spec/optimizers/adadelta.h"
#include "spec/optimizers/adafactor.h"
#include "spec/optimizers/adagrad.h"
#include "spec/optimizers/adam.h"
#include "spec/optimizers/adamax.h"
#include "spec/optimizers/ftrl.h"
#include "spec/optimizers/lamb.h"
#include "spec/optimizers/lion.h"
#include "spec/optimizers/muon.h"
#include "spec/optimizers/nadam.h"
#include "spec/optimizers/rmsprop.h"
#include "spec/optimizers/schedule_free_adamw.h"
#include "spec/optimizers/sgd.h"

namespace rnntrain {

template <class... D>
struct OptimizerList {
  static constexpr const OptimizerInfo* infos[] = {&D::info...};
  template <class F>
  static decltype(auto) with(OptimizerKind k, F& f) { return with_descriptor<F, OptimizerKind, D...>(k, f); }
};
// Every descriptor, in the order configs and messages list them.
using Optimizers =
    OptimizerList<Sgd, Adam, AdamW, RMSprop, Adagrad, Lion, Adamax, Adadelta, Nadam, Ftrl, Lamb, ScheduleFreeAdamW,
                  Adafactor, Muon>;

// Calls f(D{}) with the descriptor D of kind k; returns what f returns.
template <class F>
decltype(auto) with_optimizer(OptimizerKind k, F&& f) {
  return Optimizers::with(k, f);
}

inline const OptimizerInfo& optimizer_info(OptimizerKind k) {
  return with_optimizer(k, [](auto d) -> const OptimizerInfo& { return decltype(d)::info; });
}
inline SlotKinds optimizer_slot_kinds(const OptimizerSpec& o) {
  return with_optimizer(o.kind, [&](auto d) { return decltype(d)::slots(o); });
}
// As written in configs ("adam", "rmsprop"), and the kind such a name (or a Keras class name in lower
// case; underscores are not compared) means, if any.
inline const char* optimizer_name(OptimizerKind k) { return optimizer_info(k).name; }
std::optional<OptimizerKind> optimizer_named(const std::string& name);
// How many of the leading slot kinds (in rnntrain's order, e.g. {"momentum", "velocity", "velocity_hat"})
// Keras' files interleave variable by variable: the descriptor's `together` of the kind whose slots
// begin so; 1 when none does.
int keras_interleaved_slots(const std::vector<std::string>& kinds);
// Keras' defaults for kind k: what a config or a Keras file that names the kind and nothing else means.
OptimizerSpec optimizer_defaults(OptimizerKind k);
// Throws ConfigError when more than one of clipnorm, clipvalue and global_clipnorm is set (Keras
// refuses that too); configs cannot say so, Keras files and code can.
void check_clipping(const OptimizerSpec& o);

}  // namespace rnntrain
