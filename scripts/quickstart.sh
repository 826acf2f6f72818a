#!/usr/bin/env bash
# One command for the quickstart on a fresh Debian 12 machine: installs the dependencies, builds,
# trains configs/quickstart.yaml into runs/quickstart and evaluates the best checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
rm -rf runs/quickstart
./build/rnntrain train configs/quickstart.yaml
./build/rnntrain eval configs/quickstart.yaml --weights runs/quickstart/best.h5 --json
