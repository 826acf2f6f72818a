// Kernels of the non-recurrent layers and of the glue around cuDNN stacks: bias + activation,
// softmax, Embedding, Masking, dropout masks, Bidirectional merges, time flips and padded-step
// fixes. Kernels first, then launchers. Mirrors backend/cpu/basic_layers.cpp and rnn_layers.cpp.
#include <algorithm>
#include <cstdio>

#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"

namespace rnntrain::cuda::k {

namespace {

// ---------------- kernels ----------------

__global__ void fill_rows_k(float* out, const float* vec, int64_t rows, int64_t cols) {
  GRID_LOOP(i, rows * cols) out[i] = vec[i % cols];
}

// A block a row at a time (no division per element).
__global__ void bias_act_k(float* y, const float* bias, int64_t rows, int64_t cols, Activation act, float* pre) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float v = y[r * cols + j];
      if (bias) v += bias[j];
      if (pre) pre[r * cols + j] = v;
      y[r * cols + j] = act_f(act, v);
    }
}

__global__ void act_grad_k(float* d, const float* y, int64_t n, Activation act) {
  GRID_LOOP(i, n) d[i] = act_grad_f(act, y[i], d[i]);
}

// One thread per row, as the CPU loop (rows are positions; cols the classes).
__global__ void softmax_rows_k(float* x, int64_t rows, int64_t cols) {
  GRID_LOOP(r, rows) {
    float* row = x + r * cols;
    float mx = row[0];
    for (int64_t j = 1; j < cols; ++j) mx = fmaxf(mx, row[j]);
    float sum = 0.0f;
    for (int64_t j = 0; j < cols; ++j) {
      row[j] = expf(row[j] - mx);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < cols; ++j) row[j] *= inv;
  }
}

__global__ void softmax_rows_grad_k(const float* y, const float* dy, float* dpre, int64_t rows, int64_t cols) {
  GRID_LOOP(r, rows) {
    const float* yr = y + r * cols;
    const float* dr = dy + r * cols;
    float dot = 0.0f;
    for (int64_t j = 0; j < cols; ++j) dot += yr[j] * dr[j];
    float* out = dpre + r * cols;
    for (int64_t j = 0; j < cols; ++j) out[j] = yr[j] * (dr[j] - dot);
  }
}

__global__ void embedding_forward_k(const float* ids, const float* emb, float* y, int64_t n, int64_t E) {
  GRID_LOOP(i, n * E) {
    const int64_t k = i / E, j = i % E;
    y[i] = emb[static_cast<int64_t>(ids[k]) * E + j];
  }
}

__global__ void embedding_backward_k(const float* ids, const float* dy, float* demb, int64_t n, int64_t E) {
  GRID_LOOP(i, n * E) {
    const int64_t k = i / E, j = i % E;
    atomicAdd(demb + static_cast<int64_t>(ids[k]) * E + j, dy[i]);
  }
}

__global__ void masking_forward_k(const float* x, float* y, const uint8_t* mask_in, uint8_t* mask_out, uint8_t* used,
                                  int64_t steps, int64_t F, float value) {
  GRID_LOOP(k, steps) {
    const float* v = x + k * F;
    bool u = false;
    for (int64_t j = 0; j < F; ++j) u = u || v[j] != value;
    used[k] = u;
    mask_out[k] = (mask_in ? mask_in[k] : 1) && u;
    float* o = y + k * F;
    for (int64_t j = 0; j < F; ++j) o[j] = u ? v[j] : 0.0f;
  }
}

__global__ void masking_backward_k(const float* dy, float* dx, const uint8_t* used, int64_t steps, int64_t F) {
  GRID_LOOP(i, steps * F) dx[i] = used[i / F] ? dy[i] : 0.0f;
}

