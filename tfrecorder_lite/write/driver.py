"""Write a WritePlan: plan -> tasks -> runner -> receipts -> manifest.

The driver locks and prepares the output folder (resuming a killed run of the same job), hands
each unfinished shard's task to a runner (``runners.JoblibRunner`` by default), and writes the
label files, ``rejected.csv``, the tfds files and last ``metadata.json`` from the receipts.
Each task reads its own images and writes its own file through the storage layer; only its
receipt comes back. The bytes of a shard depend only on its rows, never on what ran it.
"""

import functools
import io
from html import escape
from dataclasses import dataclass

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from .. import redaction
from .._version import __version__
from ..errors import InvalidRowError, SchemaError, row_repr
from ..memory import give_back_freed_memory
from ..output import state as output_state
from ..output import tfds
from ..output.layout import (
    REJECTED, STATE_DIR, hashes_name, index_name, label_files, level_files,
    near_duplicates_name, rejected_name)
from ..output.lock import FolderLock
from ..output.manifest import ImageSummary, Manifest, read_manifest, split_entry, write_manifest
from ..images import content_hash
from ..near_duplicates.confirmation import CONFIRMATION, confirmed
from ..near_duplicates.hashes_file import label_texts, write_hashes
from ..near_duplicates.looks_file import kept_looks
from ..near_duplicates.pairs import (Pairs, Searched, joined, later_rows, new_pairs,
                                     write_pairs)
from ..near_duplicates.perceptual_hash import MAX_DISTANCE, METHOD, describe
from ..options import leakage_for
from ..table.schema import problems_frame, problems_frame_of
from . import append as appending
from ..output.csv_files import index_label, index_text, safe_csv
from .shard_rewrite import without_rows
from .runners import JoblibRunner

logger = redaction.logger(__name__)  # every record redacted


@dataclass
class ConversionResult:
    """What ``to_tfrecord`` wrote.

    Attributes:
        output_dir: the output folder (an absolute path, or a URL).
        counts: split -> number of records written.
        labels: label id -> label text.
        rejected: the rows not written, indexed by input row label: input columns + ``reason``,
            URLs shown without their credentials (``redaction``).
        metadata: the content of metadata.json.
        problems: what was written but looks wrong, one row per problem (columns row,
            column, value, problem, as ``validate()`` gives them): near-duplicate images
            across splits with ``leakage="warn"``.
        skipped: with ``append=True``, the rows not written because their image and label
            were already in the output.
    """

    output_dir: str
    counts: dict
    labels: list
    rejected: pd.DataFrame
    metadata: dict
    problems: pd.DataFrame = None
    skipped: int = 0

    def __post_init__(self):
        if self.problems is None:
            self.problems = problems_frame([])

    def __repr__(self):
        problems = f", problems={len(self.problems)}" if len(self.problems) else ""
        return (f"ConversionResult(output_dir={self.output_dir!r}, counts={self.counts}, "
                f"labels={_label_count(self.labels)}, rejected={len(self.rejected)}"
                f"{problems})")

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


