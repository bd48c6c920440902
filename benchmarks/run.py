"""Benchmark tfrecorder_lite against hand-written baseline recipes.

Generates (or reuses) a seeded, photo-like image dataset, then times plain
recipes (raw I/O, the TensorFlow tutorial writer, Pillow decode/resize, a
hand-tuned tf.data reader) and the library's write/load paths in one run.
Repeats are interleaved round-robin and reported as medians, because the
machine this runs on is shared and noisy.

Usage:
    python benchmarks/run.py --images 3000 --repeats 3
    python benchmarks/run.py --both --repeats 5 --remote --cluster   # every row, both sets
    python benchmarks/run.py --images 3000 --only tutorial_recipe,lib_write_header
    python benchmarks/run.py --images 3000 --profile lib_write_decode
    python benchmarks/run.py --scale
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

import recipes
from dataset import (DEFAULT_WORKDIR, SEED, describe_dataset, generate_dataset,  # noqa: F401
                     warm_page_cache)
from recipes import IMAGE_SIZE

REPO_ROOT = Path(__file__).resolve().parent.parent
BATCH_SIZE = 64
SCALE_SIZES = (2_000, 20_000)
RSS_SAMPLE_SECONDS = 0.2


# --------------------------------------------------------------------------
# Benchmark plumbing
# --------------------------------------------------------------------------

@dataclass
class Outcome:
    """What one timed run produced.

    Attributes:
        items: Images processed (the images/s numerator).
        out_bytes: Bytes produced in memory, if not written to the output dir.
        result: Library return value, kept for the details section.
    """

    items: int
    out_bytes: int | None = None
    result: Any = None


@dataclass
class Context:
    """Everything the paths need: dataset, directories, library, fixtures."""

    df: pd.DataFrame
    workdir: Path
    src_bytes: int
    lib: Any = None
    lib_error: str | None = None
    fixtures: dict[str, Path] = field(default_factory=dict)
    latency: float = 0.02
    shared: dict[str, Any] = field(default_factory=dict)
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def once(self, name: str, build: Callable[[], Any], cleanup: Callable[[Any], None] | None
             = None) -> Any:
        """Builds a shared object (a server, a cluster) once, untimed; ``cleanup`` ends it when
        the run ends."""
        if name not in self.shared:
            self.shared[name] = build()
            if cleanup is not None:
                self.cleanups.append(lambda: cleanup(self.shared[name]))
        return self.shared[name]

    @property
    def n_train(self) -> int:
        """Number of TRAIN images (what the read paths iterate over)."""
        return int((self.df["split"] == "TRAIN").sum())

    def require_lib(self) -> Any:
        """Returns the library module or raises the import error."""
        if self.lib is None:
            raise RuntimeError(f"import tfrecorder_lite failed: {self.lib_error}")
        return self.lib

    def fixture(self, name: str, build: Callable[[Path], Any]) -> Path:
        """Builds a fixture directory once (untimed) and returns its path."""
        if name not in self.fixtures:
            path = self.workdir / "fixtures" / name
            shutil.rmtree(path, ignore_errors=True)
            build(path)
            self.fixtures[name] = path
        return self.fixtures[name]


@dataclass(frozen=True)
class BenchPath:
    """One row of the table.

    Attributes:
        name: Row name (also used by --only and --profile).
        run: Timed function `(ctx, out_dir) -> Outcome`.
        baseline: Row whose images/s this row is compared to.
        setup: Untimed function run once before the first repeat.
        what: Short description for the table.
        max_rounds: Run in the first this many rounds only (for rows that take minutes).
        same_bytes_as: Row whose shards this row's must equal byte for byte (checked on the
            first run of each, noted in the table).
    """

    name: str
    run: Callable[[Context, Path], Outcome]
    baseline: str | None = None
    setup: Callable[[Context], None] | None = None
    what: str = ""
    max_rounds: int | None = None
    same_bytes_as: str | None = None


@dataclass
class PathResult:
    """Measurements of one path over all repeats."""

    seconds: list[float] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    shard_digest: str | None = None
    items: int = 0
    out_bytes: int | None = None
    shard_bytes: int | None = None
    records: int | None = None
    result_repr: str | None = None
    error: str | None = None

    @property
    def rate(self) -> float | None:
        """Median images per second, or None if nothing was measured."""
        if not self.seconds:
            return None
        return self.items / statistics.median(self.seconds)


def dir_bytes(path: Path) -> tuple[int, int, list[Path]]:
    """Returns (total bytes, TFRecord shard bytes, shard paths) under `path`."""
    total, shard_total, shards = 0, 0, []
    if not path.exists():
        return 0, 0, []
    if path.is_file():
        return path.stat().st_size, 0, []
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        size = file.stat().st_size
        total += size
        if "tfrecord" in file.name.lower():
            shard_total += size
            shards.append(file)
    return total, shard_total, shards


def count_records(shards: list[Path]) -> int:
    """Counts records in uncompressed TFRecord files (untimed sanity check)."""
    import tensorflow as tf

    ds = tf.data.TFRecordDataset([str(p) for p in shards])
    return int(ds.reduce(np.int64(0), lambda n, _: n + 1).numpy())


def leading_dim(batch: Any) -> int:
    """Batch size of a (possibly nested) batch: first tensor's first dim."""
    import tensorflow as tf

    return int(tf.nest.flatten(batch)[0].shape[0])


