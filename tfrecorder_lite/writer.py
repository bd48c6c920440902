"""Write a WritePlan: one task per shard through joblib, resume, and the manifest last.

The driver plans, checks the output folder (``output_dir``), and hands each unfinished shard to
:func:`~tfrecorder_lite.shard.write_shard` through ``joblib.Parallel``, so the backend the
caller configured (threads, processes, a dask cluster) runs them. Each task reads its own
images and writes its own file through the storage layer; only its receipt comes back. The
bytes of a shard depend only on its rows, never on the parallelism. ``metadata.json`` is
written last, from the receipts.
"""

import io
import logging
import re
from collections import Counter
from dataclasses import dataclass

import joblib
import pandas as pd
from tqdm.auto import tqdm

from . import manifest, output_dir, storage, tfds_info
from ._version import __version__
from .errors import InvalidRowError
from .folder_lock import FolderLock
from .redaction import redact_frame
from .shard import write_shard
from .tfrecord import index_name

logger = logging.getLogger(__name__)

_FETCHING_THREADS_PER_WORKER = 4
_GIL_BOUND_SHARDS = 2  # shard tasks at once in threads when preparing rows is Python-bound


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
                f"labels={_label_count(self.labels)}, rejected={len(self.rejected)})")


def _label_count(labels):
    """How many labels: a count, or with label levels a count per level."""
    if isinstance(labels, dict):
        return {level: len(texts) for level, texts in labels.items()}
    return len(labels)


def _parallelism(plan, shards, n_jobs):
    """``(outer n_jobs, prefer, threads per task)`` for this kind of image work.

    Shards are the unit joblib distributes (whatever backend ``joblib.parallel_config`` chose),
    and inside each task threads prepare its images, so one large shard still uses every core.
    Measured on 2 cores: Pillow decodes with the GIL released, so threads pay for decode checks;
    resizing is enough Python to prefer processes. A header check is short Python under the
    GIL, and each shard's writing thread (CRCs, writes) releases it: in threads, two shard
    tasks at once, each preparing in its own thread, keep both busy (measured on 2 cores
    against one after the other: 1.04-1.15x per round on 3,000 small images in three A/B
    runs, 1.76x on 200 12-MP photos; more would only contend for the GIL). So do records
    without images. Images behind URLs are mostly a wait for the store: more threads keep
    more chunks of requests in flight.
    """
    image = plan.image
    prefer = "processes" if image is not None and image.size is not None else "threads"
    workers = joblib.effective_n_jobs(n_jobs)
    outer = max(1, min(workers, len(shards)))
    threads = joblib.cpu_count() if n_jobs in (None, -1) else max(1, n_jobs)
    if image is not None and any(storage.is_remote(plan.paths[p]) for shard in shards
                                 for p in shard.positions):
        return outer, prefer, threads * _FETCHING_THREADS_PER_WORKER
    if image is None or (image.check == "header" and image.size is None):  # Python under the GIL
        backend, _ = joblib.parallel.get_active_backend(prefer=prefer)
        shared = getattr(backend, "supports_sharedmem", False)
        return (min(_GIL_BOUND_SHARDS, outer) if shared else outer), prefer, 1
    return outer, prefer, threads


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
    with FolderLock(store):
        files = [n for s in plan.shards for n in (s.name, index_name(s.name))]
        levels = [f.level for f in plan.label_fields if f.level is not None]
        state = output_dir.prepare(store, plan.fingerprint,
                                   files + output_dir.level_files(levels), overwrite)
        if state.finished:
            logger.info("%s already holds this conversion; nothing to do", store.url)
            result = _result_from_disk(store, df)
            if on_error == "raise" and len(result.rejected):  # a finished on_error="skip" run
                _raise_first(plan, df, zip(result.metadata["rejected_rows"],
                                           result.rejected.reason))
            return result
        receipts = dict(state.receipts)
        if on_error == "raise":  # shards an interrupted on_error="skip" run finished
            _raise_first(plan, df, [tuple(r) for receipt in receipts.values()
                                    for r in receipt["rejected"]])
        _write_shards(plan, df, store, receipts, on_error, n_jobs, progress)
        return _finish(plan, df, store, receipts)


def _write_shards(plan, df, store, receipts, on_error, n_jobs, progress):
    """Write the shards of ``plan`` that ``receipts`` lacks, adding their receipts to it."""
    todo = [s for s in plan.shards if s.name not in receipts]
    outer, prefer, threads = _parallelism(plan, todo, n_jobs)
    # tasks are made as joblib dispatches them: the driver never holds every shard's rows
    tasks = (plan.task(shard, df.index, threads) for shard in todo)
    for return_as in ("generator_unordered", "generator", "list"):
        try:  # receipts as they come, where the backend can (Ray's returns a list at the end)
            parallel = joblib.Parallel(n_jobs=outer, prefer=prefer, return_as=return_as)
            break
        except ValueError:
            continue
    total = sum(len(shard.positions) for shard in todo)
    with tqdm(total=total, unit="img", desc="tfrecorder_lite", disable=not progress) as bar:
        for receipt in parallel(joblib.delayed(write_shard)(task, store, on_error)
                                for task in tasks):
            receipts[receipt["name"]] = receipt
            bar.update(receipt["num_examples"] + len(receipt["rejected"]))


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