def write_plan(plan, df, store, write, *, runner=None, previous=None, before=None):
    """Write every shard of ``plan`` into the ``store`` folder and finish with the manifest.

    Args:
        plan: a WritePlan built from ``df``.
        df: the input table (for the rejected rows' columns).
        store: the output folder, a Store (its storage options also serve the image URLs).
        write: the WriteOptions (``on_error``, ``overwrite``, ``n_jobs`` for the default
            runner, ``progress``, and ``leakage``: near-duplicate images across splits
            reported, their later row rejected, or not looked for; the plan's images must be
            hashed, ``ImageOptions.phash``, unless "ignore").
        runner: what runs the shard tasks (default: a JoblibRunner of ``write.n_jobs``).
        previous: the Manifest of the output ``plan`` appends a generation to (the plan's
            shards are named for it), or None.
        before: the images of that output (``append.written_before``), when read already.

    Returns:
        A ConversionResult.
    """
    on_error = write.on_error
    if write.raises and plan.rejected:
        _raise_first(plan, df, plan.rejected)
    if not any(len(shard.positions) for shard in plan.shards) and not len(plan.skipped):
        _refuse_empty(plan, df)
    with FolderLock(store) as lock:
        store = lock.store  # on an object store every write first checks the lease
        files = [n for s in plan.shards for n in (s.name, index_name(s.name))]
        levels = [f.level for f in plan.label_fields if f.level is not None]
        if previous is None:
            state = output_state.prepare(store, plan.fingerprint, files + level_files(levels),
                                         write.overwrite)
        else:
            generation = plan.shards[0].generation
            state = output_state.prepare_append(store, plan.fingerprint, files + [
                hashes_name(generation), rejected_name(generation),
                near_duplicates_name(generation)])
        if state.finished:
            logger.info("%s already holds this conversion; nothing to do", store.url)
            result = _result_from_disk(store, df)
            if write.raises and len(result.rejected):  # a finished on_error="skip" run
                _raise_first(plan, df, zip(map(plan.planned_position,
                                               result.metadata["rejected_rows"]),
                                           result.rejected.reason))
            return result
        receipts = _hashed_alike(plan, state.receipts)
        if write.raises:  # shards an interrupted on_error="skip" run finished
            _raise_first(plan, df, [r for receipt in receipts.values()
                                    for r in receipt.rejected])
        _write_shards(plan, df, store, receipts, on_error, runner or JoblibRunner(write.n_jobs),
                      write.progress, lock)
        lock.check()  # and metadata.json's write checks the lease itself (lock.store)
        leakage = "ignore" if plan.image is None else leakage_for(
            write.leakage, plan.image.check, plan.image.size, previous is not None)
        return _finish(plan, df, store, receipts, leakage, previous, write.raises, before)


