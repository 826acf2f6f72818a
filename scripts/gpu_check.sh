#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU, CUDA, cuDNN 9 and the build dependencies (no network
# needed): configures a Release build with -DRNNTRAIN_CUDA=ON for CUDA architecture $CUDA_ARCH (90 =
# H100/H200), builds rnntrain and the gpu and planner tests, runs them (ctest -L gpu, -L plan), trains
# configs/quickstart.yaml on the GPU (and on the CPU for comparison) and charlm briefly, then prints a
# summary: GPU, driver, CUDA and cuDNN versions, tests passed and failed, the loss curves, seconds per
# epoch. Everything also goes to $OUT/gpu_check.log when $OUT is set. Exit status 0 only if all passed.
# Environment: BUILD_DIR (default build-gpu), CUDA_ARCH (90), EPOCHS (quickstart epochs, 8), JOBS, SPEED (0
# skips the speed runs), MEMCHECK (1 runs every gpu test binary under compute-sanitizer memcheck, and
# the wavefront kernels' tests under racecheck).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build-gpu}
ARCH=${CUDA_ARCH:-90}
EPOCHS=${EPOCHS:-8}
JOBS=${JOBS:-$(nproc)}
source scripts/log.sh
start_log gpu_check
fail=0

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | tee -a "$LOG" ||
  say "nvidia-smi failed: is an NVIDIA driver installed?"
nvcc --version 2>&1 | tail -2 | tee -a "$LOG"
cmake --version | head -1 | tee -a "$LOG"

step "configure (Release, RNNTRAIN_CUDA=ON, CUDA architecture $ARCH)"
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
if ! cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DRNNTRAIN_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$ARCH" >"$WORK/configure.log" 2>&1; then
  tail -30 "$WORK/configure.log" | tee -a "$LOG"
  say "FAIL: configure"
  exit 1
fi
grep -E "CUDA backend|CUDA architectures|Found CUDNN|Found CUDAToolkit|NCCL|MPI" "$WORK/configure.log" | tee -a "$LOG"

step "build"
targets=(rnntrain)
for t in tests/gpu_*_test.cpp tests/plan_*_test.cpp; do targets+=("$(basename "$t" .cpp)"); done
start=$SECONDS
if ! cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" >"$WORK/build.log" 2>&1; then
  grep -E "error|Error" "$WORK/build.log" | head -40 | tee -a "$LOG"
  say "FAIL: build"
  exit 1
fi
say "built ${targets[*]} in $((SECONDS - start)) s"

step "tests: ctest -L gpu, ctest -L plan"
(cd "$BUILD" && ctest -L gpu -j 8 -V --timeout 300) >"$WORK/ctest_gpu.log" 2>&1 || fail=1
(cd "$BUILD" && ctest -L plan -j 8 --timeout 60) >"$WORK/ctest_plan.log" 2>&1 || fail=1
gpu_summary=$(grep -E "tests passed|tests failed" "$WORK/ctest_gpu.log" | tail -1)
plan_summary=$(grep -E "tests passed|tests failed" "$WORK/ctest_plan.log" | tail -1)
say "gpu:  ${gpu_summary:-no summary (see the ctest log)}"
say "plan: ${plan_summary:-no summary (see the ctest log)}"
grep -h -E "\(Failed\)|\(SEGFAULT\)|\(Timeout\)|\(Subprocess aborted\)|\*\*\*Exception" "$WORK"/ctest_*.log | tee -a "$LOG"
skipped=$(grep -c -F "***Skipped" "$WORK/ctest_gpu.log" || true)
say "skipped gpu tests: $skipped"
grep -h -oE "no CUDA backend to test here.*" "$WORK/ctest_gpu.log" | sort -u | head -3 | tee -a "$LOG"
say "-- evidence printed by the tests (max |gpu - cpu| per case):"
grep -h -oE "parity case=.*" "$WORK/ctest_gpu.log" | sort -u >>"$LOG"
grep -h -oE "(parity|train) case=.*" "$WORK/ctest_gpu.log" | sort -u | awk '
  /^parity/ { n++; for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[2] + 0 > worst[kv[1]]) worst[kv[1]] = kv[2] + 0 } }
  END { printf "parity cases: %d; worst output %.3g, dx %.3g, weight_grad %.3g\n", n, worst["output"], worst["dx"], worst["weight_grad"] }' |
  tee -a "$LOG"
grep -h -oE "(train|dropout) case=.*|dropout rate=.*|out-of-memory message: .*" "$WORK/ctest_gpu.log" | sort -u |
  tee -a "$LOG"
