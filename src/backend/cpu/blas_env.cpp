// See blas_env.h.
#include "backend/cpu/blas_env.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace rnntrain {

void configure_cpu_libraries(char** argv) {
  bool changed = false;
  if (!std::getenv("OPENBLAS_THREAD_TIMEOUT")) {
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);  // 2^4 cycles: OpenBLAS's minimum
    changed = true;
  }
  if (!std::getenv("GOMP_SPINCOUNT") && !std::getenv("OMP_WAIT_POLICY")) {
    setenv("GOMP_SPINCOUNT", "1000", 1);
    changed = true;
  }
  const std::string core = openblas_get_corename();
  if (!std::getenv("OPENBLAS_CORETYPE") && (core == "Prescott" || core == "prescott")) {
    __builtin_cpu_init();
    const char* want = __builtin_cpu_supports("avx512f") ? "SkylakeX" : __builtin_cpu_supports("avx2") ? "Haswell" : nullptr;
    if (want) {
      setenv("OPENBLAS_CORETYPE", want, 1);
      changed = true;
    }
  }
  if (changed) execv("/proc/self/exe", argv);  // returns only on failure: carry on as loaded
}

int blas_threads() { return openblas_get_num_threads(); }
std::string blas_config() { return openblas_get_config(); }

}  // namespace rnntrain
