// rnntrain's entry point: everything happens in cli/.
#include <malloc.h>

#include "backend/engine.h"
#include "cli/cli.h"

int main(int argc, char** argv) {
  rnntrain::configure_cpu_libraries(argv);
#ifdef __GLIBC__
  // A training step allocates and frees the same large activation buffers every step. By default
  // glibc maps each from the kernel and returns it on free, so every step pays page faults again
  // (charlm_small on 2 CPU cores: about 25% of the step). Kept in the heap, they are reused.
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, 1024 << 20);
#endif
  return rnntrain::run_cli(argc, argv);
}
