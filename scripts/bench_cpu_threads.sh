#!/usr/bin/env bash
# The CPU workloads at several thread counts on one machine (issue 35: 16 threads on the GPU machine's
# host). Builds rnntrain for the CPU only in build-cpu (oneDNN from DNNL_DIR, a dnnl CMake config
# directory, where CMake would not find it), then for each count in THREADS runs `rnntrain bench`
# (oneDNN's stacks and the own engine, FP32 and bf16) and bench/torch_bench.py (the python3 on PATH,
# with torch) on the four CPU workloads, in the same call. Logs and JSON go to $OUT.
#
# Usage: THREADS="2 16" bash scripts/bench_cpu_threads.sh
# Environment: THREADS (2 16), STEPS (10), REPEATS (5), OUT (/tmp/bench_cpu_threads), DNNL_DIR.
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
cmake -S . -B build-cpu -DCMAKE_BUILD_TYPE=Release -DRNNTRAIN_CUDA=OFF -DRNNTRAIN_MPI=OFF "${dnnl[@]}" \
  >"$OUT/configure.log" 2>&1
cmake --build build-cpu -j "$(nproc)" --target rnntrain >"$OUT/build.log" 2>&1
for t in $THREADS; do
  echo "== $t threads, load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/rnntrain.log"
  for w in charlm_small blog_small gru_small maskzero_small; do
    lens=()
    [ "$w" = maskzero_small ] && lens=(--lognormal 30,0.6 --min-length 5 --stream)
    build-cpu/rnntrain bench "bench/configs/$w.yaml" device=cpu train.threads="$t" "${lens[@]}" --cpu onednn,own \
      --precision fp32,bf16 --steps "$STEPS" --repeats "$REPEATS" --json "$OUT/rnntrain_${w}_t$t.json" -q \
      2>>"$OUT/rnntrain.log" | tee -a "$OUT/rnntrain.log"
  done
  python3 bench/torch_bench.py --device cpu --threads "$t" --workloads charlm_small,blog_small,gru_small,maskzero_small \
    --stream --modes eager --steps "$STEPS" --repeats "$REPEATS" --json "$OUT/torch_t$t.json" 2>&1 | tee -a "$OUT/torch.log"
done
