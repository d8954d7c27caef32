#!/usr/bin/env bash
# sbx benchmarks: what sbx adds to bubblewrap's own cost, how start-up grows
# with the project, and how it compares with the tools people would use
# instead. Every comparison is measured in the same run, in interleaved
# rounds (each round runs every command a few times), and reported as
# medians and ratios; the machine is noisy, so single runs mean little.
#
#   bench/bench.sh            full run; rewrites the README's Performance table
#   bench/bench.sh --quick    smoke run for CI: every step once, no README change,
#                             no timing assertion
#
# Needs hyperfine (installed from Debian's packages when missing), python3,
# bubblewrap. Alternatives are measured only when installed and a trial run
# succeeds: srt (npm i -g @anthropic-ai/sandbox-runtime; it also needs
# ripgrep and socat), firejail (apt-get install firejail), codex (npm i -g
# @openai/codex); the script says which it skipped, and why.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

quick=0
[ "${1:-}" = "--quick" ] && quick=1
if [ $quick = 1 ]; then rounds=1; runs=2; warmup=0; else rounds=${SBX_BENCH_ROUNDS:-6}; runs=${SBX_BENCH_RUNS:-8}; warmup=2; fi

if ! command -v hyperfine >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hyperfine >/dev/null
fi

built=$(bench/release-build.sh)
case $built in
  *musl*) export SBX_BENCH_KIND="sbx's release build (static, musl)" ;;
  *) export SBX_BENCH_KIND="sbx's glibc build" ;;
esac
# Outside /tmp and outside the checkout: /tmp is writable inside the sandbox
# and the checkout holds the binary (sbx warns when it lies in a writable root).
work=${SBX_BENCH_DIR:-/var/tmp/sbx-bench}
mkdir -p "$work/bin" "$work/out"
# Copied and renamed into place: a watcher left by an earlier run (the
# 100,000-file project starts one) may still execute the old copy.
cp "$built" "$work/bin/sbx.new" && mv -f "$work/bin/sbx.new" "$work/bin/sbx"
sbx="$work/bin/sbx"
export XDG_CACHE_HOME="$work/cache"
# The watchers this benchmark's runs start (the big projects) end with it.
stop_watchers() {
  for pid in $(pgrep -f -- __watch); do
    case $(readlink "/proc/$pid/exe" 2>/dev/null) in
      "$sbx" | "$sbx (deleted)") kill "$pid" 2>/dev/null || true ;;
    esac
  done
}
trap stop_watchers EXIT

# Projects of growing size, each with a few .env files deep inside.
make_tree() { # DIR FILES
  local dir=$1 files=$2
  [ -f "$dir/.done-$files" ] && return 0
  rm -rf "$dir"; mkdir -p "$dir"
  python3 - "$dir" "$files" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
per_dir = 30
d = 0
for i in range(n):
    if i % per_dir == 0:
        d += 1
        sub = os.path.join(root, *[f"d{(d >> s) % 7}" for s in (0, 3, 6)], f"n{d}")
        os.makedirs(sub, exist_ok=True)
    open(os.path.join(sub, f"f{i}.txt"), "w").close()
for deep in ("a/b/c/d", "svc/api/config", "x/y"):
    os.makedirs(os.path.join(root, deep), exist_ok=True)
    open(os.path.join(root, deep, ".env"), "w").write("SECRET=1\n")
PY
  (cd "$dir" && git init -q . 2>/dev/null || true)
  touch "$dir/.done-$files"
}
sizes="1000 10000 100000"
[ $quick = 1 ] && sizes="1000"
make_tree "$work/proj-empty" 0
for n in $sizes; do make_tree "$work/proj-$n" "$n"; done
sleep 2 # let the trees age past the .env cache's timestamp granularity guard

cd "$work/proj-empty"
# The exact bwrap argv sbx would run (one argument per line), as one command.
bwrap_cmd=$("$sbx" profile --platform linux -- /bin/true | sed 's/ \\$//' | tr '\n' ' ')
bwrap_bash_cmd=$("$sbx" profile --platform linux -- /bin/bash -c true | sed 's/ \\$//' | tr '\n' ' ')
# The plan names the run's private git config copies (PER-RUN): made here as
# sbx makes them before a run, so the baseline does the same work.
"$sbx" profile --platform linux --format json -- /bin/true | python3 "$repo/bench/make-copies.py"

round() { # NAME then pairs of (label, command)
  local name=$1; shift
  local args=()
  while [ $# -gt 0 ]; do args+=(-n "$1" "$2"); shift 2; done
  for r in $(seq 1 "$rounds"); do
    hyperfine -N --style none --warmup "$warmup" --runs "$runs" \
      --export-json "$work/out/$name.$r.json" "${args[@]}" >/dev/null
  done
}

echo "== start-up: sbx run vs the same bwrap argv vs plain true"
round startup \
  "sbx run -- true" "$sbx run -- /bin/true" \
  "bwrap (same argv)" "$bwrap_cmd" \
  "true" "/bin/true"

echo "== shell mode: sbx -c vs bash -c"
round shell \
  "sbx -c true" "$sbx -c true" \
  "bwrap (same argv)" "$bwrap_bash_cmd" \
  "bash -c true" "/bin/bash -c true"

echo "== project size"
size_args=("empty" "$sbx run -- /bin/true")
for n in $sizes; do
  size_args+=("$n files" "sh -c 'cd $work/proj-$n && exec $sbx run -- /bin/true'")
done
round size "${size_args[@]}"

echo "== alternatives"
alt_args=("sbx" "$sbx run -- /bin/true")
skipped=()
printf '{"network":{"allowedDomains":[],"deniedDomains":[]},"filesystem":{"denyRead":["~/.ssh"],"allowWrite":["."],"denyWrite":[]}}' > "$work/srt.json"
# Measured where installed and a trial run succeeds (srt also needs ripgrep
# and socat); else the report says why not.
alternative() { # LABEL HINT COMMAND
  local out
  if ! command -v "${3%% *}" >/dev/null 2>&1; then
    skipped+=("$1 (not installed: $2)")
  # shellcheck disable=SC2086 # a command line, split as hyperfine -N splits it
  elif ! out=$($3 2>&1 </dev/null); then
    skipped+=("$1 (fails here: $(printf '%s\n' "$out" | head -1))")
  else
    alt_args+=("$1" "$3")
  fi
}
alternative firejail "apt-get install firejail" \
  "firejail --quiet --noprofile --net=none --read-only=/ --read-write=$work/proj-empty /bin/true"
alternative srt "npm i -g @anthropic-ai/sandbox-runtime" "srt --settings $work/srt.json /bin/true"
alternative "codex sandbox" "npm i -g @openai/codex" "codex sandbox -- /bin/true"
round alternatives "${alt_args[@]}"
printf '%s\n' "${skipped[@]}" > "$work/out/skipped.txt"
for s in "${skipped[@]}"; do echo "skipped: $s"; done

echo "== peak memory"
/usr/bin/time -f '%M' -o "$work/out/rss-run.txt" "$sbx" run -- /bin/true
/usr/bin/time -f '%M' -o "$work/out/rss-allowlist.txt" "$sbx" run --network allowlist --allow-domain example.com -- /bin/true 2>/dev/null || true

cd - >/dev/null
echo "== allowlist proxy"
SBX="$sbx" SBX_BENCH_DIR="$work/proxy" SBX_BENCH_OUT="$work/out" bash bench/proxy.sh $([ $quick = 1 ] && echo --quick)
python3 bench/report.py "$work/out" "$rounds" $([ $quick = 1 ] && echo --quick)
