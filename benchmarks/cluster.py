"""Time the same conversion locally and on a dask LocalCluster, in one run.

The cluster (2 worker processes of 1 thread, on 127.0.0.1) runs the shard tasks through
``joblib.parallel_config(backend="dask")``; the local run uses the default backend. Rounds are
interleaved, medians reported; each run checks that the shards are byte-identical.

Usage:
    python benchmarks/cluster.py --images 3000 --repeats 3 --num-shards 8
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import joblib  # noqa: E402
import pandas as pd  # noqa: E402

import dataset as bench  # noqa: E402  (the benchmarks' image set)


def digest(folder):
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
            for name in sorted(os.listdir(folder)) if name.endswith(".tfrecord")}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--num-shards", type=int, default=8)
    parser.add_argument("--workdir", type=Path, default=bench.DEFAULT_WORKDIR)
    args = parser.parse_args(argv)
    table = pd.read_csv(bench.generate_dataset(args.images, args.workdir))

    import distributed

    import tfrecorder_lite  # noqa: F401  (the DataFrame accessor)

    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None)
    client = distributed.Client(cluster)
    out = args.workdir / "cluster-out"
    options = dict(num_shards=args.num_shards, progress=False)
    times = {"local": [], "dask": []}
    shards = {}
    try:
        for round_number in range(args.repeats):
            for name in (("local", "dask") if round_number % 2 == 0 else ("dask", "local")):
                shutil.rmtree(out, ignore_errors=True)
                start = time.perf_counter()
                if name == "dask":
                    with joblib.parallel_config(backend="dask"):
                        table.tfrecord.to_tfrecord(str(out), **options)
                else:
                    table.tfrecord.to_tfrecord(str(out), **options)
                times[name].append(time.perf_counter() - start)
                shards.setdefault(name, digest(out))
                print(f"round {round_number + 1} {name}: {times[name][-1]:.3f} s",
                      file=sys.stderr)
    finally:
        client.close()
        cluster.close()
        shutil.rmtree(out, ignore_errors=True)
    assert shards["local"] == shards["dask"], "the cluster wrote other bytes"
    local, dask = statistics.median(times["local"]), statistics.median(times["dask"])
    print(f"{args.images} images, {args.num_shards} shards per split, check=decode, "
          f"{args.repeats} interleaved rounds, {os.cpu_count()} cores; shards byte-identical\n\n"
          "| run | median s | rounds s |\n|---|---|---|\n"
          f"| local (default joblib backend) | {local:.3f} | "
          f"{', '.join(f'{v:.2f}' for v in times['local'])} |\n"
          f"| dask LocalCluster, 2 workers x 1 thread | {dask:.3f} | "
          f"{', '.join(f'{v:.2f}' for v in times['dask'])} |\n\n"
          f"dask / local: {dask / local:.2f}x")


if __name__ == "__main__":
    main()
