#!/usr/bin/env bash
# The GPU benchmark of issue 5, for the H200 machine (no network needed): builds rnntrain and
# rnntrain_cudnn_bench (Release, -DRNNTRAIN_CUDA=ON, CUDA architecture $CUDA_ARCH) into build-gpu, then
# for each workload (bench/configs/W.yaml) runs in one session `rnntrain bench` (every candidate plan),
# bench/torch_bench.py (PyTorch: fused and per-layer modules, fp32/tf32/bf16-amp/fp16-amp, each run
# eagerly and with the whole step captured as a CUDA graph; bilstm eagerly only), the raw cuDNN
# timer in the precision, algorithm and fusion of rnntrain's winner, and rnntrain's own kernels timed
# the same way (rnntrain_wavefront_bench: the recurrent part alone, per wave step). Keeps the JSON in
# bench/results/gpu/ and rewrites bench/RESULTS.md (its CPU section comes from bench/results/cpu/).
#
# Usage: bash scripts/bench_gpu.sh
# Environment: WORKLOADS ("blog large gru charlm bilstm"; " ": none, only the stream runs), STEPS (10),
#   REPEATS (3), WARMUP (3), TORCH_MODES ("eager,graphed": torch_bench.py --modes),
#   STREAM_WORKLOADS ("bilstm maskzero": timed again with a new batch every step, rnntrain without
#   and with train.bucketing and PyTorch; empty: none),
#   BUILD_DIR (build-gpu), CUDA_ARCH (90), JOBS (nproc), PYTHON (python3, with torch),
#   SKIP_BUILD (1: use the binaries already in BUILD_DIR), RNNTRAIN_COMMIT (recorded as the commit).
# With $OUT set, the log goes to $OUT/bench_gpu.log, RESULTS.md to $OUT/RESULTS.md, and the JSON
# (bench/results/gpu/) with rnntrain bench's stderr to $OUT/bench_gpu_results.tgz (unpack it at the
# repository root to keep the results). CUDNN_FROM_TORCH=0: rnntrain uses the system's cuDNN.
# Exit status 0 when every run produced its JSON (missed targets do not fail it; RESULTS.md shows them).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build-gpu}
ARCH=${CUDA_ARCH:-90}
JOBS=${JOBS:-$(nproc)}
STEPS=${STEPS:-10}
REPEATS=${REPEATS:-3}
WARMUP=${WARMUP:-3}
PYTHON=${PYTHON:-python3}
TORCH_MODES=${TORCH_MODES:-eager,graphed}
read -r -a workloads <<<"$(echo "${WORKLOADS:-blog large gru charlm bilstm}" | tr ',' ' ')"
RES=bench/results/gpu
source scripts/log.sh
start_log bench_gpu
mkdir -p "$RES"
fail=0

step "machine"
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)
[ -n "$gpu" ] || { say "FAIL: nvidia-smi found no GPU"; exit 1; }
nvcc_version=$(nvcc --version 2>/dev/null | grep -oE 'release [0-9.]+' | sed 's/release //' || echo unknown)
say "GPU, driver: $gpu; nvcc $nvcc_version; workloads: ${workloads[*]}; $STEPS steps x $REPEATS repeats after $WARMUP"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  step "configure and build ($BUILD, Release, RNNTRAIN_CUDA=ON, CUDA architecture $ARCH)"
  gen=()
  command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
  cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DRNNTRAIN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
    >"$WORK/configure.log" 2>&1 || { tail -30 "$WORK/configure.log" | tee -a "$LOG"; say "FAIL: configure"; exit 1; }
  targets=(rnntrain rnntrain_cudnn_bench rnntrain_wavefront_bench)  # the benches exist whenever the CUDA backend is built
  cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" >"$WORK/build.log" 2>&1 ||
    { grep -E "error|Error" "$WORK/build.log" | head -40 | tee -a "$LOG"; say "FAIL: build"; exit 1; }
  say "built ${targets[*]}"
fi
have_cudnn_bench=0
if [ -x "$BUILD/rnntrain_cudnn_bench" ]; then
  have_cudnn_bench=1
else
  say "no $BUILD/rnntrain_cudnn_bench: the raw cuDNN rows stay n/a"
fi

