"""``validate()``: the table's problems, including unreadable images and duplicated bytes."""

import functools
from dataclasses import dataclass

import joblib
import numpy as np
import pandas as pd

from . import storage
from .errors import UnsupportedURLError, row_repr
from .options import CHECKS, LEAKAGE, TableOptions, one_of
from .table import columns, schema
from .table.cells import text_series
from .table.file_checks import stat_files
from .table.kinds import prepare
from .images.normalize import (
    DEFAULT_MAX_BYTES, ImageOptions, ImageRejected, prepare_content, read_images,
    unreadable_reason)
from .images import content_hash
from .near_duplicates.confirmation import confirmed
from .near_duplicates.pairs import Pairs
from .near_duplicates.perceptual_hash import describe, hash_grids
from .near_duplicates.search import near_pairs
from .record.boxes import declared_size_problem
from .record.features import RecordRejected


_BLOCK = 1 << 16  # rows hashed, or whose paths are resolved, at a time


def inspect_images(items, options, storage_options=None, declared=None):
    """Check images (a joblib task): ``items`` are (position, path); ``declared``: ``{position:
    (height, width)}`` an annotation file declares; return (position, the bytes' content hash
    (``content_hash.DEFAULT``) or None, problem, perceptual hash or None)."""
    out, grids, declared = [], [], declared or {}
    contents = read_images([path for _, path in items], options, storage_options)
    for (position, _), content in zip(items, contents):
        try:
            stored = prepare_content(content, options)
        except ImageRejected as exc:
            out.append((position, None, str(exc), None))  # no digest: bytes not compared
        else:
            out.append((position, content_hash.digest(content_hash.DEFAULT, content),
                        declared_size_problem(declared.get(position), stored), None))
            if stored.luminance is not None:
                grids.append((len(out) - 1, stored.luminance))
    hashes = hash_grids([grid for _, grid in grids]).tolist()
    for (i, _), value in zip(grids, hashes):
        out[i] = out[i][:3] + (tuple(value),)
    return out


def inspect_files(items, options, storage_options, prepared, values):
    """Check each row's other files (e.g. its mask) against its image as its record would be
    (a joblib task); ``items``: ``(position, image path, other files' paths)``, ``values``: the
    row values of the kind's label fields. Returns ``(position, problem or None)`` of the rows
    whose image is fine (the image check reports the others)."""
    paths = [path for _, image, files in items for path in (image, *files)]
    contents = iter(read_images(paths, options, storage_options))
    out = []
    for position, image, files in items:
        content, found = next(contents), [next(contents) for _ in files]
        try:
            stored = prepare_content(content, options)
        except ImageRejected:
            continue
        problem = next((f"{column}: {unreadable_reason(c)}" for column, c in
                        zip(prepared.files, found) if isinstance(c, Exception)), None)
        if problem is None:
            try:
                for field, value in zip(values[0], values[1][position]):
                    field.encode(value, (stored, storage.basename(image)), tuple(found))
            except RecordRejected as exc:
                problem = str(exc)
        out.append((position, problem))
    return out


def _row_hashes(df):
    """A hash of each row's cells (lists and dicts, which pandas cannot hash, by their
    text)."""
    lists = [c for c in df.columns if df[c].dtype == object and
             df[c].map(lambda v: isinstance(v, (list, tuple, set, dict, np.ndarray))).any()]
    if lists:
        df = df.copy()
        for column in lists:
            df[column] = df[column].map(repr)
    # a block of rows at a time: hashing text cells makes a Python string of each
    return np.concatenate([np.zeros(0, dtype=np.uint64)] + [
        _hashes(df.iloc[start:start + _BLOCK]) for start in range(0, len(df), _BLOCK)])


def _hashes(block):
    """The row hashes of a block of rows (text that is no valid Unicode, a lone surrogate,
    hashed as its replacement text)."""
    try:
        return pd.util.hash_pandas_object(block, index=False).to_numpy()
    except UnicodeEncodeError:
        return pd.util.hash_pandas_object(block.apply(
            lambda c: text_series(c) if c.dtype == object else c), index=False).to_numpy()


