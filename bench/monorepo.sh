#!/usr/bin/env bash
# Start-up of sbx in big repositories. Every run looks for .env files in the
# whole project (src/envscan/), cached between runs, so its cost grows with the
# number of directories. This measures `sbx run -- true` in three generated
# repository shapes and an empty repository, against the exact bubblewrap argv
# sbx runs there, in interleaved rounds (each round runs every command a few
# times), reported as medians and ratios; no timing assertion.
#
#   kernel  ~5,000 directories of ~16 files, up to 6 deep (a kernel-like tree)
#   js      a monorepo of 50 packages (~1,500 source directories) with a
#           node_modules at the root and in each package (~10,000 directories
#           in all); sbx prunes node_modules (PRUNED in src/envscan/mod.rs)
#   big     ~100,000 directories, ~300,000 empty files
#
# Each is a git repository with a few .env files 5+ levels deep and a
# .env.example. For each tree, and an empty repository, per round:
#
#   first   no cache: sbx's cache directory removed (and any `sbx __watch`
#           daemon of the benchmark's binary stopped) before each run
#   cached  after priming runs, once the tree's timestamps are older than the
#           cache's 2-second guard, in strict alternation with the bwrap argv
#           sbx runs for this tree and the one it runs for the empty
#           repository (bench/alternate.py: one of each in turn, so a machine
#           that drifts moves all three alike); then other sandboxes
#   both again with SBX_ENV_WATCH=off (only the fallback walk: no watcher
#   daemon; a binary without one ignores the variable)
#
# and once, the peak RSS of a cached and of a first run.
#
#   bench/monorepo.sh           full run; rewrites the README block between
#                               <!-- monorepo:start --> and <!-- monorepo:end -->
#   bench/monorepo.sh --quick   smoke run: trees of ~100 directories, 1 round
#                               of 2 runs, no README change
#
# Environment: SBX_BENCH_DIR (default /var/tmp/sbx-monorepo; the trees are
# made once under its trees/ and kept), SBX_BENCH_ROUNDS (5), SBX_BENCH_RUNS
# (5), SBX_BENCH_CACHED_RUNS (cycles of the strict alternation per round:
# 20, as those runs are short and the ratio must not rest on a few),
# SBX_BENCH_PEERS (all: other sandboxes in every tree; "some": only in big
# and the empty repository; "none").
# Needs hyperfine (installed from Debian's packages when missing), python3,
# git, bubblewrap. firejail, srt (which also needs ripgrep and socat) and
# codex are measured when installed and a trial run succeeds.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

quick=0
[ "${1:-}" = "--quick" ] && quick=1
if [ $quick = 1 ]; then
  rounds=1; runs=2; cycles=2; warmup=0
else
  rounds=${SBX_BENCH_ROUNDS:-5}; runs=${SBX_BENCH_RUNS:-5}; cycles=${SBX_BENCH_CACHED_RUNS:-20}; warmup=1
fi
peers_in=${SBX_BENCH_PEERS:-all}

if ! command -v hyperfine >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hyperfine >/dev/null
fi

started=$SECONDS
built=$(bench/release-build.sh)
case $built in
  *musl*) export SBX_BENCH_KIND="sbx's release build (static, musl)" ;;
  *) export SBX_BENCH_KIND="sbx's glibc build" ;;
esac
# Outside /tmp and outside the checkout: /tmp is writable inside the sandbox
# and the checkout holds the binary (sbx warns when it lies in a writable root).
work=${SBX_BENCH_DIR:-/var/tmp/sbx-monorepo}
mkdir -p "$work/bin" "$work/out" "$work/config"
rm -f "$work/out/"*
# Copied and renamed into place: a watcher daemon left by an earlier run may
# still execute the old copy.
cp "$built" "$work/bin/sbx.new" && mv -f "$work/bin/sbx.new" "$work/bin/sbx"
sbx="$work/bin/sbx"
# No user configuration: the same policy on every machine.
export XDG_CONFIG_HOME="$work/config"
unset SBX_ENV_WATCH SBX_CONFIG

# Stops the `sbx __watch` daemons of this benchmark's own binary (and only
# those: other people's sbx daemons on the machine are left alone), then
# removes a tree's sbx cache. Used before every first run, with that tree's
# cache directory (only its watcher is stopped), and at exit (all of them).
cat >"$work/bin/reset" <<EOF
#!/usr/bin/env bash
for pid in \$(pgrep -f -- __watch); do
  case \$(readlink "/proc/\$pid/exe" 2>/dev/null) in
    "$sbx"|"$sbx (deleted)") ;;
    *) continue ;;
  esac
  if [ -z "\${1:-}" ] || tr '\\0' ' ' <"/proc/\$pid/cmdline" | grep -qF -- "\$1/sbx "; then
    kill "\$pid" 2>/dev/null || true
  fi
