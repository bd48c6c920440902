"""The writer's parallelism policy: the default against threads, processes and the recipe.

Writes the image set listed 1, 10 and 30 times over (3,000, 30,000 and 90,000 rows of the
3,000-image set) with ``check="header"`` and ``check="decode"``, each way:

- ``recipe``: the TensorFlow tutorial writer (benchmarks/recipes.py), one process;
- ``durable_recipe``: the same, its files then fsynced (on the disk when it returns, as the
  library's are);
- ``floor``: read every image and append it to one file, then fsync it: what any writer whose
  output is on the disk when it returns (the library's is) cannot beat;
- ``default``: ``to_tfrecord`` as it comes (the policy in tfrecorder_lite/write/runners.py chooses);
- ``threads``: inside ``joblib.parallel_config(backend="threading")``;
- ``processes``: inside ``joblib.parallel_config(backend="loky")``.

Every conversion runs in a fresh interpreter, as a script or the CLI would: worker processes
start cold, and their start is part of the time. Only the conversion is timed: not the imports
(the library's modules, or TensorFlow for the recipe) nor reading the table. Rounds are
interleaved: every table and way once a round, in a seeded random order, each after
``os.sync()`` so that no way pays for what the one before it left to write back. The table
gives medians, the ratio of medians against the recipe, the median of the same ratio taken
within each round, and how close each library way came to the floor. The library's ways must
write the same shards: their CRC32Cs in ``metadata.json`` are compared.

Usage:
    python benchmarks/policy.py --repeats 3                        # 3,000 / 30,000 / 90,000
    python benchmarks/policy.py --times 10 --checks header --repeats 5
    python benchmarks/policy.py --photos --times 1 --repeats 3     # the 12 MP set (200 photos)
    python benchmarks/policy.py --csv /tmp/tfrl_scale/table-300000.csv --times 1  # scale.py's
    python benchmarks/policy.py --times 1,10 --checks header --ways durable_recipe,default \
        --against durable_recipe --repeats 3               # issue 47: header >= 1.0x
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import dataset

HERE = Path(__file__).resolve().parent
LIBRARY_WAYS = ("default", "threads", "processes")
BASELINES = {"recipe": "tutorial_recipe", "durable_recipe": "durable_recipe",
             "floor": "durable_floor"}  # way -> the function of recipes.py
BACKENDS = {"threads": "threading", "processes": "loky"}


def child(job: dict) -> dict:
    """One timed conversion (in its own interpreter); returns what the parent reports."""
    import pandas as pd

    table = dataset.listed(pd.read_csv(job["csv"]), job["times"])
    out = Path(job["out"])
    if job["way"] in BASELINES:
        import tensorflow  # noqa: F401  (not timed)
        import recipes

        write = getattr(recipes, BASELINES[job["way"]])
        start = time.perf_counter()
        write(table, out)
        return {"seconds": time.perf_counter() - start}

    sys.path.insert(0, str(dataset.REPO_ROOT))
    import joblib

    import tfrecorder_lite  # noqa: F401  (the DataFrame accessor)
    import tfrecorder_lite.conversion  # noqa: F401  (what a conversion imports: not timed)

    decisions = []

    class Decisions(logging.Handler):
        def emit(self, record):
            decisions.append(record.getMessage())

    logger = logging.getLogger("tfrecorder_lite.write.runners")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(Decisions())
    backend = BACKENDS.get(job["way"])
    start = time.perf_counter()
    if backend is None:
        table.tfrecord.to_tfrecord(str(out), check=job["check"], progress=False)
    else:
        with joblib.parallel_config(backend=backend):
            table.tfrecord.to_tfrecord(str(out), check=job["check"], progress=False)
    seconds = time.perf_counter() - start
    metadata = json.loads((out / "metadata.json").read_text())
    shards = [(s["name"], s["num_examples"], s["crc32c"])
              for split in metadata["splits"].values() for s in split["shards"]]
    chosen = [m.split(" in ")[1].split(",")[0] for m in decisions if m.startswith("writing ")]
    return {"seconds": seconds, "shards": shards, "decision": ", ".join(chosen)}


def run_child(job: dict) -> dict:
    """Runs ``child(job)`` in a fresh interpreter and removes its output afterwards; the disk
    has written everything before it starts (the recipes leave their bytes to write back)."""
    shutil.rmtree(job["out"], ignore_errors=True)
    os.sync()
    try:
        done = subprocess.run([sys.executable, __file__, "--child", json.dumps(job)],
                              capture_output=True, text=True,
                              env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        if done.returncode != 0:
            raise RuntimeError(f"{job['way']} failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(job["out"], ignore_errors=True)


def report(tables: list, results: dict, repeats: int, against: str = "recipe") -> str:
    """Markdown tables of medians and ratios (against the way ``against``), one per table
    size."""
    lines = []
    for name, rows in tables:
        recipe = results.get((name, against, None), {}).get("seconds")
        floor = results.get((name, "floor", None), {}).get("seconds")
        lines += ["", f"**{name}** ({rows:,} rows), {repeats} interleaved rounds, "
                  f"{os.cpu_count()} cores", "",
                  f"| way | check | median s (all rounds) | rows/s | vs {against} (per round) | "
                  "floor / this | ran in |", "|---|---|---|---:|---|---|---|"]
        for (table, way, check), result in results.items():
            if table != name:
                continue
            seconds = result["seconds"]
            median = statistics.median(seconds)
            ratio = against_floor = ""
            if way != against and recipe:
                ratio = (f"{statistics.median(recipe) / median:.2f}x "
                         f"({statistics.median(r / s for r, s in zip(recipe, seconds)):.2f}x)")
            if way in LIBRARY_WAYS and floor:
                against_floor = f"{statistics.median(floor) / median:.2f}"
            rounds = ", ".join(f"{s:.2f}" for s in seconds)
            lines.append(f"| {way} | {check or ''} | {median:.2f} ({rounds}) | "
                         f"{rows / median:,.0f} | {ratio} | {against_floor} | "
                         f"{result.get('decision') or ''} |")
        same = {check: {json.dumps(r["shards"]) for (t, w, c), r in results.items()
                        if t == name and c == check and "shards" in r}
                for check in {c for (t, _, c) in results if t == name and c}}
        lines.append("")
        lines.append("shards identical across " + ", ".join(LIBRARY_WAYS) + ": " + ", ".join(
            f"{check} {'yes' if len(digests) == 1 else 'NO'}"
            for check, digests in sorted(same.items())))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=3000, help="distinct images")
    parser.add_argument("--csv", type=Path, help="a split,image_uri,label table of your own "
                        "instead of generated images (e.g. benchmarks/scale.py's "
                        "/tmp/tfrl_scale/table-<rows>.csv)")
    parser.add_argument("--times", default="1,10,30", help="the table listed this many times")
    parser.add_argument("--photos", action="store_true",
                        help="the 12 MP photo set (use --images 200)")
    parser.add_argument("--checks", default="header,decode")
    parser.add_argument("--ways", default="recipe,floor," + ",".join(LIBRARY_WAYS))
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--against", default="recipe", choices=sorted(BASELINES),
                        help="the way the ratios are taken against")
    parser.add_argument("--workdir", type=Path, default=dataset.DEFAULT_WORKDIR)
    parser.add_argument("--seed", type=int, default=0, help="of the order of each round")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    if args.photos and args.images == 3000:
        args.images = 200
    csv = args.csv or dataset.generate_dataset(args.images, args.workdir, photos=args.photos)
    import pandas as pd

    base = pd.read_csv(csv)
    if args.csv:
        args.images = len(base)
    print(dataset.describe_dataset(base), file=sys.stderr)
    dataset.warm_page_cache(base)
    kind = "photos" if args.photos else "images"
    tables = [(f"{args.images:,} {kind} x {t}", args.images * t, t)
              for t in (int(v) for v in args.times.split(","))]
    ways = [(w, c) for w in args.ways.split(",")
            for c in (args.checks.split(",") if w in LIBRARY_WAYS else [None])]
    results = {}
    order = random.Random(args.seed)
    for round_number in range(args.repeats):
        for name, rows, times in tables:
            for way, check in order.sample(ways, len(ways)):  # no way always follows another
                job = {"csv": str(csv), "times": times, "way": way, "check": check,
                       "out": str(args.workdir / "policy_out")}
                outcome = run_child(job)
                entry = results.setdefault((name, way, check), {"seconds": []})
                entry["seconds"].append(outcome["seconds"])
                entry.setdefault("shards", outcome.get("shards"))
                entry.setdefault("decision", outcome.get("decision"))
                if "shards" in outcome and outcome["shards"] != entry["shards"]:
                    entry["shards"] = "differs between rounds"
                print(f"round {round_number + 1} {name} {way} {check or ''}: "
                      f"{outcome['seconds']:.2f} s {outcome.get('decision', '')}",
                      file=sys.stderr, flush=True)
    results = {key: value for key, value in sorted(
        results.items(), key=lambda kv: ([t[0] for t in tables].index(kv[0][0]),
                                         kv[0][2] or "", ways.index((kv[0][1], kv[0][2]))))}
    print(f"`python benchmarks/policy.py {' '.join(argv if argv is not None else sys.argv[1:])}`"
          f" ({dataset.describe_dataset(base)})")
    print(report([(name, rows) for name, rows, _ in tables], results, args.repeats,
                 args.against))


if __name__ == "__main__":
    main()
