// Dense float32 helpers of the CPU backend over OpenBLAS cblas_sgemm. exp is a branch-free Cephes-style
// polynomial (relative error ~1e-7) so activation loops vectorise without -ffast-math. Every
// activation propagates NaN, as Keras does: a NaN weight or input must show up in the loss, not be
// clamped into a finite value.
#if defined(__GNUC__) && !defined(__clang__)
// Lets GCC if-convert float selects (clamps, floor) inside the loops; results are unchanged.
#pragma GCC optimize("no-trapping-math")
#endif
#include "backend/cpu/cpu_math.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <exception>
#include <limits>
#include <vector>

#include <fmt/format.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/error.h"

namespace rnntrain::cpu {

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // c = beta * c
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  const int64_t biggest = std::max({m, n, k, lda, ldb, ldc});
  if (biggest > INT_MAX)
    throw RuntimeError(fmt::format("matrix dimension {} exceeds the BLAS integer range; use a smaller batch_size or "
                                   "shorter sequences",
                                   biggest));
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

void parallel_rows(int64_t rows, int64_t slice, const std::function<void(int64_t, int64_t)>& fn) {
  slice = std::max<int64_t>(slice, 1);
  const int64_t slices = (rows + slice - 1) / slice;
  auto run_slices = [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) fn(i * slice, std::min(rows, (i + 1) * slice));
  };
  const int blas_threads = openblas_get_num_threads();
  const int64_t n = std::min<int64_t>(blas_threads, slices);
  if (n <= 1) {
    run_slices(0, slices);
    return;
  }
  // An OpenMP team (its threads stay between calls, spinning GOMP_SPINCOUNT pauses, then sleeping:
  // blas_env.h), thread k of n taking slices [slices * k / n, slices * (k + 1) / n); starting
  // std::threads instead cost 35-40 us a call here, and a training step makes a dozen calls. BLAS's
  // thread count is process-wide: one thread per GEMM while the slices run, restored after.
  std::vector<std::exception_ptr> errors(n);
  openblas_set_num_threads(1);
#pragma omp parallel num_threads(static_cast<int>(n))
  {
    const int64_t k = omp_get_thread_num(), got = omp_get_num_threads();  // got < n: no more threads to be had
    try {
      run_slices(slices * k / got, slices * (k + 1) / got);
    } catch (...) {
      errors[k] = std::current_exception();
    }
  }
  openblas_set_num_threads(blas_threads);
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

namespace {

// exp(x) for float, Cephes expf: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial, times 2^n via bits.
// NaN gives NaN, -Inf about 1.6e-38 (exp(-87)), +Inf about 1.7e38 (exp(88)).
inline float exp_f(float x) {
  // The clamp keeps NaN: std::max(x, lo) is (x < lo ? lo : x), false for NaN, so x comes back.
  // Written the other way round (std::max(lo, x)) it would turn NaN into lo.
  x = std::min(std::max(x, -87.0f), 88.0f);
  const bool nan = x != x;
  x = nan ? 0.0f : x;  // keeps the float -> int conversion below defined; NaN is restored at the end
  const float fx = x * 1.44269504088896341f + 0.5f;
  const int32_t ti = static_cast<int32_t>(fx);
  float n = static_cast<float>(ti);
  n = n > fx ? n - 1.0f : n;  // floor
  const float r = x - n * 0.693359375f - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return nan ? std::numeric_limits<float>::quiet_NaN() : y * std::bit_cast<float>(bits);
}

inline float sigmoid_inl(float x) { return 1.0f / (1.0f + exp_f(-x)); }

inline float tanh_inl(float x) {
  const float ax = std::fabs(x);
  const float e = exp_f(-2.0f * ax);
  float t = (1.0f - e) / (1.0f + e);
  t = x < 0.0f ? -t : t;
  // Near 0 the quotient cancels; use the odd Taylor series (next term 62/2835 x^9 < 3e-11 there).
  const float x2 = x * x;
  const float s = x * (1.0f + x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f + x2 * (-17.0f / 315.0f))));
  return ax < 0.1f ? s : t;
}

