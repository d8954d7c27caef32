#!/usr/bin/env python3
"""Turn bench.sh's hyperfine exports into medians and ratios, print them, and
(unless --quick) rewrite the README's Performance section between its markers.

Every group's rounds are merged: the times of all rounds of one command form
its sample, and ratios are medians over the same group's baseline."""

import datetime
import glob
import json
import os
import platform
import statistics
import subprocess
import sys

out_dir, rounds = sys.argv[1], int(sys.argv[2])
quick = "--quick" in sys.argv

GROUPS = [
    ("startup", "Start-up: `sbx run -- true` against the same bwrap argv run directly", "bwrap (same argv)"),
    ("shell", "Shell mode: `sbx -c true` against `bash -c true`", "bwrap (same argv)"),
    ("size", "Start-up by project size (cached `.env` scan)", "empty"),
    ("alternatives", "Against other sandboxes (same command: `true`)", "sbx"),
]


def samples(group):
    merged = {}
    order = []
    for path in sorted(glob.glob(os.path.join(out_dir, f"{group}.*.json"))):
        with open(path) as f:
            for result in json.load(f)["results"]:
                name = result["command"]
                if name not in merged:
                    merged[name] = []
                    order.append(name)
                merged[name].extend(result["times"])
    return order, merged


def fmt_ms(seconds):
    return f"{seconds * 1000:.2f} ms"


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        bwrap = subprocess.run(["bwrap", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        bwrap = "bwrap not found"
    return f"{os.cpu_count()} × {cpu}, Linux {platform.release()}, {bwrap}"


lines = []
today = datetime.date.today().isoformat()
kind = os.environ.get("SBX_BENCH_KIND", "sbx")
lines.append(f"Measured {today} on {machine()}, {kind}, by `bench/bench.sh` "
             f"({rounds} interleaved rounds; medians; ratios against the group's baseline).")
lines.append("")
for group, title, baseline in GROUPS:
    order, merged = samples(group)
    if not order:
        continue
    base = statistics.median(merged[baseline]) if baseline in merged else None
    lines.append(f"**{title}**")
    lines.append("")
    lines.append("| command | median | ratio | runs |")
    lines.append("|---|---|---|---|")
    for name in order:
        med = statistics.median(merged[name])
        ratio = f"{med / base:.2f}" if base else "–"
        lines.append(f"| {name} | {fmt_ms(med)} | {ratio} | {len(merged[name])} |")
    lines.append("")

skipped_path = os.path.join(out_dir, "skipped.txt")
if os.path.exists(skipped_path):
    skipped = [s.strip() for s in open(skipped_path) if s.strip()]
    if skipped:
        lines.append("Not measured here: " + "; ".join(skipped) + ".")
        lines.append("")

proxy_path = os.path.join(out_dir, "proxy.json")
if os.path.exists(proxy_path):
    with open(proxy_path) as f:
        px = json.load(f)
    lines.append(f"**Allowlist proxy: {px.get('mib', '?')} MiB streamed through a CONNECT tunnel, "
                 f"median of {px.get('requests', '?')} small GETs (`bench/proxy.sh`)**")
    lines.append("")
    lines.append("| path | throughput | ratio | request latency |")
    lines.append("|---|---|---|---|")
    lines.append(f"| direct (loopback) | {px['direct_mbps']:.0f} MB/s | 1.00 | {px['direct_ms']:.2f} ms |")
    lines.append(f"| through the proxy | {px['proxy_mbps']:.0f} MB/s | "
                 f"{px['proxy_mbps'] / px['direct_mbps']:.2f} | {px['proxy_ms']:.2f} ms |")
    lines.append("")

rss = []
for name, label in (("rss-run.txt", "`sbx run -- true`"), ("rss-allowlist.txt", "allowlist mode")):
    path = os.path.join(out_dir, name)
    try:
        kib = int(open(path).read().strip().splitlines()[-1])
        rss.append(f"{label} {kib / 1024:.1f} MiB")
    except (OSError, ValueError, IndexError):
        pass
if rss:
    lines.append("Peak memory (max RSS of the sbx process tree's largest process): " + ", ".join(rss) + ".")
    lines.append("")

text = "\n".join(lines)
print(text)

if not quick:
    readme = os.path.join(os.path.dirname(__file__), "..", "README.md")
    with open(readme) as f:
        content = f.read()
    start, end = "<!-- bench:start -->", "<!-- bench:end -->"
    if start in content and end in content:
        head, rest = content.split(start, 1)
        _, tail = rest.split(end, 1)
        with open(readme, "w") as f:
            f.write(head + start + "\n" + text + "\n" + end + tail)
        print("README.md: Performance section updated")
    else:
        print("README.md has no bench markers; not updated", file=sys.stderr)