rm -f "$RES"/*.json "$RES"/machine.txt
# One cuDNN for all three: PyTorch's wheel brings its own (newer) cuDNN 9; rnntrain and the raw timer
# load the same library when it is found (CUDNN_FROM_TORCH=0 keeps the system's).
cudnn_lib=""
if [ "${CUDNN_FROM_TORCH:-1}" = 1 ]; then
  cudnn_lib=$("$PYTHON" -c 'import os, nvidia.cudnn as c; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null || true)
  if [ -n "$cudnn_lib" ] && [ -e "$cudnn_lib/libcudnn.so.9" ]; then
    export LD_LIBRARY_PATH="$cudnn_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    say "cuDNN for rnntrain and the raw timer: PyTorch's, $cudnn_lib"
  else
    cudnn_lib=""
    say "cuDNN for rnntrain and the raw timer: the system's (PyTorch's was not found)"
  fi
fi
for w in "${workloads[@]}"; do
  step "rnntrain bench $w"
  extra=()
  [ "$w" = bilstm ] && extra=(--timesteps 200 --min-length 50)  # lengths uniform in [50, 200]
  if ! "$BUILD/rnntrain" bench "bench/configs/$w.yaml" "${extra[@]}" --steps "$STEPS" --repeats "$REPEATS" \
      --warmup "$WARMUP" --json "$RES/rnntrain_$w.json" >"$WORK/rnntrain_$w.out" 2>"$WORK/rnntrain_$w.err"; then
    tail -5 "$WORK/rnntrain_$w.err" | tee -a "$LOG"
    say "FAIL: rnntrain bench $w"
    fail=1
  fi
  tee -a "$LOG" <"$WORK/rnntrain_$w.out"
done

for w in "${workloads[@]}"; do
  [ "$w" = bilstm ] && continue  # its batches carry lengths: never captured
  step "rnntrain bench $w: the winner again with plan.graphs=false"
  if ! args=$(python3 bench/write_results.py --winner-args "$RES/rnntrain_$w.json" 2>&1); then
    say "skipped: $args"
    continue
  fi
  # shellcheck disable=SC2086  # $args is several arguments
  "$BUILD/rnntrain" bench "bench/configs/$w.yaml" plan.graphs=false $args --steps "$STEPS" --repeats "$REPEATS" \
    --warmup "$WARMUP" --json "$RES/nographs_$w.json" 2>>"$WORK/rnntrain_$w.err" | tee -a "$LOG" ||
    say "rnntrain bench $w plan.graphs=false: exit status ${PIPESTATUS[0]}"
done

if [ "${#workloads[@]}" -gt 0 ]; then
  step "PyTorch ($PYTHON bench/torch_bench.py --device cuda --modes $TORCH_MODES)"
  "$PYTHON" bench/torch_bench.py --device cuda --workloads "$(IFS=,; echo "${workloads[*]}")" --modes "$TORCH_MODES" \
    --steps "$STEPS" --repeats "$REPEATS" --warmup "$WARMUP" --json "$RES/torch.json" 2>&1 | tee -a "$LOG" ||
    { say "FAIL: torch_bench.py"; fail=1; }
fi

if [ "$have_cudnn_bench" = 1 ]; then
  for w in "${workloads[@]}"; do
    step "raw cuDNN $w"
    if ! args=$(python3 bench/write_results.py --cudnn-args "$RES/rnntrain_$w.json" 2>&1); then
      say "skipped: $args"
      continue
    fi
    say "rnntrain's winner: $args"
    # shellcheck disable=SC2086  # $args is several options
    for how in "" graph; do  # launched one by one, then replayed as a CUDA graph
      name=cudnn${how:+_$how}_$w
      # shellcheck disable=SC2086  # $args is several options
      "$BUILD/rnntrain_cudnn_bench" --workload "$w" $args ${how:+--graph} --steps "$STEPS" --repeats "$REPEATS" \
        --warmup "$WARMUP" --json "$RES/$name.json" 2>&1 | tee -a "$LOG" ||
        say "rnntrain_cudnn_bench $w ${how}: exit status ${PIPESTATUS[0]}"
      [ -f "$RES/$name.json" ] || { say "FAIL: no $RES/$name.json"; fail=1; }
    done
  done
fi

# rnntrain's own kernels, the recurrent part alone as the raw cuDNN timer times it (issue 33), bf16.
if [ -x "$BUILD/rnntrain_wavefront_bench" ]; then
  for w in "${workloads[@]}"; do
    [ "$w" = bilstm ] && continue  # variable lengths: the stream runs time it
    step "rnntrain's own kernels, $w, recurrent part alone, graphed"
    "$BUILD/rnntrain_wavefront_bench" --workload "$w" --precision bf16 --graph --steps "$STEPS" --repeats "$REPEATS" \
      --warmup "$WARMUP" --json "$RES/own_graph_$w.json" 2>&1 | tee -a "$LOG" ||
      say "rnntrain_wavefront_bench $w: exit status ${PIPESTATUS[0]}"
  done
else
  say "no $BUILD/rnntrain_wavefront_bench: the own kernels' recurrent-part rows stay n/a"
fi

# Variable lengths as training sees them (issue 12): every step a new batch with fresh lengths, for
# rnntrain without and with train.bucketing, and for PyTorch (packed eager; maskzero also padded graphed).
read -r -a stream_workloads <<<"$(echo "${STREAM_WORKLOADS-bilstm maskzero}" | tr ',' ' ')"
for w in "${stream_workloads[@]}"; do
  case $w in
    bilstm) lens=(--timesteps 200 --min-length 50) ;;                       # uniform in [50, 200]
    maskzero) lens=(--timesteps 400 --lognormal 60,0.8 --min-length 20) ;;  # log-normal, median 60, in [20, 400]
    *) say "FAIL: no length distribution for stream workload $w"; fail=1; continue ;;
  esac
  for bk in false true; do
    name=stream_$w
    if [ "$bk" = true ]; then name+=_bucketed; fi
    step "rnntrain bench $w --stream, train.bucketing: $bk"
    "$BUILD/rnntrain" bench "bench/configs/$w.yaml" train.bucketing=$bk "${lens[@]}" --stream --steps "$STEPS" \
      --repeats "$REPEATS" --warmup "$WARMUP" --json "$RES/$name.json" 2>>"$WORK/rnntrain_$name.err" | tee -a "$LOG" ||
      { say "FAIL: rnntrain bench $w --stream (train.bucketing: $bk)"; fail=1; }
  done
  # The raw cuDNN calls of the unbucketed stream, replayed as a graph: maskzero's masked steps run
  # its unidirectional stack over all 400 steps, whatever the lengths.
  if [ "$w" = maskzero ] && [ "$have_cudnn_bench" = 1 ] &&
      args=$(python3 bench/write_results.py --cudnn-args "$RES/stream_$w.json" 2>&1); then
    step "raw cuDNN $w, all steps, graphed ($args)"
    # shellcheck disable=SC2086  # $args is several options
    "$BUILD/rnntrain_cudnn_bench" --workload "$w" $args --graph --steps "$STEPS" --repeats "$REPEATS" \
      --warmup "$WARMUP" --json "$RES/cudnn_graph_stream_$w.json" 2>&1 | tee -a "$LOG" ||
      say "rnntrain_cudnn_bench $w --graph: exit status ${PIPESTATUS[0]}"
  fi
done
if [ "${#stream_workloads[@]}" -gt 0 ]; then
  for bk in "" --bucketing; do
    step "PyTorch, a new batch every step ($PYTHON bench/torch_bench.py --stream $bk)"
    "$PYTHON" bench/torch_bench.py --device cuda --stream $bk --workloads "$(IFS=,; echo "${stream_workloads[*]}")" \
      --modes "$TORCH_MODES" --steps "$STEPS" --repeats "$REPEATS" --warmup "$WARMUP" \
      --json "$RES/torch_stream${bk:+_bucketed}.json" 2>&1 | tee -a "$LOG" || { say "FAIL: torch_bench.py --stream $bk"; fail=1; }
  done
fi

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "gpu: ${gpu%%,*}"
  echo "driver: ${gpu##*, }"
  echo "nvcc: $nvcc_version"
  # RNNTRAIN_COMMIT: the commit the tree came from, where a copied tree's git metadata may be stale.
  echo "commit: ${RNNTRAIN_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (uncommitted changes)')}"
  echo "timing: $STEPS steps x $REPEATS repeats after $WARMUP warm-up steps"
} >"$RES/machine.txt"

step "bench/RESULTS.md"
python3 bench/write_results.py 2>&1 | tee -a "$LOG"
sed -n '/^## Closing/,$p' bench/RESULTS.md | tee -a "$LOG"
if [ -n "${OUT:-}" ]; then
  # One archive: the device tool returns a limited number of files.
  cp bench/RESULTS.md "$OUT/RESULTS.md"
  tar -czf "$OUT/bench_gpu_results.tgz" "$RES" -C "$WORK" $(cd "$WORK" && ls rnntrain_*.err 2>/dev/null)
  say "copied $RES/* and RESULTS.md to $OUT"
fi
say "done in $SECONDS s; RESULT: $([ "$fail" = 0 ] && echo PASS || echo FAIL)"
exit "$fail"
