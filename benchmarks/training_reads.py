"""Reads as training needs them: global shuffle, random access, and both from a distant store.

Three comparisons, each round timing its two rows back to back (medians and per-round ratios):

1. ``load(shuffle="global")`` against ``load(shuffle=True)``: one epoch of TRAIN decoded,
   resized to 224x224, batches of 64.
2. ``data_source()`` reading every record of the set (all splits) in a random order, 64
   records a call, parsed into dicts, against tf.data's sequential raw read (the shards
   interleaved, each record parsed by ``tf.io.parse_single_example``, no image decoded).
3. From the GCS emulator answering every request ``--latency`` late: ``load(shuffle="global")``
   against the sequential ``load()`` of the same store (which copies the shards first; each
   round copies them afresh), one epoch of TRAIN as in 1.

    python benchmarks/training_reads.py --images 3000 --repeats 5 [--rows shuffle,random]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # the emulator launcher the tests use

os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
os.environ["NO_GCE_CHECK"] = "True"
os.environ["GCE_METADATA_HOST"] = os.environ["GCE_METADATA_IP"] = "127.0.0.1:9"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import joblib  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import dataset as bench  # noqa: E402
import tfrecorder_lite  # noqa: E402
from object_stores import Server  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds per request")
    parser.add_argument("--workdir", type=Path, default=bench.DEFAULT_WORKDIR)
    parser.add_argument("--rows", default="shuffle,random,remote",
                        help="comparisons to run, of shuffle, random, remote")
    return parser.parse_args(argv)


def records(args):
    """The set's records (written once, then reused)."""
    out = args.workdir / f"training_reads_n{args.images}"
    if not (out / "metadata.json").exists():
        table = pd.read_csv(bench.generate_dataset(args.images, args.workdir))
        shutil.rmtree(out, ignore_errors=True)
        table.tfrecord.to_tfrecord(out, progress=False)
    return str(out)


def epoch(dataset):
    """Seconds to iterate one epoch of ``dataset``."""
    start = time.perf_counter()
    for _ in dataset:
        pass
    return time.perf_counter() - start


def decoded_epoch(out, shuffle, seed, **options):
    return epoch(tfrecorder_lite.load(out, "TRAIN", shuffle=shuffle, seed=seed, batch_size=64,
                                      image_size=(224, 224), **options))


def random_access(out, seed):
    """Seconds to read every record of every split through data_source(), in random order,
    64 records a call, on as many threads as the process may use cores (as a loader's
    workers would; tf.data's row runs its reads and parses on as many)."""
    start = time.perf_counter()
    with ThreadPoolExecutor(joblib.cpu_count()) as pool:
        for split in ("TRAIN", "VALIDATION", "TEST"):
            src = tfrecorder_lite.data_source(out, split)
            order = np.random.default_rng(seed).permutation(len(src))
            list(pool.map(src.__getitems__, [order[i:i + 64]
                                             for i in range(0, len(order), 64)]))
    return time.perf_counter() - start


def raw_sequential(out):
    """Seconds for tf.data to read and parse every record of every shard (no decode)."""
    import tensorflow as tf

    from tfrecorder_lite.record.features import parse_spec

    meta = tfrecorder_lite.read_metadata(out)
    spec = parse_spec(meta["features"])
    paths = [os.path.join(out, shard["name"]) for split in meta["splits"].values()
             for shard in split["shards"]]
    files = tf.data.Dataset.from_tensor_slices(paths)
    dataset = files.interleave(tf.data.TFRecordDataset, cycle_length=len(paths),
                               num_parallel_calls=len(paths)).map(
        lambda r: tf.io.parse_single_example(r, spec), num_parallel_calls=joblib.cpu_count())
    return epoch(dataset.prefetch(tf.data.AUTOTUNE))


