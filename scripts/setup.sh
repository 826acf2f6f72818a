#!/usr/bin/env bash
# Installs every system and Python package rnntrain needs on Debian 12 (or Ubuntu 24.04).
# Safe to run twice: apt-get and pip skip what is already there. Needs root or sudo.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

DEB_PACKAGES=(
  build-essential cmake pkg-config ninja-build
  libyaml-cpp-dev libcli11-dev libhdf5-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libopenblas-dev libgtest-dev libzip-dev
  libprotobuf-dev protobuf-compiler libboost-dev  # TensorBoard event files: protobuf records, Boost.CRC (CRC-32C)
  libcairo2-dev  # rnntrain plot: SVG and PNG pictures of the curves
  libdnnl-dev  # oneDNN: the CPU backend's recurrent stacks (plan.cpu: onednn); optional at build time
  ocl-icd-opencl-dev  # Debian's oneDNN CMake config requires OpenCL (a recommends apt skips here)
  libopenmpi-dev openmpi-bin  # data-parallel training under mpirun (docs/distributed.md); optional at build time
  python3 python3-pip
  clang libclang-rt-dev  # scripts/fuzz.sh: libFuzzer and the sanitizer runtimes for clang
)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: Debian packages already installed" >&2
fi

# Python: numpy and h5py for the data scripts and the tests that write fixtures; Keras 3 with its JAX
# CPU backend for the Keras interchange suite (tests/keras/, ctest label `keras`), which skips with a
# printed reason when keras is missing; tensorboard, whose reader checks the event files. Pinned; reinstalled only when a version differs.
PY=${PYTHON:-python3}
PIP_PACKAGES=(numpy==2.4.6 h5py==3.11.0 keras==3.15.1 "jax[cpu]==0.10.2" jaxlib==0.10.2 tensorboard==2.20.0)
if ! "$PY" - "${PIP_PACKAGES[@]}" <<'PYEOF' 2>/dev/null
import sys
from importlib.metadata import version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    name = name.split("[")[0]
    if version(name) != want:
        sys.exit(1)
PYEOF
then
  echo "setup: installing Python packages: ${PIP_PACKAGES[*]}" >&2
  "$PY" -m pip install -q "${PIP_PACKAGES[@]}" 2>/dev/null \
    || "$PY" -m pip install -q --break-system-packages "${PIP_PACKAGES[@]}"
else
  echo "setup: Python packages already installed" >&2
fi

# Opt-in (RNNTRAIN_TF_KERAS=1): tf-keras (Keras 2) with TensorFlow CPU in its own virtualenv, for
# tests/keras/test_tf_keras.py. About 2 GB and 5 minutes to install, so not part of the default setup.
if [ "${RNNTRAIN_TF_KERAS:-0}" = 1 ]; then
  VENV=${RNNTRAIN_TF_KERAS_VENV:-$HOME/.cache/rnntrain-tf-keras}
  if ! "$VENV/bin/python" -c "import tf_keras" 2>/dev/null; then
    echo "setup: installing tf-keras==2.21.0 and tensorflow-cpu==2.21.0 into $VENV" >&2
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q tensorflow-cpu==2.21.0 tf-keras==2.21.0
  fi
  echo "setup: tf-keras ready; tests/keras/test_tf_keras.py finds $VENV (or set RNNTRAIN_TF_KERAS_PYTHON)" >&2
fi
