#!/usr/bin/env bash
# Two sbx builds head to head, for a change that must not cost speed (a
# refactor, a new check): the same commands, in interleaved rounds, in one
# run; medians and the ratio NEW / OLD. No timing assertion.
#
#   bench/compare.sh OLD_SBX NEW_SBX
#
# Build OLD from the base commit in a worktree, for example:
#   git worktree add /var/tmp/sbx-base BASE && (cd /var/tmp/sbx-base && cargo build --release)
# Both binaries are copied outside /tmp and the checkout, as bench.sh does.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 OLD_SBX NEW_SBX" >&2; exit 2; }
rounds=${SBX_BENCH_ROUNDS:-6}
runs=${SBX_BENCH_RUNS:-20}
work=${SBX_BENCH_DIR:-/var/tmp/sbx-compare}
rm -rf "$work" && mkdir -p "$work/bin" "$work/out" "$work/proj/a/b" "$work/proj/svc"
cp "$1" "$work/bin/old" && cp "$2" "$work/bin/new"
export XDG_CACHE_HOME="$work/cache"
cd "$work/proj"
git init -q . && echo 'SECRET=1' > .env && echo 'SECRET=1' > a/b/.env && echo x > svc/main.c
sleep 2 # past the .env cache's timestamp guard, so both runs use the cache

for r in $(seq 1 "$rounds"); do
  hyperfine -N --style none --warmup 2 --runs "$runs" --export-json "$work/out/$r.json" \
    -n "old run" "$work/bin/old run -- /bin/true" \
    -n "new run" "$work/bin/new run -- /bin/true" \
    -n "old -c" "$work/bin/old -c true" \
    -n "new -c" "$work/bin/new -c true" \
    -n "old profile" "$work/bin/old profile --platform linux" \
    -n "new profile" "$work/bin/new profile --platform linux" >/dev/null
done

python3 - "$work/out" <<'PY'
import glob, json, statistics, sys
times = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    for r in json.load(open(f))["results"]:
        times.setdefault(r["command"], []).extend(r["times"])
print("| command | old median | new median | new / old | runs each |")
print("|---|---|---|---|---|")
for what in ("run", "-c", "profile"):
    old, new = times[f"old {what}"], times[f"new {what}"]
    mo, mn = statistics.median(old) * 1e3, statistics.median(new) * 1e3
    label = {"run": "sbx run -- true", "-c": "sbx -c true", "profile": "sbx profile --platform linux"}[what]
    print(f"| {label} | {mo:.2f} ms | {mn:.2f} ms | {mn / mo:.3f} | {len(new)} |")
PY