done
[ -z "\${1:-}" ] || rm -rf "\$1/sbx"
EOF
chmod +x "$work/bin/reset"
trap '"$work/bin/reset"' EXIT

# The trees: made once (a marker outside each tree records the generator's
# version and how long it took), small ones in --quick mode.
trees="$work/trees"
[ $quick = 1 ] && trees="$work/trees-quick"
mkdir -p "$trees"
gen_version=2
make_tree() { # SHAPE
  local shape=$1 dir="$trees/$1" marker="$trees/.$1.done" t0=$SECONDS
  if [ -f "$marker" ] && [ "$(head -1 "$marker")" = "v$gen_version" ] && [ -d "$dir" ]; then
    return 0
  fi
  rm -rf "$dir" "$marker"
  mkdir -p "$dir"
  python3 - "$shape" "$dir" "$quick" <<'PY'
import os, random, sys

shape, root, quick = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
rng = random.Random(shape)  # the same tree on every machine
deep = []  # directories 5 or more levels below the root


def grow(base, n_dirs, files, max_depth, branching, ext):
    """Breadth first: n_dirs directories below base, up to max_depth deep,
    each with between files[0] and files[1] empty files."""
    level, made = [base], 0
    base_depth = base.count(os.sep) - root.count(os.sep)
    for depth in range(1, max_depth + 1):
        nxt = []
        for parent in level:
            for k in range(rng.randint(*branching)):
                if made >= n_dirs:
                    break
                d = os.path.join(parent, f"d{k}")
                os.mkdir(d)
                made += 1
                nxt.append(d)
                if base_depth + depth >= 5:
                    deep.append(d)
                for f in range(rng.randint(*files)):
                    open(os.path.join(d, f"f{f}.{ext}"), "w").close()
        level = nxt
        if made >= n_dirs or not level:
            break


if shape == "kernel":
    grow(root, 100 if quick else 5000, (2, 6) if quick else (8, 24), 6, (3, 7), "c")
elif shape == "big":
    grow(root, 100 if quick else 100000, (1, 5), 8, (3, 9), "txt")
elif shape == "js":
    n_pkgs, src_dirs, root_mods, pkg_mods = (3, 8, 6, 2) if quick else (50, 30, 400, 10)
    open(os.path.join(root, "package.json"), "w").write('{"private": true, "workspaces": ["packages/*"]}\n')
    nm = os.path.join(root, "node_modules")
    os.mkdir(nm)
    for m in range(root_mods):
        pkg = os.path.join(nm, f"mod{m}")
        os.mkdir(pkg)
        open(os.path.join(pkg, "package.json"), "w").close()
        grow(pkg, 11, (5, 15), 4, (1, 4), "js")
    for p in range(n_pkgs):
        pkg = os.path.join(root, "packages", f"pkg{p}")
        os.makedirs(os.path.join(pkg, "src"))
        open(os.path.join(pkg, "package.json"), "w").write("{}\n")
        grow(os.path.join(pkg, "src"), src_dirs, (4, 12), 5, (2, 4), "ts")
        for m in range(pkg_mods):
            mod = os.path.join(pkg, "node_modules", f"mod{m}")
            os.makedirs(mod)
            grow(mod, 6, (5, 15), 3, (1, 3), "js")
    deep = [d for d in deep if "node_modules" not in d.split(os.sep)]
if len(deep) < 4:  # small trees: a chain deep enough
    chain = os.path.join(root, "deep", "er", "and", "deeper", "still")
    os.makedirs(chain)
    deep += [chain] * 4
picked = rng.sample(deep, 4)
for d in picked[:3]:
    open(os.path.join(d, ".env"), "w").write("SECRET=1\n")
open(os.path.join(picked[3], ".env.example"), "w").write("SECRET=\n")
PY
  git init -q "$dir"
  printf 'v%s\n%s\n' "$gen_version" $((SECONDS - t0)) >"$marker"
}

shapes=(kernel js big)
gen_t0=$SECONDS
for s in "${shapes[@]}"; do
  [ -f "$trees/.$s.done" ] || echo "== generating $s"
  make_tree "$s"
done
# The empty repository.
if [ ! -d "$trees/empty/.git" ]; then
  mkdir -p "$trees/empty" && git init -q "$trees/empty"