// splitmix64 of (seed, index): a counter-based uniform in [0, 1) with 24 bits.
__device__ inline float uniform01(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

__global__ void dropout_mask_k(float* m, int64_t n, float keep, float scale, const uint64_t* seed, uint64_t site) {
  const uint64_t s = *seed + site * 0xD1B54A32D192ED03ull;
  GRID_LOOP(i, n) m[i] = uniform01(s, static_cast<uint64_t>(i)) < keep ? scale : 0.0f;
}

__global__ void mul_k(const float* a, const float* b, float* out, int64_t n) { GRID_LOOP(i, n) out[i] = a[i] * b[i]; }
__global__ void add_inplace_k(float* a, const float* b, int64_t n) { GRID_LOOP(i, n) a[i] += b[i]; }

__global__ void mul_per_sequence_k(const float* x, const float* m, float* out, int64_t B, int64_t T, int64_t F) {
  GRID_LOOP(i, B * T * F) {
    const int64_t f = i % F, b = i / (T * F);
    out[i] = x[i] * m[b * F + f];
  }
}

__global__ void merge_dirs_k(MergeMode mode, int64_t rows, int64_t H, const float* a, int64_t lda, const float* b,
                             int64_t ldb, float* out) {
  GRID_LOOP(i, rows * H) {
    const int64_t r = i / H, j = i % H;
    const float x = a[r * lda + j], y = b[r * ldb + j];
    switch (mode) {
      case MergeMode::Concat:
        out[r * 2 * H + j] = x;
        out[r * 2 * H + H + j] = y;
        break;
      case MergeMode::Sum: out[i] = x + y; break;
      case MergeMode::Mul: out[i] = x * y; break;
      case MergeMode::Ave: out[i] = (x + y) * 0.5f; break;
    }
  }
}

__global__ void unmerge_dirs_k(MergeMode mode, int64_t rows, int64_t H, const float* dy, const float* a, int64_t lda,
                               const float* b, int64_t ldb, float* da, int64_t ldda, float* db, int64_t lddb) {
  GRID_LOOP(i, rows * H) {
    const int64_t r = i / H, j = i % H;
    float ga, gb;
    switch (mode) {
      case MergeMode::Concat: ga = dy[r * 2 * H + j], gb = dy[r * 2 * H + H + j]; break;
      case MergeMode::Sum: ga = gb = dy[i]; break;
      case MergeMode::Mul: ga = dy[i] * b[r * ldb + j], gb = dy[i] * a[r * lda + j]; break;
      default: ga = gb = 0.5f * dy[i];  // Ave
    }
    da[r * ldda + j] = ga;
    db[r * lddb + j] = gb;
  }
}

__global__ void flip_time_k(const float* in, float* out, int64_t B, int64_t T, int64_t F) {
  GRID_LOOP(i, B * T * F) {
    const int64_t f = i % F, t = (i / F) % T, b = i / (T * F);
    out[i] = in[(b * T + (T - 1 - t)) * F + f];
  }
}

__global__ void fix_padded_outputs_k(float* y, int64_t B, int64_t T, int64_t F, const int32_t* lens, bool carry_last) {
  GRID_LOOP(i, B * T * F) {
    const int64_t f = i % F, t = (i / F) % T, b = i / (T * F);
    const int64_t len = lens[b];
    if (t < len) continue;
    y[i] = (carry_last && len > 0) ? y[(b * T + len - 1) * F + f] : 0.0f;
  }
}

__global__ void prepare_padded_grads_k(const float* dy, float* out, int64_t B, int64_t T, int64_t F,
                                       const int32_t* lens, bool fold) {
  GRID_LOOP(i, B * T * F) {
    const int64_t f = i % F, t = (i / F) % T, b = i / (T * F);
    const int64_t len = lens[b];
    float v = t < len ? dy[i] : 0.0f;
    if (fold && t == len - 1)
      for (int64_t u = len; u < T; ++u) v += dy[(b * T + u) * F + f];
    out[i] = v;
  }
}

__global__ void zero_padded_k(float* x, int64_t B, int64_t T, int64_t F, const int32_t* lens) {
  GRID_LOOP(i, B * T * F) {
    const int64_t t = (i / F) % T, b = i / (T * F);
    if (t >= lens[b]) x[i] = 0.0f;
  }
}

__global__ void zero_empty_rows_k(float* x, int64_t B, int64_t F, const int32_t* lens) {
  GRID_LOOP(i, B * F) {
    if (lens[i / F] == 0) x[i] = 0.0f;
  }
}

__global__ void lengths_from_mask_k(const uint8_t* mask, int64_t B, int64_t T, int32_t* lens) {
  GRID_LOOP(b, B) {
    int64_t len = 0;
    while (len < T && mask[b * T + len]) ++len;
    lens[b] = static_cast<int32_t>(len);
  }
}

__global__ void last_step_gather_k(const float* y, int64_t B, int64_t T, int64_t F, const int32_t* lens, float* out) {
  GRID_LOOP(i, B * F) {
    const int64_t b = i / F, len = lens[b];
    out[i] = len > 0 ? y[(b * T + len - 1) * F + i % F] : 0.0f;
  }
}

__global__ void last_step_scatter_k(const float* dy, int64_t B, int64_t T, int64_t F, const int32_t* lens, float* out) {
  GRID_LOOP(i, B * T * F) {
    const int64_t f = i % F, t = (i / F) % T, b = i / (T * F);
    out[i] = t == lens[b] - 1 ? dy[b * F + f] : 0.0f;
  }
}

__global__ void reverse_in_lengths_k(const float* in, float* out, int64_t B, int64_t T, int64_t F, const int32_t* lens,
                                     bool zero_padded, bool accumulate) {
  GRID_LOOP(i, B * T * F) {
    const int64_t f = i % F, t = (i / F) % T, b = i / (T * F), len = lens[b];
    const float v = t < len ? in[(b * T + len - 1 - t) * F + f] : zero_padded ? 0.0f : in[i];
    out[i] = accumulate ? out[i] + v : v;
  }
}

__global__ void fill_i32_k(int32_t* p, int64_t n, int32_t v) {
  GRID_LOOP(i, n) p[i] = v;
}

}  // namespace