def _identical_rows(df, found, refused=()):
    """The labels of rows whose cells repeat an earlier row's; each is added to ``found``
    (rows whose source ``refused`` them, by label, are left out: they have their reason)."""
    hashes = _row_hashes(df)
    involved = np.flatnonzero(pd.Series(hashes).duplicated(keep=False).to_numpy())
    identical, first_of, refused = set(), {}, set(refused)
    for position, row in zip(involved.tolist(), df.index[involved]):
        if row in refused:
            continue
        key = hashes[position]
        if key in first_of:
            identical.add(row)
            found.append((row, None, None, f"identical to row {row_repr(first_of[key])}"))
        else:
            first_of[key] = row
    return identical


def _resolved(df, image_col, base_dir, skipped, size, found):
    """Yield lists of up to ``size`` ``(position, path)`` of the rows not ``skipped``, a block
    of rows at a time; a path no filesystem can open goes to ``found`` instead."""
    items = []
    for start in range(0, len(df), _BLOCK):
        block = slice(start, start + _BLOCK)
        for position, row, uri in zip(range(start, start + _BLOCK), df.index[block],
                                      df[image_col].iloc[block].tolist()):
            if skipped[position]:
                continue
            try:
                items.append((position, storage.resolve(uri, base_dir)))
            except UnsupportedURLError as exc:
                found.append((row, image_col, uri, str(exc)))
            if len(items) == size:
                yield items
                items = []
    if items:
        yield items


def _parallel(n_jobs):
    """A joblib.Parallel in threads that yields results in order as they come, where the
    caller's backend can (some return a list at the end)."""
    try:
        return joblib.Parallel(n_jobs=n_jobs, prefer="threads", return_as="generator")
    except ValueError:
        return joblib.Parallel(n_jobs=n_jobs, prefer="threads")


def _near_pairs(perceptual, hashed, splits):
    """The near-duplicate pairs (``pairs.Pairs`` of positions) of the images across splits
    among the rows ``hashed`` (``perceptual``: their hashes, a row each), and each position's
    stand-in (``search.near_pairs``: the first of its copies)."""
    positions = np.flatnonzero(hashed)
    if not len(positions):
        return Pairs(), None
    groups = pd.factorize(np.asarray(splits, dtype=object))[0]
    if len(positions) == len(perceptual):  # every row: no copy of the hashes
        first, second, distance, firsts = near_pairs(perceptual, groups, stand_ins=True)
    else:
        first, second, distance, firsts = near_pairs(perceptual[positions], groups[positions],
                                                     stand_ins=True)

    def stand_in(position):
        return int(positions[firsts[np.searchsorted(positions, position)]])

    return Pairs(positions[second], positions[first], distance), stand_in