def cpu_seconds():
    """CPU seconds this process has used (user and system, every thread)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rounds(rows, repeats):
    """Time each row of ``rows`` (name -> function) once per round.

    Returns:
        ``(times, cpu)``: name -> [wall seconds], name -> [CPU seconds of this process].
    """
    times, cpu = {name: [] for name in rows}, {name: [] for name in rows}
    for r in range(repeats):
        for name, run in rows.items():
            before = cpu_seconds()
            times[name].append(run(r))
            cpu[name].append(cpu_seconds() - before)
            print(f"round {r}: {name}: {times[name][-1]:.2f} s, CPU {cpu[name][-1]:.2f} s",
                  file=sys.stderr)
    return times, cpu


def report(title, measured, base, head):
    """Lines of a table: each row's median, and the speed of ``head`` against ``base``."""
    times, cpu = measured
    lines = [title]
    for name, seconds in times.items():
        lines.append(f"  {name}: median {statistics.median(seconds):.2f} s "
                     f"({', '.join(f'{s:.2f}' for s in seconds)}); CPU median "
                     f"{statistics.median(cpu[name]):.2f} s")
    per_round = [b / h for b, h in zip(times[base], times[head])]
    ratio = statistics.median(times[base]) / statistics.median(times[head])
    lines.append(f"  {head} speed / {base} speed: {ratio:.2f}x of medians, per round "
                 f"{', '.join(f'{x:.2f}' for x in per_round)}")
    return lines


def remote_rows(out, args):
    """The remote comparison's rows, on an emulator holding the records."""
    server = Server("gcs", latency=args.latency)
    os.environ["STORAGE_EMULATOR_HOST"] = server.url
    import fsspec

    fs = fsspec.filesystem("gs", token="anon")
    fs.mkdir("bench-records")
    start = time.perf_counter()
    for name in os.listdir(out):
        if os.path.isfile(os.path.join(out, name)):
            fs.put_file(os.path.join(out, name), f"bench-records/records/{name}")
    print(f"uploaded the records in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    url, options = "gs://bench-records/records", {"token": "anon"}

    def sequential(r):
        cache = tempfile.mkdtemp(prefix="tfrl-cache-")
        try:
            return decoded_epoch(url, False, None, storage_options=options, cache_dir=cache)
        finally:
            shutil.rmtree(cache)

    def global_shuffle(r):
        return decoded_epoch(url, "global", r, storage_options=options)

    return server, {"load() sequential": sequential, 'load(shuffle="global")': global_shuffle}


def main(argv=None):
    args = parse_args(argv)
    out = records(args)
    for path in Path(out).iterdir():  # the page cache holds every shard
        path.read_bytes()
    lines = [f"{args.images} images, TRAIN {len(tfrecorder_lite.data_source(out, 'TRAIN'))} "
             f"records, {args.repeats} rounds; load average {os.getloadavg()[0]:.2f}"]
    chosen = args.rows.split(",")
    if "shuffle" in chosen:
        measured = rounds({"load(shuffle=True)": lambda r: decoded_epoch(out, True, r),
                           'load(shuffle="global")': lambda r: decoded_epoch(out, "global", r)},
                          args.repeats)
        lines += report("one epoch of TRAIN, decoded to 224x224, batches of 64:", measured,
                        "load(shuffle=True)", 'load(shuffle="global")')
    if "random" in chosen:
        measured = rounds({"tf.data sequential raw read": lambda r: raw_sequential(out),
                           "data_source random order": lambda r: random_access(out, r)},
                          args.repeats)
        lines += report("every record of the set, parsed, no decode:", measured,
                        "tf.data sequential raw read", "data_source random order")
    if "remote" in chosen:
        server, rows = remote_rows(out, args)
        try:
            measured = rounds(rows, args.repeats)
        finally:
            server.stop()
        lines += report(f"from the GCS emulator, {args.latency * 1000:.0f} ms a request, one "
                        "epoch of TRAIN as above:", measured, "load() sequential",
                        'load(shuffle="global")')
    lines.append(f"load average at the end {os.getloadavg()[0]:.2f}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