grep -h -oE "precision case=.*|fp16 training: .*" "$WORK/ctest_gpu.log" | sort -u | tee -a "$LOG"
# Failed tests' output, for the log only.
grep -B2 -A25 -E "Failure|FAILED  \]" "$WORK/ctest_gpu.log" | head -200 >>"$LOG"

# Trains CONFIG on DEVICE for N epochs; prints the loss curve and seconds per epoch.
train() {
  local name=$1 config=$2 device=$3 epochs=$4
  shift 4
  local dir="$WORK/run_${name}_$device" out="$WORK/train_${name}_$device.log"
  local start=$SECONDS
  if ! "$BUILD/rnntrain" train "$config" device="$device" train.epochs="$epochs" output.dir="$dir" "$@" \
      >"$out" 2>&1; then
    tail -20 "$out" | tee -a "$LOG"
    say "FAIL: training $name on $device"
    fail=1
    return
  fi
  grep -E "cuda: |device " "$out" | head -2 | tee -a "$LOG"
  local curve secs
  curve=$(grep -oE "epoch=[0-9]+/[0-9]+ .* s=[0-9.]+" "$out" | sed -E 's/.* loss=([^ ]+).*/\1/' | tr '\n' ' ')
  val=$(grep -oE "val_loss=[^ ]+" "$out" | sed 's/val_loss=//' | tr '\n' ' ')
  secs=$(grep -oE " s=[0-9.]+$" "$out" | sed 's/ s=//' | tr '\n' ' ')
  say "$name on $device: loss per epoch: $curve"
  [ -n "$val" ] && say "$name on $device: val_loss per epoch: $val"
  say "$name on $device: seconds per epoch: $secs(wall $((SECONDS - start)) s with data loading)"
}

step "training: quickstart ($EPOCHS epochs) on cuda and on cpu; charlm (2 epochs) on cuda"
train quickstart configs/quickstart.yaml cuda "$EPOCHS" train.early_stopping=null
train quickstart configs/quickstart.yaml cpu "$EPOCHS" train.early_stopping=null
train charlm configs/charlm.yaml cuda 2

# A larger model for speed (the shape of perf-anchors.md's "blog" workload): 4 x LSTM(512), B = 64,
# T = 100, 100 steps per epoch, as one fused cuDNN stack and as four single-layer stacks.
cat >"$WORK/bench.yaml" <<'YAML'
model:
  layers:
    - {type: Input, shape: [100, 2]}
    - {type: TimeDistributed, layer: {type: Dense, units: 512}}
    - {type: LSTM, units: 512, return_sequences: true}
    - {type: LSTM, units: 512, return_sequences: true}
    - {type: LSTM, units: 512, return_sequences: true}
    - {type: LSTM, units: 512}
    - {type: Dense, units: 1}
data:
  train: {format: synthetic, task: adding, samples: 6400, timesteps: 100, seed: 1}
train:
  batch_size: 64
  optimizer: {type: adam, learning_rate: 0.0003}
  loss: mse
YAML
if [ "${SPEED:-1}" = 1 ]; then  # SPEED=0 skips the speed runs
step "speed: 4 x LSTM(512), B=64, T=100, 100 steps per epoch (ms per step = 10 x seconds per epoch)"
train bench4xLSTM512_fused "$WORK/bench.yaml" cuda 3 plan.fuse=auto
train bench4xLSTM512_unfused "$WORK/bench.yaml" cuda 3 plan.fuse=never
train bench4xLSTM512_fused_nographs "$WORK/bench.yaml" cuda 3 plan.fuse=auto plan.graphs=false
# plan.autotune end to end: measure the candidates, cache the choice, train with it.
train bench4xLSTM512_autotune "$WORK/bench.yaml" cuda 3 plan.autotune=true plan.precision=auto plan.algo=auto \
  plan.cache="$WORK/autotune.json"
