// Helpers shared by the CPU backend tests: building small ModelSpecs by hand (no YAML), random
// parameters with non-zero biases on every gate block, and random tensors. Not a test itself.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/engine.h"
#include "core/batch.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "model/params.h"
#include "spec/config.h"
#include "spec/parse.h"

namespace rnntrain::testing {

inline LayerSpec input_layer(Shape shape) {
  LayerSpec l;
  l.kind = LayerKind::Input;
  l.name = "input";
  l.shape = std::move(shape);
  return l;
}

inline LayerSpec recurrent(LayerKind kind, int64_t units, bool return_sequences = true) {
  LayerSpec l;
  l.kind = kind;
  l.name = layer_kind_name(kind);
  l.units = units;
  l.return_sequences = return_sequences;
  return l;
}

inline LayerSpec bidirectional(LayerSpec inner, MergeMode mode) {
  LayerSpec l;
  l.kind = LayerKind::Bidirectional;
  l.name = "bidirectional";
  l.merge_mode = mode;
  l.inner = std::make_shared<LayerSpec>(std::move(inner));
  return l;
}

inline LayerSpec dense(int64_t units, Activation act = Activation::Linear) {
  LayerSpec l;
  l.kind = LayerKind::Dense;
  l.name = "dense";
  l.units = units;
  l.activation = act;
  return l;
}

inline LayerSpec time_distributed(LayerSpec inner) {
  LayerSpec l;
  l.kind = LayerKind::TimeDistributed;
  l.name = "time_distributed";
  l.inner = std::make_shared<LayerSpec>(std::move(inner));
  return l;
}

inline LayerSpec embedding(int64_t vocab, int64_t dim, bool mask_zero) {
  LayerSpec l;
  l.kind = LayerKind::Embedding;
  l.name = "embedding";
  l.input_dim = vocab;
  l.output_dim = dim;
  l.mask_zero = mask_zero;
  return l;
}

inline LayerSpec masking(double value) {
  LayerSpec l;
  l.kind = LayerKind::Masking;
  l.name = "masking";
  l.mask_value = value;
  return l;
}

inline LayerSpec dropout(double rate) {
  LayerSpec l;
  l.kind = LayerKind::Dropout;
  l.name = "dropout";
  l.rate = rate;
  return l;
}

// A layer of kind k named as Keras names it, with Keras' defaults (the 1D poolings: strides = pool_size).
inline LayerSpec layer_of(LayerKind k) {
  LayerSpec l;
  l.kind = k;
  l.name = layer_snake_name(k);
  l.activation = Activation::Linear;
  return l;
}
inline LayerSpec conv1d(int64_t filters, int64_t kernel, Padding padding = Padding::Valid, int64_t strides = 1,
                        int64_t dilation = 1, Activation act = Activation::Linear) {
  LayerSpec l = layer_of(LayerKind::Conv1D);
  l.filters = filters, l.kernel_size = kernel, l.padding = padding, l.strides = strides, l.dilation_rate = dilation;
  l.activation = act;
  return l;
}
inline LayerSpec pooling1d(LayerKind k, int64_t pool, Padding padding = Padding::Valid, int64_t strides = 0) {
  LayerSpec l = layer_of(k);
  l.pool_size = pool, l.padding = padding, l.strides = strides > 0 ? strides : pool;
  return l;
}
inline LayerSpec activation_layer(Activation a) {
  LayerSpec l = layer_of(LayerKind::Activation);
  l.activation = a;
  return l;
}

// Input first, then the layers, with unique names.
inline ModelSpec model_of(std::vector<LayerSpec> layers) {
  ModelSpec m;
  m.layers = std::move(layers);
  for (size_t i = 1; i < m.layers.size(); ++i) m.layers[i].name += "_" + std::to_string(i);
  return m;
}

inline Tensor random_tensor(Shape shape, Rng& rng, double lo = -1.0, double hi = 1.0) {
  Tensor t(std::move(shape));
  for (float& v : t.data) v = static_cast<float>(rng.uniform(lo, hi));
  return t;
}

// Keras-shaped parameters with every entry (biases included) drawn from U(-scale, scale).
inline Params random_params(const ModelSpec& m, uint64_t seed, double scale = 0.6) {
  Rng rng(seed);
  Params p = init_params(m, rng);
  for (Param* q : p.all())
    for (float& v : q->value.data) v = static_cast<float>(rng.uniform(-scale, scale));
  return p;
}

// max |a - b| / max |b| (the absolute difference where b is all zero); infinity when the shapes differ.
inline double rel_err(const Tensor& a, const Tensor& b) {
  if (a.shape != b.shape) return std::numeric_limits<double>::infinity();
  double d = 0, m = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
    m = std::max(m, static_cast<double>(std::fabs(b[i])));
  }
  return m > 0 ? d / m : d;
}

struct SideBySide {
  double fast = 0, ref = 0, first = 0;  // after the last step; the reference's first step
};
// `steps` Adam steps (learning rate 0.01) of both configs from the same weights on the same batches
// ([8, 9, 4] -> [8, 3]); the models take 4 features and give 3.
inline SideBySide train_side_by_side(const Config& fast, const Config& ref, int steps) {
  const Params init = random_params(fast.model, 2, 0.3);
  Rng r1(1), r2(1);
  auto a = make_engine(fast, init, r1);
  auto b = make_engine(ref, init, r2);
  SideBySide l;
  for (int s = 0; s < steps; ++s) {
    Rng rng(100 + s % 3);
    Batch batch;
    batch.x = random_tensor({8, 9, 4}, rng);
    batch.y = random_tensor({8, 3}, rng);
    l.fast = a->train_step(batch, 0.01, {}).mean();
    l.ref = b->train_step(batch, 0.01, {}).mean();
    if (s == 0) l.first = l.ref;
  }
  return l;
}

// 30 Adam steps of a model (`layers`, a YAML list: 4 features in, 3 out) in bf16 under plan.cpu `cpu`
// beside the FP32 reference path, from the same weights: the reference learns, and bf16's rounding
// does not derail the other (within 3% of it). The losses, for the test to print.
inline SideBySide expect_bf16_training_tracks_fp32(const std::string& layers, CpuRnn cpu) {
  Config cfg = parse_config("model:\n  layers: " + layers + "\ntrain: {optimizer: {type: adam, learning_rate: 0.01}}\n",
                            "train.yaml");
  cfg.device = Device::Cpu;
  Config ref = cfg;
  ref.plan.cpu = CpuRnn::Reference;
  cfg.plan.cpu = cpu;
  cfg.plan.precision = Precision::Bf16;
  const SideBySide l = train_side_by_side(cfg, ref, 30);
  EXPECT_LT(l.ref, 0.8 * l.first) << "the reference run learns";
  EXPECT_NEAR(l.fast, l.ref, 0.03 * l.ref) << "after 30 Adam steps";
  return l;
}

}  // namespace rnntrain::testing
