#!/usr/bin/env python3
"""Make the private git config copies a run's bwrap argv mounts.

sbx makes them before each run; a benchmark that runs the same bwrap argv
directly must make them too, or bubblewrap fails. Reads the output of
`sbx profile --platform linux --format json` on stdin.
"""
import json
import os
import shutil
import sys

args = json.load(sys.stdin)["args"]
pairs = list(zip(args, args[1:]))
copies = next((v for k, v in pairs if k == "--config-copies"), None)
if copies:
    os.makedirs(copies, exist_ok=True)
    for i, config in enumerate(v for k, v in pairs if k == "--private-config"):
        shutil.copyfile(config, os.path.join(copies, str(i)))
        link = os.path.join(copies, f"{i}.link")
        if not os.path.islink(link):
            os.symlink(os.path.join(copies, str(i)), link)
