# The log of the scripts that keep one (gpu_check.sh, bench_gpu.sh, bench_cpu.sh), sourced from the
# repository root. start_log NAME makes WORK (a temporary folder) and LOG ($OUT/NAME.log when $OUT is
# set, as on the GPU machine, else in WORK), empty. say prints a line and logs it; step starts a
# section with the time and the seconds since the script started.
start_log() {
  WORK=$(mktemp -d)
  LOG=${OUT:+$OUT/$1.log}
  LOG=${LOG:-$WORK/$1.log}
  mkdir -p "$(dirname "$LOG")"
  : >"$LOG"
}
say() { printf '%s\n' "$*" | tee -a "$LOG"; }
step() { say ""; say "== $* ($(date +%T), ${SECONDS} s)"; }
