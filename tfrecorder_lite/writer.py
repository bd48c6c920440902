"""Write a WritePlan: parallel image preparation, ordered shard writing, resume, manifest.

Workers (joblib threads or processes, whichever pays for the kind of image work) turn chunks of
rows into serialized records. The main process hands them to shards in plan order, so the bytes
never depend on the parallelism, and a thread per shard frames, hashes and writes them. Every
file goes through the storage layer, which shows it under its final name only when complete
(see ``storage.PendingFile``); each shard leaves a receipt, and ``metadata.json`` is written last.
"""

import io
import json
import logging
import re
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import joblib
import pandas as pd
from tqdm.auto import tqdm

from . import __version__, example, manifest, storage
from .errors import InvalidRowError, OutputExistsError
from .images import ImageRejected, prepare_content
from .tfrecord import RecordWriter

logger = logging.getLogger(__name__)

STATE_DIR = ".tfrecorder_lite"
_FETCHING_THREADS_PER_WORKER = 4
_JOB = "job.json"
_OUR_FILE = re.compile(
    r"^((train|validation|test)-\d{5}-of-\d{5}\.tfrecord(\.gz|\.zz)?|metadata\.json|labels\.txt"
    r"|rejected\.csv)(\.tmp)?$"
)


@dataclass
class ConversionResult:
    """What ``to_tfrecord`` wrote.

    Attributes:
        output_dir: the output folder (an absolute path, or a URL).
        counts: split -> number of records written.
        labels: label id -> label text.
        rejected: the rows not written, indexed by input row label: input columns + ``reason``.
        metadata: the content of metadata.json.
    """

    output_dir: str
    counts: dict
    labels: list
    rejected: pd.DataFrame
    metadata: dict

    def __repr__(self):
        return (f"ConversionResult(output_dir={self.output_dir!r}, counts={self.counts}, "
                f"labels={len(self.labels)}, rejected={len(self.rejected)})")


def prepare_records(items, image_options, extra_kinds, storage_options=None):
    """Turn rows into serialized records (a joblib task: top level, picklable, no TensorFlow).

    Args:
        items: tuples (position, path, label_id, label_text, extras).
        image_options: ImageOptions.
        extra_kinds: (column, kind) pairs matching ``extras``.
        storage_options: fsspec options for remote image URLs.

    Returns:
        A list of (position, record chunks (see ``encode_example_chunks``) or None, reason or
        (format, height, width, channels, label_id)).
    """
    kinds = {**example.IMAGE_FEATURES, **dict(extra_kinds)}
    out = []
    contents = storage.read_many([item[1] for item in items], storage_options)
    for (position, path, label_id, label_text, extras), content in zip(items, contents):
        try:
            stored = prepare_content(content, image_options)
        except ImageRejected as exc:
            out.append((position, None, str(exc)))
            continue
        features = {
            example.ENCODED: stored.encoded,
            example.FORMAT: stored.format,
            example.HEIGHT: stored.height,
            example.WIDTH: stored.width,
            example.CHANNELS: stored.channels,
            example.FILENAME: storage.basename(path),
            example.LABEL: label_id,
            example.LABEL_TEXT: label_text,
        }
        features.update(zip((name for name, _ in extra_kinds), extras))
        info = (stored.format, stored.height, stored.width, stored.channels, label_id)
        out.append((position, example.encode_example_chunks(features, kinds), info))
    return out


def _tasks(plan, shards, size):
    """(shard, rows, is_last_chunk_of_shard) for every chunk of ``size`` rows, in plan order."""
    for shard in shards:
        for start in range(0, len(shard.positions), size):
            rows = [(p, plan.paths[p], plan.label_ids[p], plan.labels[plan.label_ids[p]],
                     plan.extras[p]) for p in shard.positions[start:start + size]]
            yield shard, rows, start + size >= len(shard.positions)


