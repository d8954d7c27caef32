#!/usr/bin/env bash
# Cost of .env discovery (src/envscan/), measured through the real binary.
#
# Generates project trees of 1,000 / 10,000 / 100,000 files (10-50 files per
# directory, about six subdirectories per directory, a few .env files in the
# deepest directories), then times `sbx profile` (which resolves the policy,
# and so runs the scan) with hyperfine:
#
#   empty  an empty project: the fixed cost of a run (baseline)
#   first  with no cache (removed before each run): a full walk + cache write
#   repeat with the cache in place, tree unchanged: one stat per directory
#
# Usage: bench/envscan.sh [SIZE...]     (default: 1000 10000 100000)
# Environment: BENCH_DIR (default: target/bench-trees), RUNS (default: 30).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=${BENCH_DIR:-$PWD/target/bench-trees}
RUNS=${RUNS:-30}
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(1000 10000 100000)

for tool in hyperfine jq cargo; do
    command -v "$tool" >/dev/null || { echo "envscan.sh: $tool is required" >&2; exit 1; }
done

cargo build --release --quiet
SBX=$PWD/target/release/sbx

mkdir -p "$ROOT/results" "$ROOT/config"
: >"$ROOT/results/hyperfine.log"
# No user configuration: the same policy on every machine.
export XDG_CONFIG_HOME=$ROOT/config

# gen_tree FILES DIR: a tree of about FILES regular files.
gen_tree() {
    local want=$1 dir=$2 done_mark="$ROOT/.tree-$1.done"
    if [ -f "$done_mark" ] && [ -d "$dir" ]; then
        return
    fi
    rm -rf "$dir"
    local -a paths=("$dir")
    local files=0 i=0 n
    local list="$ROOT/.files.$$"
    # Directory i's parent is (i-1)/6: a balanced tree, about log6(dirs) deep.
    while [ "$files" -lt "$want" ]; do
        if [ "$i" -gt 0 ]; then
            paths[i]="${paths[(i - 1) / 6]}/d$i"
        fi
        n=$((10 + (i * 17) % 41))
        if [ $((files + n)) -gt "$want" ]; then
            n=$((want - files))
        fi
        for ((f = 0; f < n; f++)); do
            printf '%s/f%d.txt\0' "${paths[i]}" "$f"
        done
        files=$((files + n))
        i=$((i + 1))
    done >"$list"
    printf '%s\0' "${paths[@]}" | xargs -0 mkdir -p
    xargs -0 touch <"$list"
    rm -f "$list"
    # A few secrets deep inside (they replace nothing: the count grows by 4),
    # and a template that must not be reported.
    local last=$((i - 1))
    for k in 0 7 19; do
        [ $((last - k)) -ge 0 ] && echo "SECRET=$k" >"${paths[last - k]}/.env"
    done
    echo "SECRET=x" >"${paths[last / 2]}/.env.local"
    echo "EXAMPLE=" >"${paths[last / 3]}/.env.example"
    echo "$i directories" >"$done_mark"
}

# median_ms JSON: the median of the single command in a hyperfine export.
median_ms() {
    jq -r '.results[0].median * 1000 | . * 100 | round / 100' "$1"
}

# bench NAME TREE: prints "first repeat" medians in ms.
bench() {
    local name=$1 tree=$2 cache="$ROOT/cache-$1"
    local cmd="$SBX profile --platform linux --project $tree -- true"
    export XDG_CACHE_HOME=$cache
    hyperfine -N --style none --warmup 3 --runs "$RUNS" \
        --prepare "rm -rf $cache" \
        --export-json "$ROOT/results/$name-first.json" "$cmd" >/dev/null 2>>"$ROOT/results/hyperfine.log"
    # Prime the cache, then let the tree's timestamps age past the 2-second
    # window in which a directory is always read again.
    $cmd >/dev/null
    sleep 2.1
    $cmd >/dev/null
    hyperfine -N --style none --warmup 3 --runs "$RUNS" \
        --export-json "$ROOT/results/$name-repeat.json" "$cmd" >/dev/null 2>>"$ROOT/results/hyperfine.log"
    echo "$(median_ms "$ROOT/results/$name-first.json") $(median_ms "$ROOT/results/$name-repeat.json")"
}

mkdir -p "$ROOT/empty"
printf '%-8s %8s %6s %11s %11s\n' "tree" "files" "dirs" "first ms" "repeat ms"
read -r first repeat < <(bench empty "$ROOT/empty")
printf '%-8s %8s %6s %11s %11s\n' "empty" 0 1 "$first" "$repeat"
for size in "${SIZES[@]}"; do
    tree="$ROOT/tree-$size"
    gen_tree "$size" "$tree"
    dirs=$(find "$tree" -type d | wc -l)
    files=$(find "$tree" -type f | wc -l)
    read -r first repeat < <(bench "$size" "$tree")
    printf '%-8s %8s %6s %11s %11s\n' "$size" "$files" "$dirs" "$first" "$repeat"
done
echo "(medians of $RUNS runs; JSON and warnings in $ROOT/results)"
