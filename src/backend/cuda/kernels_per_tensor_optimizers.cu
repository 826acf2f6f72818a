// Kernels of the per-tensor optimizers (per_tensor_optimizers.h): the gather into Keras layout,
// Adafactor's factored moments, velocity and update, and Muon's moments and steps around its
// Newton-Schulz iteration (cuBLAS, in per_tensor_optimizers.cpp), as model/per_tensor_optimizers.cpp computes them
// (sums and means in double, values in float32 without contraction).
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"

namespace rnntrain::cuda::k {

namespace {

__device__ float square_plus(float x, float eps) { return __fadd_rn(__fmul_rn(x, x), eps); }

__global__ void gather_k(OptArgs a, const TensorVar* vars, const int64_t* pos, const int32_t* var, int64_t n, float* g,
                         float* p) {
  if (a.skip && *a.skip) return;
  GRID_LOOP(j, n) {
    const float decay = a.sched[0] * vars[var[j]].wd;
    const int64_t i = pos[j];
    float x = a.g[i];
    if (a.clip == GradClip::Factors) x *= a.factors[var[j]];
    else if (a.clip == GradClip::Value) x = fminf(fmaxf(x, -a.clipvalue), a.clipvalue);
    float w = a.p[i];
    if (decay > 0.0f) w -= w * decay;
    g[j] = x, p[j] = w;
  }
}

// One block per row: r[a] = b r[a] + (1 - b) mean_j(g[a, j]^2 + eps1).
__global__ void rows_k(const float* g, int64_t rows, int64_t cols, float* r, float eps1, const float* sched,
                       const int* skip) {
  if (skip && *skip) return;
  const float b = sched[2];
  for (int64_t a = blockIdx.x; a < rows; a += gridDim.x) {
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += square_plus(g[a * cols + j], eps1);
    s = block_sum(s);
    if (threadIdx.x == 0) r[a] = __fadd_rn(__fmul_rn(b, r[a]), __fmul_rn(1.0f - b, static_cast<float>(s / cols)));
  }
}

// One thread per column: c[j] = b c[j] + (1 - b) mean_a(g[a, j]^2 + eps1).
__global__ void cols_k(const float* g, int64_t rows, int64_t cols, float* c, float eps1, const float* sched,
                       const int* skip) {
  if (skip && *skip) return;
  const float b = sched[2];
  GRID_LOOP(j, cols) {
    double s = 0.0;
    for (int64_t a = 0; a < rows; ++a) s += square_plus(g[a * cols + j], eps1);
    c[j] = __fadd_rn(__fmul_rn(b, c[j]), __fmul_rn(1.0f - b, static_cast<float>(s / rows)));
  }
}

// One block: *out = sum of r[0, rows) (run after rows_k).
__global__ void sum_k(const float* r, int64_t rows, double* out, const int* skip) {
  if (skip && *skip) return;
  double s = 0.0;
  for (int64_t a = threadIdx.x; a < rows; a += blockDim.x) s += r[a];
  s = block_sum(s);
  if (threadIdx.x == 0) *out = s;
}

// One block per variable: out[v] = sum of x^2 over its elements, in a fixed order (every rank of a
// data-parallel run gets the same bits).
__global__ void var_squares_k(const float* x, const TensorVar* vars, int64_t nv, double* out, const int* skip) {
  if (skip && *skip) return;
  for (int64_t v = blockIdx.x; v < nv; v += gridDim.x) {
    const float* xv = x + vars[v].off;
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < vars[v].n; j += blockDim.x) s += static_cast<double>(xv[j]) * xv[j];
    s = block_sum(s);
    if (threadIdx.x == 0) out[v] = s;
  }
}

__global__ void velocity_k(const TensorVar* vars, const int32_t* var, int64_t n, int64_t nv, float* g, const float* r,
                           const float* c, float* vel, const double* sums, float eps1, const float* sched,
                           const int* skip) {
  if (skip && *skip) return;
  const float b = sched[2];
  GRID_LOOP(j, n) {
    const int v = var[j];
    const TensorVar& t = vars[v];
    const float x = g[j];
    float w;
    if (t.factored) {
      const int64_t e = j - t.off, a = e / t.cols, col = e % t.cols;
      const float r_mean = static_cast<float>(sums[2 * nv + v] / static_cast<double>(t.rows));
      w = __fmul_rn(__fdiv_rn(r[t.r_off + a], r_mean), c[t.c_off + col]);
    } else {
      w = __fadd_rn(__fmul_rn(b, vel[j]), __fmul_rn(1.0f - b, square_plus(x, eps1)));
    }
    vel[j] = w;
    g[j] = __fdiv_rn(x, sqrtf(w));
  }
}

__global__ void apply_k(const TensorVar* vars, const int32_t* var, const int64_t* pos, int64_t n, int64_t nv,
                        const float* p, const float* u, const double* sums, float eps2, float clip, const float* sched,
                        const int* skip, float* P, double* nonfinite) {
  if (skip && *skip) return;
  const float rho = sched[1];
  GRID_LOOP(j, n) {
    const int v = var[j];
    const double count = static_cast<double>(vars[v].n);
    const float alpha = __fmul_rn(fmaxf(eps2, static_cast<float>(sqrt(sums[v] / count))), rho);
    const float f = fmaxf(1.0f, static_cast<float>(sqrt(sums[nv + v] / count) / clip));
    const float x = __fsub_rn(p[j], __fmul_rn(alpha, __fdiv_rn(u[j], f)));
    P[pos[j]] = x;
    if (nonfinite && !isfinite(x)) *nonfinite = 1.0;
  }
}

__global__ void muon_moments_k(const TensorVar* vars, const int32_t* var, const int64_t* pos, int64_t n, float* g,
                               const float* p, float* m, float* v, float c1, float c2, float eps, float mu,
                               bool nesterov, const float* sched, const int* skip, float* P, double* nonfinite) {
  if (skip && *skip) return;
  const float alpha = sched[1];
  GRID_LOOP(j, n) {
    const float x = g[j];
    if (vars[var[j]].adamw) {
      const float mj = __fadd_rn(m[j], __fmul_rn(__fsub_rn(x, m[j]), c1));
      const float vj = __fadd_rn(v[j], __fmul_rn(__fsub_rn(__fmul_rn(x, x), v[j]), c2));
      m[j] = mj, v[j] = vj;
      const float w = __fsub_rn(p[j], __fdiv_rn(__fmul_rn(mj, alpha), __fadd_rn(sqrtf(vj), eps)));
      P[pos[j]] = w;
      if (nonfinite && !isfinite(w)) *nonfinite = 1.0;
    } else {
      const float mj = __fadd_rn(m[j], __fadd_rn(x, __fmul_rn(m[j], mu - 1.0f)));
      m[j] = mj;
      g[j] = nesterov ? __fadd_rn(x, __fmul_rn(mu, mj)) : mj;
    }
  }
}

__global__ void muon_normalize_k(const TensorVar* vars, const int32_t* var, int64_t n, float* x, const double* sums,
                                 const int* skip) {
  if (skip && *skip) return;
  GRID_LOOP(j, n) {
    const int v = var[j];
    if (!vars[v].adamw) x[j] = __fdiv_rn(x[j], __fadd_rn(static_cast<float>(sqrt(sums[v])), 1e-7f));
  }
}

__global__ void muon_apply_k(const TensorVar* vars, const int32_t* var, const int64_t* pos, int64_t n, const float* p,
                             const float* x, float rms_rate, const float* sched, const int* skip, float* P,
                             double* nonfinite) {
  if (skip && *skip) return;
  const float lr = sched[0];
  GRID_LOOP(j, n) {
    const TensorVar& t = vars[var[j]];
    if (t.adamw) continue;
    const float scale = static_cast<float>(sqrt(static_cast<double>(t.rows > t.cols ? t.rows : t.cols)));
    const float w = __fsub_rn(p[j], __fmul_rn(__fmul_rn(__fmul_rn(lr, x[j]), scale), rms_rate));
    P[pos[j]] = w;
    if (nonfinite && !isfinite(w)) *nonfinite = 1.0;
  }
}

}  // namespace