def _prepare_output_dir(store, fingerprint, overwrite):
    """Check what the folder holds; return 'complete', or the receipts of finished shards."""
    names = store.list()
    state = store.child(STATE_DIR)
    previous = None
    if manifest.METADATA in names:
        try:
            previous = json.loads(store.read_text(manifest.METADATA))
        except (OSError, ValueError):
            previous = {}
        if previous.get("fingerprint") == fingerprint and not overwrite:
            store.remove(STATE_DIR)  # a kill may have left it behind
            return "complete"
        what = "a finished conversion of a different table or options"
    elif STATE_DIR in names:
        try:
            previous = json.loads(state.read_text(_JOB))
        except (OSError, ValueError):
            previous = {}
        if previous.get("fingerprint") == fingerprint and not overwrite:
            return _finished_shards(store, names)
        if "fingerprint" not in previous:  # killed before job.json: nothing of value is there
            overwrite = all(_OUR_FILE.match(n) or n == STATE_DIR for n in names)
        what = "an unfinished conversion of a different table or options"
    else:
        what = f"other files ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''})"
    if names and not overwrite:
        raise OutputExistsError(f"{store.url} holds {what}; nothing was changed. "
                                "Pass overwrite=True to replace it, or choose an empty folder.")
    for name in names:
        if _OUR_FILE.match(name) or name == STATE_DIR:
            store.remove(name)
    state.make_dirs()
    state.write_atomic(_JOB, json.dumps({"fingerprint": fingerprint}))
    return {}


def _finished_shards(store, names):
    """Receipts of shards a killed run completed; everything else it left is removed."""
    state = store.child(STATE_DIR)
    finished = {}
    for name in state.list():
        if not name.endswith(".json") or name == _JOB:
            continue
        shard = name[:-len(".json")]
        try:
            receipt = json.loads(state.read_text(name))
        except (OSError, ValueError):
            continue
        if store.size(shard) == receipt["bytes"] and store.sha256(shard) == receipt["sha256"]:
            finished[shard] = receipt
    for name in names:
        if name.endswith(storage.TEMP_SUFFIX) or (_OUR_FILE.match(name) and name not in finished):
            store.remove(name)
    for name in state.list():
        if name.endswith(storage.TEMP_SUFFIX):
            state.remove(name)
    logger.info("resuming: %d finished shard(s) kept in %s", len(finished), store.url)
    return finished


class _ShardSink:
    """Collects one shard: the record file being written and what went into it.

    Framing, CRCs, sha256 and the file writes run on one background thread per shard, a batch
    at a time (the batch's join, its sha256 and its write release the GIL), in the order the
    records were added.
    """

    _MAX_PENDING_BATCHES = 4  # bounds the records held in memory while the thread catches up

    def __init__(self, store, shard, compression):
        self.shard = shard
        self._file = store.open_for_commit(shard.name)
        self.writer = RecordWriter(self._file, compression)
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tfrecorder_lite-io")
        self._batch, self._pending, self._failed = [], deque(), False
        self.rejected = []
        self.sizes, self.channels, self.formats, self.labels = set(), set(), Counter(), Counter()
        self.max_size = [0, 0]

    def add(self, position, record, info):
        if record is None:
            self.rejected.append([position, info])
            return
        self._batch.append(record)
        fmt, height, width, channels, label_id = info
        self.formats[fmt] += 1
        self.labels[label_id] += 1
        if len(self.sizes) < 2:
            self.sizes.add((height, width))
        self.max_size = [max(self.max_size[0], height), max(self.max_size[1], width)]
        self.channels.add(channels)

    def flush(self):
        """Hand the records added so far to the writing thread."""
        if self._batch:
            self._pending.append(self._io.submit(self._write, self._batch))
            self._batch = []
        while self._pending and (self._pending[0].done() or
                                 len(self._pending) > self._MAX_PENDING_BATCHES):
            self._pending.popleft().result()  # re-raises a write error here

    def _write(self, records):
        if self._failed:  # the shard is lost already: write nothing more
            return
        try:
            self.writer.write_many(records)
        except BaseException:
            self._failed = True
            raise

    def finish(self, state):
        """Close, move into place and leave a receipt in the ``state`` Store; returns it."""
        self.flush()
        while self._pending:
            self._pending.popleft().result()
        self._io.shutdown()
        sha256 = self.writer.close()
        self._file.commit()
        receipt = {
            "name": self.shard.name, "num_examples": self.writer.num_records,
            "bytes": self.writer.bytes_written, "sha256": sha256, "rejected": self.rejected,
            "sizes": sorted(self.sizes), "max_size": self.max_size,
            "channels": sorted(self.channels),
            "formats": dict(self.formats), "labels": {str(k): v for k, v in self.labels.items()},
        }
        state.write_atomic(self.shard.name + ".json", json.dumps(receipt))
        return receipt

    def abandon(self):
        self._io.shutdown(wait=True, cancel_futures=True)
        self._file.discard()


