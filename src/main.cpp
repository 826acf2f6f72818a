// rnntrain's entry point: everything happens in cli/.
#include "backend/cpu/blas_env.h"
#include "cli/cli.h"

int main(int argc, char** argv) {
  rnntrain::select_blas_kernels(argv);
  return rnntrain::run_cli(argc, argv);
}
