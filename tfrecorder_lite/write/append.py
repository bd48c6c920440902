"""Appending a generation to a finished output: whether it can be (:func:`appended_to`, before
anything is written), what is already there, and the merged manifest.

An append writes only new files (its shards, named for its generation, their index files, its
hashes and rejected rows' files), then rewrites ``labels.txt`` (new labels get the next ids)
and ``metadata.json`` last. Rows whose image (by the content hash of its file) is already in
the output with the same label and split are skipped; with another label or split they are
rejected naming both. Both are known from the earlier generations' hashes files, never by
reading their images again.
"""

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np

from .. import redaction
from ..errors import SchemaError
from ..images import content_hash
from ..memory import give_back_freed_memory
from ..near_duplicates.hashes_file import (check_present, label_texts, read_written_images,
                                           sorted_holds, text_hashes)
from ..output.layout import hashes_name
from ..output.manifest import SplitEntry, read_manifest
from ..storage import read_many
from ..output.splits import SPLITS
from ..output.csv_files import safe_cells
from ..record.kinds import kind_of
from ..table import labels, schema
from ..table.cells import is_blank
from ..table.kinds import prepare

logger = redaction.logger(__name__)  # every record redacted
SKIPPED = "already in the output"  # the reason of a skipped row (never written to a file)


def written_before(store, manifest):
    """Every image the output holds, from its hashes files, oldest first: a WrittenImages.

    Raises:
        ManifestError: a hashes file is missing, differs from what metadata.json records of
            it, or is no hashes file (``hashes_file.read_written_images``).
    """
    before = read_written_images(store, manifest.near_duplicates or {})
    before.labels = frozenset(manifest.labels)
    return before


_CHUNK = 1 << 12  # rows looked at a time (by each thread)
_READ_AT_ONCE = 32  # files read at once (for remote ones: fetched concurrently)


def already_there(plan, before, storage_options=None, threads=2):
    """The planned rows whose image is in the output already with the same label and split,
    found before anything is written (so that appending the whole table again costs a read
    of its files, not a conversion).

    Only a row whose path is the URI of an earlier image (as its hashes file keeps it: a URL
    with secrets, or a path read as a formula, is kept changed there) has its file read and
    hashed here; it is left out when :func:`decide` would skip it. Every other row (a new
    file, a copy under another name, a file that cannot be read, a changed label) is decided
    after writing, as before.

    Args:
        plan: the append's WritePlan.
        before: the earlier images (:func:`written_before`).
        storage_options: fsspec options for image URLs.
        threads: chunks of files read and hashed at once.

    Returns:
        The rows' positions, sorted (an int64 array).
    """
    if not len(before) or not plan.shards:
        return np.zeros(0, dtype=np.int64)
    positions = np.concatenate([shard.positions for shard in plan.shards])
    split_names = [shard.split for shard in plan.shards]
    split_codes = np.repeat(np.arange(len(plan.shards)),
                            [len(shard.positions) for shard in plan.shards])
    known = before.uri_hashes()

    def settled(start):  # a chunk of rows: those of it to leave out
        part = slice(start, start + _CHUNK)
        paths = plan.paths.take(positions[part])
        named = np.flatnonzero(sorted_holds(known, text_hashes(paths)))
        rows = positions[part][named].tolist()
        digests = [content_hash.hexdigest(before.hashed_by, content)
                   if isinstance(content, bytes) else None
                   for i in range(0, len(named), _READ_AT_ONCE)  # (their bytes held that long)
                   for content in read_many([paths[j] for j in named[i:i + _READ_AT_ONCE]],
                                            storage_options)]
        records = [(row, split_names[code], digest, label)
                   for row, code, digest, label in zip(
                       rows, split_codes[part][named].tolist(), digests,
                       label_texts(plan, rows))
                   if digest is not None]
        return np.array([row for row, reason in decide(records, before).items()
                         if reason == SKIPPED], dtype=np.int64)

    with ThreadPoolExecutor(threads, thread_name_prefix="tfrecorder_lite-known") as pool:
        skip = np.sort(np.concatenate([np.zeros(0, dtype=np.int64), *pool.map(
            settled, range(0, len(positions), _CHUNK))]))
    give_back_freed_memory()
    logger.info("%d of the table's %d rows to write are in the output already (the same "
                "image, label and split): left out", len(skip), len(positions))
    return skip


