#!/usr/bin/env bash
# Profiles the second design of the wavefront kernels (issue 33) on an H100/H200, in one run: builds
# rnntrain and the wavefront tests (BUILD_DIR, default build-g, CUDA architecture 90), runs those
# tests with the second design on, times training steps of bench configs under both designs
# (`rnntrain bench`, plan.graphs=false) with RNNTRAIN_PROFILE's per-stage GPU times, then rebuilds
# with RNNTRAIN_WF2_PHASES and prints the cycles of each phase of a kernel step. The log goes to
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

step "tests with RNNTRAIN_WAVEFRONT_DESIGN=2"
export RNNTRAIN_WAVEFRONT_DESIGN=2
"$BUILD/tests/gpu_wavefront_test" >"$WORK/wf.log" 2>&1 || fail=1
"$BUILD/tests/gpu_precision_test" --gtest_filter='*wavefront*' >"$WORK/prec.log" 2>&1 || fail=1
grep -h -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|tests? ran" "$WORK/wf.log" "$WORK/prec.log" | tee -a "$LOG"
unset RNNTRAIN_WAVEFRONT_DESIGN

bench() {  # design config extra-args...
  local design=$1 cfg=$2
  shift 2
  RNNTRAIN_WAVEFRONT_DESIGN=$design RNNTRAIN_PROFILE=1 "$BUILD/rnntrain" bench "bench/configs/$cfg.yaml" \
    plan.algo=wavefront plan.precision=bf16 plan.graphs=false "$@" --steps "$STEPS" --repeats 3 --warmup 5 \
    >"$WORK/bench.log" 2>&1
  say "-- design $design, $cfg $*:"
  grep -v -E "^\s*$" "$WORK/bench.log" | head -60 | tee -a "$LOG"
}
step "rnntrain bench, design 1 and 2"
for cfg in $CONFIGS; do
  for design in 1 2; do bench "$design" "$cfg"; done
done
for design in 1 2; do bench "$design" blog plan.fuse=never; done

if [ "${PHASES:-1}" != 0 ]; then
  step "phases of a kernel step (RNNTRAIN_WF2_PHASES build; SM cycles, thread 0 of each row's CTA 0)"
  if configure ON; then
    for cfg in blog gru; do
      for fuse in auto never; do
        say "-- $cfg plan.fuse=$fuse, the last launches:"
        RNNTRAIN_WAVEFRONT_DESIGN=2 "$BUILD/rnntrain" bench "bench/configs/$cfg.yaml" plan.algo=wavefront \
          plan.precision=bf16 plan.graphs=false plan.fuse=$fuse --steps 2 --repeats 1 --warmup 1 >"$WORK/ph.log" 2>&1
        grep "^wf2" "$WORK/ph.log" | tail -8 | tee -a "$LOG"
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
