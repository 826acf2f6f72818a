// OpenBLAS kernel selection. Debian 12's OpenBLAS 0.3.21 does not recognise recent Xeons (it sees
// "Intel(R) Xeon(R) Processor") and falls back to its generic Prescott kernels, about 3x slower
// than the AVX-512 ones these CPUs run. OpenBLAS picks kernels when it loads, from
// OPENBLAS_CORETYPE, so the fix is to set that and re-execute before any work is done.
#pragma once

namespace rnntrain {

// If OpenBLAS chose its generic kernels on a CPU with AVX-512 or AVX2 and OPENBLAS_CORETYPE is
// unset, sets it (SkylakeX or Haswell) and re-executes this program with the same arguments.
// Returns only when nothing was to be done (or the re-exec failed).
void select_blas_kernels(char** argv);

}  // namespace rnntrain
