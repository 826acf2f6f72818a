// See blas_env.h.
#include "backend/cpu/blas_env.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace rnntrain {

void select_blas_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  const std::string core = openblas_get_corename();
  if (core != "Prescott" && core != "prescott") return;
  __builtin_cpu_init();
  const char* want = __builtin_cpu_supports("avx512f") ? "SkylakeX" : __builtin_cpu_supports("avx2") ? "Haswell" : nullptr;
  if (!want) return;
  setenv("OPENBLAS_CORETYPE", want, 1);
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with the generic kernels
}

}  // namespace rnntrain