def decide(records, before):
    """What becomes of each new record whose file is already in the output.

    Args:
        records: ``(position, split, content hash, label text)`` of the new records (the
            hash ``before.hashed_by``; the label as the table has it, compared with the
            earlier one as its table had it, never with the hashes file's spreadsheet-safe
            text).
        before: :func:`written_before`'s WrittenImages.

    Returns:
        ``{position: reason}``: :data:`SKIPPED` for the same image, label and split; else the
        reason it is rejected (``already in TEST``, ``label changed from 'cat' to 'dog'``).
    """
    if not records or not len(before):
        return {}
    known = {}  # only the earlier images a new record repeats: the oldest of each
    for index in before.holding({digest for _, _, digest, _ in records}).tolist():
        known.setdefault(before.digest_of(index), index)
    out, tables = {}, {}
    for position, split, digest, label in records:
        index = known.get(digest)
        if index is None:
            continue
        kept = before.label_of(index)
        if kept not in tables:
            tables[kept] = _table_label(kept, before.labels)
        same_label = label == tables[kept] if tables[kept] is not None else \
            safe_cells([label])[0] == kept
        if before.split_of(index) == split and same_label:
            out[position] = SKIPPED
            continue
        old = before.image(index)
        where = f"row {old.row!r} ({old.image_uri}) of generation {old.generation}"
        if old.split != split:
            out[position] = f"already in {old.split}: the same image as {where}"
        elif not same_label:
            was = kept if tables[kept] is None else tables[kept]
            out[position] = (f"label changed from {was!r} to {label!r}: the same image as "
                             f"{where}; relabelling is not an append: convert the corrected "
                             "table again (docs/generations.md)")
    return out


def _table_label(kept, labels):
    """The label text the table had, of the text ``kept`` of a hashes file (written
    spreadsheet-safe, as ``rejected.csv``: ``'+ve`` for ``+ve``): the one of ``kept`` and
    ``kept`` unquoted that is written so and is a label of ``labels`` (several joined by "|");
    None when none is, or both are."""
    found = [text for text in {kept, kept[1:] if kept.startswith("'") else kept}
             if (text in labels or all(part in labels for part in text.split("|")))
             and safe_cells([text])[0] == kept]
    return found[0] if len(found) == 1 else None


def _counts(labels, old, new):
    """Label counts of two generations of a split, in label id order."""
    total = Counter(old)
    total.update(new)
    return {text: total[text] for text in labels if total[text]}


def _held(labels, splits, image):
    """What a generation's entry records of what it wrote, so that readers can sum the output
    up as it was after it (``manifest.as_of``): the labels known then, its label counts per
    split, its images' summary."""
    return {"labels": len(labels),
            "label_counts": {split: dict(e.label_counts) for split, e in splits.items()},
            "image": None if image is None else image.to_json()}


def merged(previous, splits, receipts_summary, plan, entry, near):
    """The Manifest of the output after a generation.

    Args:
        previous: the Manifest before it.
        splits: split -> SplitEntry of the generation's shards.
        receipts_summary: the ImageSummary of its images (None without images).
        plan: its WritePlan.
        entry: its ``generations`` entry.
        near: its ``near_duplicates`` entry (None: unchanged).
    """
    out = {}
    for split in SPLITS:
        old, new = previous.splits.get(split), splits.get(split)
        if old is None and new is None:
            continue
        old = old or SplitEntry(0, {}, ())
        new = new or SplitEntry(0, {}, ())
        out[split] = SplitEntry(old.num_examples + new.num_examples,
                                _counts(plan.labels, old.label_counts, new.label_counts),
                                old.shards + new.shards)
    generations = list(previous.generations or [{
        "generation": 0, "fingerprint": previous.fingerprint,
        "num_examples": {s: e.num_examples for s, e in previous.splits.items()},
        "hashes": hashes_name(0), **_held(previous.labels, previous.splits, previous.image)}])
    entry = {**entry, **_held(plan.labels, splits, receipts_summary)}
    return replace(previous, labels=plan.labels, splits=out,
                   image=previous.image.merged(receipts_summary),
                   fingerprint=plan.fingerprint, near_duplicates=near or previous.near_duplicates,
                   generations=generations + [entry])


