"""Near-duplicate images across splits, found from the hashes the shard tasks took.

Each shard task hashes the images it reads anyway (``images.prepare_image`` with
``ImageOptions.phash``) and returns the hashes in its receipt. Once every shard is written,
the driver finds the pairs of near-identical images in different splits here, confirms each
by reading its two images again (``images.confirm``: only the images of pairs found, copies
of one picture by their first one), and either
reports them (``leakage="warn"``), rejects the later row of each (``"reject"``: its shard is
written again without it, from the shard's own records, never from the source images), or
skips all of it (``"ignore"``). The generation's hashes file (:func:`write_hashes`) keeps every
record's hashes, so that a later append compares its rows with them.
"""

import csv
import io
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..images.phash import near_pairs
from ..output.hashes_files import checksums, hash_columns
from ..output.layout import STATE_DIR
from ..output.record_hashes import RecordHashes
from ..record.framing import FileDigest
from .csv_files import safe_cells, safe_csv
from .task import ShardSink

PAIR_COLUMNS = ["row", "split", "image_uri", "other_row", "other_split", "other_image_uri",
                "distance"]


def later_rows(pairs):
    """The later row of each pair to reject, ``{later key: (earlier key, distance)}``: a row
    whose every partner was itself rejected stays."""
    rejected = {}
    for later, earlier, distance in pairs:  # in order of the later row
        if earlier not in rejected and later not in rejected:
            rejected[later] = (earlier, distance)
    return rejected


def without_rows(store, receipt, plan, drop):
    """Write the shard of ``receipt`` again without the records of the positions in ``drop``.

    The records kept are copied from the shard as written (its receipt lists each record's
    position, in order); the dropped rows join the receipt's rejected rows with their reasons.

    Args:
        store: the output folder (a Store).
        receipt: the shard's Receipt, with ``hashes`` for every record.
        plan: the WritePlan (label ids of the rows).
        drop: ``{position: reason}``.

    Returns:
        The new Receipt (also left in the state folder, replacing the old one).
    """
    label_count = len(plan.features.labels)
    sink = ShardSink(store, receipt.name, plan.compression, plan.sha256, label_count,
                     plan.file_format)
    for position, reason in receipt.rejected:
        sink.add(position, None, reason)
    values = label_values(plan, receipt.hashes.positions.tolist())
    with store.open_read(receipt.name) as f:
        records = plan.file_format.records(f, plan.compression)
        for entry, record, labels in zip(receipt.hashes, records, values):
            position, digest, value, fmt, height, width, channels = entry
            if position in drop:
                sink.add(position, None, drop[position])
                continue
            label_ids = tuple(v[0] for v in labels[:label_count])
            sink.add(position, record,
                     (fmt, height, width, channels, label_ids, (digest, value)))
        sink.flush()  # the records go to the sink's thread before the file is closed
    return sink.finish(store.child(STATE_DIR))


def label_values(plan, positions):
    """Each planned row's ``(id, text)`` per label field, for many rows at once."""
    if hasattr(plan.label_values, "take"):
        return plan.label_values.take(positions)
    return [plan.label_values[p] for p in positions]


def pairs_frame(pairs, describe_row):
    """A DataFrame of pairs (PAIR_COLUMNS); ``describe_row(key)`` gives (row, split, uri)."""
    rows = [(*describe_row(later), *describe_row(earlier), distance)
            for later, earlier, distance in pairs]
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


_PAIRS_CHUNK = 10_000  # rows of the pairs file made into text at once


def write_pairs(store, name, pairs, describe_row):
    """Write the pairs file ``name``: a row per pair (:func:`pairs_frame`), made into text a
    chunk at a time (redacted and spreadsheet-safe, as in ``rejected.csv``): copies of one
    picture in a million rows cost a chunk's frame, not a million rows'."""
    pending = store.open_for_commit(name)
    try:
        for start in range(0, len(pairs), _PAIRS_CHUNK):
            frame = pairs_frame(pairs[start:start + _PAIRS_CHUNK], describe_row)
            pending.write(safe_csv(frame.set_index("row"), "row",
                                   header=start == 0).encode("utf-8"))
    except BaseException:
        pending.discard()
        raise
    pending.commit()


def joined(receipts, split_of, consume=False):
    """Every record of ``receipts``, in the receipts' order (no copy in table order is made).

    Args:
        receipts: shard name -> Receipt.
        split_of: shard name -> its split.
        consume: empty the receipts' hashes as they are joined (they are not needed again).

    Returns:
        ``(RecordHashes of the records, the split of each, the order that puts them in table
        order)``.
    """
    parts = [(receipt.hashes, split_of[name]) for name, receipt in receipts.items()]
    if not parts:
        return RecordHashes(), np.zeros(0, dtype=object), np.zeros(0, dtype=np.int64)
    splits = np.repeat(np.array([split for _, split in parts], dtype=object),
                       [len(hashes) for hashes, _ in parts])
    hashes = RecordHashes.joined([hashes for hashes, _ in parts], consume)
    return hashes, splits, np.argsort(hashes.positions, kind="stable")


@dataclass(frozen=True)
class Searched:
    """What the search reads of the new records' hashes: their positions, perceptual hashes
    (a row each) and whether each was hashed."""

    positions: np.ndarray
    perceptual: np.ndarray
    hashed: np.ndarray


