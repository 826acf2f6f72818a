// Kernels of the layers around the recurrent stacks (sequence_stages.cpp), mirroring
// backend/cpu/sequence_layers.cpp: Conv1D's window gather and its gradient, the 1D poolings, the
// global poolings and LayerNormalization. Every gradient is a gather (each output element sums what
// reaches it in a fixed order), so steps are deterministic and graph replays equal eager steps.
#include <cfloat>

#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"

namespace rnntrain::cuda::k {

namespace {

// col[(b, t'), j, c] = x[b, t' * strides - pad + j * dilation, c], 0 outside the sequence.
__global__ void conv1d_im2col_k(const float* x, float* col, Window1d w, int64_t B, int64_t T, int64_t C, int64_t K) {
  GRID_LOOP(i, B * w.out * K * C) {
    const int64_t c = i % C, j = i / C % K, t = i / (C * K) % w.out, b = i / (C * K * w.out);
    const int64_t src = t * w.strides - w.pad + j * w.dilation;
    col[i] = src >= 0 && src < T ? x[(b * T + src) * C + c] : 0.0f;
  }
}

// dx[b, s, c] = the sum over the (t', j) whose window place is s of dcol[(b, t'), j, c], j ascending.
__global__ void conv1d_col2im_k(const float* dcol, float* dx, Window1d w, int64_t B, int64_t T, int64_t C, int64_t K) {
  GRID_LOOP(i, B * T * C) {
    const int64_t c = i % C, s = i / C % T, b = i / (C * T);
    float acc = 0.0f;
    for (int64_t j = 0; j < K; ++j) {
      const int64_t p = s + w.pad - j * w.dilation;  // = t' * strides
      if (p < 0 || p % w.strides) continue;
      const int64_t t = p / w.strides;
      if (t < w.out) acc += dcol[((b * w.out + t) * K + j) * C + c];
    }
    dx[i] = acc;
  }
}

// The window of output step t: input steps [lo, hi) inside the sequence.
__device__ inline void pool_range(const Window1d& w, int64_t t, int64_t P, int64_t T, int64_t& lo, int64_t& hi) {
  lo = t * w.strides - w.pad;
  hi = min(lo + P, T);
  lo = max(lo, int64_t{0});
}

__global__ void pool1d_forward_k(const float* x, float* y, int32_t* from, Window1d w, int64_t B, int64_t T, int64_t C,
                                 int64_t P, bool max_pool) {
  GRID_LOOP(i, B * w.out * C) {
    const int64_t c = i % C, t = i / C % w.out, b = i / (C * w.out);
    int64_t lo, hi;
    pool_range(w, t, P, T, lo, hi);
    float acc = max_pool ? -INFINITY : 0.0f;
    int64_t at = lo;
    for (int64_t u = lo; u < hi; ++u) {
      const float v = x[(b * T + u) * C + c];
      if (!max_pool) acc += v;
      else if (v > acc || v != v) acc = v, at = u;  // the first maximum; NaN wins
    }
    y[i] = max_pool ? acc : acc / static_cast<float>(hi - lo);
    if (max_pool) from[i] = static_cast<int32_t>(at);
  }
}

// dx[b, s, c] = the sum over the output steps whose window holds s (ascending) of what they pass to s.
__global__ void pool1d_backward_k(const float* dy, const int32_t* from, float* dx, Window1d w, int64_t B, int64_t T,
                                  int64_t C, int64_t P, bool max_pool) {
  GRID_LOOP(i, B * T * C) {
    const int64_t c = i % C, s = i / C % T, b = i / (C * T);
    // Output steps t with t * strides - pad <= s < t * strides - pad + P.
    int64_t t0 = s + w.pad - P + 1;
    t0 = t0 <= 0 ? 0 : (t0 + w.strides - 1) / w.strides;
    const int64_t t1 = min((s + w.pad) / w.strides, w.out - 1);
    float acc = 0.0f;
    for (int64_t t = t0; t <= t1; ++t) {
      const int64_t o = (b * w.out + t) * C + c;
      if (max_pool) {
        if (from[o] == s) acc += dy[o];
      } else {
        int64_t lo, hi;
        pool_range(w, t, P, T, lo, hi);
        acc += dy[o] / static_cast<float>(hi - lo);
      }
    }
    dx[i] = acc;
  }
}

// y[b, c]: the mean over the steps the mask keeps (all without one; 0 / 0 = NaN with none kept), or
// the maximum over every step; n[b, c]: the kept steps, or how many steps equal the maximum.
__global__ void global_pool_forward_k(const float* x, const uint8_t* mask, float* y, float* n, int64_t B, int64_t T,
                                      int64_t C, bool max_pool) {
  GRID_LOOP(i, B * C) {
    const int64_t c = i % C, b = i / C;
    float acc = max_pool ? -INFINITY : 0.0f, count = 0.0f;
    for (int64_t t = 0; t < T; ++t) {
      const float v = x[(b * T + t) * C + c];
      if (max_pool) acc = v > acc || v != v ? v : acc;
      else if (!mask || mask[b * T + t]) acc += v, count += 1.0f;
    }
    if (max_pool)
      for (int64_t t = 0; t < T; ++t) count += x[(b * T + t) * C + c] == acc ? 1.0f : 0.0f;
    y[i] = max_pool ? acc : acc / count;
    n[i] = count;
  }
}

__global__ void global_pool_backward_k(const float* x, const float* y, const float* n, const float* dy,
                                       const uint8_t* mask, float* dx, int64_t B, int64_t T, int64_t C, bool max_pool) {
  GRID_LOOP(i, B * T * C) {
    const int64_t c = i % C, t = i / C % T, b = i / (C * T), o = b * C + c;
    const bool takes = max_pool ? x[i] == y[o] : !mask || mask[b * T + t];
    dx[i] = takes ? dy[o] / n[o] : 0.0f;
  }
}

// One block a row: mean and 1 / sqrt(variance + eps) summed in double (as the CPU), then the row.
__global__ void layer_norm_forward_k(const float* x, const float* gamma, const float* beta, float* y, float* stats,
                                     int64_t C, float eps) {
  const float* in = x + blockIdx.x * C;
  double s = 0.0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += in[c];
  const double mean = block_sum(s) / C;
  double q = 0.0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) q += (in[c] - mean) * (in[c] - mean);
  const float inv = static_cast<float>(1.0 / sqrt(block_sum(q) / C + eps)), m = static_cast<float>(mean);
  float* out = y + blockIdx.x * C;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float v = (in[c] - m) * inv;
    out[c] = (gamma ? v * gamma[c] : v) + (beta ? beta[c] : 0.0f);
  }
  if (threadIdx.x == 0) stats[2 * blockIdx.x] = m, stats[2 * blockIdx.x + 1] = inv;
}

