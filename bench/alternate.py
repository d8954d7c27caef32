#!/usr/bin/env python3
"""Run commands in strict alternation and write hyperfine's JSON.

    alternate.py --runs N --warmup W --export-json FILE LABEL COMMAND [LABEL COMMAND ...]

Each cycle runs every command once, in the order given; W cycles are not
counted, then N are. A command's times thus come from the same moments as
the others', so a machine that slows down or speeds up during the
measurement moves them all alike: their ratios hold where hyperfine's
(all runs of one command, then all of the next) drift. Commands are split
like a shell would (no expansion) and started with posix_spawnp, output to
/dev/null. The JSON has hyperfine's shape for what the report reads:
{"results": [{"command": LABEL, "times": [seconds, ...]}]}. Exits 1 when
a command fails.
"""
import argparse
import json
import os
import shlex
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--export-json", required=True)
    parser.add_argument("pairs", nargs="+")
    args = parser.parse_args()
    if len(args.pairs) % 2:
        parser.error("LABEL COMMAND pairs expected")
    labels = args.pairs[0::2]
    commands = [shlex.split(c) for c in args.pairs[1::2]]
    devnull = os.open(os.devnull, os.O_WRONLY)
    actions = [(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
    times = [[] for _ in commands]
    for cycle in range(args.warmup + args.runs):
        for i, argv in enumerate(commands):
            start = time.perf_counter()
            pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=actions)
            _, status = os.waitpid(pid, 0)
            took = time.perf_counter() - start
            if os.waitstatus_to_exitcode(status) != 0:
                print(f"alternate.py: {labels[i]} failed ({status})", file=sys.stderr)
                sys.exit(1)
            if cycle >= args.warmup:
                times[i].append(took)
    results = [{"command": label, "times": t} for label, t in zip(labels, times)]
    with open(args.export_json, "w") as f:
        json.dump({"results": results}, f)


if __name__ == "__main__":
    main()
