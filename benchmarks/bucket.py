"""Train from the bucket: reads of one output from a slow object store against the local folder.

The 3,000-photo set (``dataset.py``) is converted once with 16 shards a split; ``slow_store.py``
serves its folder on 127.0.0.1 (``--latency`` seconds before every response, ``--mbps`` MB/s a
connection), and every case below runs in a fresh process, once a round, the rounds interleaved.
TensorFlow, the library and fsspec's HTTP filesystem are imported before anything is timed; the
page cache holds every shard. Store cases read ``http://127.0.0.1:PORT/out`` without a cache
folder unless they say so, and the store's ``/__stats`` gives the bytes each one fetched.

Cases, each against what it is compared with:

1. first batch: ``load()`` and its first ``next()``, from the store and from the folder.
2. one epoch of TRAIN, decoded, 224x224, batches of 64, sequential and ``shuffle="global"``
   (seed 1), from the store and from the folder.
3. ``cache_limit=16 MiB`` in a fresh cache folder (sequential and global): the epoch complete,
   the folder's bytes after it (file sizes, and ``du``) and the most seen during it.
4. a limit larger than the split: an epoch in one process, then a second in a new process with
   the same cache folder: the bytes each fetched from the store.
5. PyTorch's DataLoader (2 workers, shuffled, batches of 64 stacked) over
   ``data_source(decode_image=True, image_size=(224, 224))``, against the sequential ``load()``
   of case 2 (local).
6. local: ``load(shuffle="global")`` against ``shuffle=True``; ``data_source()`` random reads
   against tf.data's sequential raw read (``training_reads.py``'s, every split); ``load()``
   against the hand-tuned tf.data reader (``run.py``'s, here over the same 16 TRAIN shards).

The bounds checked are issue 44's "What must hold when it is done".

    python benchmarks/bucket.py --images 3000 --rounds 3 [--latency 0.05] [--mbps 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import dataset as bench  # noqa: E402

BATCH = 64
IMAGE_SIZE = (224, 224)
SMALL_LIMIT = 16 << 20
SEED = 1


# --------------------------------------------------------------------------
# The cases, each run in a child process (``--child CASE``)
# --------------------------------------------------------------------------

def child_imports():
    """Everything a case uses, imported before it is timed."""
    import fsspec.implementations.http  # noqa: F401
    import pandas as pd
    import tensorflow  # noqa: F401

    import run
    import tfrecorder_lite
    return pd, run, tfrecorder_lite


def run_context(args):
    """``run.py``'s Context: the table (for the count of TRAIN), the library, and the records
    its hand-tuned tf.data reader reads (``train*.tfrecord`` of the output)."""
    pd, run, tfrecorder_lite = child_imports()
    return run.Context(df=pd.read_csv(args.csv), workdir=args.workdir, src_bytes=0,
                       lib=tfrecorder_lite, fixtures={"tutorial": Path(args.out)})


TIMED_CPU = {}  # the CPU seconds of this process's timed part (``timed``), for its result


def cpu_seconds():
    """CPU seconds of this process and of its children waited for (DataLoader's workers)."""
    import resource

    return sum(usage.ru_utime + usage.ru_stime for usage in
               (resource.getrusage(resource.RUSAGE_SELF),
                resource.getrusage(resource.RUSAGE_CHILDREN)))


def timed(function):
    """``(seconds, result)`` of ``function()``; its CPU seconds go to ``TIMED_CPU``."""
    cpu, start = cpu_seconds(), time.perf_counter()
    result = function()
    seconds = time.perf_counter() - start
    TIMED_CPU["cpu"] = cpu_seconds() - cpu
    return seconds, result


def first_batch(args, url):
    _, _, tfrecorder_lite = child_imports()

    def first():
        dataset = tfrecorder_lite.load(url, "TRAIN", batch_size=BATCH, image_size=IMAGE_SIZE)
        images, _ = next(iter(dataset))
        return int(images.shape[0])
    seconds, images = timed(first)
    return {"seconds": seconds, "images": images}


def epoch(args, url, **options):
    """One epoch of ``load(url, "TRAIN", batch_size=64, image_size=(224, 224), **options)``
    (``run.py``'s ``_lib_load``, which counts the images)."""
    import run

    ctx = run_context(args)
    seconds, outcome = timed(lambda: run._lib_load(ctx, url, **options))
    return {"seconds": seconds, "images": outcome.items}


def folder_bytes(folder):
    """Total size of the files under ``folder`` (0 while it is missing)."""
    total = 0
    for parent, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(parent, name)).st_size
            except FileNotFoundError:  # evicted while we looked
                pass
    return total