# --------------------------------------------------------------------------
# Baseline recipes
# --------------------------------------------------------------------------

def io_floor(ctx: Context, out_dir: Path) -> Outcome:
    """Reads every file and appends its bytes to one output file."""
    recipes.io_floor(ctx.df, out_dir)
    return Outcome(items=len(ctx.df))


def tutorial_recipe(ctx: Context, out_dir: Path) -> Outcome:
    """TF tutorial style: one process, one TFRecord file per split."""
    recipes.tutorial_recipe(ctx.df, out_dir)
    return Outcome(items=len(ctx.df))


def pillow_decode(ctx: Context, out_dir: Path) -> Outcome:
    """Opens and fully decodes every image with Pillow (one process)."""
    recipes.pillow_decode(ctx.df)
    return Outcome(items=len(ctx.df))


def pillow_resize(ctx: Context, out_dir: Path) -> Outcome:
    """Pillow decode, bilinear resize to 224x224, JPEG q90 encode to bytes."""
    return Outcome(items=len(ctx.df), out_bytes=recipes.pillow_resize(ctx.df))


def _tutorial_fixture(ctx: Context) -> Path:
    """Records written by `tutorial_recipe`, built once, untimed."""
    return ctx.fixture("tutorial", lambda path: tutorial_recipe(ctx, path))


