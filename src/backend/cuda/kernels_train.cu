// Kernels of the loss (a kernel per kind with its descriptor's value and gradient, spec/losses/*.h,
// in double precision per position, as model/loss.cpp) and of the optimizers (a kernel per kind over the flat parameter buffer,
// with its descriptor's rule, spec/optimizers/*.h, as model/optimizer.cpp), plus the per-variable
// gradient norms for clipping. Kernels first, then launchers.
#include <algorithm>

#include "backend/cuda/kernels.h"
#include "backend/cuda/kernels_common.cuh"

namespace rnntrain::cuda::k {

namespace {

// ---------------- kernels ----------------

// Adds the block's values of v into *sum (one atomic per block). Every thread of the block calls it.
__device__ void block_add(double v, double* sum) {
  const double total = block_sum(v);
  if (threadIdx.x == 0 && total != 0.0) atomicAdd(sum, total);
}

// A per-element loss (spec/losses/*.h, kRows false): one thread per element, so reads are
// coalesced; each block adds its partial sum of (loss / K) into a.sum.
template <class D>
__global__ void loss_elem_k(LossArgs a) {
  const double gs = (a.gscale_dev ? *a.gscale_dev : a.gscale) * (a.gmul ? static_cast<double>(*a.gmul) : 1.0);
  const int64_t K = a.k;
  const double inv_k = 1.0 / static_cast<double>(K);
  double acc = 0.0;
  GRID_LOOP(e, a.n * K) {
    const int64_t i = e / K;
    if (a.mask && !a.mask[i]) continue;
    const double w = a.weight ? static_cast<double>(a.weight[i / a.weight_per]) : 1.0;
    double v, d;
    D::element(a.pred[e], a.target[e], a.params, v, d);
    acc += w * v * inv_k;
    if (a.grad) a.grad[e] = static_cast<float>(d * inv_k * gs * w);
  }
  block_add(acc, a.sum);
}

// A per-row loss (over classes, kRows true): one thread per row.
template <class D>
__global__ void loss_row_k(LossArgs a) {
  const double gs = (a.gscale_dev ? *a.gscale_dev : a.gscale) * (a.gmul ? static_cast<double>(*a.gmul) : 1.0);
  GRID_LOOP(i, a.n) {
    if (a.mask && !a.mask[i]) continue;
    const int64_t K = a.k;
    const float* t = a.sparse ? nullptr : a.target + i * K;
    const int64_t label = a.sparse ? static_cast<int64_t>(a.target[i]) : -1;
    const double w = a.weight ? static_cast<double>(a.weight[i / a.weight_per]) : 1.0;
    atomicAdd(a.sum, w * D::row(a.pred + i * K, t, label, K, a.params, a.grad ? a.grad + i * K : nullptr, gs * w));
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

__global__ void weight_penalty_k(const float* w, float* g, const int32_t* var, int64_t n, const float* regs,
                                 double* penalty) {
  double acc = 0.0;
  GRID_LOOP(i, n) {
    const int32_t v = var[i];
    if (v < 0) continue;
    const float l1 = regs[2 * v], l2 = regs[2 * v + 1];
    if (l1 == 0.0f && l2 == 0.0f) continue;
    const float x = w[i];
    if (g) g[i] += __fadd_rn(__fmul_rn(l1, static_cast<float>((x > 0.0f) - (x < 0.0f))), __fmul_rn(l2, 2.0f * x));
    acc += static_cast<double>(l1) * fabsf(x) + static_cast<double>(l2) * x * x;
  }
  if (penalty) block_add(acc, penalty);
}

__global__ void activity_k(const float* y, float* dy, int64_t n, float l1, float l2, float inv_b, double dinv_b,
                           const float* gmul, double* sum) {
  double acc = 0.0;
  GRID_LOOP(i, n) {
    const float v = y[i];
    if (dy) {
      const float r = __fadd_rn(__fmul_rn(l1, static_cast<float>((v > 0.0f) - (v < 0.0f))), __fmul_rn(l2, 2.0f * v));
      const float d = __fmul_rn(inv_b, r);
      dy[i] = __fadd_rn(dy[i], gmul ? __fmul_rn(d, *gmul) : d);
    }
    acc += static_cast<double>(l1) * fabsf(v) + static_cast<double>(l2) * v * v;
  }
  if (sum) block_add(acc * dinv_b, sum);
}

__global__ void constrain_k(float* w, const int32_t* slice, int64_t n, const ConstraintRule* rules, const double* sums,
                            const int* skip) {
  if (skip && *skip) return;
  GRID_LOOP(i, n) {
    const int32_t s = slice[i];
    if (s >= 0) w[i] = rules[s](w[i], sqrtf(static_cast<float>(sums[s])));
  }
}

// One thread per position; each block adds its partial sum of hits into a.sum.
__global__ void accuracy_k(AccuracyArgs a) {
  const int64_t K = a.k;
  double acc = 0.0;
  GRID_LOOP(i, a.n) {
    if (a.mask && !a.mask[i]) continue;
    const float* p = a.pred + i * K;
    if (a.rule == AccuracyRule::Binary) {
      const float* t = a.target + i * K;
      int64_t same = 0;
      for (int64_t j = 0; j < K; ++j) same += t[j] == (p[j] > a.threshold ? 1.0f : 0.0f);
      acc += static_cast<double>(same) / static_cast<double>(K);
      continue;
    }
    if (a.rule == AccuracyRule::TopK || a.rule == AccuracyRule::SparseTopK) {  // top-k: Keras' in_top_k (JAX) of the label, the target's argmax or its index
      int64_t label = 0;
      if (a.rule == AccuracyRule::SparseTopK) {
        label = static_cast<int64_t>(a.target[i]);
      } else {
        const float* t = a.target + i * K;
        for (int64_t j = 1; j < K; ++j)
          if (t[j] > t[label]) label = j;
      }
      if (label < 0 || label >= K) continue;  // the host checked every unmasked label
      const float at = isnan(p[label]) ? -INFINITY : p[label];
      int64_t above = 0;
      for (int64_t j = 0; j < K; ++j) above += p[j] > at;
      acc += above < a.top_k ? 1.0 : 0.0;
      continue;
    }
    int64_t best = 0;  // the first index of the maximum, as numpy's argmax
    for (int64_t j = 1; j < K; ++j)
      if (p[j] > p[best]) best = j;
    if (a.rule == AccuracyRule::Sparse) {
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

// One thread per position: its units into the positives' and negatives' histograms (spec/confusion.h),
// in shared memory when they fit (a.shared), then added to a.hist once per block.
__global__ void confusion_k(ConfusionArgs a, bool shared) {
  extern __shared__ double local[];
  double* h = shared ? local : a.hist;
  const int64_t half = a.width / 2;
  if (shared) {
    for (int64_t j = threadIdx.x; j < a.width; j += blockDim.x) local[j] = 0.0;
    __syncthreads();
  }
  GRID_LOOP(i, a.n) {
    if (a.mask && !a.mask[i]) continue;
    confusion_row(a.rule, a.pred + i * a.k, a.target + i * a.k, a.k, [&](int64_t at, double pos, double neg) {
      if (pos != 0.0) atomicAdd(h + at, pos);
      if (neg != 0.0) atomicAdd(h + half + at, neg);
    });
  }
  if (shared) {
    __syncthreads();
    for (int64_t j = threadIdx.x; j < a.width; j += blockDim.x)
      if (local[j] != 0.0) atomicAdd(a.hist + j, local[j]);
  }
}

// One thread per value: its target, square and squared residual into per-unit sums, in shared memory
// when they fit (shared), then added to a.sums once per block.
__global__ void moments_k(MomentsArgs a, bool shared) {
  extern __shared__ double local[];
  double* out = shared ? local : a.sums;
  const int64_t width = 3 * a.k;
  if (shared) {
    for (int64_t j = threadIdx.x; j < width; j += blockDim.x) local[j] = 0.0;
    __syncthreads();
  }
  GRID_LOOP(i, a.n * a.k) {
    if (a.mask && !a.mask[i / a.k]) continue;
    const int64_t j = i % a.k;
    const double t = a.target[i], e = t - static_cast<double>(a.pred[i]);
    atomicAdd(out + j, t);
    atomicAdd(out + a.k + j, t * t);
    atomicAdd(out + 2 * a.k + j, e * e);
  }
  if (shared) {
    __syncthreads();
    for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
      if (local[j] != 0.0) atomicAdd(a.sums + j, local[j]);
  }
}

// The update of one kind: its descriptor's Rule on each trained element, after clipping and decay.
template <class Rule>
__global__ void optimizer_k(OptArgs a, Rule rule) {
  if (a.skip && *a.skip) return;
  const StepScalars sc = {a.sched[0], {a.sched[1], a.sched[2], a.sched[3]}};
  const float decay = a.sched[4];
  const bool first = a.sched[5] != 0.0f;
  GRID_LOOP(i, a.n) {
    if (!bit_set(a.trained, i)) continue;
    float g = a.g[i];
    if (a.clip == GradClip::Factors) g *= a.factors[a.var[i]];
    else if (a.clip == GradClip::Value) g = fminf(fmaxf(g, -a.clipvalue), a.clipvalue);
    float p = a.p[i];
    if (first)
      for (int k = 0; k < SlotKinds::kMax; ++k)
        if (a.copy_slots >> k & 1u) a.s[k][i] = p;
    if (decay > 0.0f) p -= p * decay;
    rule(p, g, a.s, i, sc);
    a.p[i] = p;
    if (a.nonfinite && !isfinite(p)) *a.nonfinite = 1.0;  // every writer stores the same value
  }
}

__global__ void trust_ratios_k(const double* sums, int64_t nv, float* ratios) {
  GRID_LOOP(v, nv) {
    const double p2 = sums[v], u2 = sums[nv + v];
    ratios[v] = p2 > 0.0 && u2 > 0.0 ? static_cast<float>(sqrt(p2) / sqrt(u2)) : 1.0f;
  }
}

__global__ void trust_update_k(float* p, const float* u, const int32_t* var, int64_t n, const float* ratios,
                               const float* sched, const int* skip, double* nonfinite) {
  if (skip && *skip) return;
  const float lr = sched[0];
  GRID_LOOP(i, n) {
    const int32_t v = var[i];
    if (v < 0) continue;
    const float x = p[i] - ratios[v] * lr * u[i];
    p[i] = x;
    if (nonfinite && !isfinite(x)) *nonfinite = 1.0;
  }
}

}  // namespace

// ---------------- launchers ----------------

void loss(const LossArgs& a, cudaStream_t s) {
  if (a.n == 0) return;
  with_loss(a.kind, [&](auto d) {
    using D = decltype(d);
    if constexpr (D::kRows) loss_row_k<D><<<blocks_for(a.n), kThreads, 0, s>>>(a);
    else loss_elem_k<D><<<std::min(blocks_for(a.n * a.k), 2048u), kThreads, 0, s>>>(a);  // fewer atomics
  });
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

void confusion(const ConfusionArgs& a, cudaStream_t s) {
  if (a.n == 0) return;
  constexpr int64_t kSharedBins = 4096;  // 32 KiB of doubles
  const bool shared = a.width <= kSharedBins;
  confusion_k<<<blocks_for(a.n), kThreads, shared ? sizeof(double) * a.width : 0, s>>>(a, shared);
  LAUNCH_CHECK("confusion");
}

void moments(const MomentsArgs& a, cudaStream_t s) {
  if (a.n == 0) return;
  constexpr int64_t kSharedSums = 4096;  // 32 KiB of doubles
  const bool shared = 3 * a.k <= kSharedSums;
  moments_k<<<blocks_for(a.n * a.k), kThreads, shared ? sizeof(double) * 3 * a.k : 0, s>>>(a, shared);
  LAUNCH_CHECK("moments");
}

void sum_squares_by_var(const float* g, const int32_t* var, int64_t n, double* sums, cudaStream_t s) {
  if (n == 0) return;
  sum_squares_k<<<blocks_for((n + kChunk - 1) / kChunk), kThreads, 0, s>>>(g, var, n, sums);
  LAUNCH_CHECK("sum_squares_by_var");
}

void weight_penalty(const float* w, float* g, const int32_t* var, int64_t n, const float* regs, double* penalty,
                    cudaStream_t s) {
  if (n == 0) return;
  weight_penalty_k<<<blocks_for(n), kThreads, 0, s>>>(w, g, var, n, regs, penalty);
  LAUNCH_CHECK("weight_penalty");
}

void activity_regularizer(const float* y, float* dy, int64_t n, double l1, double l2, double inv_b, const float* gmul,
                          double* sum, cudaStream_t s) {
  if (n == 0) return;
  activity_k<<<blocks_for(n), kThreads, 0, s>>>(y, dy, n, static_cast<float>(l1), static_cast<float>(l2),
                                                static_cast<float>(inv_b), inv_b, gmul, sum);
  LAUNCH_CHECK("activity_regularizer");
}

void constrain(float* w, const int32_t* slice, int64_t n, const ConstraintRule* rules, const double* sums,
               const int* skip, cudaStream_t s) {
  if (n == 0) return;
  constrain_k<<<blocks_for(n), kThreads, 0, s>>>(w, slice, n, rules, sums, skip);
  LAUNCH_CHECK("constrain");
}

void optimizer_step(const OptArgs& a, const OptimizerSpec& spec, cudaStream_t s) {
  if (a.n == 0) return;
  with_optimizer(spec.kind, [&](auto d) {
    using D = decltype(d);
    if constexpr (!PerTensor<D>::value) {  // the others: per_tensor_optimizers.cpp
      using Rule = typename D::Rule;
      optimizer_k<Rule><<<blocks_for(a.n), kThreads, 0, s>>>(a, Rule(spec));
    }
  });
  LAUNCH_CHECK("optimizer_step");
}

void trust_ratios(const double* sums, int64_t nv, float* ratios, cudaStream_t s) {
  if (nv == 0) return;
  trust_ratios_k<<<blocks_for(nv), kThreads, 0, s>>>(sums, nv, ratios);
  LAUNCH_CHECK("trust_ratios");
}

void trust_update(float* p, const float* u, const int32_t* var, int64_t n, const float* ratios, const float* sched,
                  const int* skip, double* nonfinite, cudaStream_t s) {
  if (n == 0) return;
  trust_update_k<<<blocks_for(n), kThreads, 0, s>>>(p, u, var, n, ratios, sched, skip, nonfinite);
  LAUNCH_CHECK("trust_update");
}

}  // namespace rnntrain::cuda::k