def disk_usage(folder):
    """Bytes ``du -sk`` gives for ``folder`` (disk blocks, folders included)."""
    out = subprocess.run(["du", "-sk", str(folder)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0]) * 1024


def bounded_epoch(args, shuffle):
    """An epoch from the store with ``cache_limit=16 MiB`` in ``args.cache_dir``, the cache
    folder's size watched while it runs."""
    peak, done = [0], threading.Event()

    def watch():
        while not done.wait(0.02):
            peak[0] = max(peak[0], folder_bytes(args.cache_dir))
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = epoch(args, args.url, shuffle=shuffle, seed=SEED, cache_dir=args.cache_dir,
                       cache_limit=SMALL_LIMIT)
    finally:
        done.set()
        watcher.join()
    after = folder_bytes(args.cache_dir)
    return {**result, "cache_bytes": after, "cache_du": disk_usage(args.cache_dir),
            "cache_peak": max(peak[0], after)}


def large_limit(args):
    """A cache limit larger than the split: twice its shards' bytes, at least 1 GiB."""
    return max(1 << 30, 2 * train_bytes(args.out))


def collate(records):
    """A batch of data_source records: stacked uint8 images and int64 labels, stacked by
    PyTorch's ``default_collate`` (in a worker, straight into the shared memory the batch
    travels in, as the DataLoader's default collation does)."""
    import torch
    from torch.utils.data import default_collate

    images = default_collate([torch.from_numpy(record["image"]) for record in records])
    labels = torch.tensor([int(record["image/class/label"]) for record in records])
    return images, labels


def torch_loader(args):
    """PyTorch's DataLoader over data_source(decode_image=True, image_size=(224, 224))."""
    import torch  # noqa: F401
    from torch.utils.data import DataLoader

    _, _, tfrecorder_lite = child_imports()
    try:
        tfrecorder_lite.data_source(args.out, "TRAIN", decode_image=True, image_size=IMAGE_SIZE)
    except TypeError as exc:
        if "image_size" not in str(exc):
            raise
        return {"na": f"data_source() takes no image_size: {exc}"}

    def one_epoch():
        source = tfrecorder_lite.data_source(args.out, "TRAIN", decode_image=True,
                                             image_size=IMAGE_SIZE)
        loader = DataLoader(source, batch_size=BATCH, shuffle=True, num_workers=2,
                            collate_fn=collate)
        return sum(len(labels) for _, labels in loader)
    seconds, images = timed(one_epoch)
    return {"seconds": seconds, "images": images}


def tuned_tfdata(args):
    """run.py's hand-tuned tf.data reader (parse, decode, 224x224, batches of 64)."""
    import run

    ctx = run_context(args)
    seconds, outcome = timed(lambda: run._tfdata_read(ctx, decode=True))
    return {"seconds": seconds, "images": outcome.items}


def all_records(out):
    """Records of every split of the output."""
    import tfrecorder_lite

    return sum(len(tfrecorder_lite.data_source(out, split))
               for split in tfrecorder_lite.read_metadata(out)["splits"])


def raw_tfdata(args):
    import training_reads

    child_imports()
    return {"seconds": training_reads.raw_sequential(args.out), "images": all_records(args.out)}


def random_data_source(args):
    import training_reads

    child_imports()
    return {"seconds": training_reads.random_access(args.out, SEED),
            "images": all_records(args.out)}


# name -> (what it is, reads the store, function of the child's args)
CASES = {
    "first_local": ("first batch, folder", False,
                    lambda a: first_batch(a, a.out)),
    "first_store": ("first batch, store", True,
                    lambda a: first_batch(a, a.url)),
    "seq_local": ("epoch, sequential, folder", False,
                  lambda a: epoch(a, a.out)),
    "seq_store": ("epoch, sequential, store", True,
                  lambda a: epoch(a, a.url)),
    "torch_data_source": ("DataLoader(2 workers) over data_source, folder", False,
                          torch_loader),
    "tuned_tfdata": ("hand-tuned tf.data reader, folder", False, tuned_tfdata),
    "global_local": ('epoch, shuffle="global", folder', False,
                     lambda a: epoch(a, a.out, shuffle="global", seed=SEED)),
    "global_store": ('epoch, shuffle="global", store', True,
                     lambda a: epoch(a, a.url, shuffle="global", seed=SEED)),
    "shuffle_local": ("epoch, shuffle=True, folder", False,
                      lambda a: epoch(a, a.out, shuffle=True, seed=SEED)),
    "limit16_seq": ("epoch, sequential, store, cache_limit=16 MiB", True,
                    lambda a: bounded_epoch(a, False)),
    "limit16_global": ('epoch, shuffle="global", store, cache_limit=16 MiB', True,
                       lambda a: bounded_epoch(a, "global")),
    "warm_epoch1": ("epoch 1, store, cache_limit > split", True,
                    lambda a: epoch(a, a.url, cache_dir=a.cache_dir,
                                    cache_limit=large_limit(a))),
    "warm_epoch2": ("epoch 2 (new process, same cache), store", True,
                    lambda a: epoch(a, a.url, cache_dir=a.cache_dir,
                                    cache_limit=large_limit(a))),
    "raw_tfdata": ("tf.data sequential raw read, every split, folder", False, raw_tfdata),
    "random_data_source": ("data_source random reads, every split, folder", False,
                           random_data_source),
}

