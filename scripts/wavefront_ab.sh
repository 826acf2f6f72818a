#!/usr/bin/env bash
# Times variants of the own kernels' second design against each other in one call (issue 33; the
# method: docs/cuda.md): each variant is a folder of files that replace those of src/backend/cuda/sm90a
# ("tree": the working tree's own). Builds rnntrain_wavefront_bench once per variant (BUILD_DIR,
# default build-gpu, CUDA architecture 90), then times the variants in turn on each workload, ROUNDS
# rounds, so that every comparison is of one machine at one time. The tree's files are put back at the
# end and the bench rebuilt from them. The log goes to $OUT/wavefront_ab.log when $OUT is set.
#
# Usage: VARIANTS="tree .ab/old" bash scripts/wavefront_ab.sh            (on the GPU machine)
#        bash scripts/wavefront_ab.sh --export REV .ab/old                (here: REV's files into a folder)
# Environment: VARIANTS (tree), WORKLOADS ("blog;gru;charlm;blog --ragged": `;` between workloads, each
#   rnntrain_wavefront_bench's --workload and its flags), ROUNDS (2), ARGS (--precision bf16 --graph
#   --steps 20 --repeats 3). A variant folder must travel with the tree: untracked, not ignored.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
K=src/backend/cuda/sm90a
if [ "${1:-}" = --export ]; then
  [ $# = 3 ] || { echo "usage: $0 --export REV DIR" >&2; exit 2; }
  mkdir -p "$3"
  for f in "$K"/*; do git show "$2:$f" >"$3/$(basename "$f")" || exit 1; done
  echo "wrote the files of $K at $2 to $3"
  exit 0
fi
BUILD=${BUILD_DIR:-build-gpu}
VARIANTS=${VARIANTS:-tree}
WORKLOADS=${WORKLOADS:-blog;gru;charlm;blog --ragged}
ROUNDS=${ROUNDS:-2}
ARGS=${ARGS:---precision bf16 --graph --steps 20 --repeats 3}
source scripts/log.sh
start_log wavefront_ab
mkdir -p "$WORK/tree"
cp "$K"/* "$WORK/tree/"
# At the end the tree's files go back and the bench is built from them again, so that BUILD holds the
# tree's objects: a later call sends the sources with their old times, and a build there would keep
# the last variant's objects.
restore() {
  cp "$WORK"/tree/* "$K"/
  [ -f "$BUILD/CMakeCache.txt" ] && cmake --build "$BUILD" -j "$(nproc)" --target rnntrain_wavefront_bench >/dev/null 2>&1
}
trap restore EXIT

step "machine"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$LOG"
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DRNNTRAIN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  >"$WORK/configure.log" 2>&1 || { tail -20 "$WORK/configure.log" | tee -a "$LOG"; say "FAIL: configure"; exit 1; }
i=0
for v in $VARIANTS; do
  step "build variant $i: $v"
  src=$v
  [ "$v" = tree ] && src=$WORK/tree
  [ -d "$src" ] || { say "FAIL: $v is not a folder"; exit 1; }
  cp "$src"/* "$K"/
  cmake --build "$BUILD" -j "$(nproc)" --target rnntrain_wavefront_bench >"$WORK/build_$i.log" 2>&1 ||
    { grep -E "error" "$WORK/build_$i.log" | head -20 | tee -a "$LOG"; say "FAIL: build of $v"; exit 1; }
  cp "$BUILD/rnntrain_wavefront_bench" "$WORK/bench_$i"
  i=$((i + 1))
done

IFS=';' read -r -a loads <<<"$WORKLOADS"
for r in $(seq "$ROUNDS"); do
  step "round $r: ms for the recurrent part; forward, backward us per wave step"
  for w in "${loads[@]}"; do
    i=0
    for v in $VARIANTS; do
      # shellcheck disable=SC2086
      line=$("$WORK/bench_$i" --workload $w $ARGS 2>&1 | tail -1)
      say "$(printf '%-24s %-16s' "$w" "$v") $(sed -E 's/.*ms_per_step=([0-9.]+).*\(([0-9]+) wave steps, ([0-9.]+) us each\).*\(([0-9]+) wave steps, ([0-9.]+) us each\).*/\1 ms; \3, \5 us/; s/.*status=/status=/' <<<"$line")"
      i=$((i + 1))
    done
  done
done
