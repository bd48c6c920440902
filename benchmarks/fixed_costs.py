"""What a small header write spends besides reading and appending its images: the fixed costs.

Runs ``to_tfrecord(check="header")`` of a table (the 3,000-image set by default) in fresh
interpreters, with the library's own functions wrapped (nothing else changes) to take the wall
time of: the plan; the lock and the folder's preparation; each small file written whole
(``Store.write_atomic``: index files, receipts, label files, the tfds files, metadata.json),
by kind; every ``os.fsync`` (the shards' and the small files'); and what comes after the
last shard (the manifest and its files). Small files are written on the shards' threads as
well as the driver's, so the kinds' times overlap the shards' work: each says what that kind
costs, not what it adds to the wall time.

Usage:
    python benchmarks/fixed_costs.py --repeats 5
    python benchmarks/fixed_costs.py --csv /tmp/tfrl_scale/table-10000.csv
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import dataset

KINDS = ("plan", "lock and prepare", "after the last shard", "fsync (all)", "index files",
         "state files (receipts, job)", "label files", "tfds files", "metadata.json",
         "other small files")


def _kind(name, folder):
    if name.endswith(".tfindex"):
        return "index files"
    if folder.rstrip("/").endswith(".tfrecorder_lite"):  # output/layout.py's STATE_DIR
        return "state files (receipts, job)"
    if name == "metadata.json":
        return "metadata.json"
    if name in ("dataset_info.json", "features.json") or name.endswith(".labels.txt"):
        return "tfds files"
    if name.startswith("labels"):
        return "label files"
    return "other small files"


def child(job):
    """One conversion with the wrappers in place; returns seconds per kind."""
    sys.path.insert(0, str(dataset.REPO_ROOT))
    import pandas as pd

    import tfrecorder_lite  # noqa: F401
    from tfrecorder_lite import conversion
    from tfrecorder_lite.storage.store import Store
    from tfrecorder_lite.write import driver

    spent, lock = defaultdict(float), threading.Lock()

    def timed(kind_of, function):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                with lock:
                    spent[kind_of(*args, **kwargs)] += time.perf_counter() - start
        return wrapper

    conversion.build_plan = timed(lambda *a, **k: "plan", conversion.build_plan)
    Store.write_atomic = timed(lambda store, name, data: _kind(name, store.url),
                               Store.write_atomic)
    os.fsync = timed(lambda fd: "fsync (all)", os.fsync)
    driver.output_state.prepare = timed(lambda *a, **k: "lock and prepare",
                                        driver.output_state.prepare)
    driver._finish = timed(lambda *a, **k: "after the last shard", driver._finish)
    lock_enter = driver.FolderLock.__enter__
    driver.FolderLock.__enter__ = timed(lambda *a: "lock and prepare", lock_enter)
    table = pd.read_csv(job["csv"])
    start = time.perf_counter()
    table.tfrecord.to_tfrecord(job["out"], check="header", progress=False)
    spent["total"] = time.perf_counter() - start
    return dict(spent)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--csv", type=Path, help="a split,image_uri,label table instead")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=dataset.DEFAULT_WORKDIR)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    csv = args.csv or dataset.generate_dataset(args.images, args.workdir)
    out = args.workdir / "fixed_costs_out"
    runs = []
    for _ in range(args.repeats):
        shutil.rmtree(out, ignore_errors=True)
        os.sync()
        done = subprocess.run([sys.executable, __file__, "--child",
                               json.dumps({"csv": str(csv), "out": str(out)})],
                              capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        shutil.rmtree(out, ignore_errors=True)
    print(f"`python benchmarks/fixed_costs.py {' '.join(argv or sys.argv[1:])}`: "
          f"{args.repeats} runs, load average {os.getloadavg()[0]:.2f}\n")
    print("| part | median s | share of the total | all runs s |\n|---|---:|---:|---|")
    total = statistics.median(r["total"] for r in runs)
    for kind in ("total",) + KINDS:
        values = [r.get(kind, 0.0) for r in runs]
        print(f"| {kind} | {statistics.median(values):.3f} | "
              f"{statistics.median(values) / total:.0%} | "
              + ", ".join(f"{v:.3f}" for v in values) + " |")


if __name__ == "__main__":
    main()
