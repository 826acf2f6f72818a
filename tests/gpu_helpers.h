// Helpers of the GPU tests: the skip reason, configs from YAML layer lists, random batches, and a
// closeness check that prints the worst error (and passes it back for the logs). Not a test itself.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backend_helpers.h"
#include "core/batch.h"
#include "spec/parse.h"
#include "spec/shapes.h"
#include "backend/engine.h"

namespace rnntrain::testing {

#define SKIP_WITHOUT_GPU()                                                        \
  do {                                                                            \
    const std::string why_ = ::rnntrain::gpu_unavailable_reason();                \
    if (!why_.empty()) GTEST_SKIP() << "no CUDA backend to test here: " << why_; \
  } while (0)

// input: "[7, 5]" (features) or "[7]" (token ids); layers: YAML list items after the Input layer.
inline Config config_of(const std::string& input, const std::string& layers, const std::string& name) {
  const std::string yaml = "model:\n  layers: [{type: Input, shape: " + input + "}, " + layers.substr(1) + "\n";
  return parse_config(yaml, name + ".yaml");
}

// The CPU and the CUDA engine of cfg, both from the parameters init, with RNGs of the same seed.
struct EnginePair {
  std::unique_ptr<Engine> cpu, gpu;
};
inline EnginePair engines_on_both(const Config& cfg, const Params& init, uint64_t seed) {
  Config cpu_cfg = cfg, gpu_cfg = cfg;
  cpu_cfg.device = Device::Cpu;
  gpu_cfg.device = Device::Cuda;
  Rng r1(seed), r2(seed);
  return {make_engine(cpu_cfg, init, r1), make_engine(gpu_cfg, init, r2)};
}

// A batch for cfg's model: features in [-1, 1] or token ids in [1, vocab); targets shaped like the
// output (or class labels for sparse losses); optional lengths (padding steps set to 0 / token 0).
inline Batch random_batch(const Config& cfg, int64_t B, int64_t T, uint64_t seed, std::vector<int32_t> lengths = {}) {
  Rng rng(seed);
  const auto shapes = infer_shapes(cfg.model);
  const LayerSpec& in = cfg.model.layers[0];
  Batch b;
  if (in.shape.size() == 1) {
    const int64_t vocab = cfg.model.layers[1].input_dim;
    b.x = Tensor({B, T});
    for (float& v : b.x.data) v = static_cast<float>(1 + rng.below(static_cast<uint64_t>(vocab - 1)));
  } else {
    b.x = random_tensor({B, T, in.shape[1]}, rng);
  }
  if (!lengths.empty()) {
    const int64_t F = b.x.numel() / (B * T);
    for (int64_t i = 0; i < B; ++i)
      for (int64_t t = lengths[i]; t < T; ++t)
        for (int64_t f = 0; f < F; ++f) b.x[(i * T + t) * F + f] = 0.0f;
    b.lengths = std::move(lengths);
  }
  Shape out = shapes.back().out;
  for (int64_t& d : out)
    if (d < 0) d = T;
  out.insert(out.begin(), B);
  if (cfg.train.loss.kind == LossKind::SparseCategoricalCrossentropy) {
    const int64_t K = out.back();
    out.pop_back();
    b.y = Tensor(out);
    for (float& v : b.y.data) v = static_cast<float>(rng.below(static_cast<uint64_t>(K)));
  } else {
    b.y = random_tensor(out, rng);
  }
  return b;
}

// Fails unless |got - want| <= atol + rtol * |want| everywhere; prints the worst entry. Returns
// the largest absolute difference.
inline double expect_near_all(const Tensor& got, const Tensor& want, double atol, double rtol, const std::string& what) {
  EXPECT_EQ(got.shape, want.shape) << what << ": shape " << shape_str(got.shape) << " vs " << shape_str(want.shape);
  if (got.numel() != want.numel()) return INFINITY;
  double worst_abs = 0.0, worst_excess = 0.0;
  int64_t worst = -1;
  for (int64_t k = 0; k < want.numel(); ++k) {
    const double d = std::fabs(static_cast<double>(got[k]) - want[k]);
    if (!(d <= worst_abs)) worst_abs = d;  // NaN propagates
    const double excess = d - (atol + rtol * std::fabs(want[k]));
    if (!(excess <= worst_excess)) worst_excess = excess, worst = k;
  }
  if (worst >= 0) {
    std::ostringstream first;
    for (int64_t k = 0; k < std::min<int64_t>(6, want.numel()); ++k) first << " (" << got[k] << " vs " << want[k] << ")";
    ADD_FAILURE() << what << ": entry " << worst << " is " << got[worst] << ", expected " << want[worst]
                  << " (max abs diff " << worst_abs << ", tolerance " << atol << " + " << rtol
                  << " * |expected|); first values (gpu vs cpu):" << first.str();
  }
  return worst_abs;
}

}  // namespace rnntrain::testing