void muon_moments(const TensorVar* vars, const int32_t* var, const int64_t* pos, int64_t n, float* g, const float* p,
                  float* m, float* v, float c1, float c2, float eps, float mu, bool nesterov, const float* sched,
                  const int* skip, float* P, double* nonfinite, cudaStream_t s) {
  if (n == 0) return;
  muon_moments_k<<<blocks_for(n), kThreads, 0, s>>>(vars, var, pos, n, g, p, m, v, c1, c2, eps, mu, nesterov, sched,
                                                    skip, P, nonfinite);
  LAUNCH_CHECK("muon_moments");
}

void muon_normalize(const TensorVar* vars, const int32_t* var, int64_t n, float* x, const double* sums, const int* skip,
                    cudaStream_t s) {
  if (n == 0) return;
  muon_normalize_k<<<blocks_for(n), kThreads, 0, s>>>(vars, var, n, x, sums, skip);
  LAUNCH_CHECK("muon_normalize");
}

void muon_apply(const TensorVar* vars, const int32_t* var, const int64_t* pos, int64_t n, const float* p,
                const float* x, float rms_rate, const float* sched, const int* skip, float* P, double* nonfinite,
                cudaStream_t s) {
  if (n == 0) return;
  muon_apply_k<<<blocks_for(n), kThreads, 0, s>>>(vars, var, pos, n, p, x, rms_rate, sched, skip, P, nonfinite);
  LAUNCH_CHECK("muon_apply");
}

