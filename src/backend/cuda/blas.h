// Row-major cuBLAS helpers with the CPU backend's argument conventions (backend/cpu/cpu_math.h), so
// the generic RNN and Dense read like their CPU twins. FP32, strict (no TF32); gemm_half for the half types.
#pragma once
#include <cstdint>

#include "backend/cuda/gpu.h"

namespace rnntrain::cuda {

// c: [m, n] = alpha * op(a) @ op(b) + beta * c; op(a): [m, k] (a is [k, m] when ta); op(b): [k, n]
// (b is [n, k] when tb); leading dimensions in elements.
void gemm(Gpu& gpu, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The same with fp16 (or bf16) a and b and FP32 accumulation; c is FP32, or the half type when c_half.
void gemm_half(Gpu& gpu, bool bf16, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
               int64_t lda, const void* b, int64_t ldb, float beta, void* c, bool c_half, int64_t ldc);
// out[j] += sum_i a[i * lda + j] for a: [rows, cols].
void add_colsum(Gpu& gpu, const float* a, int64_t rows, int64_t cols, int64_t lda, float* out);

}  // namespace rnntrain::cuda
