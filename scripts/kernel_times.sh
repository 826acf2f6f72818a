#!/usr/bin/env bash
# The kernels of one training step, each with its GPU time, from Nsight Compute (ncu, hardware timer,
# clocks left alone), for an H100/H200 with ncu on PATH: builds rnntrain (BUILD_DIR, default build-g,
# CUDA architecture 90) unless BUILD=0, then for each bench config in CONFIGS runs `rnntrain bench`
# for two steps without graphs (the bench's other settings from ARGS) under ncu and prints the last
# step's kernels in launch order, the same kernels grouped by name, and their sum. The sum against
# the step's time without ncu shows how much of a step is not kernels (launch gaps, host work).
# The log goes to $OUT/kernel_times.log when $OUT is set. Environment: CONFIGS (default "blog"),
# ARGS (default "--precision bf16 --algo wavefront"), ENVS (extra environment for rnntrain),
# DETAIL (a regex of kernel names: each matching kernel's first launch is profiled with ncu's full set,
# and its summary and per-SASS-instruction warp stalls are written to $OUT/CONFIG_NAME_{details,sass}.csv).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-g}
CONFIGS=${CONFIGS:-blog}
ARGS=${ARGS:---precision bf16 --algo wavefront}
source scripts/log.sh
start_log kernel_times
command -v ncu >/dev/null || { say "FAIL: ncu is not on PATH"; exit 1; }

if [ "${BUILD:-1}" != 0 ]; then
  step "build"
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRNNTRAIN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    >"$WORK/configure.log" 2>&1 && cmake --build "$BUILD_DIR" -j "$(nproc)" --target rnntrain >"$WORK/build.log" 2>&1 ||
    { tail -30 "$WORK/configure.log" "$WORK/build.log" | tee -a "$LOG"; say "FAIL: build"; exit 1; }
fi

for cfg in $CONFIGS; do
  step "$cfg: $ARGS"
  # shellcheck disable=SC2086
  env ${ENVS:-} "$BUILD_DIR/rnntrain" bench "bench/configs/$cfg.yaml" plan.graphs=false $ARGS --steps 20 --repeats 3 \
    --warmup 5 2>&1 | sed -n '/^candidate /,$p' | tee -a "$LOG"
  # shellcheck disable=SC2086
  env ${ENVS:-} ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base --print-kernel-base function \
    --log-file "$WORK/ncu.csv" "$BUILD_DIR/rnntrain" bench "bench/configs/$cfg.yaml" plan.graphs=false $ARGS \
    --steps 1 --repeats 3 --warmup 1 >"$WORK/run.log" 2>&1 || { tail -20 "$WORK/run.log" | tee -a "$LOG"; continue; }
  python3 - "$WORK/ncu.csv" <<'EOF' | tee -a "$LOG"
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 14 and r[0].isdigit()]
ks = [(r[4], float(r[14].replace(',', '')) / 1e3) for r in rows]  # name, us
if not ks: sys.exit("no kernels in the ncu log")
names = [k for k, _ in ks]
# A step is the shortest tail that the two kernel sequences before it repeat (the timed steps are alike).
p = next((p for p in range(1, len(ks) // 3 + 1) if names[-p:] == names[-2 * p:-p] == names[-3 * p:-2 * p]), len(ks))
step = ks[-p:]
print(f"{len(ks)} kernels launched; {len(step)} in the last step, {sum(t for _, t in step):.1f} us in all")
for name, t in step: print(f"  {t:9.1f} us  {name[:110]}")
print("by name:")
by = collections.defaultdict(lambda: [0, 0.0])
for name, t in step: by[name][0] += 1; by[name][1] += t
for name, (n, t) in sorted(by.items(), key=lambda x: -x[1][1]): print(f"  {t:9.1f} us  {n:3d}x  {name[:100]}")
EOF
  for k in ${DETAIL:-}; do
    [ -n "${OUT:-}" ] || { say "DETAIL needs OUT"; break; }
    # shellcheck disable=SC2086
    env ${ENVS:-} ncu --clock-control none --set full --import-source no --kernel-name-base function \
      --kernel-name "regex:$k" --launch-count 1 -o "$WORK/$k" -f "$BUILD_DIR/rnntrain" bench "bench/configs/$cfg.yaml" \
      plan.graphs=false $ARGS --steps 1 --repeats 3 --warmup 1 >"$WORK/detail.log" 2>&1 ||
      { tail -20 "$WORK/detail.log" | tee -a "$LOG"; continue; }
    ncu -i "$WORK/$k.ncu-rep" --page details --csv >"$OUT/${cfg}_${k}_details.csv" 2>&1
    ncu -i "$WORK/$k.ncu-rep" --page source --csv --print-source sass >"$OUT/${cfg}_${k}_sass.csv" 2>&1
    say "-- $cfg $k: $(wc -l <"$OUT/${cfg}_${k}_details.csv") detail lines, $(wc -l <"$OUT/${cfg}_${k}_sass.csv") SASS lines"
  done
done
