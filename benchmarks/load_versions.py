"""Compare the read speed of ``load()`` in two revisions of tfrecorder_lite in one run.

Small JPEGs (the case where per-record work in the pipeline weighs most), or the table of
``--csv``, are converted once, by this tree; then every round times, in a fresh subprocess of
each revision, the two alternating, the process's first ``load()`` call with its first epoch
(what a new process pays: tracing, thread start) and full epochs after it of
``load(out, "TRAIN", batch_size=64, image_size=(64, 64))`` (``--image-size``), and the table
reports medians, the ratio of medians and the median of the ratios within a round (less
exposed to the machine changing speed).

Usage:
    python benchmarks/load_versions.py --base HEAD --images 2000 --repeats 5
    python benchmarks/load_versions.py --base main~3 --head /tmp/new   # a folder as it is
    python benchmarks/load_versions.py --base main --csv /tmp/tfrl_bench/dataset_v1_s20240_n3000.csv \
        --image-size 224 --repeats 3 --epochs 2   # run.py's 3,000-image set, as lib_load reads it
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import dataset as bench  # noqa: E402  (its image renderer)
import versions  # noqa: E402  (its checkout of a revision)

SIDES = (64, 160)  # smallest and largest side of the generated JPEGs

TIMED = """
import resource, sys, time
import tensorflow, tfrecorder_lite, tfrecorder_lite.read.loader  # imports are not timed
out, epochs, side = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

first_cpu, first = cpu(), time.perf_counter()
dataset = tfrecorder_lite.load(out, "TRAIN", batch_size=64, image_size=(side, side))
for _ in dataset:  # the first epoch: tracing, thread start, page cache
    pass
first, first_cpu = time.perf_counter() - first, cpu() - first_cpu
used, start = cpu(), time.perf_counter()
for _ in range(epochs):
    for _ in dataset:
        pass
print((time.perf_counter() - start) / epochs, (cpu() - used) / epochs, first, first_cpu)
"""


def small_jpegs(n, workdir, seed=bench.SEED):
    """A TRAIN-only ``split,image_uri,label`` table of ``n`` small JPEGs (made once)."""
    folder = workdir / f"small_jpegs_s{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        path = folder / f"img_{i:06d}.jpg"
        if not path.exists():
            width, height = (SIDES[0] + (i * k) % (SIDES[1] - SIDES[0]) for k in (37, 53))
            spec = bench.ImageSpec(i, "TRAIN", bench.CLASSES[i % 10], "jpg", width, height)
            bench.render_image(spec, seed).save(path, format="JPEG", quality=bench.JPEG_QUALITY)
        rows.append(("TRAIN", str(path), bench.CLASSES[i % 10]))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"])


def tree(revision, workdir):
    """A folder holding ``revision``: an existing folder is used as it is."""
    return Path(revision) if Path(revision).is_dir() else versions.checkout(revision, workdir)


def timed(folder, out, epochs, side):
    """(wall, CPU) seconds an epoch, the mean of ``epochs`` epochs, then (wall, CPU) seconds
    of the first load() call and its first epoch, in a fresh process importing ``folder``."""
    env = {**os.environ, "PYTHONPATH": str(folder), "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run([sys.executable, "-c", TIMED, str(out), str(epochs), str(side)],
                          env=env, capture_output=True, text=True, check=True, cwd=folder)
    return tuple(float(v) for v in proc.stdout.strip().splitlines()[-1].split())


def row(what, base, head):
    """A table row: medians, their ratio, the median ratio within a round, every round."""
    cells = [statistics.median(base), statistics.median(head),
             statistics.median(head) / statistics.median(base),
             statistics.median(h / b for h, b in zip(head, base))]
    rounds = [", ".join(f"{v:.3f}" for v in values) for values in (base, head)]
    return "| " + " | ".join([what, *(f"{c:.3f}" for c in cells), *rounds]) + " |"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True,
                        help="git revision (or a folder holding one) to compare against")
    parser.add_argument("--head", default="WORKTREE",
                        help="git revision or folder (default: this tree)")
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs a round")
    parser.add_argument("--num-shards", type=int, help="shards (default: the library's)")
    parser.add_argument("--image-size", type=int, default=64, help="side load() resizes to")
    parser.add_argument("--csv", type=Path,
                        help="a split,image_uri,label table to read (default: small JPEGs)")
    parser.add_argument("--workdir", type=Path, default=bench.DEFAULT_WORKDIR)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(bench.REPO_ROOT))
    import tfrecorder_lite

    out = args.workdir / "load-versions-out"
    table = pd.read_csv(args.csv) if args.csv else small_jpegs(args.images, args.workdir)
    tfrecorder_lite.to_tfrecord(table, out, num_shards=args.num_shards, progress=False,
                                overwrite=True)
    trees = {"base": tree(args.base, args.workdir), "head": tree(args.head, args.workdir)}
    times = {which: [] for which in trees}
    for round_number in range(args.repeats):
        order = list(trees) if round_number % 2 == 0 else list(reversed(trees))
        for which in order:
            times[which].append(timed(trees[which], out, args.epochs, args.image_size))
            print(f"round {round_number + 1} {which}: "
                  "{:.3f} s, {:.3f} s CPU; first: {:.3f} s, {:.3f} s CPU".format(
                      *times[which][-1]), file=sys.stderr)
    images = args.csv or f"{args.images} small JPEGs"
    lines = [f"{images}, epochs of load(batch_size=64, image_size=({args.image_size}, "
             f"{args.image_size})) (TRAIN), "
             f"{args.num_shards or 'default'} shard(s), {args.repeats} interleaved rounds of "
             f"{args.epochs} epochs, base {args.base}, "
             f"head {args.head}, {os.cpu_count()} cores", "",
             "| seconds an epoch | base median | head median | head / base | per round | "
             "base rounds | head rounds |", "|---|---|---|---|---|---|---|"]
    for i, what in enumerate(("wall", "CPU", "first (load() + epoch) wall",
                              "first (load() + epoch) CPU")):
        lines.append(row(what, *([t[i] for t in times[which]] for which in ("base", "head"))))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