def _tfdata_read(ctx: Context, decode: bool) -> Outcome:
    """Hand-tuned tf.data epoch over the tutorial's TRAIN records."""
    import tensorflow as tf

    features = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse(record):
        ex = tf.io.parse_single_example(record, features)
        return ex["image/encoded"], ex["image/class/label"]

    def parse_and_decode(record):
        encoded, label = parse(record)
        image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
        image = tf.cast(tf.image.resize(image, IMAGE_SIZE), tf.uint8)
        return image, label

    pattern = str(_tutorial_fixture(ctx) / "train*.tfrecord")
    files = tf.data.Dataset.list_files(pattern, shuffle=False)
    ds = files.interleave(tf.data.TFRecordDataset, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.map(parse_and_decode if decode else parse, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(BATCH_SIZE).prefetch(tf.data.AUTOTUNE)
    n = 0
    for images, _ in ds:
        n += int(images.shape[0])
    return Outcome(items=n)


def tfdata_read(ctx: Context, out_dir: Path) -> Outcome:
    """tf.data read + parse + decode + resize of the tutorial TRAIN records."""
    return _tfdata_read(ctx, decode=True)


def tfdata_read_raw(ctx: Context, out_dir: Path) -> Outcome:
    """tf.data read + parse only (no decode) of the tutorial TRAIN records."""
    return _tfdata_read(ctx, decode=False)


# --------------------------------------------------------------------------
# Library paths
# --------------------------------------------------------------------------

def _lib_write(ctx: Context, out_dir: Path, **kwargs: Any) -> Outcome:
    """Calls `df.tfrecord.to_tfrecord(out_dir, overwrite=True, progress=False, ...)`."""
    ctx.require_lib()
    result = ctx.df.tfrecord.to_tfrecord(str(out_dir), overwrite=True, progress=False, **kwargs)
    return Outcome(items=len(ctx.df), result=result)


def lib_write_header(ctx: Context, out_dir: Path) -> Outcome:
    """Library write, kept as encoded, check="header"."""
    return _lib_write(ctx, out_dir, check="header")


def lib_write_decode(ctx: Context, out_dir: Path) -> Outcome:
    """Library write with the default check ("decode")."""
    return _lib_write(ctx, out_dir)


def lib_write_resize(ctx: Context, out_dir: Path) -> Outcome:
    """Library write, resized to 224x224."""
    return _lib_write(ctx, out_dir, image_size=IMAGE_SIZE)


def _lib_fixture(ctx: Context, resized: bool) -> Path:
    """Library-written records (default or 224x224), built once, untimed."""
    kwargs = {"image_size": IMAGE_SIZE} if resized else {}
    name = "lib_224" if resized else "lib_default"
    return ctx.fixture(name, lambda path: _lib_write(ctx, path, **kwargs))


def _lib_load(ctx: Context, records: Path, **options: Any) -> Outcome:
    """Iterates one epoch of `tfrecorder_lite.load(records, split="TRAIN", ...)`."""
    lib = ctx.require_lib()
    options = {"batch_size": BATCH_SIZE, "image_size": IMAGE_SIZE, **options}
    ds = lib.load(str(records), split="TRAIN", **options)
    n, limit = 0, 2 * ctx.n_train + BATCH_SIZE
    for batch in ds:
        n += leading_dim(batch) if options["batch_size"] else 1
        if n > limit:
            raise RuntimeError(f"load() yielded > {limit} images: does it repeat?")
    return Outcome(items=n)


def lib_load(ctx: Context, out_dir: Path) -> Outcome:
    """load() of records written with the default (kept-as-encoded) write."""
    return _lib_load(ctx, _lib_fixture(ctx, resized=False))


def lib_load_autotune(ctx: Context, out_dir: Path) -> Outcome:
    """lib_load with tf.data's autotuner on, whatever the cores (load() turns it off on few)."""
    from tfrecorder_lite.read import loader

    kept = loader._AUTOTUNE_OFF_UP_TO_CORES
    loader._AUTOTUNE_OFF_UP_TO_CORES = 0
    try:
        return _lib_load(ctx, _lib_fixture(ctx, resized=False))
    finally:
        loader._AUTOTUNE_OFF_UP_TO_CORES = kept


def lib_load_no_autotune(ctx: Context, out_dir: Path) -> Outcome:
    """lib_load with tf.data's autotuner off, whatever the cores."""
    from tfrecorder_lite.read import loader

    kept = loader._AUTOTUNE_OFF_UP_TO_CORES
    loader._AUTOTUNE_OFF_UP_TO_CORES = 1 << 20
    try:
        return _lib_load(ctx, _lib_fixture(ctx, resized=False))
    finally:
        loader._AUTOTUNE_OFF_UP_TO_CORES = kept


def lib_load_fast_idct(ctx: Context, out_dir: Path) -> Outcome:
    """lib_load with TensorFlow's default (fast, inexact) JPEG IDCT."""
    return _lib_load(ctx, _lib_fixture(ctx, resized=False), dct_method="")


def lib_load_full(ctx: Context, out_dir: Path) -> Outcome:
    """load() at full size, unbatched: every JPEG decoded whole (accurate IDCT)."""
    return _lib_load(ctx, _lib_fixture(ctx, resized=False), batch_size=None, image_size=None)


def lib_load_full_fast_idct(ctx: Context, out_dir: Path) -> Outcome:
    """lib_load_full with TensorFlow's default (fast, inexact) JPEG IDCT."""
    return _lib_load(ctx, _lib_fixture(ctx, resized=False), batch_size=None, image_size=None,
                     dct_method="")


def lib_load_resized(ctx: Context, out_dir: Path) -> Outcome:
    """load() of records written with image_size=(224, 224)."""
    return _lib_load(ctx, _lib_fixture(ctx, resized=True))


def _image_store(ctx: Context) -> Any:
    """The table's images in a local GCS emulator answering every request `ctx.latency` late
    (benchmarks/remote.py), started and filled once, untimed."""
    def start() -> Any:
        import remote  # sets up the object-store clients' environment; imports the emulator

        return remote.ImageStore(ctx.df, ctx.latency)

    return ctx.once("image_store", start, lambda store: store.server.stop())


def remote_sequential_get(ctx: Context, out_dir: Path) -> Outcome:
    """GETs every image from the store, one request at a time (the plain loop)."""
    _image_store(ctx).sequential_get()
    return Outcome(items=len(ctx.df))


def _lib_write_remote(ctx: Context, out_dir: Path, check: str) -> Outcome:
    """The library write of the same table with every image read from the store."""
    store = _image_store(ctx)
    table = ctx.once("remote_table", lambda: ctx.df.assign(image_uri=store.urls))
    ctx.require_lib()
    result = table.tfrecord.to_tfrecord(str(out_dir), check=check, progress=False,
                                        storage_options=store.options)
    return Outcome(items=len(ctx.df), result=result)


def lib_write_remote(ctx: Context, out_dir: Path) -> Outcome:
    """Library write (check="decode") of images in the latency-injected store."""
    return _lib_write_remote(ctx, out_dir, "decode")


def lib_write_remote_header(ctx: Context, out_dir: Path) -> Outcome:
    """Library write (check="header") of images in the latency-injected store."""
    return _lib_write_remote(ctx, out_dir, "header")


CLUSTER_SHARDS = 8  # per split, so that the cluster has tasks to spread


def _dask_client(ctx: Context) -> Any:
    """A dask LocalCluster (2 worker processes x 1 thread, 127.0.0.1), started once."""
    def start() -> Any:
        import distributed

        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           host="127.0.0.1", dashboard_address=None)
        return distributed.Client(cluster)

    def stop(client: Any) -> None:
        cluster = client.cluster
        client.close()
        cluster.close()

    return ctx.once("dask", start, stop)


def lib_write_sharded(ctx: Context, out_dir: Path) -> Outcome:
    """Library write (check="decode") in CLUSTER_SHARDS shards per split, local backend."""
    return _lib_write(ctx, out_dir, num_shards=CLUSTER_SHARDS)


def lib_write_dask(ctx: Context, out_dir: Path) -> Outcome:
    """lib_write_sharded with the shard tasks on the dask LocalCluster."""
    import joblib

    _dask_client(ctx)
    with joblib.parallel_config(backend="dask"):
        return _lib_write(ctx, out_dir, num_shards=CLUSTER_SHARDS)


def _kept_records(ctx: Context) -> Path:
    """The default write's records (images kept as encoded), made once for the load rows."""
    return _lib_fixture(ctx, resized=False)


PATHS = (
    BenchPath("io_floor", io_floor, what="read all files, append to one file"),
    BenchPath("tutorial_recipe", tutorial_recipe, what="TFRecordWriter, 1 file/split"),
    BenchPath("pillow_decode", pillow_decode, what="Pillow open + load()"),
    BenchPath("pillow_resize", pillow_resize, what="Pillow decode, 224 bilinear, JPEG q90"),
    BenchPath("tfdata_read_raw", tfdata_read_raw, setup=_tutorial_fixture,
              what="tf.data read+parse, TRAIN"),
    BenchPath("tfdata_read", tfdata_read, setup=_tutorial_fixture,
              what="tf.data read+decode+resize 224, TRAIN"),
    BenchPath("lib_write_header", lib_write_header, baseline="tutorial_recipe",
              what='to_tfrecord(check="header")'),
    BenchPath("lib_write_decode", lib_write_decode, baseline="pillow_decode",
              what="to_tfrecord() (check=decode)"),
    BenchPath("lib_write_resize", lib_write_resize, baseline="pillow_resize",
              what="to_tfrecord(image_size=224)"),
    BenchPath("lib_load", lib_load, baseline="tfdata_read",
              setup=_kept_records,
              what="load(TRAIN, 224) of kept-encoded records"),
    BenchPath("lib_load_autotune", lib_load_autotune, baseline="lib_load_no_autotune",
              setup=_kept_records, what="lib_load, tf.data's autotuner on"),
    BenchPath("lib_load_no_autotune", lib_load_no_autotune, baseline="lib_load",
              setup=_kept_records, what="lib_load, tf.data's autotuner off"),
    BenchPath("lib_load_fast_idct", lib_load_fast_idct, baseline="lib_load",
              setup=_kept_records,
              what='lib_load with dct_method="" (fast IDCT)'),
    BenchPath("lib_load_full", lib_load_full, baseline="tfdata_read",
              setup=_kept_records,
              what="load(TRAIN) full size, unbatched"),
    BenchPath("lib_load_full_fast_idct", lib_load_full_fast_idct, baseline="lib_load_full",
              setup=_kept_records,
              what='lib_load_full with dct_method="" (fast IDCT)'),
    BenchPath("lib_load_resized", lib_load_resized, baseline="lib_load",
              setup=lambda ctx: _lib_fixture(ctx, resized=True),
              what="load(TRAIN, 224) of 224x224 records"),
)

# --remote: images behind a latency-injected object store (GCS emulator), local output
REMOTE_PATHS = (
    BenchPath("remote_sequential_get", remote_sequential_get, setup=_image_store, max_rounds=2,
              what="GET each image from the store in turn (a plain loop)"),
    BenchPath("lib_write_remote", lib_write_remote, baseline="remote_sequential_get",
              setup=_image_store, what="lib_write_decode, images in the store"),
    BenchPath("lib_write_remote_header", lib_write_remote_header,
              baseline="remote_sequential_get", setup=_image_store,
              what="lib_write_header, images in the store"),
)

# --cluster: the same shard tasks on a dask LocalCluster and on the local joblib backend
CLUSTER_PATHS = (
    BenchPath("lib_write_sharded", lib_write_sharded, baseline="lib_write_decode",
              what=f"lib_write_decode, {CLUSTER_SHARDS} shards per split, local"),
    BenchPath("lib_write_dask", lib_write_dask, baseline="lib_write_sharded",
              setup=_dask_client, same_bytes_as="lib_write_sharded",
              what="lib_write_sharded on a dask LocalCluster (2 workers x 1 thread)"),
)

# extra ratios shown in a row's notes: (other row, what the ratio means)
NOTE_RATIOS = {
    "lib_load_resized": ("tfdata_read",),
    "lib_write_remote": ("lib_write_decode",),
    "lib_write_remote_header": ("lib_write_header",),
}


# --------------------------------------------------------------------------
# Running and reporting
# --------------------------------------------------------------------------

def _short_error(exc: BaseException) -> str:
    """One-line, table-safe error message."""
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ").replace("|", "/")
    return text[:160]


def import_library() -> tuple[Any, str | None]:
    """Imports TensorFlow (untimed) and tfrecorder_lite from the repo root."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow  # noqa: F401  (import cost must not count in any path)

    sys.path.insert(0, str(REPO_ROOT))
    try:
        import tfrecorder_lite
        import tfrecorder_lite.conversion  # noqa: F401  (loaded on first use: not timed either)
        import tfrecorder_lite.read.loader  # noqa: F401
    except Exception as exc:  # pragma: no cover - reported in the table
        traceback.print_exc()
        return None, _short_error(exc)
    if getattr(tfrecorder_lite, "__file__", None) is None:
        return None, "tfrecorder_lite has no __init__.py yet (namespace package)"
    return tfrecorder_lite, None


def shards_digest(shards: list[Path]) -> str:
    """sha256 over the names and bytes of shard files (untimed byte-identity check)."""
    digest = hashlib.sha256()
    for shard in sorted(shards):
        digest.update(shard.name.encode() + b"\0")
        with open(shard, "rb") as f:
            for block in iter(lambda: f.read(8 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def timed_run(path: BenchPath, ctx: Context, res: PathResult, first: bool,
              round_number: int = 0, digest: bool = False) -> None:
    """Runs one repeat of `path` in a fresh output dir and records it."""
    out_dir = ctx.workdir / "out" / path.name
    shutil.rmtree(out_dir, ignore_errors=True)
    gc.collect()
    # what earlier rows left to write back is written now, untimed: else the first fsync
    # after a row that does not sync (the recipes) pays for its bytes too (ext4 commits them)
    os.sync()
    try:
        start = time.perf_counter()
        outcome = path.run(ctx, out_dir)
        res.seconds.append(time.perf_counter() - start)
        res.rounds.append(round_number)
        res.items = outcome.items
        if first:
            total, shard_total, shards = dir_bytes(out_dir)
            res.out_bytes = outcome.out_bytes if outcome.out_bytes is not None else (total or None)
            res.shard_bytes = shard_total or None
            if outcome.result is not None:
                res.result_repr = repr(outcome.result)[:400]
            if shards and digest:
                res.shard_digest = shards_digest(shards)
            if shards and path.name.startswith("lib_write"):
                try:
                    res.records = count_records(shards)
                except Exception as exc:
                    res.result_repr = f"{res.result_repr} [record count failed: {_short_error(exc)}]"
    except Exception as exc:
        res.error = _short_error(exc)
        print(f"[{path.name}] failed:", file=sys.stderr)
        traceback.print_exc()
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def run_benchmarks(paths: list[BenchPath], ctx: Context, repeats: int) -> dict[str, PathResult]:
    """Runs setups, then `repeats` interleaved rounds over `paths`.

    The start of each round is rotated so no path always follows the same one.
    """
    results = {p.name: PathResult() for p in paths}
    for p in paths:
        if p.setup is not None:
            try:
                p.setup(ctx)
            except Exception as exc:
                results[p.name].error = f"setup: {_short_error(exc)}"
                traceback.print_exc()
    compared = {p.same_bytes_as for p in paths} | {p.name for p in paths if p.same_bytes_as}
    for rep in range(repeats):
        k = rep % len(paths)
        for p in paths[k:] + paths[:k]:
            res = results[p.name]
            if p.max_rounds is not None and rep >= p.max_rounds:
                continue
            if res.error is None:
                timed_run(p, ctx, res, first=not res.seconds, round_number=rep,
                          digest=p.name in compared)
                if res.seconds and res.error is None:
                    print(f"  round {rep + 1}/{repeats} {p.name:18s} "
                          f"{res.seconds[-1]:7.2f}s", file=sys.stderr)
    return results


def _mb(n: int | None) -> str:
    return "" if n is None else f"{n / 1e6:.1f} MB"


def _paired_ratio(res: PathResult, base: PathResult) -> float | None:
    """Median over rounds of this path's images/s over its baseline's in the same round.

    Each round runs every path back to back, so a ratio taken within a round is less
    exposed to the machine getting slower or faster between rounds.
    """
    if not res.items or not base.items:
        return None
    base_rounds = dict(zip(base.rounds, base.seconds))
    pairs = [(s, base_rounds[r]) for r, s in zip(res.rounds, res.seconds) if r in base_rounds]
    if not pairs:
        return None
    return statistics.median((res.items / s) / (base.items / b) for s, b in pairs)


def format_table(paths: list[BenchPath], results: dict[str, PathResult], ctx: Context) -> str:
    """Renders the results as a markdown table plus a details section."""
    lines = [
        "| path | what | images | images/s | vs baseline | median s (min-max) | output | notes |",
        "|---|---|---:|---:|---|---|---:|---|",
    ]
    details = []
    for p in paths:
        res = results[p.name]
        notes = []
        rate = res.rate
        if res.error:
            notes.append(f"ERROR: {res.error}")
        ratio = ""
        base = results.get(p.baseline) if p.baseline else None
        if base is not None and rate and base.rate:
            ratio = f"{rate / base.rate:.2f}x {p.baseline}"
            paired = _paired_ratio(res, base)
            if paired is not None:
                ratio += f" (per round {paired:.2f}x)"
        elif p.baseline and rate:
            ratio = f"- ({p.baseline} not run)"
        for other in NOTE_RATIOS.get(p.name, ()):
            if rate and results.get(other, PathResult()).rate:
                notes.append(f"{rate / results[other].rate:.2f}x {other}")
        if p.same_bytes_as and res.shard_digest:
            theirs = results.get(p.same_bytes_as, PathResult()).shard_digest
            if theirs:
                notes.append(f"shards {'identical to' if theirs == res.shard_digest else 'DIFFER from'}"
                             f" {p.same_bytes_as}'s")
        if p.max_rounds is not None and res.seconds:
            notes.append(f"{len(res.seconds)} round(s)")
        if res.shard_bytes and "resize" not in p.name:
            notes.append(f"shards/src bytes = {res.shard_bytes / ctx.src_bytes:.4f}")
        if res.records is not None and res.records != res.items:
            notes.append(f"record count {res.records} != {res.items} images")
        elif res.records is not None:
            notes.append(f"{res.records} records")
        expected = ctx.n_train if ("load" in p.name or "tfdata" in p.name) else len(ctx.df)
        if res.seconds and res.items != expected:
            notes.append(f"expected {expected} images")
        timing = ""
        if res.seconds:
            timing = (f"{statistics.median(res.seconds):.2f} "
                      f"({min(res.seconds):.2f}-{max(res.seconds):.2f})")
        lines.append(
            f"| {p.name} | {p.what} | {res.items or ''} | "
            f"{'' if rate is None else f'{rate:,.0f}'} | {ratio} | {timing} | "
            f"{_mb(res.out_bytes)} | {'; '.join(notes)} |")
        if res.result_repr:
            details.append(f"- {p.name}: {res.result_repr}")
    text = "\n".join(lines)
    if details:
        text += "\n\nLibrary return values (first run):\n" + "\n".join(details)
    return text


def profile_path(path: BenchPath, ctx: Context, top: int = 25) -> None:
    """Runs one path once under cProfile and prints the top functions."""
    if path.setup is not None:
        path.setup(ctx)
    out_dir = ctx.workdir / "out" / path.name
    shutil.rmtree(out_dir, ignore_errors=True)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    try:
        profiler.runcall(path.run, ctx, out_dir)
    finally:
        elapsed = time.perf_counter() - start
        shutil.rmtree(out_dir, ignore_errors=True)
    print(f"{path.name}: {elapsed:.2f}s under cProfile "
          f"(worker processes/threads are not profiled)")
    stats = pstats.Stats(profiler).strip_dirs()
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(15)


# --------------------------------------------------------------------------
# Memory / scale mode
# --------------------------------------------------------------------------

def _proc_tree(root: int) -> list[int]:
    """Pids of `root` and all its live descendants (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    tree, stack = [], [root]
    while stack:
        pid = stack.pop()
        tree.append(pid)
        stack.extend(parents.get(pid, []))
    return tree


def _tree_memory(root: int) -> tuple[int, int]:
    """Summed (RSS, PSS) bytes of a process tree; PSS counts shared pages once."""
    rss = pss = 0
    for pid in _proc_tree(root):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1]) * 1024
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
        except OSError:
            continue
    return rss, pss


