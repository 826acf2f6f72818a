// Dense float32 helpers of the CPU backend: a row-major cblas_sgemm wrapper, a row-parallel loop for
// many small GEMMs, elementwise activations and their derivatives over whole arrays (the switch on the
// kind sits outside the loop, so loops vectorise), softmax rows and column sums. Not layer logic.
#pragma once
#include <cstdint>
#include <functional>

#include "spec/config.h"

namespace rnntrain::cpu {

// c: [m, n] = alpha * op(a) @ op(b) + beta * c, row-major with leading dimensions (elements).
// op(a): [m, k] (a is [k, m] when ta); op(b): [k, n] (b is [n, k] when tb).
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Calls fn(r0, r1) for the slices [0, slice), [slice, 2 * slice), ... of [0, rows) (the last one
// shorter), spread over the BLAS threads: each thread takes a contiguous run of slices, one after
// the other, with BLAS single-threaded inside; returns when all are done, rethrowing the first
// exception. For loops of many small GEMMs over rows that do not depend on each other, such as a
// recurrent layer's batch rows over time: OpenBLAS would wake and join its threads for each tiny
// GEMM, which costs about as much as the GEMM. fn must write only to its own rows. With one BLAS
// thread or one slice everything runs here, in order. Not reentrant: do not call it from fn.
void parallel_rows(int64_t rows, int64_t slice, const std::function<void(int64_t, int64_t)>& fn);
// fn(i) for every i in [0, n), one run of them per BLAS thread where `spread` (for passes large
// enough to be worth a parallel region), else here in order. fn must write only what item i owns.
void parallel_each(int64_t n, bool spread, const std::function<void(int64_t)>& fn);
// From how many elements a pass over an array is worth spreading over the threads (packing, column
// sums): below it a parallel region costs more than it saves.
inline constexpr int64_t kSpreadElements = int64_t{1} << 18;

// x = act(x) in place, elementwise (Softmax is not elementwise: use softmax_rows).
void apply_act(Activation act, float* x, int64_t n);
// d *= act'(pre): from = y = act(pre), or pre itself where act_grad_from_input(act).
void mul_act_grad(Activation act, const float* from, float* d, int64_t n);

// A layer's activation over rows of n (Dense, Conv1D, Activation): y = act(y), softmax along the rows;
// *pre (if given) keeps the pre-activation where act_grad_from_input(act). activate_grad: d = dy *
// act'(pre) in place, from y or that pre-activation.
void activate(Activation act, Tensor& y, int64_t n, Tensor* pre);
void activate_grad(Activation act, const Tensor& y, const Tensor& pre, Tensor& d, int64_t n);

// x: [rows, cols]; softmax over each row, in place.
void softmax_rows(float* x, int64_t rows, int64_t cols);
// dpre = y * (dy - sum(dy * y)) per row; y, dy, dpre: [rows, cols] (dpre may alias dy).
void softmax_rows_grad(const float* y, const float* dy, float* dpre, int64_t rows, int64_t cols);

// out[j] += sum_i a[i * lda + j] for a: [rows, cols].
void add_colsum(const float* a, int64_t rows, int64_t cols, int64_t lda, float* out);

// Scalar versions used by the array functions (exposed for tests): max error ~2 ulp of 1.
float sigmoid_f(float x);
float tanh_f(float x);

}  // namespace rnntrain::cpu
