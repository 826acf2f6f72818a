// The losses: their kind, their settings (LossSpec) and one descriptor each (spec/losses/*.h: names,
// Keras class and config, keys with defaults, the targets it takes, the accuracy it implies, and its
// value and gradient per position). The parser, the emitter, the Keras reader and writer, the data
// checks, the metrics, autotuning's synthetic batches, the CPU loss (model/loss.cpp) and the GPU's
// loss kernels (backend/cuda/kernels_train.cu) read the descriptors. Adding a loss:
// docs/contributing.md. Plain C++17: the CUDA kernels include it.
#pragma once
#include <cmath>
#include <cstdint>

#include "spec/descriptor.h"

namespace rnntrain {

// Every loss; the list at the end of this file orders them for configs and messages.
enum class LossKind {
  MSE, MAE, Huber, BinaryCrossentropy, CategoricalCrossentropy, SparseCategoricalCrossentropy, MSLE, LogCosh
};

struct LossSpec {
  LossKind kind = LossKind::MSE;
  bool from_logits = false;
  double delta = 1.0;  // huber
  double label_smoothing = 0.0;
#if __cplusplus >= 202002L  // the C++17 kernels that include this file do not compare
  bool operator==(const LossSpec&) const = default;
#endif
};

// ---- the shape of a descriptor ----

// A setting of a loss: its name in configs and in Keras' loss config, the LossSpec field, its
// default, its range, and whether Keras' class has it (sparse_categorical_crossentropy has no
// label_smoothing in Keras: rnntrain takes it, and does not write it there).
struct LossKey {
  const char* name;
  double LossSpec::*number;
  bool LossSpec::*flag;
  double fallback;
  KeyRange range;
  bool keras;
};
constexpr LossKey loss_number(const char* name, double LossSpec::*field, double fallback, KeyRange range,
                              bool keras = true) {
  return {name, field, nullptr, fallback, range, keras};
}
constexpr LossKey loss_flag(const char* name, bool LossSpec::*field, bool fallback) {
  return {name, nullptr, field, fallback ? 1.0 : 0.0, KeyRange::Flag, true};
}

// What the targets are, for the data checks and synthetic batches: values (any float), 0/1 labels or
// probabilities per output, rows of class probabilities (one-hot) over the last axis, or class labels
// (one integer per position instead of the last axis).
enum class Targets { Values, Probabilities, Distributions, Labels };
// What metric "accuracy" means with the loss (Keras' rule): none, binary, categorical or sparse.
enum class AccuracyOf { None, Binary, Categorical, Sparse };

struct LossInfo {
  LossKind kind;
  const char* name;        // in configs
  const char* alias;       // also accepted in configs (Keras' long name), or null
  const char* keras_class;  // "MeanSquaredError"
  const char* keras_name;   // the `name` in its Keras config: "mean_squared_error"
  const LossKey* keys;
  int num_keys;
  Targets targets;
  AccuracyOf accuracy;
};
template <int N>
constexpr LossInfo make_info(LossKind kind, const char* name, const char* alias, const char* keras_class,
                             const char* keras_name, const LossKey (&keys)[N], Targets targets, AccuracyOf accuracy) {
  return {kind, name, alias, keras_class, keras_name, keys, N, targets, accuracy};
}
constexpr LossKey kNoLossKeys[1] = {};
constexpr LossInfo make_info(LossKind kind, const char* name, const char* alias, const char* keras_class,
                             const char* keras_name, Targets targets, AccuracyOf accuracy) {
  return {kind, name, alias, keras_class, keras_name, kNoLossKeys, 0, targets, accuracy};
}

// The settings a position's loss reads, in the form the kernels take.
struct LossParams {
  bool from_logits;
  double delta, label_smoothing;
};
inline LossParams loss_params(const LossSpec& l) { return {l.from_logits, l.delta, l.label_smoothing}; }

// Keras' backend.epsilon() and the clip bounds of probabilities, as float32 (as Keras computes them).
constexpr double kProbLo = static_cast<float>(1e-7);
constexpr double kProbHi = static_cast<float>(1.0 - 1e-7);

// A descriptor D has `static constexpr LossInfo info`, `static constexpr bool kRows` and its value
// per position, one of:
//  - per element (kRows false; the loss of a position is the mean over its K outputs):
//    static RNNTRAIN_HD void element(double x, double t, const LossParams&, double& v, double& d),
//    v the loss of prediction x against target t, d its derivative in x;
//  - per row (kRows true; the last axis is a class distribution):
//    static RNNTRAIN_HD double row(const float* p, const float* t, int64_t label, int64_t K,
//    const LossParams&, float* g, double gscale): the loss of the row p[K] against t[K] (or, t
//    null, the class `label`), writing gscale * d(loss)/d(p) into g[K] when g is not null.
// All in double, as Keras' float32 values promoted: the CPU and the GPU run these same functions.

}  // namespace rnntrain

#include "spec/losses/binary_crossentropy.h"
#include "spec/losses/categorical_crossentropy.h"
#include "spec/losses/huber.h"
#include "spec/losses/log_cosh.h"
#include "spec/losses/mae.h"
#include "spec/losses/mse.h"
#include "spec/losses/msle.h"
#include "spec/losses/sparse_categorical_crossentropy.h"

namespace rnntrain {

// Per-row losses are exactly those over classes (one-hot rows or labels).
constexpr bool over_classes(const LossInfo& i) { return i.targets == Targets::Distributions || i.targets == Targets::Labels; }

template <class... D>
struct LossList {
  static constexpr const LossInfo* infos[] = {&D::info...};
  static_assert(((D::kRows == over_classes(D::info)) && ...), "a loss is per row exactly when it is over classes");
  template <class F>
  static decltype(auto) with(LossKind k, F& f) { return with_descriptor<F, LossKind, D...>(k, f); }
};
// Every descriptor, in the order configs and messages list them.
using Losses = LossList<Mse, Mae, Huber, Msle, LogCosh, BinaryCrossentropy, CategoricalCrossentropy,
                        SparseCategoricalCrossentropy>;

// Calls f(D{}) with the descriptor D of kind k; returns what f returns.
template <class F>
decltype(auto) with_loss(LossKind k, F&& f) {
  return Losses::with(k, f);
}
inline const LossInfo& loss_info(LossKind k) {
  return with_loss(k, [](auto d) -> const LossInfo& { return decltype(d)::info; });
}
// The config spelling of a loss ("mse", "binary_crossentropy", ...), for messages.
inline const char* loss_name(LossKind k) { return loss_info(k).name; }
// A loss of kind k with every setting at its default.
inline LossSpec loss_defaults(LossKind k) {
  const LossInfo& info = loss_info(k);
  LossSpec l;
  l.kind = k;
  for (int i = 0; i < info.num_keys; ++i) {
    if (info.keys[i].number) l.*info.keys[i].number = info.keys[i].fallback;
    else l.*info.keys[i].flag = info.keys[i].fallback != 0;
  }
  return l;
}
}  // namespace rnntrain