def _parallelism(image_options, n_jobs, remote):
    """joblib ``(n_jobs, prefer)`` that pays for this kind of image work (measured on 2 cores).

    A header check is short Python under the GIL, where more threads only contend: rows are
    prepared in the calling thread while each shard's writing thread hashes and writes. Pillow
    decodes with the GIL released, so threads pay for full decodes (and records need not cross
    processes); resizing is enough Python to need processes. Images behind URLs are mostly a
    wait for the store: more threads keep more chunks of requests in flight.
    """
    if image_options.size is not None:
        return n_jobs, "processes"
    if remote:
        workers = joblib.cpu_count() if n_jobs in (None, -1) else max(1, n_jobs)
        return workers * _FETCHING_THREADS_PER_WORKER, "threads"
    if image_options.check == "header":
        return 1, None
    return n_jobs, "threads"


def write_plan(plan, df, store, *, on_error="raise", overwrite=False, n_jobs=-1,
               progress=True):
    """Write every shard of ``plan`` into the ``store`` folder and finish with the manifest.

    Args:
        plan: a WritePlan built from ``df``.
        df: the input table (for the rejected rows' columns).
        store: the output folder, a Store (its storage options also serve the image URLs).
        on_error: "raise" (stop at the first bad row) or "skip" (reject it with a reason).
        overwrite: replace whatever the folder holds.
        n_jobs: joblib worker count (-1: all cores).
        progress: show a tqdm progress bar.

    Returns:
        A ConversionResult.
    """
    if on_error == "raise" and plan.rejected:
        _raise_first(plan, df, plan.rejected)
    state = _prepare_output_dir(store, plan.fingerprint, overwrite)
    if state == "complete":
        logger.info("%s already holds this conversion; nothing to do", store.url)
        result = _result_from_disk(store, df)
        if on_error == "raise" and len(result.rejected):  # a finished on_error="skip" run
            _raise_first(plan, df, zip(result.metadata["rejected_rows"], result.rejected.reason))
        return result
    state_store = store.child(STATE_DIR)
    receipts = dict(state)
    if on_error == "raise":  # shards an interrupted on_error="skip" run finished
        _raise_first(plan, df, [tuple(r) for receipt in receipts.values()
                                for r in receipt["rejected"]])
    todo = [s for s in plan.shards if s.name not in receipts]
    total = sum(len(s.positions) for s in todo)
    remote = any(storage.is_remote(plan.paths[p]) for shard in todo for p in shard.positions)
    n_jobs, prefer = _parallelism(plan.image, n_jobs, remote)
    workers = joblib.cpu_count() if n_jobs in (None, -1) else max(1, n_jobs)
    chunk_size = max(4, min(64, total // (8 * workers) or 1))
    tasks = list(_tasks(plan, todo, chunk_size))
    parallel = joblib.Parallel(n_jobs=n_jobs, prefer=prefer, return_as="generator")
    results = parallel(joblib.delayed(prepare_records)(chunk, plan.image, plan.extra_kinds,
                                                       store.storage_options)
                       for _, chunk, _ in tasks)
    sink = None
    with tqdm(total=total, unit="img", desc="tfrecorder_lite", disable=not progress) as bar:
        try:
            for (shard, _, last), records in zip(tasks, results):
                if sink is None or sink.shard is not shard:
                    sink = _ShardSink(store, shard, plan.compression)
                for position, record, info in records:
                    if record is None and on_error == "raise":
                        raise InvalidRowError(df.index[position], plan.paths[position], info)
                    sink.add(position, record, info)
                sink.flush()
                bar.update(len(records))
                if last:
                    receipts[shard.name] = sink.finish(state_store)
                    sink = None
        finally:
            if sink is not None:
                sink.abandon()
            results.close()
    for shard in todo:  # shards with no rows at all
        if shard.name not in receipts:
            empty = _ShardSink(store, shard, plan.compression)
            receipts[shard.name] = empty.finish(state_store)
    return _finish(plan, df, store, receipts)


def _raise_first(plan, df, rejected):
    """Raise InvalidRowError for the first (by table position) of (position, reason) pairs."""
    rejected = sorted(rejected)
    if rejected:
        position, reason = rejected[0]
        raise InvalidRowError(df.index[position], plan.paths[position], reason)


def _rejected_frame(df, rejected):
    """The input rows at the positions of (position, reason) pairs, plus a ``reason`` column."""
    frame = df.iloc[[position for position, _ in rejected]].copy()
    frame["reason"] = [reason for _, reason in rejected]
    return frame


def _index_label(index):
    """Column header(s) for the row labels in rejected.csv, one per index level."""
    if isinstance(index, pd.MultiIndex):
        return [name or f"level_{i}" for i, name in enumerate(index.names)]
    return index.name or "row"


def _finish(plan, df, store, receipts):
    rejected = list(plan.rejected)
    for receipt in receipts.values():
        rejected += [tuple(r) for r in receipt["rejected"]]
    rejected.sort()
    rejected_df = _rejected_frame(df, rejected)
    manifest.write_labels(store, plan.labels)
    if rejected:
        store.write_atomic(manifest.REJECTED,
                           rejected_df.to_csv(index_label=_index_label(df.index)))
    splits, sizes, channels, formats, max_size = {}, set(), set(), Counter(), [0, 0]
    for split in plan.splits:
        shards = [receipts[s.name] for s in plan.shards if s.split == split]
        per_label = Counter()
        for r in shards:
            per_label.update({int(k): v for k, v in r["labels"].items()})
        splits[split] = {
            "num_examples": sum(r["num_examples"] for r in shards),
            "label_counts": {plan.labels[i]: per_label[i] for i in sorted(per_label)},
            "shards": [{k: r[k] for k in ("name", "num_examples", "bytes", "sha256")}
                       for r in shards],
        }
        for r in shards:
            sizes.update(tuple(s) for s in r["sizes"])
            max_size = [max(a, b) for a, b in zip(max_size, r["max_size"])]
            channels.update(r["channels"])
            formats.update(r["formats"])
    resized = plan.image.size is not None
    metadata = {
        "format_version": manifest.FORMAT_VERSION,
        "created_by": f"tfrecorder_lite {__version__}",
        "fingerprint": plan.fingerprint,
        "labels": list(plan.labels),
        "features": {k: {"dtype": v, "shape": []} for k, v in plan.features.items()},
        "compression": plan.compression,
        "image": {
            "stored": "resized" if resized else "encoded",
            "size": list(sizes.pop()) if len(sizes) == 1 else None,
            "max_size": max_size,
            "channels": channels.pop() if len(channels) == 1 else None,
            "formats": dict(sorted(formats.items())),
        },
        "rejected": len(rejected),
        "rejected_rows": [position for position, _ in rejected],
        "splits": splits,
    }
    manifest.write_metadata(store, metadata)
    store.remove(STATE_DIR)
    counts = {split: info["num_examples"] for split, info in splits.items()}
    logger.info("wrote %s to %s (%d rejected)", counts, store.url, len(rejected))
    return ConversionResult(store.url, counts, list(plan.labels), rejected_df, metadata)


def _result_from_disk(store, df):
    """The result of a finished run of the same job: rejected rows come from ``df`` itself."""
    metadata = manifest.read_metadata(store)
    positions = metadata.get("rejected_rows", [])
    reasons = []
    if positions:
        table = pd.read_csv(io.BytesIO(store.read_bytes(manifest.REJECTED)), dtype=str,
                            keep_default_na=False)
        reasons = table["reason"].tolist()
    rejected = _rejected_frame(df, list(zip(positions, reasons)))
    counts = {split: info["num_examples"] for split, info in metadata["splits"].items()}
    return ConversionResult(store.url, counts, metadata["labels"], rejected, metadata)
