// Device helpers shared by the .cu files: grid-stride loop sizing, launch checking, half conversions and the
// activations with their derivatives, mirroring backend/cpu/cpu_math.cpp. Not a kernel file.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "spec/activations.h"

namespace rnntrain::cuda::k {

constexpr int kThreads = 256;

inline unsigned blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  if (b > 65535LL * 16) b = 65535LL * 16;
  return static_cast<unsigned>(b);
}

// Launch errors surface here; the backend's callers turn them into RuntimeError via api_errors.h.
void check_launch(const char* kernel, const char* file, int line);
#define LAUNCH_CHECK(name) ::rnntrain::cuda::k::check_launch(name, __FILE__, __LINE__)

// V consecutive elements, loaded or stored as one access (the pointer aligned to V elements).
template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

#define GRID_LOOP(i, n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// Conversions between FP32 and the half types (fp16, bf16), rounding to nearest.
template <typename H>
__device__ inline H from_f(float v);
template <>
__device__ inline __half from_f<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ inline __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
__device__ inline float to_f(__half v) { return __half2float(v); }
__device__ inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }

// Bit i of a bit set stored as 32-bit words (ParamStore::trained()).
// The block's total of v, in every thread. Every thread of the block calls it.
__device__ inline double block_sum(double v) {
  __shared__ double part[kThreads];
  part[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  const double total = part[0];
  __syncthreads();  // part is reused by the next call
  return total;
}

__device__ inline bool bit_set(const uint32_t* bits, int64_t i) { return (bits[i >> 5] >> (i & 31)) & 1u; }

// fminf/fmaxf drop NaN operands; these keep NaN, as the CPU backend does, so bad weights surface.
__device__ inline float clamp01_nan(float v) { return v != v ? v : fminf(1.0f, fmaxf(0.0f, v)); }

__device__ inline float act_f(Activation act, float x) {
  switch (act) {
    case Activation::Tanh: return tanhf(x);
    case Activation::Sigmoid: return 1.0f / (1.0f + expf(-x));
    case Activation::HardSigmoid: return clamp01_nan(x * (1.0f / 6.0f) + 0.5f);
    case Activation::HardSigmoidKeras2: return clamp01_nan(0.2f * x + 0.5f);
    case Activation::Relu: return x != x ? x : fmaxf(0.0f, x);
    default: return act::value(act, x);  // Linear, and those from act_grad_from_input (spec/activations.h)
  }
}

// d * act'(pre), from y = act(pre), or from pre itself where act_grad_from_input(act).
__device__ inline float act_grad_f(Activation act, float y, float d) {
  if (act_grad_from_input(act)) return act::grad(act, y, d);
  switch (act) {
    case Activation::Tanh: return d * (1.0f - y * y);
    case Activation::Sigmoid: return d * (y * (1.0f - y));
    case Activation::HardSigmoid: return (y > 0.0f && y < 1.0f) ? d * (1.0f / 6.0f) : 0.0f;
    case Activation::HardSigmoidKeras2: return (y > 0.0f && y < 1.0f) ? d * 0.2f : 0.0f;
    case Activation::Relu: return y > 0.0f ? d : 0.0f;
    default: return d;
  }
}

}  // namespace rnntrain::cuda::k
