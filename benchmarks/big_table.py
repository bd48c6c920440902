"""What planning and dispatching a very large table costs the driver (time, memory, payload).

A synthetic table of N rows (splits 80/10/10, 1,000 labels, one extra int column) points at a
pool of 1,000 real photo-sized images, reused, so that every row passes the plan's checks (each
path is still resolved and stat'ed) and shards hold what ~128 MiB of such images make. Each size runs in a fresh subprocess, which times:

- ``plan``: ``build_plan`` (validation of the cells, labels, shuffle, shards, fingerprint);
- ``tasks``: building every ShardTask (each shard's rows only) and pickling it, which is what
  dispatching sends to a worker;

and reports the peak RSS of the process, and the pickled size of the tasks.

Usage:
    python benchmarks/big_table.py --rows 100000,300000,1000000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

REPO = Path(__file__).resolve().parent.parent

CHILD = """
import json, pickle, resource, sys, time
import pandas as pd
sys.path.insert(0, sys.argv[3])
from tfrecorder_lite import options
from tfrecorder_lite.write.plan import plan_table

rows, pool = int(sys.argv[1]), sys.argv[2]
start = time.perf_counter()
table = pd.read_pickle(pool + f"/table-{rows}.pkl")
loaded = time.perf_counter() - start
rss_table = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
plan = plan_table(table, split_col="split", image_col="image_uri", label_col="label",
                  image=options.image_options("header"), num_shards=None)
planned = time.perf_counter() - start
start = time.perf_counter()
sizes = [len(pickle.dumps(plan.task(shard, table.index))) for shard in plan.shards]
dispatched = time.perf_counter() - start
print(json.dumps({"rows": rows, "load_s": loaded, "plan_s": planned, "tasks_s": dispatched,
                  "shards": len(plan.shards), "rejected": len(plan.rejected),
                  "task_bytes": sizes, "rss_table_mb": rss_table / 1024,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def make_pool(folder, size=1000):
    """1,000 photo-sized JPEGs (256x256 noise, about 60 KB: shard counts follow the bytes)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(size):
        path = folder / f"{i:04d}.jpg"
        pixels = rng.integers(0, 255, (256, 256, 3), dtype=np.uint8)
        if not path.exists():
            Image.fromarray(pixels).save(path, quality=80)
    return [str(folder / f"{i:04d}.jpg") for i in range(size)]


def make_table(rows, pool, path):
    rng = np.random.default_rng(rows)
    table = pd.DataFrame({
        "split": rng.choice(["TRAIN", "VALIDATION", "TEST"], rows, p=[0.8, 0.1, 0.1]),
        "image_uri": [pool[i % len(pool)] for i in range(rows)],
        "label": [f"class_{i:04d}" for i in rng.integers(0, 1000, rows)],
        "source_id": np.arange(rows),
    })
    table.to_pickle(path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="100000,300000,1000000")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/tfrl_bench/big_table"))
    args = parser.parse_args(argv)
    pool = make_pool(args.workdir / "pool")
    results = []
    for rows in (int(r) for r in args.rows.split(",")):
        table_path = args.workdir / f"table-{rows}.pkl"
        if not table_path.exists():
            make_table(rows, pool, table_path)
        proc = subprocess.run([sys.executable, "-c", CHILD, str(rows), str(args.workdir),
                               str(REPO)], capture_output=True, text=True, check=True)
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(json.dumps({k: v for k, v in results[-1].items() if k != "task_bytes"}),
              file=sys.stderr)
    lines = [f"{os.cpu_count()} cores; each size in a fresh process", "",
             "| rows | plan s | tasks s | shards | task pickle KB (median / max) | "
             "RSS after reading the table MB | peak RSS MB |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        sizes = r["task_bytes"]
        lines.append(f"| {r['rows']:,} | {r['plan_s']:.1f} | {r['tasks_s']:.1f} | {r['shards']} | "
                     f"{statistics.median(sizes) / 1024:.0f} / {max(sizes) / 1024:.0f} | "
                     f"{r['rss_table_mb']:.0f} | {r['peak_rss_mb']:.0f} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