grep -h "autotune: chose" "$WORK"/*.log 2>/dev/null | tail -1 | tee -a "$LOG"
fi

# Faults on the GPU: divergence stops before a non-finite checkpoint (the optimizer kernel flags it),
# and SIGTERM mid-run saves last.h5 (exit 143) and the run resumes.
step "faults on cuda: divergence, SIGTERM and resume"
dir="$WORK/run_diverge"
"$BUILD/rnntrain" train configs/quickstart.yaml device=cuda output.dir="$dir" 'train.optimizer={type: sgd, learning_rate: 1e6}' \
  train.steps_per_epoch=1 train.early_stopping=null train.epochs=8 -q >"$WORK/diverge.log" 2>&1
rc=$?
say "divergence on cuda: exit $rc: $(grep -m1 -oE 'epoch [0-9]+ step [0-9]+: .*' "$WORK/diverge.log" | cut -c1-160)"
if [ "$rc" != 1 ] || ! grep -q "inf or NaN" "$WORK/diverge.log"; then say "FAIL: divergence on cuda"; fail=1; fi
dir="$WORK/run_sigterm"
"$BUILD/rnntrain" train configs/charlm.yaml device=cuda output.dir="$dir" train.epochs=30 -q >"$WORK/sigterm.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -f "$dir/config.yaml" ] && break; sleep 0.1; done
sleep 1.5
kill -TERM "$pid"
wait "$pid"
rc=$?
"$BUILD/rnntrain" train --resume "$dir" -q >"$WORK/resume.log" 2>&1
rc2=$?
say "SIGTERM on cuda: exit $rc ($(grep -m1 -oE 'stopped by .* holds' "$WORK/sigterm.log")); resume: exit $rc2, $(grep -oE '"epochs":[0-9]+' "$WORK/resume.log")"
if [ "$rc" != 143 ] || [ "$rc2" != 0 ]; then say "FAIL: SIGTERM and resume on cuda"; fail=1; fi

# compute-sanitizer memcheck over every gpu test binary, racecheck over the wavefront kernels' tests
# (MEMCHECK=1; slow, so off by default).
if [ "${MEMCHECK:-0}" = 1 ]; then
  step "compute-sanitizer memcheck over the gpu tests"
  # API errors are not reported: rnntrain checks every CUDA call itself, and gpu_engine_test runs out
  # of memory on purpose. gpu_layout_test makes no CUDA call (memcheck refuses such a program).
  ls "$BUILD"/tests/gpu_*_test | grep -v gpu_layout_test | xargs -P 4 -I{} sh -c \
    'timeout 300 compute-sanitizer --tool memcheck --leak-check full --report-api-errors no --error-exitcode 99 \
      --print-limit 20 {} >"$0/memcheck_$(basename {}).log" 2>&1; echo "$(basename {}) exit $?"' "$WORK" |
    sort | tee -a "$LOG"
  grep -h -E "ERROR SUMMARY|Invalid|Leaked|PASSED" "$WORK"/memcheck_*.log | sort | uniq -c | tee -a "$LOG"
  grep -q -E "exit [^0]" <(grep -h "" "$LOG" | grep -E "^gpu_.*_test exit") && { say "FAIL: memcheck"; fail=1; }
  # racecheck (shared-memory hazards) over rnntrain's own kernels: the wavefront tests and cases.
  for t in "gpu_wavefront_test --gtest_filter=-*Sliced*" "gpu_precision_test --gtest_filter=*wavefront*"; do
    set -f; set -- $t; set +f  # the filters are not globs
    timeout 600 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 99 --print-limit 20 \
      "$BUILD/tests/$1" "$2" >"$WORK/racecheck_$1.log" 2>&1
    rc=$?
    say "racecheck $1 $2: exit $rc; $(grep -h -E "RACECHECK SUMMARY" "$WORK/racecheck_$1.log" | head -1)"
    [ "$rc" = 0 ] || fail=1
  done
  [ -n "${OUT:-}" ] && tar czf "$OUT/memcheck_logs.tgz" -C "$WORK" $(cd "$WORK" && ls memcheck_*.log racecheck_*.log) 2>/dev/null
fi

step "summary"
say "GPU:    $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
say "CUDA:   $(nvcc --version | grep -oE 'release [0-9.]+' | head -1)"
say "cuDNN:  headers $(grep -oE 'cuDNN [0-9.]+$' "$WORK/configure.log" | head -1 | sed 's/cuDNN //'), loaded at run time $(grep -ohE 'cuDNN [0-9.]+\)' "$WORK"/train_*_cuda.log | head -1 | tr -d ')' | sed 's/cuDNN //')"
say "tests:  gpu: ${gpu_summary:-?}; plan: ${plan_summary:-?}"
grep -h -E "^(quickstart|charlm|bench[^ ]*) on" "$LOG" | sed 's/^/        /' >"$WORK/curves"
cat "$WORK/curves" | tee -a "$LOG"
if [ "$fail" = 0 ]; then say "RESULT: PASS"; else say "RESULT: FAIL"; fi
[ -n "${OUT:-}" ] && cp "$WORK/ctest_gpu.log" "$OUT/ctest_gpu.log" 2>/dev/null
exit "$fail"