def new_pairs(before, new, splits):
    """The near-duplicate pairs across splits that involve a new record.

    Args:
        before: the earlier generations' images (a WrittenImages), or None.
        new: the new records' RecordHashes (or their Searched columns), in any order.
        splits: the split of each new record.

    Returns:
        ``(pairs, stand_in)``: ``(later key, earlier key, distance)`` per pair, in order of
        the later record (its partners in ``before`` first, in their order, then the new ones
        by position; a record among copies of one picture in its split is paired once, see
        ``phash.near_pairs``); and ``stand_in(key)``, the key of the record whose image
        stands for a pair's record when the pair is confirmed (the first of its copies, so
        that a pair of sets of copies is confirmed once). A key is a new record's table
        position, or ``(0, i)`` for row ``i`` of ``before``.
    """
    if not new.hashed.any():
        return [], _itself
    old_rows = np.zeros(0, dtype=np.int64) if before is None or not len(before) else \
        np.flatnonzero(before.hashed)
    hashes = new.perceptual if new.hashed.all() else new.perceptual[new.hashed]
    count = len(old_rows)
    if count:  # one copy of the earlier hashes beside the new (else no copy of the new)
        width = min(before.perceptual.shape[1], hashes.shape[1])
        whole = count == len(before) and before.perceptual.shape[1] == width
        hashes = np.concatenate([before.perceptual if whole else
                                 before.perceptual[old_rows, :width], hashes[:, :width]])
        groups = before.split_groups(old_rows, splits[new.hashed])
    else:
        groups = pd.factorize(splits[new.hashed])[0]
    positions = new.positions[new.hashed]
    first, second, distance, stand_ins = near_pairs(  # with earlier images: a new one's only
        hashes, groups, involving=np.arange(count, len(hashes)) if count else None,
        order=np.concatenate([np.arange(count), count + positions]),  # earlier ones first
        stand_ins=True)
    del hashes, groups

    def key(i):
        return (0, int(old_rows[i])) if i < count else int(positions[i - count])

    pairs = []
    for a, b, d in zip(first.tolist(), second.tolist(), distance.tolist()):
        earlier, later = sorted((key(a), key(b)), key=_table_order_key)
        pairs.append((later, earlier, d))
    pairs.sort(key=lambda pair: (pair[0], _table_order_key(pair[1])))
    if (stand_ins == np.arange(len(stand_ins))).all():  # no copies: each stands for itself
        return pairs, _itself
    index_of = np.zeros(int(positions.max()) + 1, dtype=np.int64)  # a new record's index
    index_of[positions] = np.arange(count, count + len(positions))

    def stand_in(found):
        if isinstance(found, tuple):  # an earlier image: its index among the old rows
            return key(stand_ins[int(np.searchsorted(old_rows, found[1]))])
        return key(stand_ins[index_of[found]])

    return pairs, stand_in


def _itself(key):
    """The stand-in of a record without copies: itself."""
    return key


def _table_order_key(key):
    """A sort key that puts earlier generations' images first, then new records by
    position."""
    return (0, key[1]) if isinstance(key, tuple) else (1, key)


def label_texts(plan, positions):
    """The label text of planned rows (several joined by "|"), as the hashes file keeps it."""
    values = label_values(plan, positions)
    return ["|".join(v[0][1]) if isinstance(v[0][1], tuple) else v[0][1] for v in values]


_HASHES_CHUNK = 10_000  # rows of the hashes file made into text at once


def write_hashes(store, name, plan, labels, hashes, splits, order):
    """Write the hashes file ``name``: a row per record of ``hashes`` (a RecordHashes,
    ``splits`` the split of each; its files hashed by ``plan.image.content_hash``), in table
    order (``order``), made into text a chunk at a time (the table's text redacted and
    spreadsheet-safe, as in ``rejected.csv``).

    Returns:
        Its size and CRC32C, as metadata.json records them (``hashes_files.checksums``).
    """
    pending = store.open_for_commit(name)
    digest, size = FileDigest(), 0
    header = hash_columns(plan.image.content_hash)
    try:
        for start in range(0, len(order), _HASHES_CHUNK):
            rows = order[start:start + _HASHES_CHUNK]
            part = hashes.take(rows)
            positions = part.positions.tolist()
            perceptual = [value or "" for value in part.perceptual_hex()]
            columns = {
                "row": safe_cells(labels.take(positions)),
                "split": splits[rows].tolist(),
                "image_uri": safe_cells(plan.paths.take(positions)),
                plan.image.content_hash: part.digests(),
                "label": safe_cells(label_texts(plan, positions)),
                "phash": [value[:16] for value in perceptual],
                "crops": [value[16:] for value in perceptual]}
            text = io.StringIO()
            writer = csv.writer(text, lineterminator="\n")  # as pandas' to_csv writes
            if start == 0:
                writer.writerow(header)
            writer.writerows(zip(*(columns[column] for column in header)))
            chunk = text.getvalue().encode()
            digest.update(chunk)
            size += len(chunk)
            pending.write(chunk)
    except BaseException:
        pending.discard()
        raise
    pending.commit()
    return checksums(size, digest.hexdigests()["crc32c"])
