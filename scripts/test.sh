#!/usr/bin/env bash
# One command for the whole test suite on a fresh Debian 12 machine: installs the dependencies,
# builds, and runs every test with ctest (GPU tests skip with a reason when no GPU is visible).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