def _check_images(df, image_col, base_dir, splits, found, results, members=None,
                  storage_options=None, max_bytes=None):
    """Add to ``found`` the problems of ``results`` (``inspect_images``' answers, in position
    order), each for every row of its record (``members``: ``{first row: rows}`` of records
    of several rows), and the rows whose image bytes equal an earlier row's, in position
    order; find the rows whose image looks like an earlier one's in another split
    (near-duplicates, confirmed by reading their images again: ``storage_options``,
    ``max_bytes``).

    Returns:
        A _NearRows: the near-duplicates (a million copies of one picture make a million),
        as an array of rows and shared texts rather than a tuple a row.
    """
    digests = np.zeros(len(df), dtype=f"S{content_hash.digest_bytes(content_hash.DEFAULT)}")
    has_digest = np.zeros(len(df), dtype=bool)
    image_found, perceptual, hashed = [], None, np.zeros(len(df), dtype=bool)
    for position, digest, problem, value in (r for chunk in results for r in chunk):
        if value is not None:  # kept as one array, not a tuple of ints a row
            if perceptual is None:
                perceptual = np.zeros((len(df), len(value)), dtype=np.uint64)
            perceptual[position], hashed[position] = value, True
        if problem:
            uri = df[image_col].iloc[position]
            if problem == "file not found":
                problem += storage.relative_path_hint(uri, storage.resolve(uri, base_dir),
                                                      base_dir)
            image_found += [(p, (df.index[p], image_col, df[image_col].iloc[p], problem))
                            for p in (members or {}).get(position, (position,))]
        if digest is not None:
            digests[position], has_digest[position] = digest, True
    checked = np.flatnonzero(has_digest)
    if len(checked):
        _, first, inverse = np.unique(digests[checked], return_index=True, return_inverse=True)
        earlier = checked[first[np.ravel(inverse)]]  # each row's first row with its bytes
        for position, other in zip(checked[earlier != checked].tolist(),
                                   earlier[earlier != checked].tolist()):
            kind = "train/test leakage" if splits[other] != splits[position] \
                else "duplicate image"
            image_found.append((position, (
                df.index[position], image_col, df[image_col].iloc[position],
                f"{kind}: same image bytes as {_where(df, other, image_col, splits)}")))
        hashed[checked[earlier != checked]] = False  # reported above already
        pairs, stand_in = _near_pairs(perceptual, hashed, splits)
        pairs = confirmed(pairs, lambda p: (storage.resolve(df[image_col].iloc[p], base_dir),
                                            None), storage_options, max_bytes,
                          stand_in=stand_in)
        described = functools.lru_cache(maxsize=1 << 12)(  # copies: one text, many rows
            lambda other, distance: describe(_where(df, other, image_col, splits), distance))
        near = pairs.later, [described(other, distance) for _, other, distance in pairs]
    else:
        near = np.zeros(0, dtype=np.int64), []
    image_found.sort(key=lambda item: item[0])
    start = len(found)
    found += [problem for _, problem in image_found]
    return _NearRows(start, np.array([position for position, _ in image_found],
                                     dtype=np.int64), *near)


@dataclass
class _NearRows:
    """validate()'s near-duplicate problems, kept apart from the others' tuples.

    Attributes:
        start: where ``found`` holds the image problems (those of ``image_positions``).
        image_positions: the table position of each of those.
        positions: the rows of the near-duplicates (an array).
        problems: their problems (one text shared by the copies of one picture).
    """

    start: int
    image_positions: np.ndarray
    positions: np.ndarray
    problems: list


def _problems_frame(df, image_col, found, near):
    """The problems frame of ``found`` (``(row, column, value, problem)`` tuples in the order
    found) and ``near`` (a _NearRows, or None), in row order: a row's problems in the order
    found, its image's among them where they were found (a near-duplicate after the row's
    other image problems). The near-duplicates' values are taken from the image column as
    an array, not as a string a row, when the other values are text too."""
    count = 0 if near is None else len(near.positions)
    if not count:
        if found:
            wanted = {p[0] for p in found}
            order = {row: i for i, row in enumerate(df.index) if row in wanted}
            found.sort(key=lambda p: order.get(p[0], -1))
        return schema.problems_frame(found)
    last = pd.Series(np.arange(len(df)), index=df.index)  # a row label's last position
    last = last[~last.index.duplicated(keep="last")]
    at = last.index.get_indexer(pd.Index([p[0] for p in found], dtype=object))
    labels = df.index.take(near.positions)
    keys = np.concatenate([np.where(at >= 0, last.to_numpy()[at], -1),
                           last.to_numpy()[last.index.get_indexer(labels)]])
    # by row; then a row's problems found before its image's, its image's (by position, a
    # near-duplicate last), and those found after
    end = near.start + len(near.image_positions)
    block = np.ones(len(keys), dtype=np.int8)
    block[:near.start], block[end:len(found)] = 0, 2
    within = np.zeros(len(keys), dtype=np.int64)
    within[near.start:end], within[len(found):] = near.image_positions, near.positions
    order = np.lexsort((within, block, keys)).tolist()
    rows = [p[0] for p in found] + labels.tolist()
    column = [p[1] for p in found] + [image_col] * count
    problem = [p[3] for p in found] + near.problems
    values = [p[2] for p in found]
    near_values = df[image_col].array.take(near.positions)
    if pd.api.types.infer_dtype(values, skipna=True) in ("string", "empty") and \
            pd.api.types.infer_dtype(near_values, skipna=True) == "string":
        value = pd.concat([pd.Series(pd.array(values, dtype=near_values.dtype)),
                           pd.Series(near_values)], ignore_index=True).array.take(order)
    else:  # values of other kinds: Python objects, as the tuples hold them
        values += near_values.tolist()
        value = [values[i] for i in order]
    return schema.problems_frame_of([rows[i] for i in order], [column[i] for i in order],
                                    value, [problem[i] for i in order])


