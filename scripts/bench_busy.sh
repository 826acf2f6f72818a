#!/usr/bin/env bash
# Two trainings at once on the same cores (issue 35 item 4): for each CPU workload, `rnntrain bench`'s
# ms per training step alone and with a second identical bench running beside it, with train.threads 0
# (the default: oneDNN's threads follow the load, thread_governor.h) and with a fixed count of all
# cores (what 0 meant before), on each CPU path (plan.cpu onednn and own). Target: two at once at most
# 2.2x one alone. Writes bench/BUSY.md with
# the date, the machine, the versions and the load average; the log goes to $OUT/bench_busy.log.
#
# Usage: bash scripts/bench_busy.sh   (after scripts/build.sh)
# Environment: BUILD_DIR (build), STEPS (40), REPEATS (3), CONFIGS (charlm_small blog_small gru_small
#   maskzero_small), PATHS (onednn own).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build}
STEPS=${STEPS:-40}
REPEATS=${REPEATS:-3}
CONFIGS=${CONFIGS:-charlm_small blog_small gru_small maskzero_small}
PATHS=${PATHS:-onednn own}
CORES=$(nproc)
source scripts/log.sh
start_log bench_busy
[ -x "$BUILD/rnntrain" ] || { say "FAIL: no $BUILD/rnntrain (run scripts/build.sh)"; exit 1; }

# ms per step of one bench (median of the repeats), from its JSON.
ms() {
  local json=$1
  python3 -c "import json,sys; print('%.2f' % json.load(open(sys.argv[1]))['candidates'][0]['ms_per_step'])" "$json"
}
bench() {  # config threads json (plan.cpu from $path)
  "$BUILD/rnntrain" bench "bench/configs/$1.yaml" "train.threads=$2" "plan.cpu=$path" --steps "$STEPS" --repeats "$REPEATS" \
    --json "$3" -q >/dev/null 2>>"$LOG"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
rows=""
for cfg in $CONFIGS; do
  for path in $PATHS; do
  for threads in 0 "$CORES"; do
    step "$cfg, plan.cpu=$path, train.threads=$threads: alone, then two at once"
    sleep 1  # the previous pair gone: the run alone starts on every core
    bench "$cfg" "$threads" "$WORK/alone.json"
    bench "$cfg" "$threads" "$WORK/a.json" & bench "$cfg" "$threads" "$WORK/b.json"; wait
    alone=$(ms "$WORK/alone.json") a=$(ms "$WORK/a.json") b=$(ms "$WORK/b.json")
    ratio=$(python3 -c "print('%.2f' % (max($a, $b) / $alone))")
    verdict=$(python3 -c "print('met' if $ratio <= 2.2 else 'missed')")
    say "$cfg plan.cpu=$path threads=$threads: alone $alone ms/step, two at once $a and $b ($ratio x)"
    rows+="| $cfg | $path | $threads | $alone | $a / $b | ${ratio}x | $verdict |"$'\n'
  done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

{
  echo "# Two trainings at once on the same cores (issue 35 item 4)"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $CORES cores"
  echo "- rnntrain: commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (uncommitted changes)'); $("$BUILD/rnntrain" --version 2>/dev/null | head -1)"
  echo "- load average before / after: $load_before / $load_after"
  echo "- \`rnntrain bench bench/configs/CONFIG.yaml train.threads=N plan.cpu=P --steps $STEPS --repeats $REPEATS\`, ms per"
  echo "  training step (median of the repeats); \"two at once\": the same bench started twice together"
  echo
  echo "train.threads 0 is the default (oneDNN's threads follow the load); $CORES is a fixed count of every core,"
  echo "what 0 meant before. Target: the slower of the two at most 2.2x one alone."
  echo
  echo "| workload | plan.cpu | train.threads | alone ms/step | two at once ms/step | ratio | target 2.2x |"
  echo "|---|---|---|---|---|---|---|"
  printf "%s" "$rows"
} >bench/BUSY.md
cat bench/BUSY.md | tee -a "$LOG"
