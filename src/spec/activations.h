// The activations and Bidirectional's merge modes: read by the config, both backends and the CUDA
// kernels themselves (kernels_common.cuh, kernels_layers.cu), so no int codes stand in for them.
// Plain C++17: the CUDA kernels include it.
#pragma once

namespace rnntrain {

// HardSigmoid is Keras 3's clip(x/6 + 0.5, 0, 1); HardSigmoidKeras2 is clip(0.2x + 0.5, 0, 1).
enum class Activation { Linear, Tanh, Sigmoid, HardSigmoid, HardSigmoidKeras2, Relu, Softmax };

// How Bidirectional joins its directions: concatenated [forward, backward], summed, multiplied, averaged.
enum class MergeMode { Concat, Sum, Mul, Ave };

}  // namespace rnntrain