def _file_problems(df, prepared, image_col, positions, check, base_dir, n_jobs,
                   storage_options, max_bytes):
    """validate()'s problems of each row's other files (a kind's file columns, e.g. a mask),
    read and checked against the row's image, for the rows at ``positions``."""
    column = prepared.files[0]
    problems, items = [], []
    for position in positions:
        try:
            image = storage.resolve(df[image_col].iloc[position], base_dir)
        except UnsupportedURLError:
            continue  # the image check reports it
        try:
            files = tuple(storage.resolve(df[c].iloc[position], base_dir) for c in prepared.files)
        except UnsupportedURLError as exc:
            problems.append((df.index[position], column, df[column].iloc[position], str(exc)))
            continue
        items.append((position, image, files))
    values = prepared.kind.label_fields(prepared, prepared.options, {})
    options = ImageOptions(check=check, max_bytes=max_bytes)
    size = max(1, min(64, len(items) // 16))
    results = joblib.Parallel(n_jobs=n_jobs, prefer="threads")(
        joblib.delayed(inspect_files)(items[i:i + size], options, storage_options, prepared,
                                      values)
        for i in range(0, len(items), size))
    for position, problem in (r for chunk in results for r in chunk):
        if problem:
            problems.append((df.index[position], column, df[column].iloc[position], problem))
    return problems


def _where(df, position, image_col, splits):
    return (f"row {row_repr(df.index[position])} ({df[image_col].iloc[position]}, "
            f"{splits[position]})")


def validate(df, *, split_col="split", image_col="image_uri", label_col="label", label_map=None,
             check="header", base_dir=None, n_jobs=-1, storage_options=None,
             max_image_bytes=DEFAULT_MAX_BYTES, unassigned="reject", split_ratios=None,
             label_sep=None, features=None, box_units="relative", box_columns=None,
             mask_col=None, mask_labels=None, mask_colors=None, ignore_value=255,
             allow_lossy_masks=False, leakage="warn"):
    """Report every problem of the table, one row per problem.

    Checks columns, split values, labels (also labels that differ only in case or spaces,
    and fractional numbers, which would each be a class),
    extra columns and paths; with ``check`` ("header" or "decode") also opens every image, and
    reports rows whose image bytes equal another row's (train/test leakage across splits,
    duplicates within one), rows whose image looks like one in another split (the same photo
    resized, re-encoded, slightly cropped or brightened: ``near-duplicate across splits``,
    found by a perceptual hash and confirmed by reading the pair's two images again), and
    rows identical to another. A row's other files (a mask) are read and checked against its
    image as its record would be, with the same reasons.

    Args:
        df: the table; the column and label options are those of ``to_tfrecord``.
        check: "header", "decode", or None to check the cells only (no file is read).
        base_dir: folder (path or URL) that relative image paths resolve against.
        n_jobs: joblib workers that read and check images.
        storage_options: fsspec options for remote image URLs.
        max_image_bytes: larger image files are reported ("file too large") without being read.
        unassigned, split_ratios: as in ``to_tfrecord``: rows without a split are problems, or
            are given one (and then checked for leakage in it).
        label_sep, features, box_units, box_columns, mask_col, mask_labels, mask_colors,
            ignore_value, allow_lossy_masks: as in ``to_tfrecord``. Each kind of
            table adds its own checks (a per-box table: its boxes; see ``table/kinds.py``).
        leakage: "ignore" to leave near-duplicates across splits out (images are then not
            hashed); any other value of ``to_tfrecord``'s option reports them.

    Returns:
        A DataFrame with columns row, column, value, problem (empty when the table is clean).

    Raises:
        SchemaError: when a required column is missing, or an extra column cannot be stored
            exactly (``to_tfrecord`` refuses the same).
    """
    prepared = prepare(df, TableOptions.of(locals()), check_labels=False)
    one_of("check", check, (*CHECKS, None))
    kind, table = prepared.kind, prepared.options
    assignment = table.assignment
    problems = schema.row_problems(df, split_col, image_col, kind.label_column(table),
                                   table.label_map, assignment, label_sep)
    refused_by_source = [df.index[p] for p in schema.source_problems(df)]
    problems = problems[~problems.row.isin(refused_by_source)]  # its source's reason only
    found = list(problems.itertuples(index=False, name=None))
    columns.extra_columns(prepared.frame, schema.used_columns(split_col, image_col, label_col) |
                          prepared.used, features)  # SchemaError: unstorable
    found += kind.problems(df, prepared)
    bad_rows = set(problems["row"]) | set(refused_by_source)  # their images are not read
    splits = schema.table_splits(df, split_col, image_col, assignment).tolist()

    identical = _identical_rows(df, found, refused_by_source)
    if image_col is None:
        check = None
    skipped = df.index.isin(list(bad_rows | identical)) if bad_rows or identical else \
        np.zeros(len(df), dtype=bool)
    # a record of several rows (an image and its boxes) is read once, for its first row, and
    # its problem is every row's; a size its annotation file declares is compared with its own
    members = None if prepared.members is None else {m[0]: m for m in prepared.members}
    declared = {}
    if members is not None:
        skipped = skipped | ~np.isin(np.arange(len(df)), list(members))
        declared = {first: size for first, size in
                    zip(members, kind.declared_sizes(prepared) or ()) if size is not None}
    near = None  # the near-duplicates (_check_images)
    if image_col is not None:
        options = ImageOptions(check=check or "header", max_bytes=max_image_bytes,
                               phash=one_of("leakage", leakage, LEAKAGE) != "ignore")
        size = max(1, min(64, int((~skipped).sum()) // 16))
        tasks = (joblib.delayed(inspect_images)(
                     items, options, storage_options,
                     {p: declared[p] for p, _ in items if p in declared} or None)
                 for items in _resolved(df, image_col, base_dir, skipped, size, found))
        if check is None:  # only the paths: resolving them finds unsupported URLs
            for _ in tasks:
                pass
        else:
            near = _check_images(df, image_col, base_dir, splits, found,
                                 _parallel(n_jobs)(tasks), members, storage_options,
                                 max_image_bytes)
    if check is not None:  # each row's other files (e.g. a mask): there, and not too large
        others = {int(position): "" for position in np.flatnonzero(skipped)}
        others.update({position: "" for position, _ in
                       prepared.rows_of(prepared.refused.items())})
        unusable = set(others)
        for column in prepared.files:
            refused = dict(others)
            stat_files(df[column], refused, base_dir, max_image_bytes, storage_options,
                       column=column)
            found += [(df.index[position], column, df[column].iloc[position], reason)
                      for position, reason in refused.items() if reason]
            unusable.update(position for position, reason in refused.items() if reason)
        if prepared.files and image_col is not None:  # then read, checked against the image
            found += _file_problems(df, prepared, image_col,
                                    [p for p in range(len(df)) if p not in unusable], check,
                                    base_dir, n_jobs, storage_options, max_image_bytes)
    return _problems_frame(df, image_col, found, near)
