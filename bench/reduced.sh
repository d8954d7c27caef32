#!/usr/bin/env bash
# Reduced mode's start-up, against full mode and the bare stage, in
# interleaved rounds of one run; medians and ratios. No timing assertion.
#
#   bench/reduced.sh SBX
#
# On the host:
#   full      sbx run --backend bwrap   -- /bin/true
#   reduced   sbx run --backend reduced -- /bin/true
#   stage     the reduced plan itself (`sbx profile --backend reduced`),
#             run by hand: the Landlock and seccomp setup alone
#   stage-0   the same stage with no path to hide (no sibling grants)
# In a container-like place (an outer bubblewrap whose user namespace may
# not create another, as Docker's defaults), each under the same wrapper:
#   box-auto     sbx run -- /bin/true (bubblewrap fails, then reduced mode)
#   box-reduced  sbx run --backend reduced -- /bin/true
#   box-true     /bin/true (the wrapper's own cost)
# The fake home holds 150 entries beside its credentials, so the sibling
# grants are measured on a realistic home; the script prints the number of
# Landlock path rules the stage makes there.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 SBX" >&2; exit 2; }
rounds=${SBX_BENCH_ROUNDS:-5}
runs=${SBX_BENCH_RUNS:-20}
work=${SBX_BENCH_DIR:-/var/tmp/sbx-reduced-bench}
rm -rf "$work" && mkdir -p "$work/bin" "$work/out" "$work/home/proj/a/b"
cp "$1" "$work/bin/sbx"
sbx=$work/bin/sbx
export HOME=$work/home XDG_CACHE_HOME=$work/home/.cache
for i in $(seq 1 150); do mkdir -p "$HOME/entry-$i"; done
for d in .ssh .aws .config/gcloud .kube .docker; do mkdir -p "$HOME/$d" && echo secret > "$HOME/$d/key"; done
echo secret > "$HOME/.netrc"
cd "$HOME/proj"
git init -q . && echo 'SECRET=1' > .env && echo 'SECRET=1' > a/b/.env
sleep 2 # past the .env cache's timestamp guard

mapfile -t stage < <("$sbx" profile --backend reduced -- /bin/true | sed -e 's/ \\$//' -e 's/^  //' | xargs -n1 printf '%s\n')
stage0=()
skip=0
for a in "${stage[@]}"; do
  if [ $skip = 1 ]; then skip=0; continue; fi
  if [ "$a" = --hide ]; then skip=1; continue; fi
  stage0+=("$a")
done
q() { printf '%q ' "$@"; }
box=(bwrap --unshare-user --disable-userns --cap-drop ALL --ro-bind / / --bind "$work" "$work" --bind /tmp /tmp --dev /dev --proc /proc --)

# The stage grants each entry of every directory above a hidden path.
hidden=()
for i in "${!stage[@]}"; do [ "${stage[$i]}" = --hide ] && hidden+=("${stage[$((i + 1))]}"); done
python3 - "${hidden[@]}" <<'PY'
import os, sys
partial = set()
for h in sys.argv[1:]:
    d = os.path.dirname(h)
    while True:
        partial.add(d)
        if d == "/":
            break
        d = os.path.dirname(d)
print(f"hidden paths: {len(sys.argv) - 1}; directories split: {len(partial)}; "
      f"read rules about {sum(len(os.listdir(d)) for d in partial) + len(partial)}")
PY
for r in $(seq 1 "$rounds"); do
  hyperfine -N --style none --warmup 2 --runs "$runs" --export-json "$work/out/$r.json" \
    -n "full" "$sbx run -q --backend bwrap -- /bin/true" \
    -n "reduced" "$sbx run -q --backend reduced -- /bin/true" \
    -n "stage" "$(q "${stage[@]}")" \
    -n "stage-0" "$(q "${stage0[@]}")" \
    -n "box-auto" "$(q "${box[@]}") $sbx run -q -- /bin/true" \
    -n "box-reduced" "$(q "${box[@]}") $sbx run -q --backend reduced -- /bin/true" \
    -n "box-true" "$(q "${box[@]}") /bin/true" >/dev/null 2>&1
done

python3 - "$work/out" <<'PY'
import glob, json, statistics, sys
times = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    for r in json.load(open(f))["results"]:
        times.setdefault(r["command"], []).extend(r["times"])
med = {k: statistics.median(v) * 1000 for k, v in times.items()}
def row(name, base):
    ratio = f"{med[name] / med[base]:.2f}" if base else ""
    print(f"| {name} | {med[name]:.2f} ms | {ratio} | {base or ''} |")
print("| command | median | ratio | against |")
print("|---|---|---|---|")
row("full", None)
row("reduced", "full")
row("stage", None)
row("stage-0", "stage")
row("box-true", None)
row("box-reduced", "box-true")
row("box-auto", "box-reduced")
print(f"\nreduced mode's own cost in the box: {med['box-reduced'] - med['box-true']:.2f} ms; "
      f"bubblewrap's failed attempt first: {med['box-auto'] - med['box-reduced']:.2f} ms more")
PY
