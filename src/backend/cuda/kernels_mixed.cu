// Kernels of mixed precision and of the device-side step control: FP32 <-> FP16/BF16 conversion for
// the half-precision cuDNN stacks, gradient unscaling with the non-finite check and the dynamic loss
// scale's update (fp16), and the clipping factors computed from the gradient norms on the device, so
// a training step never waits for the host. Kernels first, then launchers.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"

namespace rnntrain::cuda::k {

namespace {

// n / V vectors of V (both pointers aligned to V elements), then the rest one at a time.
template <typename H, int V>
__global__ void to_half_k(const float* in, H* out, int64_t n) {
  GRID_LOOP(i, n / V) {
    const Vec<float, V> x = reinterpret_cast<const Vec<float, V>*>(in)[i];
    Vec<H, V> y;
#pragma unroll
    for (int j = 0; j < V; ++j) y.v[j] = from_f<H>(x.v[j]);
    reinterpret_cast<Vec<H, V>*>(out)[i] = y;
  }
  GRID_LOOP(i, n % V) out[n / V * V + i] = from_f<H>(in[n / V * V + i]);
}

template <typename H>
__global__ void from_half_k(const H* in, float* out, int64_t n, bool accumulate) {
  GRID_LOOP(i, n) out[i] = accumulate ? out[i] + to_f(in[i]) : to_f(in[i]);
}

// in [A, C, F] -> out [C, A, F], converting the element type: row (c, a) of out is row (a, c) of in,
// a block a row at a time, its threads over the row's features V at a time.
template <typename In, typename Out, int V>
__global__ void swap01_k(const In* in, Out* out, int64_t A, int64_t C, int64_t F) {
  for (int64_t r = blockIdx.x; r < A * C; r += gridDim.x) {
    const int64_t c = r / A, a = r % A;
    const auto* src = reinterpret_cast<const Vec<In, V>*>(in + (a * C + c) * F);
    auto* dst = reinterpret_cast<Vec<Out, V>*>(out + r * F);
    for (int64_t j = threadIdx.x; j < F / V; j += blockDim.x) {
      const Vec<In, V> x = src[j];
      Vec<Out, V> y;
#pragma unroll
      for (int i = 0; i < V; ++i) {
        if constexpr (std::is_same_v<Out, In>) y.v[i] = x.v[i];
        else if constexpr (std::is_same_v<Out, float>) y.v[i] = to_f(x.v[i]);
        else y.v[i] = from_f<Out>(x.v[i]);
      }
      dst[j] = y;
    }
  }
}

template <typename In, typename Out>
void swap01(const In* in, Out* out, int64_t A, int64_t C, int64_t F, cudaStream_t s) {
  const unsigned rows = static_cast<unsigned>(std::min<int64_t>(A * C, 1 << 20));
  const auto at = [](const void* p, size_t b) { return reinterpret_cast<uintptr_t>(p) % b == 0; };
  if (F % 4 == 0 && at(in, 4 * sizeof(In)) && at(out, 4 * sizeof(Out)))
    swap01_k<In, Out, 4><<<rows, 128, 0, s>>>(in, out, A, C, F);
  else
    swap01_k<In, Out, 1><<<rows, 128, 0, s>>>(in, out, A, C, F);
}

__global__ void unscale_check_k(float* g, const uint32_t* trained, int64_t n, const float* scale, int* found) {
  const float inv = 1.0f / *scale;
  bool bad = false;
  GRID_LOOP(i, n) {
    if (!bit_set(trained, i)) continue;
    const float v = g[i] * inv;
    g[i] = v;
    bad = bad || !isfinite(v);
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) atomicOr(found, 1);
}

// Doubles the scale after `interval` finite steps in a row, halves it after a non-finite one (whose
// update the optimizer skipped), as PyTorch's GradScaler and Keras' LossScaleOptimizer.
__global__ void update_scale_k(float* scale, int* good, int* found, int interval) {
  if (*found) {
    *scale = fmaxf(*scale * 0.5f, 1.0f);
    *good = 0;
  } else if (++*good >= interval) {
    *scale = fminf(*scale * 2.0f, 16777216.0f);  // 2^24
    *good = 0;
  }
  *found = 0;
}

// One block: factors[v] from the per-variable sums of squares: clipnorm per variable, else
// global_clipnorm (one factor for all; a NaN norm gives NaN, as Keras).
__global__ void clip_factors_k(const double* sums, int64_t nv, bool per_variable, double c, float* factors) {
  if (per_variable) {
    for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
      const double norm = sqrt(sums[v]);
      factors[v] = norm > c ? static_cast<float>(c / norm) : 1.0f;
    }
    return;
  }
  __shared__ double total;
  if (threadIdx.x == 0) {
    double t = 0.0;
    for (int64_t v = 0; v < nv; ++v) t += sums[v];  // in order: the same sum every time
    const double norm = sqrt(t);
    total = c * fmin(1.0 / norm, 1.0 / c) + (norm - norm);
  }
  __syncthreads();
  for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) factors[v] = static_cast<float>(total);
}

}  // namespace

