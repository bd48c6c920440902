"""Write a WritePlan: plan -> tasks -> runner -> receipts -> manifest.

The driver locks and prepares the output folder (resuming a killed run of the same job), hands
each unfinished shard's task to a runner (``runners.JoblibRunner`` by default), and writes the
label files, ``rejected.csv``, the tfds files and last ``metadata.json`` from the receipts.
Each task reads its own images and writes its own file through the storage layer; only its
receipt comes back. The bytes of a shard depend only on its rows, never on what ran it.
"""

import io
from html import escape
import re
from dataclasses import dataclass

import pandas as pd
from tqdm.auto import tqdm

from .. import redaction
from .._version import __version__
from ..errors import InvalidRowError, SchemaError
from ..output import state as output_state
from ..output import tfds
from ..output.layout import (
    REJECTED, STATE_DIR, index_name, label_files, level_files)
from ..output.lock import FolderLock
from ..output.manifest import ImageSummary, Manifest, read_manifest, split_entry, write_manifest
from ..redaction import redact_frame
from .runners import JoblibRunner

logger = redaction.logger(__name__)  # every record redacted


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

    def _repr_html_(self):
        """A notebook's view: counts per split, labels, and the first rejected rows."""
        counts = "".join(f"<tr><td>{escape(split)}</td><td>{n}</td></tr>"
                         for split, n in self.counts.items())
        rejected = ""
        if len(self.rejected):
            shown = self.rejected.head(_REJECTED_SHOWN)
            rejected = (f"<p>{len(self.rejected)} rejected row(s)"
                        + (f", the first {len(shown)}:" if len(shown) < len(self.rejected)
                           else ":") + "</p>" + shown.to_html(escape=True, max_cols=8))
        return (f"<p>Wrote <code>{escape(self.output_dir)}</code>: "
                f"{escape(str(_label_count(self.labels)))} labels</p>"
                f"<table><tr><th>split</th><th>records</th></tr>{counts}</table>{rejected}")


_REJECTED_SHOWN = 10  # rejected rows a notebook shows (rejected.csv has them all)


def _label_count(labels):
    """How many labels: a count, or with label levels a count per level."""
    if isinstance(labels, dict):
        return {level: len(texts) for level, texts in labels.items()}
    return len(labels)


def write_plan(plan, df, store, write, *, runner=None):
    """Write every shard of ``plan`` into the ``store`` folder and finish with the manifest.

    Args:
        plan: a WritePlan built from ``df``.
        df: the input table (for the rejected rows' columns).
        store: the output folder, a Store (its storage options also serve the image URLs).
        write: the WriteOptions (``on_error``, ``overwrite``, ``n_jobs`` for the default
            runner, ``progress``).
        runner: what runs the shard tasks (default: a JoblibRunner of ``write.n_jobs``).

    Returns:
        A ConversionResult.
    """
    on_error = write.on_error
    if write.raises and plan.rejected:
        _raise_first(plan, df, plan.rejected)
    if not any(shard.positions for shard in plan.shards):
        _refuse_empty(plan, df)
    with FolderLock(store) as lock:
        store = lock.store  # on an object store every write first checks the lease
        files = [n for s in plan.shards for n in (s.name, index_name(s.name))]
        levels = [f.level for f in plan.label_fields if f.level is not None]
        state = output_state.prepare(store, plan.fingerprint, files + level_files(levels),
                                     write.overwrite)
        if state.finished:
            logger.info("%s already holds this conversion; nothing to do", store.url)
            result = _result_from_disk(store, df)
            if write.raises and len(result.rejected):  # a finished on_error="skip" run
                _raise_first(plan, df, zip(map(plan.planned_position,
                                               result.metadata["rejected_rows"]),
                                           result.rejected.reason))
            return result
        receipts = dict(state.receipts)
        if write.raises:  # shards an interrupted on_error="skip" run finished
            _raise_first(plan, df, [r for receipt in receipts.values()
                                    for r in receipt.rejected])
        _write_shards(plan, df, store, receipts, on_error, runner or JoblibRunner(write.n_jobs),
                      write.progress, lock)
        lock.check()  # and metadata.json's write checks the lease itself (lock.store)
        return _finish(plan, df, store, receipts)


def _write_shards(plan, df, store, receipts, on_error, runner, progress, lock):
    """Write the shards of ``plan`` that ``receipts`` lacks, adding their receipts to it.

    A task stopped by a bad row (``on_error="raise"``) returns it in its receipt; it is raised
    here as InvalidRowError, whatever ran the task. Between receipts, ``lock.check()`` stops
    the run when the folder's lease was taken over.
    """
    todo = [s for s in plan.shards if s.name not in receipts]
    labels = plan.planned_labels(df.index)

    def tasks_of(shards, threads):  # made as the runner asks: the driver never holds them all
        return (plan.task(shard, labels, threads) for shard in shards)

    total = sum(len(shard.positions) for shard in todo)
    with tqdm(total=total, unit="img", desc="tfrecorder_lite", disable=not progress) as bar:
        for receipt in runner.run(plan, tasks_of, todo, store, on_error):
            lock.check()
            if receipt.failed is not None:
                _raise_first(plan, df, [receipt.failed])
            receipts[receipt.name] = receipt
            bar.update(receipt.shard.num_examples + len(receipt.rejected))


