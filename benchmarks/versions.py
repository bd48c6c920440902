"""Compare the write speed of two revisions of tfrecorder_lite in one run.

Each revision is checked out (``git worktree``) into the workdir; every timed conversion runs
in a fresh subprocess importing that tree, in interleaved rounds, and the table reports medians
and the ratio of medians per mode, from the same run.

Usage:
    python benchmarks/versions.py --base main~3 --images 3000 --repeats 5
    python benchmarks/versions.py --base b83597f --head WORKTREE   # the uncommitted tree
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import dataset as bench  # noqa: E402  (the benchmarks' image set)

MODES = {
    "decode": {},
    "header": {"check": "header"},
    "resize": {"image_size": [224, 224]},
}

TIMED = """
import json, shutil, sys, time
import pandas as pd
import tfrecorder_lite
for name in ("conversion", "write.driver", "writer"):  # what a conversion imports: loaded on
    try:  # first use since the package loads lazily (write.driver was writer before the layout)
        __import__("tfrecorder_lite." + name)
    except ImportError:  # a revision from before that module: it came with the package
        pass
table, out, options = pd.read_csv(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
shutil.rmtree(out, ignore_errors=True)
start = time.perf_counter()
tfrecorder_lite.to_tfrecord(table, out, progress=False, **options)
print(time.perf_counter() - start)
"""


def checkout(revision, workdir):
    """A folder holding ``revision`` (``WORKTREE``: this checkout as it is)."""
    if revision == "WORKTREE":
        return REPO
    folder = workdir / f"rev-{revision.replace('/', '_').replace('~', '_')}"
    if not folder.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(folder),
                        revision], check=True, capture_output=True)
    return folder


def timed(tree, csv, out, options):
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-c", TIMED, str(csv), str(out), json.dumps(options)],
                          env=env, capture_output=True, text=True, check=True, cwd=tree)
    return float(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="git revision to compare against")
    parser.add_argument("--head", default="WORKTREE", help="git revision (default: this tree)")
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--workdir", type=Path, default=bench.DEFAULT_WORKDIR)
    args = parser.parse_args(argv)
    csv = bench.generate_dataset(args.images, args.workdir)
    trees = {"base": checkout(args.base, args.workdir), "head": checkout(args.head, args.workdir)}
    modes = args.modes.split(",")
    times = {(mode, which): [] for mode in modes for which in trees}
    out = args.workdir / "versions-out"
    for round_number in range(args.repeats):
        order = list(trees) if round_number % 2 == 0 else list(reversed(trees))
        for mode in modes:
            for which in order:
                seconds = timed(trees[which], csv, out, MODES[mode])
                times[mode, which].append(seconds)
                print(f"round {round_number + 1} {mode} {which}: {seconds:.3f} s",
                      file=sys.stderr)
    shutil.rmtree(out, ignore_errors=True)
    lines = [f"{args.images} images, {args.repeats} interleaved rounds, base {args.base}, "
             f"head {args.head}, {os.cpu_count()} cores", "",
             "| mode | base median s | head median s | head / base | base rounds | head rounds |",
             "|---|---|---|---|---|---|"]
    for mode in modes:
        base, head = times[mode, "base"], times[mode, "head"]
        lines.append(f"| {mode} | {statistics.median(base):.3f} | {statistics.median(head):.3f} "
                     f"| {statistics.median(head) / statistics.median(base):.2f} | "
                     f"{', '.join(f'{v:.2f}' for v in base)} | "
                     f"{', '.join(f'{v:.2f}' for v in head)} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
