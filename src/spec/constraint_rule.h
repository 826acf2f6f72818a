// One Keras weight constraint as the update both engines apply to each entry w of a slice whose norm
// (sqrt of the sum of squares along the constraint's axes, in float32 as Keras) is `norm`: the CPU in
// model/params.cpp, the CUDA kernel in kernels_train.cu. Plain C++17: the CUDA kernels include it.
#pragma once
#include "spec/descriptor.h"

namespace rnntrain {

struct ConstraintRule {
  int kind = 0;  // ConstraintKind: 1 max_norm, 2 non_neg, 3 unit_norm, 4 min_max_norm
  float min_value = 0.0f, max_value = 0.0f, rate = 1.0f;

  RNNTRAIN_HD static float clip(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }
  // Keras' backend.epsilon().
  RNNTRAIN_HD float operator()(float w, float norm) const {
    const float eps = 1e-7f;
    switch (kind) {
      case 1: return w * (clip(norm, 0.0f, max_value) / (eps + norm));
      case 2: return w > 0.0f ? w : 0.0f;
      case 3: return w / (eps + norm);
      case 4: return w * ((rate * clip(norm, min_value, max_value) + (1.0f - rate) * norm) / (eps + norm));
      default: return w;
    }
  }
};

}  // namespace rnntrain
