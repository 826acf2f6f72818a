// Kernels of the loss (Keras 3 losses with their gradients, mirroring model/loss.cpp in double
// precision per position) and of the optimizers (a kernel per kind over the flat parameter buffer,
// with its descriptor's rule, spec/optimizers/*.h, as model/optimizer.cpp), plus the per-variable
// gradient norms for clipping. Kernels first, then launchers.
#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"

namespace rnntrain::cuda::k {

namespace {

// LossKind values (static_assert in session.cpp).
enum { kMSE = 0, kMAE = 1, kHuber = 2, kBinary = 3, kCategorical = 4, kSparse = 5 };

// ---------------- kernels ----------------

__device__ inline double clip_prob(double p, double lo, double hi) { return fmin(fmax(p, lo), hi); }
__device__ inline double sgn(double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }

// Adds the block's values of v into *sum (one atomic per block). Every thread of the block calls it.
__device__ void block_add(double v, double* sum) {
  __shared__ double part[kThreads];
  part[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0 && part[0] != 0.0) atomicAdd(sum, part[0]);
}

// The per-element losses (MSE, MAE, Huber, binary cross-entropy): one thread per element, so reads
// are coalesced; each block adds its partial sum of (loss / K) into a.sum.
__global__ void loss_elem_k(LossArgs a) {
  const double gs = (a.gscale_dev ? *a.gscale_dev : a.gscale) * (a.gmul ? static_cast<double>(*a.gmul) : 1.0);
  const double lo = static_cast<double>(1e-7f), hi = static_cast<double>(1.0f - 1e-7f);
  const int64_t K = a.k;
  const double inv_k = 1.0 / static_cast<double>(K);
  double acc = 0.0;
  GRID_LOOP(e, a.n * K) {
    const int64_t i = e / K;
    if (a.mask && !a.mask[i]) continue;
    const double x = a.pred[e], t = a.target[e];
    double v, d;
    if (a.kind == kBinary) {
      const double y = t * (1.0 - a.label_smoothing) + 0.5 * a.label_smoothing;
      if (a.from_logits) {
        v = fmax(x, 0.0) - x * y + log1p(exp(-fabs(x)));
        const double sg = x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
        d = sg - y;
      } else {
        const double c = clip_prob(x, lo, hi);
        v = -(y * log(c) + (1.0 - y) * log(1.0 - c));
        d = (x >= lo && x <= hi) ? -(y / c - (1.0 - y) / (1.0 - c)) : 0.0;
      }
    } else {
      const double err = x - t;
      if (a.kind == kMSE) v = err * err, d = 2.0 * err;
      else if (a.kind == kMAE) v = fabs(err), d = sgn(err);
      else if (fabs(err) <= a.delta) v = 0.5 * err * err, d = err;
      else v = a.delta * fabs(err) - 0.5 * a.delta * a.delta, d = a.delta * sgn(err);
    }
    acc += v * inv_k;
    if (a.grad) a.grad[e] = static_cast<float>(d * inv_k * gs);
  }
  block_add(acc, a.sum);
}

// The per-row losses (categorical and sparse categorical cross-entropy): one thread per row.
__global__ void loss_k(LossArgs a) {
  const double gs = (a.gscale_dev ? *a.gscale_dev : a.gscale) * (a.gmul ? static_cast<double>(*a.gmul) : 1.0);
  const double lo = static_cast<double>(1e-7f), hi = static_cast<double>(1.0f - 1e-7f);
  GRID_LOOP(i, a.n) {
    if (a.mask && !a.mask[i]) continue;
    const int64_t K = a.k;
    const float* p = a.pred + i * K;
    float* g = a.grad ? a.grad + i * K : nullptr;
    double l = 0.0;
    {
      // Categorical (dense targets or sparse labels), targets smoothed towards 1/K.
      const float* t = a.sparse ? nullptr : a.target + i * K;
      const int64_t label = a.sparse ? static_cast<int64_t>(a.target[i]) : -1;
      const double ls = a.label_smoothing;
      auto target = [&](int64_t j) {
        const double raw = t ? static_cast<double>(t[j]) : (j == label ? 1.0 : 0.0);
        return ls > 0 ? raw * (1.0 - ls) + ls / static_cast<double>(K) : raw;
      };
      if (a.from_logits) {
        double m = p[0];
        for (int64_t j = 1; j < K; ++j) m = fmax(m, static_cast<double>(p[j]));
        double z = 0.0;
        for (int64_t j = 0; j < K; ++j) z += exp(p[j] - m);
        const double lse = m + log(z);
        double ysum = 0.0;
        for (int64_t j = 0; j < K; ++j) {
          const double y = target(j);
          ysum += y;
          l += y * (lse - p[j]);
        }
        if (g)
          for (int64_t j = 0; j < K; ++j) g[j] = static_cast<float>((ysum * exp(p[j] - lse) - target(j)) * gs);
      } else {
        double s = 0.0;
        for (int64_t j = 0; j < K; ++j) s += p[j];
        double gq = 0.0;
        for (int64_t j = 0; j < K; ++j) {
          const double q = p[j] / s, c = clip_prob(q, lo, hi), y = target(j);
          l -= y * log(c);
          gq += ((q >= lo && q <= hi) ? -y / c : 0.0) * q;
        }
        if (g)
          for (int64_t j = 0; j < K; ++j) {
            const double q = p[j] / s, c = clip_prob(q, lo, hi);
            const double w = (q >= lo && q <= hi) ? -target(j) / c : 0.0;
            g[j] = static_cast<float>((w - gq) / s * gs);
          }
      }
    }
    atomicAdd(a.sum, l);
  }
}

// Each thread sums a contiguous chunk, flushing when the variable changes.
constexpr int64_t kChunk = 256;
__global__ void sum_squares_k(const float* g, const int32_t* var, int64_t n, double* sums) {
  GRID_LOOP(c, (n + kChunk - 1) / kChunk) {
    const int64_t end = min(n, (c + 1) * kChunk);
    int32_t cur = -1;
    double acc = 0.0;
    for (int64_t i = c * kChunk; i < end; ++i) {
      const int32_t v = var[i];
      if (v != cur) {
        if (cur >= 0 && acc != 0.0) atomicAdd(sums + cur, acc);
        cur = v, acc = 0.0;
      }
      if (v >= 0) acc += static_cast<double>(g[i]) * g[i];
    }
    if (cur >= 0 && acc != 0.0) atomicAdd(sums + cur, acc);
  }
}

// One thread per position; each block adds its partial sum of hits into a.sum.
__global__ void accuracy_k(AccuracyArgs a) {
  const int64_t K = a.k;
  double acc = 0.0;
  GRID_LOOP(i, a.n) {
    if (a.mask && !a.mask[i]) continue;
    const float* p = a.pred + i * K;
    if (a.mode == 0) {
      const float* t = a.target + i * K;
      int64_t same = 0;
      for (int64_t j = 0; j < K; ++j) same += t[j] == (p[j] > a.threshold ? 1.0f : 0.0f);
      acc += static_cast<double>(same) / static_cast<double>(K);
      continue;
    }
    int64_t best = 0;  // the first index of the maximum, as numpy's argmax
    for (int64_t j = 1; j < K; ++j)
      if (p[j] > p[best]) best = j;
    if (a.mode == 2) {
      acc += a.target[i] == static_cast<float>(best) ? 1.0 : 0.0;
    } else {
      const float* t = a.target + i * K;
      int64_t tbest = 0;
      for (int64_t j = 1; j < K; ++j)
        if (t[j] > t[tbest]) tbest = j;
      acc += tbest == best ? 1.0 : 0.0;
    }
  }
  block_add(acc, a.sum);
}

// The update of one kind: its descriptor's Rule on each trained element, after clipping and decay.
template <class Rule>
__global__ void optimizer_k(OptArgs a, Rule rule) {
  if (a.skip && *a.skip) return;
  const float lr = a.sched[0], alpha = a.sched[1], decay = a.sched[2];
  GRID_LOOP(i, a.n) {
    if (!bit_set(a.trained, i)) continue;
    float g = a.g[i];
    if (a.clip == 1) g *= a.factors[a.var[i]];
    else if (a.clip == 2) g *= a.factor;
    else if (a.clip == 3) g = fminf(fmaxf(g, -a.clipvalue), a.clipvalue);
    float p = a.p[i];
    if (decay > 0.0f) p -= p * decay;
    rule(p, g, a.s, i, lr, alpha);
    a.p[i] = p;
    if (a.nonfinite && !isfinite(p)) *a.nonfinite = 1.0;  // every writer stores the same value
  }
}

}  // namespace

// ---------------- launchers ----------------

void loss(const LossArgs& a, cudaStream_t s) {
  if (a.n == 0) return;
  if (a.kind == kCategorical || a.kind == kSparse) loss_k<<<blocks_for(a.n), kThreads, 0, s>>>(a);
  else loss_elem_k<<<blocks_for(a.n * a.k), kThreads, 0, s>>>(a);
  LAUNCH_CHECK("loss");
}

__global__ void count_k(const uint8_t* mask, int64_t n, double* out, bool inverse) {
  __shared__ int64_t part[kThreads];
  int64_t c = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) c += !mask || mask[i] != 0;
  part[threadIdx.x] = c;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = !inverse ? static_cast<double>(part[0]) : part[0] > 0 ? 1.0 / static_cast<double>(part[0]) : 0.0;
}

