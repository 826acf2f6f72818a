#!/usr/bin/env bash
# One command for the whole test suite on a fresh Debian 12 machine: installs the dependencies,
# builds, and runs every test with ctest (GPU tests skip with a reason when no GPU is visible).
# --sanitize: the CPU build with ASan+UBSan in build-asan, running the unit tests and the bad-input
# corpus (everything but the slow `keras` label); any sanitizer report fails the test that hit it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${1:-}" = --sanitize ]; then
  shift
  gen=()
  command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
  # -O1 with line tables only: stack traces keep file:line, and the build takes half the time of -O2 -g.
  # Without MPI (one process): Open MPI's own allocations would read as leaks; tests/dist runs in build/.
  [ -f build-asan/CMakeCache.txt ] || cmake -S . -B build-asan "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DRNNTRAIN_SANITIZE=ON -DRNNTRAIN_CUDA=OFF -DRNNTRAIN_MPI=OFF
  cmake --build build-asan -j "$(nproc)"
  supp="$PWD/tests/sanitize"
  export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp"
  export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
  export RNNTRAIN_ROBUST_TIMEOUT=60  # per bad-input case; the ASan build is 2-5x slower
  ctest --test-dir build-asan --output-on-failure -j "$(nproc)" -LE keras "$@"
  exit
fi
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
