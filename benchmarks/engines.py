"""The same conversion on every engine, and what a Beam pipeline of a very large table carries.

Part 1: the same ``--images`` conversion (benchmarks/run.py's image set, ``check="decode"``,
``--num-shards`` per split) locally (the default joblib backend), on a dask LocalCluster (2
worker processes x 1 thread), on Spark local[2] through joblibspark, and on Beam's
DirectRunner (in process; and with 2 worker processes). Each engine runs in a fresh process
that starts the engine (timed apart), then converts ``--repeats`` times; the median is
compared with the local run's (overhead = engine median / local median), and every engine's
files are checked byte-identical to the local run's. Beam runs under ``--beam-python``: an
interpreter whose environment has ``tfrecorder_lite[beam]`` (apache-beam pins older pillow and
protobuf; see docs/engines.md).

Part 2: for tables of ``--rows`` rows (benchmarks/big_table.py's table: every row points at one
of 1,000 real images, each path resolved and stat'ed), each size in a fresh process: the time
to plan, to make, pickle and stage every shard task into a state folder (what BeamRunner does
before its pipeline starts), the staged bytes (per row), what the pipeline itself then carries
(``Create`` of one ``(shard, sha256)`` per shard), and the peak RSS.

Usage:
    python benchmarks/engines.py --images 2000 --beam-python /tmp/beam-env/bin/python \\
        --rows 1000000,10000000
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

ENGINE = r"""
import hashlib, json, os, shutil, sys, time
sys.path.insert(0, sys.argv[5])
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYTHONPATH"] = sys.argv[5]
import contextlib
import joblib
import pandas as pd
import tfrecorder_lite

csv, out, engine, repeats, num_shards = sys.argv[1], sys.argv[2], sys.argv[3], \
    int(sys.argv[4]), int(sys.argv[6])
table = pd.read_csv(csv)
backend, options, stop = None, {}, lambda: None
start = time.perf_counter()
if engine == "dask":
    import distributed
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None)
    client = distributed.Client(cluster)
    backend, stop = "dask", lambda: (client.close(), cluster.close())
elif engine == "spark":
    from joblibspark import register_spark
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
               .getOrCreate())
    register_spark()
    backend, stop = "spark", session.stop
elif engine.startswith("beam"):
    import apache_beam
    options = {"runner": "DirectRunner"}
    if engine == "beam-2":
        options["pipeline_options"] = {"direct_num_workers": 2,
                                       "direct_running_mode": "multi_processing"}
started = time.perf_counter() - start
times = []
for _ in range(repeats):
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    with joblib.parallel_config(backend=backend) if backend else contextlib.nullcontext():
        table.tfrecord.to_tfrecord(out, num_shards=num_shards, progress=False, **options)
    times.append(time.perf_counter() - start)
stop()
files = {n: hashlib.sha256(open(os.path.join(out, n), "rb").read()).hexdigest()
         for n in sorted(os.listdir(out))}
shutil.rmtree(out, ignore_errors=True)
print(json.dumps({"engine": engine, "startup_s": started, "times": times, "files": files}))
"""

PLAN = r"""
import hashlib, json, pickle, resource, sys, time
import pandas as pd
sys.path.insert(0, sys.argv[3])
from tfrecorder_lite import options
from tfrecorder_lite.write.beam_runner import stage_task
from tfrecorder_lite.write.plan import plan_table
from tfrecorder_lite.storage import Store

rows, workdir = int(sys.argv[1]), sys.argv[2]
table = pd.read_pickle(workdir + f"/table-{rows}.pkl")
start = time.perf_counter()
plan = plan_table(table, split_col="split", image_col="image_uri", label_col="label",
                  image=options.image_options("header"), num_shards=None)