__global__ void invert_count_k(const double* count, double* out) { *out = *count > 0 ? 1.0 / *count : 0.0; }

void inverse_count(const uint8_t* mask, int64_t n, double* out, cudaStream_t s) {
  count_k<<<1, kThreads, 0, s>>>(mask, n, out, true);
  LAUNCH_CHECK("inverse_count");
}

void count_positions(const uint8_t* mask, int64_t n, double* out, cudaStream_t s) {
  count_k<<<1, kThreads, 0, s>>>(mask, n, out, false);
  LAUNCH_CHECK("count_positions");
}

void invert_count(const double* count, double* out, cudaStream_t s) {
  invert_count_k<<<1, 1, 0, s>>>(count, out);
  LAUNCH_CHECK("invert_count");
}

void accuracy(const AccuracyArgs& a, cudaStream_t s) {
  if (a.n == 0) return;
  accuracy_k<<<blocks_for(a.n), kThreads, 0, s>>>(a);
  LAUNCH_CHECK("accuracy");
}

void sum_squares_by_var(const float* g, const int32_t* var, int64_t n, double* sums, cudaStream_t s) {
  if (n == 0) return;
  sum_squares_k<<<blocks_for((n + kChunk - 1) / kChunk), kThreads, 0, s>>>(g, var, n, sums);
  LAUNCH_CHECK("sum_squares_by_var");
}

void optimizer_step(const OptArgs& a, const OptimizerSpec& spec, cudaStream_t s) {
  if (a.n == 0) return;
  with_optimizer(spec.kind, [&](auto d) {
    using Rule = typename decltype(d)::Rule;
    optimizer_k<Rule><<<blocks_for(a.n), kThreads, 0, s>>>(a, Rule(spec));
  });
  LAUNCH_CHECK("optimizer_step");
}

}  // namespace rnntrain::cuda::k