// ---------------- launchers ----------------

void fill_rows(float* out, const float* vec, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows * cols == 0) return;
  fill_rows_k<<<blocks_for(rows * cols), kThreads, 0, s>>>(out, vec, rows, cols);
  LAUNCH_CHECK("fill_rows");
}

void bias_act(float* y, const float* bias, int64_t rows, int64_t cols, Activation act, cudaStream_t s, float* pre) {
  if (rows * cols == 0 || (!bias && act == Activation::Linear && !pre)) return;
  bias_act_k<<<static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20)), cols >= 256 ? 256 : 128, 0, s>>>(y, bias, rows,
                                                                                                 cols, act, pre);
  LAUNCH_CHECK("bias_act");
}

void act_grad(float* d, const float* y, int64_t n, Activation act, cudaStream_t s) {
  if (n == 0 || act == Activation::Linear) return;
  act_grad_k<<<blocks_for(n), kThreads, 0, s>>>(d, y, n, act);
  LAUNCH_CHECK("act_grad");
}

void softmax_rows(float* x, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows == 0) return;
  softmax_rows_k<<<blocks_for(rows), kThreads, 0, s>>>(x, rows, cols);
  LAUNCH_CHECK("softmax_rows");
}

void softmax_rows_grad(const float* y, const float* dy, float* dpre, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows == 0) return;
  softmax_rows_grad_k<<<blocks_for(rows), kThreads, 0, s>>>(y, dy, dpre, rows, cols);
  LAUNCH_CHECK("softmax_rows_grad");
}

void embedding_forward(const float* ids, const float* emb, float* y, int64_t n, int64_t E, cudaStream_t s) {
  if (n * E == 0) return;
  embedding_forward_k<<<blocks_for(n * E), kThreads, 0, s>>>(ids, emb, y, n, E);
  LAUNCH_CHECK("embedding_forward");
}

void embedding_backward(const float* ids, const float* dy, float* demb, int64_t n, int64_t E, cudaStream_t s) {
  if (n * E == 0) return;
  embedding_backward_k<<<blocks_for(n * E), kThreads, 0, s>>>(ids, dy, demb, n, E);
  LAUNCH_CHECK("embedding_backward");
}

void masking_forward(const float* x, float* y, const uint8_t* mask_in, uint8_t* mask_out, uint8_t* used,
                     int64_t steps, int64_t F, float value, cudaStream_t s) {
  if (steps == 0) return;
  masking_forward_k<<<blocks_for(steps), kThreads, 0, s>>>(x, y, mask_in, mask_out, used, steps, F, value);
  LAUNCH_CHECK("masking_forward");
}

void masking_backward(const float* dy, float* dx, const uint8_t* used, int64_t steps, int64_t F, cudaStream_t s) {
  if (steps * F == 0) return;
  masking_backward_k<<<blocks_for(steps * F), kThreads, 0, s>>>(dy, dx, used, steps, F);
  LAUNCH_CHECK("masking_backward");
}

void dropout_mask(float* m, int64_t n, float rate, const uint64_t* seed, uint64_t site, cudaStream_t s) {
  if (n == 0) return;
  const float keep = 1.0f - rate;
  dropout_mask_k<<<blocks_for(n), kThreads, 0, s>>>(m, n, keep, static_cast<float>(1.0 / (1.0 - rate)), seed, site);
  LAUNCH_CHECK("dropout_mask");
}

void mul(const float* a, const float* b, float* out, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  mul_k<<<blocks_for(n), kThreads, 0, s>>>(a, b, out, n);
  LAUNCH_CHECK("mul");
}

void add_inplace(float* a, const float* b, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  add_inplace_k<<<blocks_for(n), kThreads, 0, s>>>(a, b, n);
  LAUNCH_CHECK("add_inplace");
}

void mul_per_sequence(const float* x, const float* m, float* out, int64_t B, int64_t T, int64_t F, cudaStream_t s) {
  if (B * T * F == 0) return;
  mul_per_sequence_k<<<blocks_for(B * T * F), kThreads, 0, s>>>(x, m, out, B, T, F);
  LAUNCH_CHECK("mul_per_sequence");
}