// The same sigmoid and tanh, 16 lanes at a time with AVX-512: every operation of exp_f, sigmoid_inl
// and tanh_inl in the same order, with no FMA contraction, so the results are bit for bit the
// scalar ones (tests/backend_math_test.cpp). GCC's auto-vectoriser uses 4 lanes at the baseline ISA.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define RNNTRAIN_AVX512_ACT 1
#pragma GCC push_options
#pragma GCC target("avx512f")
#pragma GCC optimize("fp-contract=off")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 on its own _mm512_undefined_* in the headers

inline __m512 exp16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  x = _mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_max_ps(_mm512_set1_ps(-87.0f), x));  // NaN stays NaN
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  x = _mm512_mask_mov_ps(x, nan, _mm512_setzero_ps());
  const __m512 fx = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _mm512_set1_ps(0.5f));
  __m512 n = _mm512_cvtepi32_ps(_mm512_cvttps_epi32(fx));
  n = _mm512_mask_sub_ps(n, _mm512_cmp_ps_mask(n, fx, _CMP_GT_OQ), n, one);  // floor
  const __m512 r = _mm512_sub_ps(_mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(0.693359375f))),
                                 _mm512_mul_ps(n, _mm512_set1_ps(-2.12194440e-4f)));
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  for (const float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(c));
  const __m512 y = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(p, r), r), r), one);
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
  const __m512 e = _mm512_mul_ps(y, _mm512_castsi512_ps(bits));
  return _mm512_mask_mov_ps(e, nan, _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()));
}

inline __m512 neg16(__m512 x) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT_MIN))); }

inline __m512 sigmoid16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp16(neg16(x))));
}

inline __m512 tanh16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 ax = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT_MAX)));
  const __m512 e = exp16(_mm512_mul_ps(_mm512_set1_ps(-2.0f), ax));
  __m512 t = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
  t = _mm512_mask_mov_ps(t, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), neg16(t));
  const __m512 x2 = _mm512_mul_ps(x, x);
  __m512 s = _mm512_add_ps(_mm512_set1_ps(2.0f / 15.0f), _mm512_mul_ps(x2, _mm512_set1_ps(-17.0f / 315.0f)));
  s = _mm512_add_ps(_mm512_set1_ps(-1.0f / 3.0f), _mm512_mul_ps(x2, s));
  s = _mm512_mul_ps(x, _mm512_add_ps(one, _mm512_mul_ps(x2, s)));
  return _mm512_mask_mov_ps(t, _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.1f), _CMP_LT_OQ), s);
}

// Sigmoid or tanh over x[0, n - n % 16); returns how many it did.
int64_t act16(bool tanh, float* x, int64_t n) {
  const int64_t m = n - n % 16;
  for (int64_t i = 0; i < m; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    _mm512_storeu_ps(x + i, tanh ? tanh16(v) : sigmoid16(v));
  }
  return m;
}
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

}  // namespace

float sigmoid_f(float x) { return sigmoid_inl(x); }
float tanh_f(float x) { return tanh_inl(x); }

void apply_act(Activation act, float* x, int64_t n) {
#ifdef RNNTRAIN_AVX512_ACT
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512 && (act == Activation::Tanh || act == Activation::Sigmoid)) {
    const int64_t done = act16(act == Activation::Tanh, x, n);
    x += done, n -= done;  // the rest below
  }