# Cells a spreadsheet would run as a formula (OWASP "CSV injection"); plain numbers are data.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _spreadsheet_safe(value):
    """``value``, with a leading ``'`` when it is text that a spreadsheet would run as a formula."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and \
            not _PLAIN_NUMBER.match(value):
        return "'" + value
    return value


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
    for name, vocabulary in manifest.label_files(plan.labels).items():
        store.write_atomic(name, "".join(f"{text}\n" for text in vocabulary))
    if rejected:
        safe = redact_frame(rejected_df).map(_spreadsheet_safe)
        safe.index = safe.index.map(_spreadsheet_safe)
        store.write_atomic(manifest.REJECTED, safe.to_csv(index_label=_index_label(df.index)))
    splits, sizes, channels, formats, max_size = {}, set(), set(), Counter(), [0, 0]
    for split in plan.splits:
        shards = [receipts[s.name] for s in plan.shards if s.split == split]
        counts = [_label_counts(field, [_receipt_labels(r)[i] for r in shards])
                  for i, field in enumerate(plan.label_fields)]
        splits[split] = {
            "num_examples": sum(r["num_examples"] for r in shards),
            "label_counts": counts[0] if plan.label_fields[0].level is None else
            {field.level: c for field, c in zip(plan.label_fields, counts)},
            "shards": [{k: r[k] for k in ("name", "num_examples", "bytes", "crc32c", "sha256",
                                          "index") if k in r} for r in shards],
        }
        for r in shards:
            sizes.update(tuple(s) for s in r["sizes"])
            max_size = [max(a, b) for a, b in zip(max_size, r["max_size"])]
            channels.update(r["channels"])
            formats.update(r["formats"])
    for field in plan.label_fields:
        written = {label for info in splits.values()
                   for label in _field_counts(info["label_counts"], field)}
        unused = [text for text in field.vocabulary if text not in written]
        if unused:
            logger.warning("%d label(s)%s have an id but no example (their every image was "
                           "rejected while writing, or label_map lists them): %s", len(unused),
                           f" of level {field.level}" if field.level else "", unused[:10])
    metadata = {
        "format_version": manifest.FORMAT_VERSION,
        "created_by": f"tfrecorder_lite {__version__}",
        "fingerprint": plan.fingerprint,
        **({"task": "multi-label"} if plan.multi_label else {}),
        "labels": plan.labels,
        "features": plan.features,
        "compression": plan.compression,
        "image": None if plan.image is None else {
            "stored": "resized" if plan.image.size is not None else "encoded",
            "size": list(sizes.pop()) if len(sizes) == 1 else None,
            "max_size": max_size,
            "channels": channels.pop() if len(channels) == 1 else None,
            "formats": dict(sorted(formats.items())),
        },
        **({"split_assignment": {
            "unassigned": "assign", "ratios": dict(plan.assignment),
            "by": "sha256 of the image_uri text" if plan.image is not None else
            "sha256 of the row's cells (but the split)"}} if plan.assignment else {}),
        "rejected": len(rejected),
        "rejected_rows": [position for position, _ in rejected],
        "splits": splits,
    }
    for name, text in tfds_info.files(metadata).items():
        store.write_atomic(name, text)
    manifest.write_metadata(store, metadata)
    store.remove(output_dir.STATE_DIR)
    counts = {split: info["num_examples"] for split, info in splits.items()}
    logger.info("wrote %s to %s (%d rejected)", counts, store.url, len(rejected))
    return ConversionResult(store.url, counts, plan.labels, rejected_df, metadata)


def _receipt_labels(receipt):
    """Per label field, label id (as text) -> records, from a shard's receipt (receipts of
    earlier versions hold one field's counts)."""
    labels = receipt["labels"]
    return [labels] if isinstance(labels, dict) else labels


def _label_counts(field, shard_counts):
    """label text -> records of one label field, summed over shards, in id order."""
    total = Counter()
    for counts in shard_counts:
        total.update({int(k): v for k, v in counts.items()})
    return {field.vocabulary[i]: total[i] for i in sorted(total)}


def _field_counts(label_counts, field):
    """The counts of one field in a split's ``label_counts``."""
    return label_counts if field.level is None else label_counts[field.level]


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