void merge_dirs(MergeMode mode, int64_t rows, int64_t H, const float* a, int64_t lda, const float* b, int64_t ldb, float* out,
                cudaStream_t s) {
  if (rows * H == 0) return;
  merge_dirs_k<<<blocks_for(rows * H), kThreads, 0, s>>>(mode, rows, H, a, lda, b, ldb, out);
  LAUNCH_CHECK("merge_dirs");
}

void unmerge_dirs(MergeMode mode, int64_t rows, int64_t H, const float* dy, const float* a, int64_t lda, const float* b,
                  int64_t ldb, float* da, int64_t ldda, float* db, int64_t lddb, cudaStream_t s) {
  if (rows * H == 0) return;
  unmerge_dirs_k<<<blocks_for(rows * H), kThreads, 0, s>>>(mode, rows, H, dy, a, lda, b, ldb, da, ldda, db, lddb);
  LAUNCH_CHECK("unmerge_dirs");
}

void flip_time(const float* in, float* out, int64_t B, int64_t T, int64_t F, cudaStream_t s) {
  if (B * T * F == 0) return;
  flip_time_k<<<blocks_for(B * T * F), kThreads, 0, s>>>(in, out, B, T, F);
  LAUNCH_CHECK("flip_time");
}

void fix_padded_outputs(float* y, int64_t B, int64_t T, int64_t F, const int32_t* lens, bool carry_last,
                        cudaStream_t s) {
  if (B * T * F == 0) return;
  fix_padded_outputs_k<<<blocks_for(B * T * F), kThreads, 0, s>>>(y, B, T, F, lens, carry_last);
  LAUNCH_CHECK("fix_padded_outputs");
}

void prepare_padded_grads(const float* dy, float* out, int64_t B, int64_t T, int64_t F, const int32_t* lens,
                          bool fold_into_last, cudaStream_t s) {
  if (B * T * F == 0) return;
  prepare_padded_grads_k<<<blocks_for(B * T * F), kThreads, 0, s>>>(dy, out, B, T, F, lens, fold_into_last);
  LAUNCH_CHECK("prepare_padded_grads");
}

void zero_padded(float* x, int64_t B, int64_t T, int64_t F, const int32_t* lens, cudaStream_t s) {
  if (B * T * F == 0) return;
  zero_padded_k<<<blocks_for(B * T * F), kThreads, 0, s>>>(x, B, T, F, lens);
  LAUNCH_CHECK("zero_padded");
}

void zero_empty_rows(float* x, int64_t B, int64_t F, const int32_t* lens, cudaStream_t s) {
  if (B * F == 0) return;
  zero_empty_rows_k<<<blocks_for(B * F), kThreads, 0, s>>>(x, B, F, lens);
  LAUNCH_CHECK("zero_empty_rows");
}

void lengths_from_mask(const uint8_t* mask, int64_t B, int64_t T, int32_t* lens, cudaStream_t s) {
  if (B == 0) return;
  lengths_from_mask_k<<<blocks_for(B), kThreads, 0, s>>>(mask, B, T, lens);
  LAUNCH_CHECK("lengths_from_mask");
}

void last_step_gather(const float* y, int64_t B, int64_t T, int64_t F, const int32_t* lens, float* out,
                      cudaStream_t s) {
  if (B * F == 0) return;
  last_step_gather_k<<<blocks_for(B * F), kThreads, 0, s>>>(y, B, T, F, lens, out);
  LAUNCH_CHECK("last_step_gather");
}

void last_step_scatter(const float* dy, int64_t B, int64_t T, int64_t F, const int32_t* lens, float* out,
                       cudaStream_t s) {
  if (B * T * F == 0) return;
  last_step_scatter_k<<<blocks_for(B * T * F), kThreads, 0, s>>>(dy, B, T, F, lens, out);
  LAUNCH_CHECK("last_step_scatter");
}

void reverse_in_lengths(const float* in, float* out, int64_t B, int64_t T, int64_t F, const int32_t* lens,
                        bool zero_padded, bool accumulate, cudaStream_t s) {
  if (B * T * F == 0) return;
  reverse_in_lengths_k<<<blocks_for(B * T * F), kThreads, 0, s>>>(in, out, B, T, F, lens, zero_padded, accumulate);
  LAUNCH_CHECK("reverse_in_lengths");
}

void fill_i32(int32_t* p, int64_t n, int32_t v, cudaStream_t s) {
  if (n == 0) return;
  fill_i32_k<<<blocks_for(n), kThreads, 0, s>>>(p, n, v);
  LAUNCH_CHECK("fill_i32");
}

}  // namespace rnntrain::cuda::k
