#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (ASan+UBSan) into build-fuzz and runs each
# for N seconds over a scratch copy of its seed corpus (tests/fuzz/corpus/<target>/, never written
# to). Fails if any target finds a crash, leak, timeout or OOM, and prints the reproducer's path.
#   bash scripts/fuzz.sh [--seconds N] [--keep-going] [target...]   (default: 30 s, every target)
# --keep-going: fork mode that keeps fuzzing after a finding (for the long runs). docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=30
keep_going=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --keep-going) keep_going=1; shift ;;
    -*) echo "usage: $0 [--seconds N] [--keep-going] [target...]" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_config fuzz_keras_json fuzz_h5_checkpoint fuzz_npy fuzz_csv fuzz_zip)

gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
[ -f build-fuzz/CMakeCache.txt ] || CC=clang CXX=clang++ cmake -S . -B build-fuzz "${gen[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DRNNTRAIN_FUZZ=ON -DRNNTRAIN_TESTS=OFF \
  -DRNNTRAIN_CUDA=OFF
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]}"

# Inputs larger than the readers' interesting structure only slow the fuzzer down.
declare -A max_len=([fuzz_config]=8192 [fuzz_keras_json]=16384 [fuzz_h5_checkpoint]=65536 [fuzz_npy]=8192
                    [fuzz_csv]=8192 [fuzz_zip]=16384)
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitize/lsan.supp:print_suppressions=0"
work="$PWD/build-fuzz/runs/$(date +%Y%m%d-%H%M%S)"
failed=()
for t in "${targets[@]}"; do
  dir="$work/$t"
  mkdir -p "$dir/corpus" "$dir/artifacts" "$dir/tmp"
  cp -r "tests/fuzz/corpus/$t/." "$dir/corpus/"
  args=(-max_total_time="$seconds" -max_len="${max_len[$t]:-16384}" -rss_limit_mb=2048 -timeout=10
        -artifact_prefix="$dir/artifacts/" -print_final_stats=1)
  [ -f "tests/fuzz/$t.dict" ] && args+=(-dict="tests/fuzz/$t.dict")
  asan=$ASAN_OPTIONS
  if [ "$t" = fuzz_h5_checkpoint ]; then
    # rnntrain walks each HDF5 file in a child process first (src/io/h5_probe.cpp), where libhdf5 may
    # crash or allocate sizes read from the file. Such allocations must fail there as they do in a
    # plain build (NULL), not stop the child through ASan's or libFuzzer's allocation checks, whose
    # handlers would write a reproducer for a crash the parent survived.
    asan="$ASAN_OPTIONS:allocator_may_return_null=1"
    args+=(-malloc_limit_mb=1048576)
  fi
  [ "$keep_going" = 1 ] && args+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  echo "fuzz: $t for ${seconds}s (log: $dir/log)" >&2
  rc=0
  ASAN_OPTIONS=$asan TMPDIR="$dir/tmp" "build-fuzz/tests/fuzz/$t" "${args[@]}" "$dir/corpus" >"$dir/log" 2>&1 || rc=$?
  # The last status line ("#422174: cov: ... exec/s 3040"; fork mode prints no final stats).
  execs=$(grep -oE '^#[0-9]+' "$dir/log" | tail -1 | tr -d '#' || true)
  rate=$(grep -oE 'exec/s:? [0-9]+' "$dir/log" | tail -1 | grep -oE '[0-9]+$' || true)
  found=$(find "$dir/artifacts" -type f | sort)
  echo "fuzz: $t: rc=$rc, ${execs:-?} runs, ${rate:-?} exec/s, corpus $(ls "$dir/corpus" | wc -l) files" >&2
  if [ "$rc" != 0 ] || [ -n "$found" ]; then
    failed+=("$t")
    grep -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|terminate called|SUMMARY' "$dir/log" \
      | head -5 >&2 || tail -5 "$dir/log" >&2
    for f in $found; do echo "fuzz: $t: reproducer $f (run: build-fuzz/tests/fuzz/$t $f)" >&2; done
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (logs and reproducers under $work)" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran ${seconds}s without findings (logs under $work)" >&2