#endif
  switch (act) {
    case Activation::Linear: return;
    case Activation::Tanh:
      for (int64_t i = 0; i < n; ++i) x[i] = tanh_inl(x[i]);
      return;
    case Activation::Sigmoid:
      for (int64_t i = 0; i < n; ++i) x[i] = sigmoid_inl(x[i]);
      return;
    // Clamps in NaN-propagating order (value first), as in exp_f.
    case Activation::HardSigmoid:
      for (int64_t i = 0; i < n; ++i) x[i] = std::min(std::max(x[i] * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
      return;
    case Activation::HardSigmoidKeras2:
      for (int64_t i = 0; i < n; ++i) x[i] = std::min(std::max(0.2f * x[i] + 0.5f, 0.0f), 1.0f);
      return;
    case Activation::Relu:
      for (int64_t i = 0; i < n; ++i) x[i] = std::max(x[i], 0.0f);
      return;
    case Activation::Softmax: throw RuntimeError("internal: softmax is not an elementwise activation");
    default:  // from the input (spec/activations.h)
      for (int64_t i = 0; i < n; ++i) x[i] = act::value(act, x[i]);
      return;
  }
}

void mul_act_grad(Activation act, const float* y, float* d, int64_t n) {
  if (act_grad_from_input(act)) {
    for (int64_t i = 0; i < n; ++i) d[i] = act::grad(act, y[i], d[i]);  // y is the input here
    return;
  }
  switch (act) {
    case Activation::Linear: return;
    case Activation::Tanh:
      for (int64_t i = 0; i < n; ++i) d[i] *= 1.0f - y[i] * y[i];
      return;
    case Activation::Sigmoid:
      for (int64_t i = 0; i < n; ++i) d[i] *= y[i] * (1.0f - y[i]);
      return;
    case Activation::HardSigmoid:
      for (int64_t i = 0; i < n; ++i) d[i] = (y[i] > 0.0f && y[i] < 1.0f) ? d[i] * (1.0f / 6.0f) : 0.0f;
      return;
    case Activation::HardSigmoidKeras2:
      for (int64_t i = 0; i < n; ++i) d[i] = (y[i] > 0.0f && y[i] < 1.0f) ? d[i] * 0.2f : 0.0f;
      return;
    case Activation::Relu:
      for (int64_t i = 0; i < n; ++i) d[i] = y[i] > 0.0f ? d[i] : 0.0f;
      return;
    case Activation::Softmax: throw RuntimeError("internal: softmax is not an elementwise activation");
    default: return;  // act_grad_from_input, above
  }
}

void activate(Activation act, Tensor& y, int64_t n, Tensor* pre) {
  if (pre && act_grad_from_input(act)) *pre = y;
  if (act == Activation::Softmax) softmax_rows(y.ptr(), y.numel() / n, n);
  else apply_act(act, y.ptr(), y.numel());
}

void activate_grad(Activation act, const Tensor& y, const Tensor& pre, Tensor& d, int64_t n) {
  if (act == Activation::Softmax) softmax_rows_grad(y.ptr(), d.ptr(), d.ptr(), d.numel() / n, n);
  else mul_act_grad(act, act_grad_from_input(act) ? pre.ptr() : y.ptr(), d.ptr(), d.numel());
}

void softmax_rows(float* x, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
    float mx = row[0];
    for (int64_t j = 1; j < cols; ++j) mx = std::max(mx, row[j]);
    // A NaN anywhere makes the row NaN (exp_f keeps it, then the sum spreads it). The entries equal
    // to the maximum get exp(0) = 1 even when it is +Inf (Inf - Inf would be NaN): softmax's limit.
    float sum = 0.0f;
    for (int64_t j = 0; j < cols; ++j) {
      const float v = row[j];
      row[j] = exp_f(v == mx ? 0.0f : v - mx);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < cols; ++j) row[j] *= inv;
  }
}

void softmax_rows_grad(const float* y, const float* dy, float* dpre, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    const float* dr = dy + r * cols;
    float dot = 0.0f;
    for (int64_t j = 0; j < cols; ++j) dot += yr[j] * dr[j];
    float* out = dpre + r * cols;
    for (int64_t j = 0; j < cols; ++j) out[j] = yr[j] * (dr[j] - dot);
  }
}

void parallel_each(int64_t n, bool spread, const std::function<void(int64_t)>& fn) {
  const int64_t threads = spread ? std::max(1, openblas_get_num_threads()) : 1;
  parallel_rows(n, (n + threads - 1) / threads, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) fn(i);
  });
}

void add_colsum(const float* a, int64_t rows, int64_t cols, int64_t lda, float* out) {
  // Runs of 16 columns over the BLAS threads where the array is large (a stack's gate gradients over
  // all steps): each column still sums its rows in order, so the bits do not depend on the split.
  const int64_t threads = rows * cols >= kSpreadElements ? std::max(1, openblas_get_num_threads()) : 1;
  parallel_rows(cols, ((cols + threads - 1) / threads + 15) / 16 * 16, [&](int64_t c0, int64_t c1) {
    for (int64_t i = 0; i < rows; ++i) {
      const float* row = a + i * lda;
      for (int64_t j = c0; j < c1; ++j) out[j] += row[j];
    }
  });
}

}  // namespace rnntrain::cpu
