#!/usr/bin/env bash
# The CPU comparison of issues 5 and 13: rnntrain versus PyTorch from PyPI and Keras 3 on JAX, 2 threads
# each, on bench/configs/charlm_small.yaml, blog_small.yaml, gru_small.yaml and maskzero_small.yaml (a
# new batch with fresh lengths every step). Builds rnntrain (Release, in build/ unless
# BUILD_DIR says otherwise), makes a venv with PyTorch on first use (bench/README.md says why it is the
# full PyPI wheel), runs `rnntrain bench` and bench/torch_bench.py, keeps the JSON in
# bench/results/cpu/ and rewrites bench/RESULTS.md (its GPU section comes from bench/results/gpu/).
#
# Usage: bash scripts/bench_cpu.sh
# Environment: BUILD_DIR (build), THREADS (2), STEPS (10), REPEATS (5), WARMUP (3), JOBS (nproc),
#   TORCH_VENV (~/.cache/rnntrain-bench/venv), TORCH_VERSION (2.11.0, the GPU machine's).
# The log goes to $OUT/bench_cpu.log when $OUT is set. Timings need a quiet machine: the load
# average before and after is logged and written to RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build}
THREADS=${THREADS:-2}
STEPS=${STEPS:-10}
REPEATS=${REPEATS:-5}
WARMUP=${WARMUP:-3}
JOBS=${JOBS:-$(nproc)}
VENV=${TORCH_VENV:-$HOME/.cache/rnntrain-bench/venv}
TORCH_VERSION=${TORCH_VERSION:-2.11.0}
RES=bench/results/cpu
source scripts/log.sh
start_log bench_cpu
mkdir -p "$RES"

step "build rnntrain ($BUILD, Release)"
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  gen=()
  command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
  cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >"$WORK/configure.log" 2>&1 ||
    { tail -30 "$WORK/configure.log" | tee -a "$LOG"; say "FAIL: configure (did scripts/setup.sh run?)"; exit 1; }
fi
cmake --build "$BUILD" -j "$JOBS" --target rnntrain >"$WORK/build.log" 2>&1 ||
  { grep -E "error|Error" "$WORK/build.log" | head -40 | tee -a "$LOG"; say "FAIL: build"; exit 1; }

step "PyTorch $TORCH_VERSION from PyPI in $VENV"
if ! "$VENV/bin/python" -c "import sys, torch; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  say "installing torch==$TORCH_VERSION and numpy (once: about a minute on a fast link, 4.7 GB on disk)"
  python3 -m venv "$VENV" 2>&1 | tee -a "$LOG" ||
    { say "FAIL: python3 -m venv $VENV (on Debian: apt-get install python3-venv)"; exit 1; }
  "$VENV/bin/pip" install --no-cache-dir --quiet "torch==$TORCH_VERSION" numpy 2>&1 | tail -5 | tee -a "$LOG" ||
    { say "FAIL: pip install torch==$TORCH_VERSION into $VENV"; exit 1; }
fi
"$VENV/bin/python" -c "import torch; print('torch', torch.__version__, 'cuda available:', torch.cuda.is_available())" |
  tee -a "$LOG"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
step "rnntrain bench, $THREADS threads, $STEPS steps x $REPEATS repeats after $WARMUP (load average $load_before)"
rm -f "$RES"/*.json "$RES"/machine.txt
fail=0
for w in charlm_small blog_small gru_small maskzero_small; do
  lens=()  # maskzero_small: a new batch every step, long-tailed lengths (as torch_bench.py and keras_bench.py)
  [ "$w" = maskzero_small ] && lens=(--lognormal 30,0.6 --min-length 5 --stream)
  # FP32 and bf16 (AVX512-BF16 where the CPU has it; issue 35 item 3) on oneDNN's stacks and on the
  # own engine (plan.cpu: own, issue 35 item 2)
  if ! table=$("$BUILD/rnntrain" bench "bench/configs/$w.yaml" device=cpu train.threads="$THREADS" "${lens[@]}" \
      --cpu onednn,own --precision fp32,bf16 --steps "$STEPS" --repeats "$REPEATS" --warmup "$WARMUP" --json "$RES/rnntrain_$w.json" \
      2>>"$LOG"); then
    say "FAIL: rnntrain bench $w"
    fail=1
  fi
  say "$table"
done

step "PyTorch (CPU), $THREADS threads"
"$VENV/bin/python" bench/torch_bench.py --device cpu --threads "$THREADS" --workloads charlm_small,blog_small,gru_small,maskzero_small --stream \
  --steps "$STEPS" --repeats "$REPEATS" --warmup "$WARMUP" --json "$RES/torch.json" 2>&1 | tee -a "$LOG" || fail=1

step "Keras 3 on JAX (CPU), $THREADS threads"
if KERAS_BACKEND=jax python3 -c "import keras, jax" 2>/dev/null; then
  KERAS_BACKEND=jax python3 bench/keras_bench.py --threads "$THREADS" --workloads charlm_small,blog_small,gru_small,maskzero_small \
    --steps "$STEPS" --repeats "$REPEATS" --warmup "$WARMUP" --json "$RES/keras.json" 2>&1 | tee -a "$LOG" || fail=1
else
  say "no Keras/JAX for python3 (scripts/setup.sh installs them): the Keras column stays n/a"
fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (uncommitted changes)')"
  echo "timing: $STEPS steps x $REPEATS repeats after $WARMUP warm-up steps, $THREADS threads"
  echo "load_before: $load_before"
  echo "load_after: $load_after"
} >"$RES/machine.txt"

step "bench/RESULTS.md"
python3 bench/write_results.py 2>&1 | tee -a "$LOG"
sed -n '/^## CPU/,/^## Closing/p' bench/RESULTS.md | tee -a "$LOG"
say "load average before / after: $load_before / $load_after (compare with $THREADS threads; a busy machine skews both)"
say "JSON in $RES/; log in $LOG"
exit "$fail"