def scale_child(csv_path: str, out_dir: str) -> None:
    """Child process body: default library write, prints a JSON line."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, str(REPO_ROOT))
    import tfrecorder_lite  # noqa: F401

    df = pd.read_csv(csv_path)
    rss_after_import = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    df.tfrecord.to_tfrecord(out_dir, overwrite=True, progress=False)
    seconds = time.perf_counter() - start
    print(json.dumps({"n": len(df), "seconds": seconds,
                      "rss_after_import": rss_after_import}))


def measure_write_subprocess(csv_path: Path, out_dir: Path) -> dict[str, Any]:
    """Runs `scale_child` in a fresh interpreter; returns time and memory.

    Peak memory comes from wait4() (max RSS of the child and its reaped
    descendants) and from sampling RSS/PSS of the whole process tree.
    """
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_scale-child",
           str(csv_path), str(out_dir)]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        peak_rss = peak_pss = 0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            rss, pss = _tree_memory(proc.pid)
            peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
            time.sleep(RSS_SAMPLE_SECONDS)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    shutil.rmtree(out_dir, ignore_errors=True)
    if proc.returncode != 0:
        raise RuntimeError(f"child exited {proc.returncode}: {stderr[-2000:]}")
    info = json.loads(stdout.strip().splitlines()[-1])
    info.update(maxrss=usage.ru_maxrss * 1024, tree_rss=peak_rss, tree_pss=peak_pss)
    return info


def run_scale(workdir: Path, seed: int) -> str:
    """Measures the default write for SCALE_SIZES images; returns a table."""
    csvs = {n: generate_dataset(n, workdir, seed) for n in sorted(SCALE_SIZES, reverse=True)}
    rows = {}
    for n in SCALE_SIZES:
        print(f"scale: writing {n} images in a subprocess...", file=sys.stderr)
        try:
            rows[n] = measure_write_subprocess(csvs[n], workdir / "out" / f"scale_{n}")
        except Exception as exc:
            rows[n] = {"error": _short_error(exc)}
            traceback.print_exc()
    lines = [
        "| images | seconds | ms/image | RSS after import | peak RSS (wait4) "
        "| peak tree RSS (sampled) | peak tree PSS (sampled) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, r in rows.items():
        if "error" in r:
            lines.append(f"| {n} | ERROR: {r['error']} | | | | | |")
            continue
        lines.append(
            f"| {n} | {r['seconds']:.1f} | {1e3 * r['seconds'] / n:.2f} | "
            f"{_mb(r['rss_after_import'])} | {_mb(r['maxrss'])} | "
            f"{_mb(r['tree_rss'])} | {_mb(r['tree_pss'])} |")
    small, big = (rows.get(n, {}) for n in SCALE_SIZES)
    if "maxrss" in small and "maxrss" in big:
        lines.append("")
        lines.append(
            f"peak ratio {SCALE_SIZES[1]}/{SCALE_SIZES[0]}: wait4 RSS "
            f"{big['maxrss'] / small['maxrss']:.2f}, tree RSS "
            f"{big['tree_rss'] / max(small['tree_rss'], 1):.2f}, tree PSS "
            f"{big['tree_pss'] / max(small['tree_pss'], 1):.2f}; time/image ratio "
            f"{(big['seconds'] / big['n']) / (small['seconds'] / small['n']):.2f}")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parses command-line arguments."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=3000, help="dataset size")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR,
                        help="cache for images, fixtures and outputs")
    parser.add_argument("--csv", type=Path, help="use this split,image_uri,label CSV "
                        "instead of generating one (--images is then ignored)")
    parser.add_argument("--seed", type=int, default=SEED, help="generator seed")
    parser.add_argument("--photos", action="store_true",
                        help="12 MP phone-camera JPEGs (about 3 MB each) instead of 160-640 px "
                             "images; use with --images 200 or so")
    parser.add_argument("--both", action="store_true",
                        help="the 160-640 px set (--images), then the photo set "
                             "(--photo-images), one table each, in one run")
    parser.add_argument("--photo-images", type=int, default=200,
                        help="photo set size with --both")
    parser.add_argument("--remote", action="store_true",
                        help="add rows whose images live in a GCS emulator answering each "
                             "request --latency late (needs the [test] extra)")
    parser.add_argument("--latency", type=float, default=0.02,
                        help="seconds per request of the store of --remote")
    parser.add_argument("--cluster", action="store_true",
                        help="add the dask LocalCluster rows (needs the [dask] extra)")
    parser.add_argument("--only", help="comma-separated path names to run")
    parser.add_argument("--profile", metavar="PATH_NAME",
                        help="run one path once under cProfile instead of the table")
    parser.add_argument("--scale", action="store_true",
                        help=f"peak memory/time of the default write for {SCALE_SIZES} images")
    parser.add_argument("--_scale-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = {p.name for p in PATHS + REMOTE_PATHS + CLUSTER_PATHS}
    selected = [args.profile] if args.profile else (args.only.split(",") if args.only else [])
    unknown = [n for n in selected if n not in names]
    if unknown:
        parser.error(f"unknown path(s) {unknown}; choose from {sorted(names)}")
    if args.both and args.csv:
        parser.error("--both generates both image sets; it takes no --csv")
    return args


def selected_paths(args: argparse.Namespace) -> list[BenchPath]:
    """The rows to run: the main table, plus --remote / --cluster rows, filtered by --only."""
    paths = list(PATHS)
    wanted = set(args.only.split(",")) if args.only else None
    if args.remote or (wanted and wanted & {p.name for p in REMOTE_PATHS}):
        paths += REMOTE_PATHS
    if args.cluster or (wanted and wanted & {p.name for p in CLUSTER_PATHS}):
        paths += CLUSTER_PATHS
    return [p for p in paths if wanted is None or p.name in wanted]


def run_set(args: argparse.Namespace, csv_path: Path, lib: Any, lib_error: str | None) -> None:
    """Runs (or profiles) the selected rows over one image set and prints its table."""
    df = pd.read_csv(csv_path)
    print(describe_dataset(df))
    src_bytes = warm_page_cache(df)  # so that the first path is not penalised
    ctx = Context(df=df, workdir=args.workdir, src_bytes=src_bytes, lib=lib, lib_error=lib_error,
                  latency=args.latency)
    try:
        if args.profile:
            paths = PATHS + REMOTE_PATHS + CLUSTER_PATHS
            profile_path(next(p for p in paths if p.name == args.profile), ctx)
            return
        paths = selected_paths(args)
        results = run_benchmarks(paths, ctx, args.repeats)
        print(f"\n{len(df)} images from {csv_path}; {args.repeats} interleaved repeat(s), "
              f"median; {os.cpu_count()} CPUs; read paths count TRAIN only "
              f"({ctx.n_train} images)"
              + (f"; store latency {args.latency * 1000:.0f} ms per request" if any(
                  p in REMOTE_PATHS for p in paths) else "") + "\n")
        print(format_table(paths, results, ctx), flush=True)
    finally:
        for cleanup in reversed(ctx.cleanups):
            try:
                cleanup()
            except Exception:
                traceback.print_exc()
        shutil.rmtree(args.workdir / "fixtures", ignore_errors=True)
        shutil.rmtree(args.workdir / "out", ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point."""
    args = parse_args(argv)
    if args._scale_child:
        scale_child(*args._scale_child)
        return
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.scale:
        print(run_scale(args.workdir, args.seed))
        return

    # Generate the datasets before importing TensorFlow (fork-based pool).
    if args.csv:
        sets = [args.csv.resolve()]
    elif args.both:
        sets = [generate_dataset(args.images, args.workdir, args.seed),
                generate_dataset(args.photo_images, args.workdir, args.seed, photos=True)]
    else:
        sets = [generate_dataset(args.images, args.workdir, args.seed, photos=args.photos)]
    lib, lib_error = import_library()
    for csv_path in sets:
        run_set(args, csv_path, lib, lib_error)
        print()


if __name__ == "__main__":
    main()
