#!/usr/bin/env bash
# Configures and builds rnntrain in ./build (Release). Extra arguments go to CMake's configure step,
# e.g. -DRNNTRAIN_CUDA=OFF. Used by quickstart.sh and test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
elif [ $# -gt 0 ]; then
  cmake -S . -B build "$@"
fi
cmake --build build -j "$(nproc)"
