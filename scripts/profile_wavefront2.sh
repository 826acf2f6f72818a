#!/usr/bin/env bash
# Profiles the second design of the wavefront kernels (issue 33) on an H100/H200, in one run: builds
# rnntrain and the wavefront tests (BUILD_DIR, default build-g, CUDA architecture 90), runs those
# tests (the precision cases under both designs), times training steps of bench configs under both designs
# (`rnntrain bench`, plan.graphs=false) with RNNTRAIN_PROFILE's per-stage GPU times, then rebuilds
# with RNNTRAIN_WF2_PHASES and prints the cycles of each phase of a kernel step (forward and backward). The log goes to
# $OUT/profile_wavefront2.log when $OUT is set. Environment: CONFIGS (default "blog gru charlm"),
# STEPS (30), PHASES (0 skips the phase build).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build-g}
CONFIGS=${CONFIGS:-blog gru charlm}
STEPS=${STEPS:-30}
source scripts/log.sh
start_log profile_wavefront2
fail=0

configure() {
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRNNTRAIN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DRNNTRAIN_WF2_PHASES="$1" >"$WORK/configure.log" 2>&1 &&
    cmake --build "$BUILD" -j "$(nproc)" --target rnntrain gpu_wavefront_test gpu_precision_test >"$WORK/build.log" 2>&1
}

step "machine"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$LOG"
step "build"
if ! configure OFF; then
  tail -40 "$WORK/configure.log" "$WORK/build.log" | tee -a "$LOG"
  say "FAIL: build"
  exit 1
fi

if [ "${TESTS:-1}" != 0 ]; then
  step "tests: the wavefront kernels, both designs"
  "$BUILD/tests/gpu_wavefront_test" >"$WORK/wf.log" 2>&1 || fail=1
  RNNTRAIN_WAVEFRONT_DESIGN=2 "$BUILD/tests/gpu_precision_test" --gtest_filter='*wavefront*' >"$WORK/prec.log" 2>&1 || fail=1
  RNNTRAIN_WAVEFRONT_DESIGN=1 "$BUILD/tests/gpu_precision_test" --gtest_filter='*wavefront*' >"$WORK/prec1.log" 2>&1 ||
    fail=1
  grep -h -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure" "$WORK/wf.log" "$WORK/prec.log" "$WORK/prec1.log" | tee -a "$LOG"
  [ "$fail" = 0 ] || [ -z "${OUT:-}" ] || cp "$WORK/wf.log" "$WORK/prec.log" "$WORK/prec1.log" "$OUT/"
fi

bench() {  # design config
  RNNTRAIN_WAVEFRONT_DESIGN=$1 RNNTRAIN_PROFILE=1 "$BUILD/rnntrain" bench "bench/configs/$2.yaml" plan.graphs=false \
    --precision bf16 --algo wavefront --steps "$STEPS" --repeats 3 --warmup 5 >"$WORK/bench.log" 2>&1
  say "-- design $1, $2: the wavefront stages' GPU time per training step, then the candidates' ms/step"
  grep -E "candidate=|profile:|^  .* (forward|backward) " "$WORK/bench.log" | tee -a "$LOG"
  sed -n '/^candidate /,$p' "$WORK/bench.log" | tee -a "$LOG"
}
step "rnntrain bench, design 1 and 2 (bf16, plan.graphs=false)"
for cfg in $CONFIGS; do
  for design in 1 2; do bench "$design" "$cfg"; done
done

if [ "${PHASES:-1}" != 0 ]; then
  step "phases of a kernel step (RNNTRAIN_WF2_PHASES build; SM cycles of thread 0, each row's first CTA / the largest over its CTAs)"
  say "forward (wf2), recurrent rows: [1] input side [2] wait for h [3] wgmma [4] cell and h stores [5] fence, CTA"
  say "  barrier [6] cluster wait [7] multicast issued, flag released [8] wait for the input row's next sums"
  say "  (above the launch's first layer) [9] saved state stores [10] the next input side's copies issued; input"
  say "  rows: [1] cluster wait, flag wait, multicast issued [2] wait for h [3] wgmma [4] wait for the ring slot"
  say "  [5] ring stores [6] flag"
  say "backward (wf2b), recurrent rows: [1] loads for the cell, wait for the input row [2] the products over the ring"
  say "  of slices (full waits: for slices to land) [3] wait for the global ring's slot [4] cell, stores; input rows:"
  say "  [2] products [3] wait for the ring slot [4] stores, flag; producer warp: [1] wait for the slice [2] wait"
  say "  for the slot, multicast"
  if configure ON; then
    for cfg in blog gru; do
      RNNTRAIN_WAVEFRONT_DESIGN=2 "$BUILD/rnntrain" bench "bench/configs/$cfg.yaml" plan.graphs=false \
        --precision bf16 --algo wavefront --steps 2 --repeats 3 --warmup 1 >"$WORK/ph.log" 2>&1
      grep "^wf2" "$WORK/ph.log" >"$WORK/ph.txt" || tail -5 "$WORK/ph.log" | tee -a "$LOG"
      for kind in wf2 wf2b; do
        for rows in $(grep "^$kind " "$WORK/ph.txt" | grep -o " of [0-9]* " | sort -u | tr -dc '0-9 '); do
          say "-- $cfg, $kind, launches of $rows rows, the last one:"
          grep "^$kind .* of $rows " "$WORK/ph.txt" | tail -"$rows" | tee -a "$LOG"
        done
      done
    done
  else
    tail -20 "$WORK/build.log" | tee -a "$LOG"
    fail=1
  fi
  configure OFF >/dev/null 2>&1
fi

step "done"
[ "$fail" = 0 ] && say "RESULT: PASS" || say "RESULT: FAIL"
exit "$fail"