def _hashed_alike(plan, receipts):
    """The receipts of shards a killed run finished whose files' content hashes are the
    plan's (a run of an earlier version may have taken another hash: its shards are written
    again, so that the generation's hashes file has one)."""
    if plan.image is None or not plan.image.phash:
        return dict(receipts)
    size = content_hash.digest_bytes(plan.image.content_hash)
    return {name: receipt for name, receipt in receipts.items()
            if not len(receipt.hashes) or receipt.hashes.digest_bytes.shape[1] == size}


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
    shown = "; ".join(f"row {row_repr(df.index[plan.table_rows(position)[0]])}: {reason}"
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
    """The input rows at the positions of (position, reason) pairs, plus a ``reason`` column,
    every URL in their text redacted (the frame is shown in notebooks and logs; the rows as
    the table has them are ``df.loc[frame.index]``)."""
    frame = df.iloc[[position for position, _ in rejected]].copy()
    for column in frame.select_dtypes(include=["object", "string"]).columns:
        cells = frame[column].tolist()
        clean = [redaction.redact(cell) for cell in cells]
        if clean != cells:  # a column without a secret keeps its cells and dtype
            frame[column] = pd.Series(clean, index=frame.index, dtype=object)
    frame["reason"] = [redaction.redact(reason) for _, reason in rejected]
    return frame


def _near_duplicates(plan, df, store, receipts, leakage, generation=0, before=None):
    """Find the near-duplicate images across splits among the records of ``receipts`` (and
    between them and the earlier generations' images in ``before``).

    With ``leakage="reject"``, the shards holding the later row of a pair are written again
    without it (``receipts`` is updated). Writes the generation's hashes file, and with "warn"
    the pairs' file.

    Returns:
        ``(problems frame, metadata.json's near_duplicates entry)``, or ``(None, None)`` when
        there is nothing to look at.
    """
    if leakage == "ignore" or plan.image is None:
        return None, None
    split_of = {s.name: s.split for s in plan.shards}
    labels = plan.planned_labels(df.index)
    shards = [(name, len(r.hashes), r.shard.crc32c) for name, r in receipts.items()]
    shard_starts = np.cumsum([0] + [count for _, count, _ in shards])  # in ``new``
    new, splits, order = joined(receipts, split_of, consume=leakage != "reject")
    written, checksums = len(new), None
    if leakage != "reject":  # the hashes file first; then the search keeps what it reads only
        if written:  # (the receipts' own hashes were emptied as they were joined)
            checksums = write_hashes(store, hashes_name(generation), plan, labels, new,
                                           splits, order)
        new = Searched(new.positions, new.perceptual, new.hashed)
        give_back_freed_memory()

    def where(key):
        if isinstance(key, tuple):  # an earlier generation's image
            image = before.image(key[1])
            return (f"row {image.row!r} ({image.image_uri}, {image.split}, generation "
                    f"{image.generation})")
        return f"row {row_repr(labels[key])} ({plan.paths[key]}, {split_of_row(key)})"

    def described(key):
        if isinstance(key, tuple):
            image = before.image(key[1])
            return image.row, image.split, image.image_uri
        return labels[key], split_of_row(key), plan.paths[key]

    @functools.cache
    def table_positions():  # made for the first pair described
        return new.positions[order]

    def split_of_row(position):
        return splits[order[np.searchsorted(table_positions(), position)]]

    def source_of(key):  # where a pair's image is read again to confirm it
        if isinstance(key, tuple):
            image = before.image(key[1])
            return image.image_uri, image.digest
        return plan.paths[key], None

    def kept(keys):  # what the write kept to confirm its records' pairs
        keys = [key for key in keys if not isinstance(key, tuple)]
        if not keys:
            return {}
        joined_at = order[np.searchsorted(table_positions(), keys)]
        shard_of = np.searchsorted(shard_starts, joined_at, side="right") - 1
        wanted, key_of = {}, {}
        for key, k, index in zip(keys, shard_of.tolist(),
                                 (joined_at - shard_starts[shard_of]).tolist()):
            name, count, crc32c = shards[k]
            wanted.setdefault(name, (count, crc32c, []))[2].append(index)
            key_of[name, index] = key
        found = kept_looks(store.child(STATE_DIR), wanted)
        return {key_of[where]: looks for where, looks in found.items()}

    pairs, stand_in = new_pairs(before, new, splits)
    give_back_freed_memory()  # the search's tables
    pairs = confirmed(pairs, source_of, store.storage_options, plan.image.max_bytes,
                      plan.image.content_hash, stand_in=stand_in, kept=kept)
    del stand_in
    found = len(pairs)
    problems = problems_frame([])

    @functools.lru_cache(maxsize=1 << 12)  # copies of one picture: one text, many rows
    def described_pair(earlier, distance):
        return describe(where(earlier), distance)

    if leakage == "reject":
        drop = {later: described_pair(earlier, distance)
                for later, (earlier, distance) in later_rows(pairs).items()}
        for name, receipt in list(receipts.items()):
            mine = {p: drop[p] for p in receipt.hashes.positions.tolist() if p in drop}
            if mine:
                receipts[name] = without_rows(store, receipt, plan, mine)
        new, splits, order = joined(receipts, split_of)
        written = len(new)
        if written:
            checksums = write_hashes(store, hashes_name(generation), plan, labels, new,
                                           splits, order)
        pairs = Pairs()
    elif pairs:
        problems = problems_frame_of(  # a million rows of copies: arrays, and one text
            labels.take(pairs.later).to_numpy(), [None] * len(pairs),
            plan.paths.texts(pairs.later),
            [described_pair(earlier, distance) for _, earlier, distance in pairs])
        write_pairs(store, near_duplicates_name(generation), pairs, described)
    return problems, {
        "hash": METHOD,
        "max_distance": MAX_DISTANCE, "leakage": leakage, "pairs": found,
        "confirmed_by": CONFIRMATION, "content_hash": plan.image.content_hash,
        "hashes": [hashes_name(generation)] if written else [],
        "checksums": {hashes_name(generation): checksums} if written else {},
        "file": near_duplicates_name(generation) if pairs else None}


def _finish_append(plan, df, store, receipts, leakage, previous, raises, before=None):
    """Finish a generation appended to the output of ``previous`` (its Manifest): drop the
    rows already there (skipped, or rejected with the reason naming both), look for
    near-duplicates against every generation, and write its files and metadata.json. When
    nothing new is left, every file of the generation is removed: the folder is unchanged."""
    generation = plan.shards[0].generation
    split_of = {s.name: s.split for s in plan.shards}
    if before is None:
        before = appending.written_before(store, previous)
    new = [(position, split_of[name], digest) for name, r in receipts.items()
           for position, digest in zip(r.hashes.positions.tolist(), r.hashes.digests())]
    fate = appending.decide([(*row, text) for row, text in
                             zip(new, label_texts(plan, [row[0] for row in new]))], before)
    refused = [(p, reason) for p, reason in fate.items() if reason != appending.SKIPPED]
    if raises:
        _raise_first(plan, df, refused)
    for name, receipt in list(receipts.items()):
        mine = {p: fate[p] for p in receipt.hashes.positions.tolist() if p in fate}
        if mine:
            receipts[name] = without_rows(store, receipt, plan, mine)
    hashed_by = (previous.near_duplicates or {}).get("hash", METHOD)
    if leakage != "ignore" and len(before) and hashed_by != METHOD:
        logger.warning("%s: the earlier generations' images were hashed by another version "
                       "(%s); this generation's are compared with those hashes, which are a "
                       "few bits from this version's: a near-duplicate may be missed",
                       store.url, hashed_by)
    problems, near = _near_duplicates(plan, df, store, receipts, leakage, generation, before)
    skipped = {p for p, reason in fate.items() if reason == appending.SKIPPED}
    skipped_count = len(skipped) + len(plan.skipped)  # (those left out before writing too)
    rejected = sorted((row, reason) for position, reason in
                      [*plan.rejected, *(r for receipt in receipts.values() for r in receipt.rejected)]
                      if position not in skipped for row in plan.table_rows(position))
    rejected_df = _rejected_frame(df, rejected)
    written = {split_of[n] for n, r in receipts.items() if r.shard.num_examples}
    for name in [n for n in receipts if split_of[n] not in written]:
        store.remove(name)  # a split whose every row was already there; a split with new
        store.remove(index_name(name))  # records keeps its empty shards, as a conversion
        del receipts[name]  # does, so that its shards stay numbered 0 to n - 1
    if not receipts:
        store.remove(STATE_DIR)
        logger.info("%s already holds every row of this append; nothing was changed",
                    store.url)
        return ConversionResult(store.url, {}, previous.labels, rejected_df,
                                previous.to_json(), problems, skipped_count)
    for name, vocabulary in label_files(plan.labels).items():
        store.write_atomic(name, "".join(f"{text}\n" for text in vocabulary))
    if rejected:
        store.write_atomic(rejected_name(generation),
                           safe_csv(rejected_df, index_label(df.index)))
    fields = [(field.level, field.vocabulary) for field in plan.label_fields]
    splits = {split: split_entry(mine, fields) for split in plan.splits
              if (mine := [receipts[s.name] for s in plan.shards
                           if s.split == split and s.name in receipts])}
    counts = {split: entry.num_examples for split, entry in splits.items()}
    earlier = previous.near_duplicates or {}
    entry = {"generation": generation, "fingerprint": plan.fingerprint, "num_examples": counts,
             "skipped": skipped_count, "rejected": len(rejected),
             "rejected_file": rejected_name(generation) if rejected else None,
             "hashes": (near or {}).get("hashes", [None])[0],
             "near_duplicates": (near or {}).get("pairs", 0),
             "near_duplicates_file": (near or {}).get("file")}
    near = near and {**earlier, "hashes": [*earlier.get("hashes", ()), *near["hashes"]],
                     "checksums": {**earlier.get("checksums", {}), **near["checksums"]}}
    manifest = appending.merged(previous, splits, None if plan.image is None else
                                ImageSummary.from_receipts(previous.image.stored,
                                                           receipts.values()),
                                plan, entry, near)
    for name, text in tfds.files(manifest).items():
        store.write_atomic(name, text)
    write_manifest(store, manifest)
    store.remove(STATE_DIR)
    logger.info("appended generation %d to %s: %s (%d already there, %d rejected)",
                generation, store.url, counts, skipped_count, len(rejected))
    return ConversionResult(store.url, counts, plan.labels, rejected_df, manifest.to_json(),
                            problems, skipped_count)


def _finish(plan, df, store, receipts, leakage="warn", previous=None, raises=False,
            before=None):
    if previous is not None:
        return _finish_append(plan, df, store, receipts, leakage, previous, raises, before)
    if not any(receipt.shard.num_examples for receipt in receipts.values()):
        for shard in plan.shards:  # every row was rejected while writing: no output at all
            store.remove(shard.name)
            store.remove(index_name(shard.name))
        store.remove(STATE_DIR)
        _refuse_empty(plan, df, [*plan.rejected,
                                 *(r for receipt in receipts.values() for r in receipt.rejected)])
    problems, near = _near_duplicates(plan, df, store, receipts, leakage)
    rejected = sorted((row, reason) for position, reason in
                      [*plan.rejected, *(r for receipt in receipts.values() for r in receipt.rejected)]
                      for row in plan.table_rows(position))
    rejected_df = _rejected_frame(df, rejected)
    fields = [(field.level, field.vocabulary) for field in plan.label_fields]
    by_split = {split: [receipts[s.name] for s in plan.shards if s.split == split]
                for split in plan.splits}
    splits = {split: split_entry(shards, fields) for split, shards in by_split.items()}
    kind = plan.record_kind
    labels = kind.written_labels(plan.features, plan.labels,
                                 {split: entry.label_counts for split, entry in splits.items()})
    for name, vocabulary in label_files(labels).items():
        store.write_atomic(name, "".join(f"{text}\n" for text in vocabulary))
    for name, text in kind.extra_files(labels).items():
        store.write_atomic(name, text)
    if rejected:
        store.write_atomic(REJECTED, safe_csv(rejected_df, index_label(df.index)))
    for field in plan.label_fields:
        written = {label for entry in splits.values()
                   for label in (entry.label_counts if field.level is None
                                 else entry.label_counts[field.level])}
        vocabulary = labels if field.level is None else labels[field.level]
        unused = [text for text in vocabulary if text and text not in written]
        if unused:
            logger.warning("%d label(s)%s have an id but no example (their every image was "
                           "rejected while writing, or label_map lists them): %s", len(unused),
                           f" of level {field.level}" if field.level else "", unused[:10])
    manifest = Manifest(
        labels=labels, features=plan.features.describe(), compression=plan.compression,
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
            "sha256 of the row's cells (but the split)"} if plan.assignment else None,
        near_duplicates=near,
        other={} if plan.image is None else
        {"image_options": appending.recorded_image_options(plan.image)})
    metadata = manifest.to_json()
    for name, text in tfds.files(manifest).items():
        store.write_atomic(name, text)
    write_manifest(store, manifest)
    store.remove(STATE_DIR)
    counts = {split: entry.num_examples for split, entry in splits.items()}
    logger.info("wrote %s to %s (%d rejected)", counts, store.url, len(rejected))
    return ConversionResult(store.url, counts, labels, rejected_df, metadata, problems)


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
    problems = None
    near = manifest.near_duplicates or {}
    if near.get("file"):
        pairs = pd.read_csv(io.BytesIO(store.read_bytes(near["file"])), dtype=str,
                            keep_default_na=False)
        row_of = {index_text(label): label for label in df.index}  # as the file has them
        problems = problems_frame([
            (row_of.get(p.row, p.row), None, p.image_uri, describe(
                f"row {row_repr(row_of.get(p.other_row, p.other_row))} ({p.other_image_uri}, "
                f"{p.other_split})", int(p.distance)))
            for p in pairs.itertuples(index=False)])
    return ConversionResult(store.url, counts, manifest.labels, rejected, metadata, problems)