// ---------------- launchers ----------------

void to_half(const float* in, void* out, int64_t n, bool bf16, cudaStream_t s) {
  if (n == 0) return;
  const bool vec = reinterpret_cast<uintptr_t>(in) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 8 == 0;
  const unsigned b = blocks_for(vec ? n / 4 : n);
  if (bf16 && vec) to_half_k<__nv_bfloat16, 4><<<b, kThreads, 0, s>>>(in, static_cast<__nv_bfloat16*>(out), n);
  else if (bf16) to_half_k<__nv_bfloat16, 1><<<b, kThreads, 0, s>>>(in, static_cast<__nv_bfloat16*>(out), n);
  else if (vec) to_half_k<__half, 4><<<b, kThreads, 0, s>>>(in, static_cast<__half*>(out), n);
  else to_half_k<__half, 1><<<b, kThreads, 0, s>>>(in, static_cast<__half*>(out), n);
  LAUNCH_CHECK("to_half");
}

void from_half(const void* in, float* out, int64_t n, bool bf16, bool accumulate, cudaStream_t s) {
  if (n == 0) return;
  if (bf16) from_half_k<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(in), out, n, accumulate);
  else from_half_k<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const __half*>(in), out, n, accumulate);
  LAUNCH_CHECK("from_half");
}

void swap01_from_f32(const float* in, void* out, int out_type, int64_t A, int64_t C, int64_t F, cudaStream_t s) {
  const int64_t n = A * C * F;
  if (n == 0) return;
  if (out_type == kF32) swap01(in, static_cast<float*>(out), A, C, F, s);
  else if (out_type == kF16) swap01(in, static_cast<__half*>(out), A, C, F, s);
  else swap01(in, static_cast<__nv_bfloat16*>(out), A, C, F, s);
  LAUNCH_CHECK("swap01_from_f32");
}

void swap01_to_f32(const void* in, int in_type, float* out, int64_t A, int64_t C, int64_t F, cudaStream_t s) {
  const int64_t n = A * C * F;
  if (n == 0) return;
  if (in_type == kF32) swap01(static_cast<const float*>(in), out, A, C, F, s);
  else if (in_type == kF16) swap01(static_cast<const __half*>(in), out, A, C, F, s);
  else swap01(static_cast<const __nv_bfloat16*>(in), out, A, C, F, s);
  LAUNCH_CHECK("swap01_to_f32");
}

void unscale_check(float* g, const uint32_t* trained, int64_t n, const float* scale, int* found, cudaStream_t s) {
  if (n == 0) return;
  unscale_check_k<<<blocks_for(n), kThreads, 0, s>>>(g, trained, n, scale, found);
  LAUNCH_CHECK("unscale_check");
}

void update_scale(float* scale, int* good, int* found, int interval, cudaStream_t s) {
  update_scale_k<<<1, 1, 0, s>>>(scale, good, found, interval);
  LAUNCH_CHECK("update_scale");
}

void clip_factors(const double* sums, int64_t nv, bool per_variable, double c, float* factors, cudaStream_t s) {
  if (nv == 0) return;
  clip_factors_k<<<1, kThreads, 0, s>>>(sums, nv, per_variable, c, factors);
  LAUNCH_CHECK("clip_factors");
}

}  // namespace rnntrain::cuda::k