def recorded_image_options(image):
    """The image options that decide a record's bytes, as metadata.json keeps them (an
    append must use the same)."""
    return {"check": image.check, "size": None if image.size is None else list(image.size),
            "format": image.format, "quality": image.quality}


def appended_to(df, store, prepared, table, write, image):
    """``(the Manifest appended to, the table prepared with the output's label ids)``.

    Raises:
        ManifestError: ``store`` holds no finished output, or one whose hashes files are
            missing or damaged.
        SchemaError: an append that cannot be (what it lacks, what differs), before anything
            is written.
    """
    previous, _ = read_manifest(store)
    if write.overwrite:
        raise SchemaError("append=True adds to the output, and overwrite=True replaces it: "
                          "choose one")
    if image is None or previous.image is None:
        raise SchemaError("append adds images to an output of images; a table without images "
                          "(or an output without them) cannot be appended to")
    if not (previous.near_duplicates or {}).get("hashes"):
        raise SchemaError(f"{store.url} keeps no hashes of its images (written with "
                          "leakage='ignore', with check='header' without leakage='warn', or "
                          "before they were kept), so an append cannot tell which rows it "
                          "already holds; convert it again first (with leakage='warn')")
    check_present(store, previous.near_duplicates)  # an append reads them when it finishes
    annotations = kind_of(previous.task).annotations
    if annotations is not None:
        raise SchemaError(
            f"{store.url} is a {previous.task} output, and an append takes tables of one label "
            "(or several) per row: the hashes files keep each image's labels, not its "
            f"{annotations}, so a corrected one could not be told from one already there; "
            "convert the whole table again (overwrite=True, or a new folder)")
    if isinstance(previous.labels, dict):
        raise SchemaError(f"{store.url} has label levels ({', '.join(previous.labels)}), and "
                          "an append takes tables of one label (or several) per row; convert "
                          "the whole table again (overwrite=True, or a new folder)")
    if table.label_map is not None:
        raise SchemaError("append keeps the output's label ids (new labels get the next "
                          "ones): it takes no label_map")
    if (previous.compression or None) != write.compression:
        raise SchemaError(f"compression must be the output's ({previous.compression}) to "
                          f"append to it, not {write.compression}")
    known = previous.other.get("image_options")
    asked = recorded_image_options(image)
    if known is not None and known != asked:
        differ = [f"{k} {known.get(k)!r} (asked: {asked[k]!r})" for k in asked
                  if known.get(k) != asked[k]]
        raise SchemaError(f"the output's records were written with {', '.join(differ)}: an "
                          "append must use the same image options; nothing was written")
    if (previous.image.stored == "resized") != (image.size is not None):
        raise SchemaError("image_size must be the output's to append to it "
                          f"({'resized' if image.size else 'kept'} images asked, "
                          f"{previous.image.stored} in the output)")
    series, _, _ = labels.elements(prepared.frame[table.label_col], table.label_sep)
    texts = {schema.label_text(v) for v in series.tolist() if not is_blank(v)}
    new = sorted(texts - set(previous.labels))
    return previous, prepare(df, replace(
        table, label_map=list(previous.labels) + new))


def check_same_records(previous, plan, store):
    """SchemaError unless the append's records have the output's features."""
    features = plan.features.describe()
    if features != previous.features:
        differ = sorted(set(features) ^ set(previous.features)) or sorted(
            k for k in features if features[k] != previous.features.get(k))
        raise SchemaError(f"the table's records would differ from those of {store.url} in "
                          f"{', '.join(differ)}: an append must give records of the same "
                          "features; nothing was written")
