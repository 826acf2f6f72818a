// OpenBLAS settings that can only be given through the environment, before the library loads:
// - Kernel selection. Debian 12's OpenBLAS 0.3.21 does not recognise recent Xeons (it sees
//   "Intel(R) Xeon(R) Processor") and falls back to its generic Prescott kernels, about 3x slower
//   than the AVX-512 ones these CPUs run. OPENBLAS_CORETYPE picks them.
// - How long its idle worker threads spin. By default they spin (yielding) for about 2^28 cycles
//   after each threaded GEMM, so they keep competing for the cores with the backend's own threads
//   (parallel_rows in cpu_math.h) that run a recurrent layer's time loop. OPENBLAS_THREAD_TIMEOUT=4
//   puts them to sleep at once; waking them costs little next to the large GEMMs they still run.
// - How long oneDNN's OpenMP threads (libgomp) spin after each parallel region before they sleep:
//   300000 pause instructions by default, milliseconds on CPUs whose pause takes ~100 cycles, during
//   which they hold every core the stack ran on while OpenBLAS's threads run the GEMMs after it. On
//   the GPU machine's 16-core Xeon at 16 threads the Dense layer after a stack took 5.7 ms instead of
//   0.3-0.45 with 5000. rnntrain sets GOMP_SPINCOUNT=1000 (unless it or OMP_WAIT_POLICY is set): as
//   fast alone here, and two trainings with a fixed train.threads sharing 2 cores slow each other down
//   in proportion to the spin (charlm_small: 85 ms a step with 1000, 267 with 5000, 120 with libgomp's
//   default; bench/PROFILE_CPU.md).
#pragma once
#include "backend/engine.h"

// configure_cpu_libraries (backend/engine.h) sets what is unset of the above (OPENBLAS_CORETYPE only
// where OpenBLAS chose its generic kernels on a CPU with AVX-512 or AVX2: SkylakeX or Haswell) and
// re-executes this program with the same arguments; it returns only when nothing was to be done (or
// the re-exec failed). blas_threads() and blas_config() report OpenBLAS's settings.
