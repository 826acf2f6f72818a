// Row-major GEMM and column sums over cuBLAS's column-major API: a row-major [m, n] matrix is a
// column-major [n, m] one, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T.
#include "backend/cuda/blas.h"

#include <climits>

#include <fmt/format.h>

#include "core/error.h"

namespace rnntrain::cuda {

namespace {
int checked(int64_t v) {
  if (v > INT_MAX)
    throw RuntimeError(fmt::format("matrix dimension {} exceeds cuBLAS's integer range; use a smaller batch_size or "
                                   "shorter sequences",
                                   v));
  return static_cast<int>(v);
}
}  // namespace

void gemm(Gpu& gpu, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (beta == 0.0f) {
      for (int64_t i = 0; i < m; ++i) CUDA_CHECK(cudaMemsetAsync(c + i * ldc, 0, sizeof(float) * n, gpu.stream()));
      return;
    }
    k = 0;
  }
  CUBLAS_CHECK(cublasSgemm(gpu.cublas(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, checked(n),
                           checked(m), checked(k), &alpha, b, checked(ldb), a, checked(lda), &beta, c, checked(ldc)));
}

void gemm_half(Gpu& gpu, bool bf16, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
               int64_t lda, const void* b, int64_t ldb, float beta, void* c, bool c_half, int64_t ldc) {
  if (m <= 0 || n <= 0 || k <= 0) throw RuntimeError("internal: empty half-precision GEMM");
  const cudaDataType_t h = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  CUBLAS_CHECK(cublasGemmEx(gpu.cublas(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, checked(n),
                            checked(m), checked(k), &alpha, b, h, checked(ldb), a, h, checked(lda), &beta, c,
                            c_half ? h : CUDA_R_32F, checked(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void add_colsum(Gpu& gpu, const float* a, int64_t rows, int64_t cols, int64_t lda, float* out) {
  if (rows <= 0 || cols <= 0) return;
  // Column-major view: a is [cols, rows] with leading dimension lda; out += a @ ones(rows).
  const float one = 1.0f;
  CUBLAS_CHECK(cublasSgemv(gpu.cublas(), CUBLAS_OP_N, checked(cols), checked(rows), &one, a, checked(lda),
                           gpu.ones(rows), 1, &one, out, 1));
}

}  // namespace rnntrain::cuda
