// cuBLAS, loaded when first called. Linking libcublas loads libcublasLt with it, and loading that
// alone makes ~150 MB of the process resident: every CPU run of a CUDA build (and `--version`) paid
// for it. rnntrain calls nine cuBLAS functions; they are defined here, each loads libcublas once
// (dlopen: the usual search, then the folder of libcudart) and calls its own. A missing libcublas
// makes them fail with CUBLAS_STATUS_NOT_INITIALIZED, and cublasGetStatusString says why.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

namespace {

std::string g_load_error;

void* library() {
  static void* lib = [] {
    const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    Dl_info info{};
    if (!h && dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info) && info.dli_fname) {
      const std::string runtime = info.dli_fname;
      h = dlopen((runtime.substr(0, runtime.rfind('/') + 1) + name).c_str(), RTLD_NOW | RTLD_LOCAL);
    }
    if (!h) {
      const char* why = dlerror();
      g_load_error = name + " could not be loaded (" + (why ? why : "not found") +
                     "); install cuBLAS or add its folder to LD_LIBRARY_PATH";
    }
    return h;
  }();
  return lib;
}

template <class F>
F* resolve(const char* name) {
  void* lib = library();
  return lib ? reinterpret_cast<F*>(dlsym(lib, name)) : nullptr;
}

}  // namespace

extern "C" {

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
  static auto* f = resolve<decltype(cublasCreate_v2)>("cublasCreate_v2");
  return f ? f(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  static auto* f = resolve<decltype(cublasDestroy_v2)>("cublasDestroy_v2");
  return f ? f(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  static auto* f = resolve<decltype(cublasSetStream_v2)>("cublasSetStream_v2");
  return f ? f(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  static auto* f = resolve<decltype(cublasSetMathMode)>("cublasSetMathMode");
  return f ? f(handle, mode) : CUBLAS_STATUS_NOT_INITIALIZED;
}

const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  static auto* f = resolve<decltype(cublasGetStatusName)>("cublasGetStatusName");
  return f ? f(status) : "CUBLAS_STATUS_NOT_INITIALIZED";
}

const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  static auto* f = resolve<decltype(cublasGetStatusString)>("cublasGetStatusString");
  return f ? f(status) : g_load_error.c_str();
}

cublasStatus_t CUBLASWINAPI cublasSgemv_v2(cublasHandle_t handle, cublasOperation_t trans, int m, int n,
                                           const float* alpha, const float* A, int lda, const float* x, int incx,
                                           const float* beta, float* y, int incy) {
  static auto* f = resolve<decltype(cublasSgemv_v2)>("cublasSgemv_v2");
  return f ? f(handle, trans, m, n, alpha, A, lda, x, incx, beta, y, incy) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                           int m, int n, int k, const float* alpha, const float* A, int lda,
                                           const float* B, int ldb, const float* beta, float* C, int ldc) {
  static auto* f = resolve<decltype(cublasSgemm_v2)>("cublasSgemm_v2");
  return f ? f(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                         int lda, const void* B, cudaDataType Btype, int ldb, const void* beta,
                                         void* C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                         cublasGemmAlgo_t algo) {
  using GemmEx = cublasStatus_t(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);  // not the C++ overload
  static auto* f = resolve<GemmEx>("cublasGemmEx");
  return f ? f(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, computeType,
               algo)
           : CUBLAS_STATUS_NOT_INITIALIZED;
}

}  // extern "C"