def _refuse_empty(plan, df, rejected=None):
    """Raise SchemaError for a plan with nothing to write: an empty table, or one whose every
    row was rejected (``rejected``: (position, reason) pairs, default the plan's), by the
    table's checks or while writing (an output without records is no output, and readers
    refuse it)."""
    rejected = plan.rejected if rejected is None else rejected
    if not len(df) or not rejected:
        raise SchemaError("the table has no rows: there is nothing to convert; nothing was "
                          "written")
    shown = "; ".join(f"row {df.index[plan.table_rows(position)[0]]!r}: {reason}"
                      for position, reason in sorted(rejected)[:3])
    raise SchemaError(f"none of the table's {len(df)} rows can be written ({shown}"
                      f"{'; ...' if len(rejected) > 3 else ''}); nothing was written. "
                      "validate() lists every row's problem.")


def _raise_first(plan, df, rejected):
    """Raise InvalidRowError for the first (by table position) of (position, reason) pairs."""
    rejected = sorted(rejected)
    if rejected:
        position, reason = rejected[0]
        raise InvalidRowError(df.index[plan.table_rows(position)[0]], plan.paths[position],
                              reason)


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
    refused = [*plan.rejected, *(r for receipt in receipts.values() for r in receipt.rejected)]
    if not any(receipt.shard.num_examples for receipt in receipts.values()):
        for shard in plan.shards:  # every row was rejected while writing: no output at all
            store.remove(shard.name)
            store.remove(index_name(shard.name))
        store.remove(STATE_DIR)
        _refuse_empty(plan, df, refused)
    rejected = sorted((row, reason) for position, reason in refused
                      for row in plan.table_rows(position))
    rejected_df = _rejected_frame(df, rejected)
    for name, vocabulary in label_files(plan.labels).items():
        store.write_atomic(name, "".join(f"{text}\n" for text in vocabulary))
    kind = plan.record_kind
    for name, text in kind.extra_files(plan.labels).items():
        store.write_atomic(name, text)
    if rejected:
        safe = redact_frame(rejected_df).map(_spreadsheet_safe)
        safe.index = safe.index.map(_spreadsheet_safe)
        store.write_atomic(REJECTED, safe.to_csv(index_label=_index_label(df.index)))
    fields = [(field.level, field.vocabulary) for field in plan.label_fields]
    by_split = {split: [receipts[s.name] for s in plan.shards if s.split == split]
                for split in plan.splits}
    splits = {split: split_entry(shards, fields) for split, shards in by_split.items()}
    for field in plan.label_fields:
        written = {label for entry in splits.values()
                   for label in (entry.label_counts if field.level is None
                                 else entry.label_counts[field.level])}
        unused = [text for text in field.vocabulary if text and text not in written]
        if unused:
            logger.warning("%d label(s)%s have an id but no example (their every image was "
                           "rejected while writing, or label_map lists them): %s", len(unused),
                           f" of level {field.level}" if field.level else "", unused[:10])
    manifest = Manifest(
        labels=plan.labels, features=plan.features.describe(), compression=plan.compression,
        image=None if plan.image is None else ImageSummary.from_receipts(
            "resized" if plan.image.size is not None else "encoded", receipts.values()),
        splits=splits, rejected=len(rejected),
        rejected_rows=tuple(position for position, _ in rejected),
        fingerprint=plan.fingerprint, created_by=f"tfrecorder_lite {__version__}",
        task=kind.task(plan.features), file_format=plan.file_format.name,
        kind_fields=kind.manifest_entry(plan.features, {
            split: entry.label_counts for split, entry in splits.items()}),
        split_assignment={
            "unassigned": "assign", "ratios": dict(plan.assignment),
            "by": "sha256 of the image_uri text" if plan.image is not None else
            "sha256 of the row's cells (but the split)"} if plan.assignment else None)
    metadata = manifest.to_json()
    for name, text in tfds.files(manifest).items():
        store.write_atomic(name, text)
    write_manifest(store, manifest)
    store.remove(STATE_DIR)
    counts = {split: entry.num_examples for split, entry in splits.items()}
    logger.info("wrote %s to %s (%d rejected)", counts, store.url, len(rejected))
    return ConversionResult(store.url, counts, plan.labels, rejected_df, metadata)


def _result_from_disk(store, df):
    """The result of a finished run of the same job: rejected rows come from ``df`` itself."""
    manifest, metadata = read_manifest(store)
    positions = manifest.rejected_rows
    reasons = []
    if positions:
        table = pd.read_csv(io.BytesIO(store.read_bytes(REJECTED)), dtype=str,
                            keep_default_na=False)
        reasons = table["reason"].tolist()
    rejected = _rejected_frame(df, list(zip(positions, reasons)))
    counts = {split: entry.num_examples for split, entry in manifest.splits.items()}
    return ConversionResult(store.url, counts, manifest.labels, rejected, metadata)
