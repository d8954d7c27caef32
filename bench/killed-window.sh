#!/usr/bin/env bash
# How long a file planted by a command stays in place after sbx is killed
# with SIGKILL (an agent's timeout): from the kill to the moment the planted
# `.envrc` has been moved aside, by the run's guardian. N rounds (default
# 20); prints the median and the slowest, in milliseconds. Each round also
# checks that no process of the sandbox outlives the kill.
#
#   bench/killed-window.sh [SBX] [N]
#
# The project and sbx's cache live under a fresh directory in /var/tmp; sbx
# is copied there (a binary inside the checkout lies in a writable root).
set -euo pipefail
sbx=${1:-target/release/sbx}
rounds=${2:-20}
work=$(mktemp -d /var/tmp/sbx-killed.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp "$sbx" "$work/sbx"
mkdir -p "$work/proj"
export XDG_CACHE_HOME="$work/cache"
cd "$work/proj"
git init -q .

python3 - "$work/sbx" "$rounds" <<'PY'
import os, signal, statistics, subprocess, sys, time
sbx, rounds = sys.argv[1], int(sys.argv[2])
windows = []
for i in range(rounds):
    for name in (".envrc", ".envrc.sbx-blocked", "up"):
        if os.path.exists(name):
            os.remove(name)
    tag = f"sleep 300.{os.getpid()}{i:03d}"
    child = subprocess.Popen(
        [sbx, "run", "--", "sh", "-c", f"echo evil > .envrc; echo up > up; {tag}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not os.path.exists("up"):
        if time.monotonic() > deadline:
            sys.exit("the sandboxed command never started")
        time.sleep(0.001)
    start = time.monotonic()
    child.send_signal(signal.SIGKILL)
    # Not reaped until the end: a zombie sbx, as a careless parent leaves.
    while os.path.exists(".envrc") or not os.path.exists(".envrc.sbx-blocked"):
        if time.monotonic() - start > 30:
            sys.exit("the planted .envrc was never moved aside")
        time.sleep(0.0002)
    windows.append((time.monotonic() - start) * 1000)
    child.wait()
    left = subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True).stdout.split()
    if left:
        sys.exit(f"sandbox processes outlived the kill: {left}")
print(f"kill -> planted .envrc moved aside: median {statistics.median(windows):.1f} ms, "
      f"slowest {max(windows):.1f} ms, {rounds} rounds")
PY