# Cases run back to back; the groups' order rotates each round. A group's cases that share a
# cache folder get one fresh folder a round (``cache``).
GROUPS = {
    "first": (("first_local", "first_store"), False),
    "sequential": (("seq_local", "seq_store", "torch_data_source", "tuned_tfdata"), False),
    "global": (("global_local", "global_store", "shuffle_local"), False),
    "limit16": (("limit16_seq", "limit16_global"), False),
    "warm": (("warm_epoch1", "warm_epoch2"), True),
    "raw": (("raw_tfdata", "random_data_source"), False),
}
NEEDS_CACHE_DIR = {"limit16_seq", "limit16_global", "warm_epoch1", "warm_epoch2"}


def child_main(args):
    """Run one case and print its result as the last line of stdout."""
    try:
        result = CASES[args.child][2](args)
    except Exception as exc:  # the row shows it; the other cases still run
        traceback.print_exc()
        result = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps({**TIMED_CPU, **result}), flush=True)


# --------------------------------------------------------------------------
# The driver: the output, the store, the rounds, the report
# --------------------------------------------------------------------------

def train_bytes(out):
    """Bytes of the TRAIN shards."""
    return sum(path.stat().st_size for path in Path(out).glob("train-*.tfrecord"))


def make_output(args):
    """The set converted with ``--shards`` shards a split (once; reused after)."""
    out = args.workdir / f"bucket_n{args.images}_s{args.shards}" / "out"
    if not (out / "metadata.json").exists():
        import pandas as pd

        import tfrecorder_lite  # noqa: F401  (the .tfrecord accessor)

        table = pd.read_csv(args.csv)
        print(bench.describe_dataset(table), file=sys.stderr)
        shutil.rmtree(out, ignore_errors=True)
        table.tfrecord.to_tfrecord(out, num_shards=args.shards, progress=False)
    for path in out.iterdir():  # the page cache holds every shard
        if path.is_file():
            path.read_bytes()
    return out