fi
echo "tree generation: $((SECONDS - gen_t0)) s this run; $(for s in "${shapes[@]}"; do printf '%s %s s, ' "$s" "$(sed -n 2p "$trees/.$s.done")"; done)when made" |
  tee "$work/out/generation.txt"
all=(empty "${shapes[@]}")

# Counts: every directory and file (find), and the directories the .env walk
# enters (all but those under a pruned name, read from src/envscan/mod.rs).
pruned=$(sed -n '/^pub const PRUNED/,/^];/p' src/envscan/mod.rs | grep -o '"[^"]*"' | tr -d '"')
for t in "${all[@]}"; do
  prune=()
  for p in $pruned; do prune+=(-name "$p" -o); done
  printf '%s %s %s\n' \
    "$(find "$trees/$t" -type d | wc -l)" \
    "$(find "$trees/$t" -type f | wc -l)" \
    "$(find "$trees/$t" -type d \( "${prune[@]}" -false \) -prune -o -type d -print | wc -l)" \
    >"$work/out/$t.counts"
done

in_tree() { # TREE COMMAND...: run with the tree as cwd and its own sbx cache
  local t=$1
  shift
  (cd "$trees/$t" && XDG_CACHE_HOME="$work/cache/$t" "$@")
}

# The bwrap argv sbx runs in a tree, as one command line. Its private git
# config copies (named PER-RUN in the plan) are made here as sbx makes them
# before a run, so the argv does the same work; sbx's cache must hold the
# directories it names (a priming run makes them).
bwrap_argv() { # TREE
  in_tree "$1" "$sbx" profile --platform linux -- /bin/true | sed 's/ \\$//' | tr '\n' ' '
}
make_copies() { # TREE
  in_tree "$1" "$sbx" profile --platform linux --format json -- /bin/true |
    python3 "$repo/bench/make-copies.py"
}
wait_for_watcher() { # TREE: its watcher's socket, when a watcher was started (2 minutes at most)
  local dir="$work/cache/$1/sbx/watch" n=0
  while [ $n -lt 1200 ]; do
    compgen -G "$dir/*.sock" >/dev/null && return 0
    # No lock 3 s after the run that would have started one: none started.
    [ $n -ge 30 ] && ! compgen -G "$dir/*.lock" >/dev/null && return 0
    sleep 0.1
    n=$((n + 1))
  done
  echo "monorepo.sh: no watcher answers in $1; its runs walk" >&2
}

prime() { # TREE: cache in place, in both modes
  in_tree "$1" "$sbx" run -- /bin/true && in_tree "$1" env SBX_ENV_WATCH=off "$sbx" run -- /bin/true
}

declare -A argv
for t in "${all[@]}"; do
  prime "$t"
  argv[$t]=$(bwrap_argv "$t")
done

# Other sandboxes, the same command lines as bench.sh's, writable project.
# Each is measured where it is installed and a trial run in the empty
# repository succeeds (srt, for one, also needs ripgrep and socat); else the
# report says why not.
printf '{"network":{"allowedDomains":[],"deniedDomains":[]},"filesystem":{"denyRead":["~/.ssh"],"allowWrite":["."],"denyWrite":[]}}' >"$work/srt.json"
skipped=()
peer_labels=()
declare -A peer_cmds=()
add_peer() { # LABEL HINT COMMAND (@TREE@ stands for the tree's path)
  local label=$1 hint=$2 cmd=$3 out
  if ! command -v "${cmd%% *}" >/dev/null 2>&1; then
    skipped+=("$label (not installed: $hint)")
    return 0
  fi
  # shellcheck disable=SC2086 # a command line, split as hyperfine -N splits it
  if ! out=$(cd "$trees/empty" && ${cmd//@TREE@/$trees/empty} 2>&1 </dev/null); then
    skipped+=("$label (fails here: $(printf '%s\n' "$out" | head -1))")
    return 0
  fi
  peer_labels+=("$label")
  peer_cmds[$label]=$cmd
}
add_peer firejail "apt-get install firejail" \
  "firejail --quiet --noprofile --net=none --read-only=/ --read-write=@TREE@ /bin/true"
add_peer srt "npm i -g @anthropic-ai/sandbox-runtime" "srt --settings $work/srt.json /bin/true"
add_peer "codex sandbox" "npm i -g @openai/codex" "codex sandbox -- /bin/true"
peers() { # TREE: pairs of (label, command) for the hyperfine of that tree
  case "$peers_in:$1" in
    none:*) return 0 ;;
    some:empty | some:big | all:*) ;;
    *) return 0 ;;
  esac
  local label
  for label in "${peer_labels[@]}"; do
    printf '%s\n' "$label" "${peer_cmds[$label]//@TREE@/$trees/$1}"
  done
}
printf '%s\n' "${skipped[@]}" >"$work/out/skipped.txt"
for s in "${skipped[@]}"; do echo "skipped: $s"; done

