"""What a process worker costs before its first shard: its imports, and the wait for it.

For this checkout and, with ``--base REV``, an earlier revision (exported with ``git archive``),
alternating round by round, each measurement in fresh interpreters:

- ``import``: seconds to ``import tfrecorder_lite.write.task`` (what unpickling a shard task
  imports) in an interpreter that has joblib's worker machinery and numpy loaded already, as a
  loky worker has before its first task; and whether pandas or TensorFlow came with it;
- ``first results``: seconds from asking joblib's loky backend for 2 workers (in a driver that
  has imported pandas and tfrecorder_lite) to the results of one task each that imports
  ``tfrecorder_lite.write.task``: starting the interpreters, their imports and the round trip.

Usage:
    python benchmarks/worker_start.py --base 65cc3ac --repeats 5
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

IMPORT = """
import json, sys, time
import joblib.externals.loky.process_executor, numpy
start = time.perf_counter()
import tfrecorder_lite.write.task
print(json.dumps([time.perf_counter() - start,
                  sorted(m for m in ("pandas", "tensorflow") if m in sys.modules)]))
"""

FIRST_RESULTS = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import joblib, pandas, tfrecorder_lite
import worker_start
start = time.perf_counter()
with joblib.parallel_config(backend="loky"):
    found = joblib.Parallel(n_jobs=2)(joblib.delayed(worker_start.probe)(i) for i in range(2))
print(json.dumps([time.perf_counter() - start, found]))
"""


def probe(_):
    """A worker's task: import the shard writer; what else is loaded then."""
    start = time.perf_counter()
    import tfrecorder_lite.write.task  # noqa: F401

    return [time.perf_counter() - start,
            sorted(m for m in ("pandas", "tensorflow") if m in sys.modules)]


def export(revision, workdir):
    """A folder holding the files of ``revision`` (git archive), made once."""
    folder = Path(workdir) / f"tree-{revision}"
    if not folder.exists():
        archive = subprocess.run(["git", "-C", str(REPO), "archive", revision],
                                 capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(folder)
    return folder


def run(tree, code, *args):
    """Run ``code`` in a fresh interpreter that imports the library from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env, cwd=tree,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="an earlier revision to compare with")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workdir", default=tempfile.gettempdir())
    args = parser.parse_args(argv)
    trees = {"this tree": REPO}
    if args.base:
        trees[args.base] = export(args.base, args.workdir)
    found = {name: {"import": [], "first": [], "worker import": [], "loaded": set()}
             for name in trees}
    for round_number in range(args.repeats):
        for name, tree in trees.items():
            seconds, loaded = run(tree, IMPORT)
            first, workers = run(tree, FIRST_RESULTS, HERE)
            found[name]["import"].append(seconds)
            found[name]["first"].append(first)
            found[name]["worker import"] += [w[0] for w in workers]
            found[name]["loaded"].update(loaded, *(w[1] for w in workers))
            print(f"round {round_number + 1} {name}: import {seconds:.3f} s, first results "
                  f"{first:.2f} s, in the workers {[round(w[0], 3) for w in workers]}",
                  file=sys.stderr)
    print(f"`python benchmarks/worker_start.py {' '.join(sys.argv[1:] if argv is None else argv)}`"
          f", {os.cpu_count()} cores\n")
    print("| tree | import tfrecorder_lite.write.task s, median (range) | first results from 2 "
          "workers s | the import in the workers s | also loaded |")
    print("|---|---|---|---|---|")
    for name, values in found.items():
        cells = [f"{statistics.median(values[k]):.2f} ({min(values[k]):.2f}-{max(values[k]):.2f})"
                 for k in ("import", "first", "worker import")]
        print(f"| {name} | {' | '.join(cells)} | {', '.join(sorted(values['loaded'])) or '-'} |")


if __name__ == "__main__":
    main()