class SlowStore:
    """benchmarks/slow_store.py serving ``root`` in a child process."""

    def __init__(self, root, latency, mbps):
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "slow_store.py"), str(root), str(latency), str(mbps)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.port = int(self.process.stdout.readline())

    def stats(self):
        """``{"requests": n, "bytes": n}`` served so far, once it stops changing (a reader
        that has exited may leave responses being sent)."""
        last = None
        for _ in range(20):
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/__stats") as answer:
                now = json.loads(answer.read())
            if now == last:
                return now
            last = now
            time.sleep(0.1)
        return last

    def cpu_seconds(self):
        """CPU seconds the store's process has used so far (None: no ``/proc`` here)."""
        try:
            with open(f"/proc/{self.process.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.process.stdin.close()
        self.process.wait(timeout=30)


def run_case(name, args, url, store, cache_dir):
    """Run one case in a fresh process; its result, with the store's bytes and requests."""
    command = [sys.executable, __file__, "--child", name, "--out", str(args.out), "--url", url,
               "--csv", str(args.csv), "--workdir", str(args.workdir)]
    if cache_dir:
        command += ["--cache-dir", cache_dir]
    before, store_cpu = store.stats(), store.cpu_seconds()
    done = subprocess.run(command, capture_output=True, text=True)
    after, store_cpu_after = store.stats(), store.cpu_seconds()
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        result = {"error": tail[0]}
    if "error" in result:
        print(f"{name} failed:\n{done.stderr[-3000:]}", file=sys.stderr)
    result["fetched"] = after["bytes"] - before["bytes"]
    result["requests"] = after["requests"] - before["requests"]
    if store_cpu is not None:  # the store's own work for this case (on the same cores)
        result["store_cpu"] = store_cpu_after - store_cpu
    return result


def run_rounds(args, url, store, groups):
    """Every case of ``groups`` once a round; name -> [result of each round]."""
    results = {name: [] for group in groups for name in GROUPS[group][0]}
    for r in range(args.rounds):
        for group in groups[r % len(groups):] + groups[:r % len(groups)]:
            names, shared = GROUPS[group]
            cache_dir = tempfile.mkdtemp(prefix="tfrl-bucket-cache-", dir=args.workdir)
            try:
                for name in names:
                    if not shared and name in NEEDS_CACHE_DIR:  # a fresh folder each case
                        shutil.rmtree(cache_dir)
                        os.mkdir(cache_dir)
                    result = run_case(name, args, url, store,
                                      cache_dir if name in NEEDS_CACHE_DIR else None)
                    results[name].append(result)
                    print(f"round {r}: {name}: {brief(result)}", file=sys.stderr)
            finally:
                shutil.rmtree(cache_dir, ignore_errors=True)
    return results


def brief(result):
    if "error" in result or "na" in result:
        return result.get("error") or result["na"]
    return (f"{result['seconds']:.2f} s, {result['images']} images, "
            f"{result['fetched'] / 1e6:.1f} MB fetched")


def median(results, key):
    values = [r[key] for r in results if key in r]
    return statistics.median(values) if values else None


def rate(results):
    """Median images/s of a case's rounds (None: it never ran)."""
    values = [r["images"] / r["seconds"] for r in results if "seconds" in r]
    return statistics.median(values) if values else None


def ratio(results, head, base):
    """``(ratio of median images/s, [per-round ratios])`` of case ``head`` over ``base``."""
    if not results.get(head) or not results.get(base):
        return None, []
    heads, bases = rate(results[head]), rate(results[base])
    per_round = [(h["images"] / h["seconds"]) / (b["images"] / b["seconds"])
                 for h, b in zip(results[head], results[base])
                 if "seconds" in h and "seconds" in b]
    return (heads / bases if heads and bases else None), per_round


def table(results):
    """The table: each case's median seconds (min-max), images/s and bytes fetched."""
    lines = ["| case | what | median s (min-max) | images/s | CPU s (+ store's) | MB fetched | "
             "notes |", "|---|---|---|---:|---:|---:|---|"]
    for name, rounds in results.items():
        what, from_store, _ = CASES[name]
        seconds = [r["seconds"] for r in rounds if "seconds" in r]
        notes = sorted({r.get("error") or r.get("na") for r in rounds} - {None})
        timing = (f"{statistics.median(seconds):.2f} ({min(seconds):.2f}-{max(seconds):.2f})"
                  if seconds else "-")
        speed = f"{rate(rounds):,.0f}" if seconds else "-"
        fetched = f"{median(rounds, 'fetched') / 1e6:.1f}" if from_store and seconds else ""
        cpu, served = median(rounds, "cpu"), median(rounds, "store_cpu")
        cpu = "-" if cpu is None else f"{cpu:.2f}" + (
            f" (+ {served:.2f})" if from_store and served is not None else "")
        cached = [r for r in rounds if "cache_bytes" in r]
        if cached:
            notes.insert(0, f"cache after {mib(max(r['cache_bytes'] for r in cached))} "
                            f"(du {mib(max(r['cache_du'] for r in cached))}), "
                            f"peak {mib(max(r['cache_peak'] for r in cached))}")
        lines.append(f"| {name} | {what} | {timing} | {speed} | {cpu} | {fetched} | "
                     f"{'; '.join(notes)} |")
    return lines


def mib(n):
    return f"{n / (1 << 20):.2f} MiB"


def verdict(ok):
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def speed_bound(results, head, base, floor, label):
    value, per_round = ratio(results, head, base)
    ok = None if value is None else value >= floor
    shown = "-" if value is None else f"{value:.2f}x"
    return (f"{verdict(ok)}  {label}: {shown} (>= {floor}x; per round "
            f"{', '.join(f'{x:.2f}' for x in per_round) or '-'})")


def bounds(results, expected, split_bytes):
    """Issue 44's bounds that these cases measure, each PASS, FAIL or n/a."""
    lines = []
    if results.get("first_store") and results.get("first_local"):
        local, store = median(results["first_local"], "seconds"), \
            median(results["first_store"], "seconds")
        gap = None if local is None or store is None else store - local
        lines.append(f"{verdict(None if gap is None else gap <= 1.0)}  first batch from the "
                     f"store within 1.0 s of the local one: "
                     + ("-" if gap is None else f"{store:.2f} s - {local:.2f} s = {gap:+.2f} s"))
    for head, base, floor, label in (
            ("seq_store", "seq_local", 0.9, "epoch from the store / local, sequential"),
            ("global_store", "global_local", 0.9, 'epoch from the store / local, "global"'),
            ("torch_data_source", "seq_local", 0.8, "DataLoader over data_source / load()"),
            ("global_local", "shuffle_local", 0.9, 'load(shuffle="global") / shuffle=True'),
            ("random_data_source", "raw_tfdata", 1.0,
             "data_source random reads / tf.data sequential raw read"),
            ("seq_local", "tuned_tfdata", 1.0, "load() / the hand-tuned tf.data reader")):
        if head in results and base in results:
            lines.append(speed_bound(results, head, base, floor, label))
    for name in ("limit16_seq", "limit16_global"):
        rounds = [r for r in results.get(name, []) if "cache_bytes" in r]
        if name in results:
            ok = bool(rounds) and len(rounds) == len(results[name]) and all(
                r["images"] == expected and r["cache_peak"] <= SMALL_LIMIT for r in rounds)
            most = max((r["cache_peak"] for r in rounds), default=0)
            lines.append(f"{verdict(ok)}  {name}: every epoch complete ({expected} images) and "
                         f"the cache folder <= 16 MiB during and after it (most seen {mib(most)}"
                         f" of file bytes, split {split_bytes / 1e6:.1f} MB)")
    if results.get("warm_epoch1") and results.get("warm_epoch2"):
        pairs = [(a["fetched"], b["fetched"]) for a, b in
                 zip(results["warm_epoch1"], results["warm_epoch2"])
                 if "seconds" in a and "seconds" in b]
        shares = [second / first for first, second in pairs if first]
        ok = None if not shares else max(shares) < 0.05
        lines.append(f"{verdict(ok)}  second epoch in a new process fetches < 5% of the first: "
                     + ", ".join(f"{second / 1e6:.1f} MB / {first / 1e6:.1f} MB"
                                 for first, second in pairs))
    return lines


def work(results):
    """What a store epoch costs the machine beside the folder's: the CPU seconds of the
    reader and of the store (both on this machine's cores) against the folder epoch's.
    While an epoch keeps every core busy, its speed can be at most about the folder's CPU
    over the store's whole CPU."""
    lines = []
    for store_case, local_case in (("seq_store", "seq_local"), ("global_store", "global_local")):
        reader, local = median(results.get(store_case, []), "cpu"), \
            median(results.get(local_case, []), "cpu")
        served = median(results.get(store_case, []), "store_cpu")
        if None in (reader, local, served):
            continue
        lines.append(f"{store_case}: reader {reader:.2f} + store {served:.2f} CPU s against "
                     f"{local:.2f} from the folder ({(reader + served) / local - 1:+.0%} work; "
                     f"at equal use of the cores, at most {local / (reader + served):.2f}x)")
    return lines


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds a request")
    parser.add_argument("--mbps", type=float, default=5.0, help="MB/s a connection")
    parser.add_argument("--shards", type=int, default=16, help="shards a split")
    parser.add_argument("--groups", default=",".join(GROUPS),
                        help="groups of cases to run, of " + ", ".join(GROUPS))
    parser.add_argument("--workdir", type=Path, default=bench.DEFAULT_WORKDIR)
    for hidden in ("--child", "--out", "--url", "--csv", "--cache-dir"):  # a case's process
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        return child_main(args)
    started = time.perf_counter()
    groups = args.groups.split(",")
    unknown = set(groups) - set(GROUPS)
    if unknown:
        raise SystemExit(f"unknown groups {sorted(unknown)}: choose from {', '.join(GROUPS)}")
    args.csv = bench.generate_dataset(args.images, args.workdir)
    args.out = make_output(args)
    import tfrecorder_lite

    expected = len(tfrecorder_lite.data_source(args.out, "TRAIN"))
    split_bytes = train_bytes(args.out)
    store = SlowStore(args.out.parent, args.latency, args.mbps)
    try:
        url = f"http://127.0.0.1:{store.port}/{args.out.name}"
        results = run_rounds(args, url, store, groups)
    finally:
        store.stop()
    print(f"{args.images} images: TRAIN {expected} records, {split_bytes / 1e6:.1f} MB in "
          f"{args.shards} shards; store {args.latency * 1000:.0f} ms a request, "
          f"{args.mbps:g} MB/s a connection; {args.rounds} rounds, each case a fresh process; "
          f"load average {os.getloadavg()[0]:.2f}")
    print("\n".join(table(results)))
    print()
    print("\n".join(bounds(results, expected, split_bytes)))
    print("\n".join(["", *work(results)]))
    print(f"\n(two different permutations per iteration and tf.train.Checkpoint resume are "
          f"checked by the tests, not here); {time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
