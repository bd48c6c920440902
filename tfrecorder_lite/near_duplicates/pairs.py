"""The near-duplicate pairs of a generation, from the hashes its shard tasks took.

Each shard task hashes the images it reads anyway (``images.prepare_image`` with
``ImageOptions.phash``) and returns the hashes in its receipt. Once every shard is written,
the driver joins them (:func:`joined`), finds the pairs of near-identical images in different
splits that involve a new record (:func:`new_pairs`, against the earlier generations' images
too), has each confirmed (``confirmation``), and either reports them (``leakage="warn"``,
the pairs file: :func:`write_pairs`) or rejects the later row of each (``"reject"``:
:func:`later_rows`).
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..output.csv_files import safe_csv
from ..output.record_hashes import RecordHashes
from .search import near_pairs

PAIR_COLUMNS = ["row", "split", "image_uri", "other_row", "other_split", "other_image_uri",
                "distance"]


_PAIRS_CHUNK = 10_000  # pairs made into Python ints, or rows of the pairs file into text, at once


class Pairs:
    """Near-duplicate pairs, ``(later key, earlier key, distance)`` each, held as arrays:
    a million rows of copies of one picture, each paired once, take 18 bytes a pair rather
    than a tuple of Python ints each.

    A key is a table position, or ``(0, row)`` for row ``row`` of the earlier generations'
    images (``old`` marks those earlier keys; a later key is always a table position).
    Iterating gives the pairs as tuples; ``pairs[i:j]`` and ``pairs[mask]`` are Pairs.
    """

    def __init__(self, later=(), earlier=(), distance=(), old=None):
        self.later = np.asarray(later, dtype=np.int64)
        self.earlier = np.asarray(earlier, dtype=np.int64)
        self.distance = np.asarray(distance, dtype=np.int8)
        self.old = np.zeros(len(self.later), dtype=bool) if old is None else \
            np.asarray(old, dtype=bool)

    def __len__(self):
        return len(self.later)

    def __getitem__(self, which):
        return Pairs(self.later[which], self.earlier[which], self.distance[which],
                     self.old[which])

    def __iter__(self):
        for start in range(0, len(self), _PAIRS_CHUNK):  # a chunk's Python ints at a time
            part = slice(start, start + _PAIRS_CHUNK)
            for later, earlier, distance, old in zip(
                    self.later[part].tolist(), self.earlier[part].tolist(),
                    self.distance[part].tolist(), self.old[part].tolist()):
                yield later, (0, earlier) if old else earlier, distance

    def __repr__(self):
        return f"Pairs(<{len(self)} pair(s)>)"


def later_rows(pairs):
    """The later row of each pair to reject, ``{later key: (earlier key, distance)}``: a row
    whose every partner was itself rejected stays."""
    rejected = {}
    for later, earlier, distance in pairs:  # in order of the later row
        if earlier not in rejected and later not in rejected:
            rejected[later] = (earlier, distance)
    return rejected


def pairs_frame(pairs, describe_row):
    """A DataFrame of pairs (PAIR_COLUMNS); ``describe_row(key)`` gives (row, split, uri)."""
    rows = [(*describe_row(later), *describe_row(earlier), distance)
            for later, earlier, distance in pairs]
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


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
        ``(pairs, stand_in)``: the Pairs, in order of the later record (its partners in
        ``before`` first, in their order, then the new ones by position; a record among
        copies of one picture in its split is paired once, see ``search.near_pairs``); and
        ``stand_in(key)``, the key of the record whose image stands for a pair's record when
        the pair is confirmed (the first of its copies, so that a pair of sets of copies is
        confirmed once). A key is a new record's table position, or ``(0, i)`` for row ``i``
        of ``before``.
    """
    if not new.hashed.any():
        return Pairs(), _itself
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

    def keys(indexes):  # (their keys' numbers: a row of before or a position, old or not)
        old = indexes < count
        return np.where(old, old_rows[np.minimum(indexes, max(count - 1, 0))] if count else 0,
                        positions[np.maximum(indexes - count, 0)]), old

    (a, a_old), (b, b_old) = keys(first), keys(second)  # first < second: an old one is first
    a_earlier = a_old | (~b_old & (a < b))
    later, earlier = np.where(a_earlier, b, a), np.where(a_earlier, a, b)
    old = np.where(a_earlier, a_old, b_old)
    by_later = np.lexsort((earlier, ~old, later))  # the earlier generations' partners first
    pairs = Pairs(later[by_later], earlier[by_later], distance[by_later], old[by_later])
    del a, b, a_old, b_old, later, earlier, old, by_later
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
