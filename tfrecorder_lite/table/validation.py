"""``validate()``: the table's problems, including unreadable images and duplicated bytes."""

import hashlib

import joblib
import numpy as np
import pandas as pd

from . import columns, schema
from .cells import text_series
from .. import storage
from .files import stat_files
from .kinds import prepare
from ..errors import UnsupportedURLError
from ..options import TableOptions
from ..images.normalize import (
    DEFAULT_MAX_BYTES, ImageOptions, ImageRejected, prepare_content, read_images)
from ..record.boxes import declared_size_problem


def inspect_images(items, options, storage_options=None):
    """Check images (a joblib task): ``items`` are (position, path, the (height, width) its
    annotation file declares, or None); return (position, sha256 of the bytes or None,
    problem)."""
    out = []
    contents = read_images([path for _, path, _ in items], options, storage_options)
    for (position, _, declared), content in zip(items, contents):
        try:
            stored = prepare_content(content, options)
        except ImageRejected as exc:
            out.append((position, None, str(exc)))  # no digest: the bytes were not compared
        else:
            out.append((position, hashlib.sha256(content).digest(),
                        declared_size_problem(declared, stored)))
    return out


def _row_hashes(df):
    """A hash of each row's cells (lists, which pandas cannot hash, by their text)."""
    lists = [c for c in df.columns if df[c].dtype == object and
             df[c].map(lambda v: isinstance(v, (list, tuple, set, np.ndarray))).any()]
    if lists:
        df = df.copy()
        for column in lists:
            df[column] = df[column].map(repr)
    try:
        return pd.util.hash_pandas_object(df, index=False)
    except UnicodeEncodeError:  # text that is no valid Unicode (a lone surrogate)
        return pd.util.hash_pandas_object(
            df.apply(lambda c: text_series(c) if c.dtype == object else c), index=False)


def _where(df, position, image_col, splits):
    return f"row {df.index[position]!r} ({df[image_col].iloc[position]}, {splits[position]})"


def validate(df, *, split_col="split", image_col="image_uri", label_col="label", label_map=None,
             check="header", base_dir=None, n_jobs=-1, storage_options=None,
             max_image_bytes=DEFAULT_MAX_BYTES, unassigned="reject", split_ratios=None,
             label_sep=None, features=None, box_units="relative", box_columns=None):
    """Report every problem of the table, one row per problem.

    Checks columns, split values, labels (also labels that differ only in case or spaces,
    and fractional numbers, which would each be a class),
    extra columns and paths; with ``check`` ("header" or "decode") also opens every image, and
    reports rows whose image bytes equal another row's (train/test leakage across splits,
    duplicates within one) and rows identical to another.

    Args:
        df: the table; the column and label options are those of ``to_tfrecord``.
        check: "header", "decode", or None to check the cells only (no file is read).
        base_dir: folder (path or URL) that relative image paths resolve against.
        n_jobs: joblib workers that read and check images.
        storage_options: fsspec options for remote image URLs.
        max_image_bytes: larger image files are reported ("file too large") without being read.
        unassigned, split_ratios: as in ``to_tfrecord``: rows without a split are problems, or
            are given one (and then checked for leakage in it).
        label_sep, features, box_units, box_columns: as in ``to_tfrecord``. Each kind of
            table adds its own checks (a per-box table: its boxes; see ``table/kinds.py``).

    Returns:
        A DataFrame with columns row, column, value, problem (empty when the table is clean).

    Raises:
        SchemaError: when a required column is missing, or an extra column cannot be stored
            exactly (``to_tfrecord`` refuses the same).
    """
    prepared = prepare(df, TableOptions(
        split_col, image_col, label_col, label_map, label_sep, features, unassigned,
        split_ratios, box_units, box_columns, base_dir), check_labels=False)
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
    bad_rows = set(problems["row"])
    splits = schema.table_splits(df, split_col, image_col, assignment).tolist()

    identical, first_of = set(), {}
    for row, key in zip(df.index, _row_hashes(df)):
        if key in first_of:
            identical.add(row)
            found.append((row, None, None, f"identical to row {first_of[key]!r}"))
        else:
            first_of[key] = row

    if image_col is None:
        check = None
    # a record of several rows (an image and its boxes) is read once, for its first row, and
    # its problem is every row's; a size its annotation file declares is compared with its own
    members = None if prepared.members is None else {m[0]: m for m in prepared.members}
    declared = dict(zip(members, kind.declared_sizes(prepared) or ())) if members else {}
    items = []
    for position, (row, uri) in enumerate(zip(df.index, df[image_col] if image_col else ())):
        if row in bad_rows or row in identical or (members is not None and
                                                   position not in members):
            continue
        try:
            items.append((position, storage.resolve(uri, base_dir), declared.get(position)))
        except UnsupportedURLError as exc:
            found.append((row, image_col, uri, str(exc)))
    if check is not None and items:
        paths = {position: path for position, path, _ in items}
        options = ImageOptions(check=check, max_bytes=max_image_bytes)
        size = max(1, min(64, len(items) // 16))
        results = joblib.Parallel(n_jobs=n_jobs, prefer="threads")(
            joblib.delayed(inspect_images)(items[i:i + size], options, storage_options)
            for i in range(0, len(items), size))
        first_with = {}
        for position, digest, problem in (r for chunk in results for r in chunk):
            row, uri = df.index[position], df[image_col].iloc[position]
            if problem == "file not found":
                problem += storage.relative_path_hint(uri, paths[position], base_dir)
            if problem:
                found += [(df.index[p], image_col, df[image_col].iloc[p], problem)
                          for p in (members[position] if members else (position,))]
            if digest is None:
                continue
            if digest in first_with:
                other = first_with[digest]
                leak = ("train/test leakage" if splits[other] != splits[position]
                        else "duplicate image")
                found.append((row, image_col, uri, f"{leak}: same image bytes as "
                              f"{_where(df, other, image_col, splits)}"))
            else:
                first_with[digest] = position
    if check is not None:  # each row's other files (e.g. a mask): there, and not too large
        skipped = {position: "" for position, row in enumerate(df.index)
                   if row in bad_rows or row in identical}
        for column in prepared.files:
            refused = dict(skipped)
            stat_files(df[column].tolist(), refused, base_dir, max_image_bytes, storage_options,
                       column=column)
            found += [(df.index[position], column, df[column].iloc[position], reason)
                      for position, reason in refused.items() if reason]
    order = {row: i for i, row in enumerate(df.index)}
    found.sort(key=lambda p: order.get(p[0], -1))
    return schema.problems_frame(found)