hf() { # TREE GROUP [hyperfine options] -- then pairs of (label, command); cwd: the tree
  local t=$1 group=$2 opts=()
  shift 2
  while [ "$1" != "--" ]; do opts+=("$1"); shift; done
  shift
  local args=()
  while [ $# -gt 0 ]; do args+=(-n "$1" "$2"); shift 2; done
  in_tree "$t" hyperfine -N --style none --warmup "$warmup" --runs "$runs" "${opts[@]}" \
    --export-json "$work/out/$t.$group.$r.json" "${args[@]}" >/dev/null 2>>"$work/out/hyperfine.log"
}

alt() { # TREE GROUP -- then pairs of (label, command), run in strict alternation; cwd: the tree
  local t=$1 group=$2
  shift 3
  in_tree "$t" python3 "$repo/bench/alternate.py" --warmup "$warmup" --runs "$cycles" \
    --export-json "$work/out/$t.$group.$r.json" "$@" 2>>"$work/out/hyperfine.log"
}

for r in $(seq 1 "$rounds"); do
  echo "== round $r of $rounds ($((SECONDS - started)) s)"
  for t in "${all[@]}"; do
    reset=(--prepare "$work/bin/reset $work/cache/$t")
    hf "$t" first "${reset[@]}" -- "sbx first run" "$sbx run -- /bin/true"
    SBX_ENV_WATCH=off hf "$t" first-off "${reset[@]}" -- "sbx first run, SBX_ENV_WATCH=off" "$sbx run -- /bin/true"
  done
  # Caches back in place, then past the 2-second guard, then primed again.
  for t in "${all[@]}"; do prime "$t"; make_copies "$t"; done
  sleep 2.1
  for t in "${all[@]}"; do prime "$t"; done
  # A tree whose walk started a watcher: measured once it answers.
  for t in "${all[@]}"; do wait_for_watcher "$t"; done
  for t in "${all[@]}"; do
    mapfile -t peer < <(peers "$t")
    alt "$t" cached -- "sbx cached" "$sbx run -- /bin/true" \
      "bwrap argv of this tree" "${argv[$t]}" \
      "bwrap argv of the empty repository" "${argv[empty]}"
    [ ${#peer[@]} -eq 0 ] || hf "$t" peers -- "${peer[@]}"
    SBX_ENV_WATCH=off hf "$t" cached-off -- "sbx cached, SBX_ENV_WATCH=off" "$sbx run -- /bin/true"
  done
done

echo "== peak memory ($((SECONDS - started)) s)"
for t in "${all[@]}"; do
  in_tree "$t" "$sbx" run -- /bin/true
  wait_for_watcher "$t"
  in_tree "$t" /usr/bin/time -f '%M' -o "$work/out/$t.rss-cached" "$sbx" run -- /bin/true
  "$work/bin/reset" "$work/cache/$t"
  in_tree "$t" /usr/bin/time -f '%M' -o "$work/out/$t.rss-first" "$sbx" run -- /bin/true
done
echo "total: $((SECONDS - started)) s" | tee "$work/out/total.txt"

python3 - "$work/out" "$rounds" "$runs" "$cycles" "$quick" "$repo/README.md" "${all[@]}" <<'PY'
import datetime, glob, json, os, platform, statistics, subprocess, sys

out, rounds, runs, cycles = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
quick, readme, trees = sys.argv[5] == "1", sys.argv[6], sys.argv[7:]

CACHED, FIRST = "sbx cached", "sbx first run"
CACHED_OFF, FIRST_OFF = "sbx cached, SBX_ENV_WATCH=off", "sbx first run, SBX_ENV_WATCH=off"
OWN, EMPTY = "bwrap argv of this tree", "bwrap argv of the empty repository"


def samples(tree):
    """Every command's times in a tree, all rounds and groups merged, in order."""
    merged = {}
    for group in ("first", "first-off", "cached", "cached-off", "peers"):
        for path in sorted(glob.glob(os.path.join(out, f"{tree}.{group}.*.json"))):
            for result in json.load(open(path))["results"]:
                merged.setdefault(result["command"], []).extend(result["times"])
    order = [CACHED, FIRST, CACHED_OFF, FIRST_OFF, OWN, EMPTY]
    return {k: merged[k] for k in order + [k for k in merged if k not in order] if k in merged}


def paired(tree, other):
    """`sbx cached` over `other`, cycle by cycle of the strict alternation
    (both from the same moment), all rounds: (median, lower, upper quartile)."""
    ratios = []
    for path in sorted(glob.glob(os.path.join(out, f"{tree}.cached.*.json"))):
        by = {r["command"]: r["times"] for r in json.load(open(path))["results"]}
        if CACHED in by and other in by:
            ratios += [a / b for a, b in zip(by[CACHED], by[other])]
    if len(ratios) < 2:
        return None
    q = statistics.quantiles(ratios, n=4)
    return statistics.median(ratios), q[0], q[2]


def ms(s):
    return f"{s * 1000:.1f} ms" if s >= 0.1 else f"{s * 1000:.2f} ms"


def rss(tree, kind):
    try:
        return int(open(os.path.join(out, f"{tree}.rss-{kind}")).read().split()[-1]) / 1024
    except (OSError, ValueError, IndexError):
        return None


def machine():
    cpu = "unknown CPU"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    bwrap = subprocess.run(["bwrap", "--version"], capture_output=True, text=True).stdout.strip()
    return f"{os.cpu_count()} × {cpu}, Linux {platform.release()}, {bwrap}"


def n(x):
    return f"{int(x):,}"


kind = os.environ.get("SBX_BENCH_KIND", "sbx")
lines = [f"Measured {datetime.date.today().isoformat()} on {machine()}, {kind}, by `bench/monorepo.sh` "
         f"({rounds} interleaved rounds; medians; {runs} runs per command and round, but {cycles} cycles "
         "per round of `sbx cached` and both bwrap argv strictly alternated, one of each in turn). "
         "Ratios: against the bwrap argv sbx runs in the empty repository / in that tree. "
         "*Paired*: the median, and the quartiles, of `sbx cached` over the empty repository's "
         "bwrap argv run right after it, cycle by cycle (what a drifting machine moves least).", ""]
summary = ["| tree | directories (walked) | files | bwrap argv, this tree | bwrap argv, empty repo | "
           "sbx cached | paired | sbx first run | cached, SBX_ENV_WATCH=off | first run, SBX_ENV_WATCH=off | peak RSS cached / first |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
tables = []
for tree in trees:
    dirs, files, walked = open(os.path.join(out, f"{tree}.counts")).read().split()
    s = {k: statistics.median(v) for k, v in samples(tree).items()}
    count = {k: len(v) for k, v in samples(tree).items()}
    own, empty = s.get(OWN), s.get(EMPTY)

    def cell(key):
        if key not in s:
            return "–"
        return f"{ms(s[key])} ({s[key] / empty:.2f} / {s[key] / own:.2f})"

    r_c, r_f = rss(tree, "cached"), rss(tree, "first")
    mem = f"{r_c:.1f} / {r_f:.1f} MiB" if r_c and r_f else "–"
    p = paired(tree, EMPTY)
    pair = f"{p[0]:.2f} ({p[1]:.2f}–{p[2]:.2f})" if p else "–"
    summary.append(f"| {tree} | {n(dirs)} ({n(walked)}) | {n(files)} | {ms(own)} | {ms(empty)} | "
                   f"{cell(CACHED)} | {pair} | {cell(FIRST)} | {cell(CACHED_OFF)} | {cell(FIRST_OFF)} | {mem} |")
    tables += [f"**{tree}**: {n(dirs)} directories ({n(walked)} walked, the rest under pruned names), "
               f"{n(files)} files", "",
               "| command | median | × bwrap argv, empty repo | × bwrap argv, this tree | runs |",
               "|---|---|---|---|---|"]
    for k, v in s.items():
        tables.append(f"| {k} | {ms(v)} | {v / empty:.2f} | {v / own:.2f} | {count[k]} |")
    tables.append("")

lines += summary + [""] + tables
skipped = [x.strip() for x in open(os.path.join(out, "skipped.txt")) if x.strip()]
if skipped:
    lines += ["Not measured here: " + "; ".join(skipped) + ".", ""]
text = "\n".join(lines)
print(text)

if not quick:
    content = open(readme).read()
    start, end = "<!-- monorepo:start -->", "<!-- monorepo:end -->"
    if start in content and end in content:
        head, rest = content.split(start, 1)
        _, tail = rest.split(end, 1)
        open(readme, "w").write(head + start + "\n" + text + "\n" + end + tail)
        print("README.md: monorepo block updated")
    else:
        print("README.md has no monorepo markers; not updated", file=sys.stderr)
PY
