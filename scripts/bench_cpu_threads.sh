#!/usr/bin/env bash
# The CPU workloads at several thread counts on one machine (issue 35: 16 threads on the GPU machine's
# host). Builds rnntrain for the CPU only in build-cpu (oneDNN from DNNL_DIR, a dnnl CMake config
# directory, where CMake would not find it), then for each count in THREADS runs `rnntrain bench`
# (oneDNN's stacks and the own engine, FP32 and bf16), bench/torch_bench.py (the python3 on PATH, with
# torch) and, where python3 imports keras and jax, bench/keras_bench.py (Keras 3 on JAX) on the four CPU
# workloads, in the same call. Logs and JSON go to $OUT.
#
# Usage: THREADS="2 16" bash scripts/bench_cpu_threads.sh
# Environment: THREADS (2 16), STEPS (10), REPEATS (5), OUT (/tmp/bench_cpu_threads), DNNL_DIR, DNNL_LIB
#   (a folder with libdnnl, put on LD_LIBRARY_PATH for rnntrain alone);
#   SPINS: GOMP_SPINCOUNT values to run rnntrain under, each in turn (default: rnntrain's own, 1000);
#   PROFILE=1: rnntrain also prints each phase's wall time per step (RNNTRAIN_PROFILE) into the log;
#   KERAS=0 skips Keras.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2 16}
STEPS=${STEPS:-10}
REPEATS=${REPEATS:-5}
OUT=${OUT:-/tmp/bench_cpu_threads}
mkdir -p "$OUT"
dnnl=()
[ -n "${DNNL_DIR:-}" ] && dnnl=(-Ddnnl_DIR="$DNNL_DIR")
{ date -u +%Y-%m-%dT%H:%M:%SZ; lscpu; git rev-parse --short HEAD 2>/dev/null || true; } >"$OUT/machine.txt"
cmake -S . -B build-cpu -DCMAKE_BUILD_TYPE=Release -DRNNTRAIN_CUDA=OFF -DRNNTRAIN_MPI=OFF -DRNNTRAIN_TESTS=OFF \
  "${dnnl[@]}" >"$OUT/configure.log" 2>&1
cmake --build build-cpu -j "$(nproc)" --target rnntrain >"$OUT/build.log" 2>&1
keras=0
if [ "${KERAS:-1}" != 0 ] && KERAS_BACKEND=jax python3 -c "import keras, jax" 2>/dev/null; then keras=1; fi
for t in $THREADS; do
  for spin in ${SPINS:-default}; do
    env=()
    [ "$spin" != default ] && env=(GOMP_SPINCOUNT="$spin")
    [ -n "${DNNL_LIB:-}" ] && env+=(LD_LIBRARY_PATH="$DNNL_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    [ "${PROFILE:-0}" = 1 ] && env+=(RNNTRAIN_PROFILE=1)
    echo "== $t threads, GOMP_SPINCOUNT $spin, load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/rnntrain.log"
    for w in charlm_small blog_small gru_small maskzero_small; do
      lens=()
      [ "$w" = maskzero_small ] && lens=(--lognormal 30,0.6 --min-length 5 --stream)
      env "${env[@]}" build-cpu/rnntrain bench "bench/configs/$w.yaml" device=cpu train.threads="$t" "${lens[@]}" \
        --cpu onednn,own --precision fp32,bf16 --steps "$STEPS" --repeats "$REPEATS" \
        --json "$OUT/rnntrain_${w}_t${t}_spin$spin.json" 2>&1 | grep -v "^\[info\] bench candidate" | tee -a "$OUT/rnntrain.log"
    done
  done
  python3 bench/torch_bench.py --device cpu --threads "$t" --workloads charlm_small,blog_small,gru_small,maskzero_small \
    --stream --modes eager --steps "$STEPS" --repeats "$REPEATS" --json "$OUT/torch_t$t.json" 2>&1 | tee -a "$OUT/torch.log"
  if [ "$keras" = 1 ]; then
    KERAS_BACKEND=jax python3 bench/keras_bench.py --threads "$t" --workloads charlm_small,blog_small,gru_small,maskzero_small \
      --steps "$STEPS" --repeats "$REPEATS" --json "$OUT/keras_t$t.json" 2>&1 | tee -a "$OUT/keras.log"
  else
    echo "no Keras/JAX for python3 (KERAS_BACKEND=jax python3 -c 'import keras, jax' fails): Keras not run" | tee -a "$OUT/keras.log"
  fi
done
