// The activations and Bidirectional's merge modes: read by the config, both backends and the CUDA
// kernels themselves (kernels_common.cuh, kernels_layers.cu), so no int codes stand in for them.
// Plain C++17: the CUDA kernels include it.
#pragma once

#include <cmath>

#include "spec/descriptor.h"

namespace rnntrain {

// HardSigmoid is Keras 3's clip(x/6 + 0.5, 0, 1); HardSigmoidKeras2 is clip(0.2x + 0.5, 0, 1).
// From Gelu on, the activations of Dense, Conv1D and Activation layers only (Keras 3's keras.activations):
// Gelu is the exact 0.5x(1 + erf(x/sqrt 2)) that Keras' 'gelu' means, GeluApproximate its tanh form
// (keras.activations.gelu(x, approximate=True), which a Keras config cannot name); Elu with alpha 1,
// Selu with Keras' constants, Softplus, Softsign, Silu (Keras' 'silu', alias 'swish').
enum class Activation {
  Linear, Tanh, Sigmoid, HardSigmoid, HardSigmoidKeras2, Relu, Softmax,
  Gelu, GeluApproximate, Elu, Selu, Softplus, Softsign, Silu
};

// Whether the derivative is computed from the pre-activation x (these must keep it); the others' from
// y = act(x), which is all the recurrent cells keep (so they take only those).
RNNTRAIN_HD constexpr bool act_grad_from_input(Activation a) { return a >= Activation::Gelu; }

// How Bidirectional joins its directions: concatenated [forward, backward], summed, multiplied, averaged.
enum class MergeMode { Concat, Sum, Mul, Ave };

// The activations with act_grad_from_input, their values and derivatives from x, on the host and in
// the CUDA kernels alike (float math the C library and CUDA both have).
namespace act {
constexpr float kSeluAlpha = 1.6732632423543772f, kSeluScale = 1.0507009873554805f;
constexpr float kSqrtHalf = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f, kGeluCubic = 0.044715f;

RNNTRAIN_HD inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// act(x) for act_grad_from_input(a); x itself for the others (never called with them).
RNNTRAIN_HD inline float value(Activation a, float x) {
  switch (a) {
    case Activation::Gelu: return 0.5f * x * (1.0f + erff(x * kSqrtHalf));
    case Activation::GeluApproximate: return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
    case Activation::Elu: return x > 0.0f ? x : expm1f(x);
    case Activation::Selu: return kSeluScale * (x > 0.0f ? x : kSeluAlpha * expm1f(x));
    case Activation::Softplus: return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x)));  // log(1 + e^x) = logaddexp(x, 0)
    case Activation::Softsign: return x / (1.0f + fabsf(x));
    case Activation::Silu: return x * sigmoid(x);
    default: return x;
  }
}

// d * act'(x) for act_grad_from_input(a).
RNNTRAIN_HD inline float grad(Activation a, float x, float d) {
  switch (a) {
    case Activation::Gelu: return d * (0.5f * (1.0f + erff(x * kSqrtHalf)) + x * kInvSqrt2Pi * expf(-0.5f * x * x));
    case Activation::GeluApproximate: {
      const float t = tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
      return d * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x));
    }
    case Activation::Elu: return x > 0.0f ? d : d * expf(x);
    case Activation::Selu: return x > 0.0f ? d * kSeluScale : d * (kSeluScale * kSeluAlpha * expf(x));
    case Activation::Softplus: return d * sigmoid(x);
    case Activation::Softsign: {
      const float s = 1.0f + fabsf(x);
      return d / (s * s);
    }
    case Activation::Silu: {
      const float s = sigmoid(x);
      return d * (s * (1.0f + x * (1.0f - s)));
    }
    default: return d;
  }
}
}  // namespace act

}  // namespace rnntrain