void tensor_gather(const OptArgs& a, const TensorVar* vars, const int64_t* pos, const int32_t* var, int64_t n, float* g,
                   float* p, cudaStream_t s) {
  if (n == 0) return;
  gather_k<<<blocks_for(n), kThreads, 0, s>>>(a, vars, pos, var, n, g, p);
  LAUNCH_CHECK("tensor_gather");
}

void tensor_squares(const float* x, const TensorVar* vars, int64_t nv, double* out, const int* skip, cudaStream_t s) {
  if (nv == 0) return;
  var_squares_k<<<static_cast<unsigned>(std::min<int64_t>(nv, 65535)), kThreads, 0, s>>>(x, vars, nv, out, skip);
  LAUNCH_CHECK("tensor_squares");
}

void adafactor_moments(const TensorVar& h, int v, int64_t nv, const float* g, float* r, float* c, double* sums,
                       float eps1, const float* sched, const int* skip, cudaStream_t s) {
  if (!h.factored) return;
  const float* gv = g + h.off;
  rows_k<<<static_cast<unsigned>(std::min<int64_t>(h.rows, 65535)), kThreads, 0, s>>>(gv, h.rows, h.cols, r + h.r_off,
                                                                                       eps1, sched, skip);
  cols_k<<<blocks_for(h.cols), kThreads, 0, s>>>(gv, h.rows, h.cols, c + h.c_off, eps1, sched, skip);
  sum_k<<<1, kThreads, 0, s>>>(r + h.r_off, h.rows, sums + 2 * nv + v, skip);
  LAUNCH_CHECK("adafactor_moments");
}

void adafactor_velocity(const TensorVar* vars, const int32_t* var, int64_t n, int64_t nv, float* g, const float* r,
                        const float* c, float* vel, const double* sums, float eps1, const float* sched, const int* skip,
                        cudaStream_t s) {
  if (n == 0) return;
  velocity_k<<<blocks_for(n), kThreads, 0, s>>>(vars, var, n, nv, g, r, c, vel, sums, eps1, sched, skip);
  LAUNCH_CHECK("adafactor_velocity");
}

void adafactor_apply(const TensorVar* vars, const int32_t* var, const int64_t* pos, int64_t n, int64_t nv,
                     const float* p, const float* u, const double* sums, float eps2, float clip, const float* sched,
                     const int* skip, float* P, double* nonfinite, cudaStream_t s) {
  if (n == 0) return;
  apply_k<<<blocks_for(n), kThreads, 0, s>>>(vars, var, pos, n, nv, p, u, sums, eps2, clip, sched, skip, P, nonfinite);
  LAUNCH_CHECK("adafactor_apply");
}

}  // namespace rnntrain::cuda::k