planned = time.perf_counter() - start
state = Store(workdir + f"/state-{rows}")
state.make_dirs()
start = time.perf_counter()
staged = [stage_task(state, plan.task(shard, table.index)) for shard in plan.shards]
staging = time.perf_counter() - start
sizes = [state.size(name + ".task") for name, _ in staged]
print(json.dumps({"rows": rows, "plan_s": planned, "stage_s": staging,
                  "shards": len(plan.shards), "staged_bytes": sum(sizes),
                  "largest_task": max(sizes), "create_bytes": len(pickle.dumps(staged)),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

ENGINES = {"local": "local (default joblib backend)", "dask": "dask LocalCluster, 2 x 1",
           "spark": "Spark local[2], joblibspark", "beam": "Beam DirectRunner (in process)",
           "beam-2": "Beam DirectRunner, 2 worker processes"}


def compare_engines(args):
    import run as bench  # the image set of benchmarks/run.py

    csv = bench.generate_dataset(args.images, args.workdir)
    results = {}
    for engine in ENGINES:
        python = args.beam_python if engine.startswith("beam") else sys.executable
        if python is None:
            continue
        out = args.workdir / f"engines-out-{engine}"
        proc = subprocess.run([python, "-c", ENGINE, str(csv), str(out), engine,
                               str(args.repeats), str(REPO), str(args.num_shards)],
                              capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"{engine} failed:\n{proc.stderr[-3000:]}")
        results[engine] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(json.dumps({k: v for k, v in results[engine].items() if k != "files"}),
              file=sys.stderr)
    local = statistics.median(results["local"]["times"])
    lines = [f"{args.images} images, {args.num_shards} shards per split, check=decode, "
             f"{args.repeats} runs per engine, {os.cpu_count()} cores", "",
             "| engine | start-up s | median s | runs s | overhead vs local | files |",
             "|---|---|---|---|---|---|"]
    for engine, r in results.items():
        median = statistics.median(r["times"])
        same = "identical" if r["files"] == results["local"]["files"] else "DIFFERENT"
        lines.append(f"| {ENGINES[engine]} | {r['startup_s']:.1f} | {median:.2f} | "
                     f"{', '.join(f'{t:.2f}' for t in r['times'])} | {median / local:.2f} | "
                     f"{same} |")
    return "\n".join(lines)


def plan_and_stage(args):
    import big_table

    pool = big_table.make_pool(args.workdir / "big_table" / "pool")
    results = []
    for rows in (int(r) for r in args.rows.split(",")):
        workdir = args.workdir / "big_table"
        table_path = workdir / f"table-{rows}.pkl"
        if not table_path.exists():
            big_table.make_table(rows, pool, table_path)
        shutil.rmtree(workdir / f"state-{rows}", ignore_errors=True)
        proc = subprocess.run([sys.executable, "-c", PLAN, str(rows), str(workdir), str(REPO)],
                              capture_output=True, text=True)
        shutil.rmtree(workdir / f"state-{rows}", ignore_errors=True)
        if proc.returncode:
            raise SystemExit(f"{rows} rows failed:\n{proc.stderr[-3000:]}")
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), file=sys.stderr)
    lines = ["Each size in a fresh process; every row's image path resolved and stat'ed", "",
             "| rows | plan s | stage tasks s | shards | staged MB (bytes/row) | largest task MB "
             "| pipeline's Create KB | peak RSS MB |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['rows']:,} | {r['plan_s']:.1f} | {r['stage_s']:.1f} | {r['shards']} | "
                     f"{r['staged_bytes'] / 2**20:.0f} ({r['staged_bytes'] / r['rows']:.0f}) | "
                     f"{r['largest_task'] / 2**20:.1f} | {r['create_bytes'] / 1024:.0f} | "
                     f"{r['peak_rss_mb']:.0f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--num-shards", type=int, default=8)
    parser.add_argument("--beam-python", help="a Python whose environment has "
                                              "tfrecorder_lite[beam] (no Beam rows without it)")
    parser.add_argument("--rows", default="1000000,10000000", help="'' to skip part 2")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/tfrl_bench"))
    args = parser.parse_args(argv)
    print(compare_engines(args))
    if args.rows:
        print()
        print(plan_and_stage(args))


if __name__ == "__main__":
    main()