// dx of a row, and the row's terms of the gamma gradient (gterm = dy * xhat, summed over rows by a GEMV).
__global__ void layer_norm_backward_k(const float* x, const float* gamma, const float* stats, const float* dy,
                                      float* dx, float* gterm, int64_t C) {
  const int64_t r = blockIdx.x;
  const float m = stats[2 * r], inv = stats[2 * r + 1];
  const float* in = x + r * C;
  const float* g = dy + r * C;
  double a = 0.0, b = 0.0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float xhat = (in[c] - m) * inv, d = gamma ? g[c] * gamma[c] : g[c];
    a += d, b += static_cast<double>(d) * xhat;
    if (gterm) gterm[r * C + c] = g[c] * xhat;
  }
  const float ma = static_cast<float>(block_sum(a) / C), mb = static_cast<float>(block_sum(b) / C);
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float xhat = (in[c] - m) * inv, d = gamma ? g[c] * gamma[c] : g[c];
    dx[r * C + c] = inv * (d - ma - xhat * mb);
  }
}

}  // namespace

void conv1d_im2col(const float* x, float* col, const Window1d& w, int64_t B, int64_t T, int64_t C, int64_t K,
                   cudaStream_t s) {
  if (B * w.out * K * C == 0) return;
  conv1d_im2col_k<<<blocks_for(B * w.out * K * C), kThreads, 0, s>>>(x, col, w, B, T, C, K);
  LAUNCH_CHECK("conv1d_im2col");
}

void conv1d_col2im(const float* dcol, float* dx, const Window1d& w, int64_t B, int64_t T, int64_t C, int64_t K,
                   cudaStream_t s) {
  if (B * T * C == 0) return;
  conv1d_col2im_k<<<blocks_for(B * T * C), kThreads, 0, s>>>(dcol, dx, w, B, T, C, K);
  LAUNCH_CHECK("conv1d_col2im");
}

void pool1d_forward(const float* x, float* y, int32_t* from, const Window1d& w, int64_t B, int64_t T, int64_t C,
                    int64_t P, bool max_pool, cudaStream_t s) {
  if (B * w.out * C == 0) return;
  pool1d_forward_k<<<blocks_for(B * w.out * C), kThreads, 0, s>>>(x, y, from, w, B, T, C, P, max_pool);
  LAUNCH_CHECK("pool1d_forward");
}

void pool1d_backward(const float* dy, const int32_t* from, float* dx, const Window1d& w, int64_t B, int64_t T, int64_t C,
                     int64_t P, bool max_pool, cudaStream_t s) {
  if (B * T * C == 0) return;
  pool1d_backward_k<<<blocks_for(B * T * C), kThreads, 0, s>>>(dy, from, dx, w, B, T, C, P, max_pool);
  LAUNCH_CHECK("pool1d_backward");
}

void global_pool_forward(const float* x, const uint8_t* mask, float* y, float* n, int64_t B, int64_t T, int64_t C,
                         bool max_pool, cudaStream_t s) {
  if (B * C == 0) return;
  global_pool_forward_k<<<blocks_for(B * C), kThreads, 0, s>>>(x, mask, y, n, B, T, C, max_pool);
  LAUNCH_CHECK("global_pool_forward");
}

void global_pool_backward(const float* x, const float* y, const float* n, const float* dy, const uint8_t* mask,
                          float* dx, int64_t B, int64_t T, int64_t C, bool max_pool, cudaStream_t s) {
  if (B * T * C == 0) return;
  global_pool_backward_k<<<blocks_for(B * T * C), kThreads, 0, s>>>(x, y, n, dy, mask, dx, B, T, C, max_pool);
  LAUNCH_CHECK("global_pool_backward");
}

void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y, float* stats, int64_t rows,
                        int64_t C, float eps, cudaStream_t s) {
  if (rows == 0) return;
  layer_norm_forward_k<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(x, gamma, beta, y, stats, C, eps);
  LAUNCH_CHECK("layer_norm_forward");
}

void layer_norm_backward(const float* x, const float* gamma, const float* stats, const float* dy, float* dx,
                         float* gterm, int64_t rows, int64_t C, cudaStream_t s) {
  if (rows == 0) return;
  layer_norm_backward_k<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(x, gamma, stats, dy, dx, gterm, C);
  LAUNCH_CHECK("layer_norm_backward");
}

}  // namespace rnntrain::cuda::k
