#!/usr/bin/env bash
# The whole test suite on a busy machine: runs the README's test command
# (`cargo test`, with SBX_TEST_REQUIRE_SANDBOX=1 so no sandbox test passes by
# skipping) N times in a row, default 3, while one busy loop per core keeps
# every core busy. A test that waits for a fixed time instead of an event, or
# whose bound is too tight, fails here. Prints each run's wall time and its
# passed/failed counts; exits non-zero if any run failed.
#
#   bench/busy-suite.sh [N]
#
# Test worlds go to a fresh directory under /var/tmp (never /tmp: it is
# writable inside the sandbox); it is removed at the end, except for the logs
# of failed runs.
set -uo pipefail
cd "$(dirname "$0")/.."

runs=${1:-3}
case $runs in '' | *[!0-9]* | 0)
  echo "usage: $0 [N]  (N runs, default 3)" >&2
  exit 2
  ;;
esac
cores=$(nproc)
work=$(mktemp -d /var/tmp/sbx-busy.XXXXXX)
chmod 755 "$work"
keep_logs=0

load=()
stop_load() {
  [ ${#load[@]} -gt 0 ] && kill "${load[@]}" 2>/dev/null
  [ ${#load[@]} -gt 0 ] && wait "${load[@]}" 2>/dev/null
  load=()
}
cleanup() {
  stop_load
  if [ $keep_logs = 1 ]; then
    find "$work" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
    echo "logs of the failed runs: $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Build first, unloaded: the runs time the tests, not the compiler.
echo "building the tests..."
if ! cargo test --no-run --quiet >"$work/build.log" 2>&1; then
  cat "$work/build.log" >&2
  exit 1
fi

for _ in $(seq "$cores"); do
  sh -c 'while :; do :; done' &
  load+=($!)
done
echo "load: $cores busy loop(s) (sh -c 'while :; do :; done'), pids ${load[*]}"

# SIGINT and SIGQUIT back to their defaults (GNU env): a script started in
# the background (`bench/busy-suite.sh &`) has them ignored, every process
# of the suite would inherit that, and no shell can undo it (a test checks
# that `kill -INT $$` ends the command).
default_signals=()
if env --default-signal=INT,QUIT true 2>/dev/null; then
  default_signals=(env --default-signal=INT,QUIT)
fi

failed_runs=0
for i in $(seq "$runs"); do
  dir="$work/run$i"
  log="$work/run$i.log"
  mkdir -p "$dir" && chmod 755 "$dir"
  start=$(date +%s.%N)
  SBX_TEST_REQUIRE_SANDBOX=1 SBX_TEST_TMPDIR="$dir" \
    "${default_signals[@]}" cargo test >"$log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  read -r passed failed ignored < <(awk '/^test result:/ {
      for (f = 1; f <= NF; f++) {
        if ($(f + 1) ~ /^passed/) p += $f
        if ($(f + 1) ~ /^failed/) x += $f
        if ($(f + 1) ~ /^ignored/) g += $f
      }
    } END { print p + 0, x + 0, g + 0 }' "$log")
  secs=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')
  printf 'run %d/%d: %6s s  %d passed, %d failed, %d ignored  (exit %d)\n' \
    "$i" "$runs" "$secs" "$passed" "$failed" "$ignored" "$rc"
  if [ $rc -ne 0 ]; then
    failed_runs=$((failed_runs + 1))
    keep_logs=1
    grep -E '^test .* FAILED$|^error' "$log" | sed 's/^/    /'
  fi
done

stop_load
if [ $failed_runs -gt 0 ]; then
  echo "FAILED: $failed_runs of $runs run(s)"
  exit 1
fi
echo "ok: $runs of $runs runs passed under load"
