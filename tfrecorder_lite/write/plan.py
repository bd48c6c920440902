"""The write plan: label vocabulary, seeded shuffle, split -> shards. Frozen and picklable.

Everything that decides the output bytes is decided here, before any image is opened, so the
same table, options and seed give the same shards whatever the parallelism.
"""

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..table import columns, labels, schema
from ..errors import SchemaError
from ..images.normalize import ImageOptions
from ..output.splits import SPLITS, canonical
from ..formats import DEFAULT
from ..output.layout import shard_name
from ..output.manifest import FORMAT_VERSION
from ..record import keys
from ..record.features import FeatureSet
from ..table.row_columns import LabelColumns, TextColumn
from .task import ShardTask, TaskRows
from ..options import leakage_for, table_and_write
from ..table.file_checks import stat_files
from ..table.kinds import prepare

TARGET_SHARD_BYTES = 128 * 2**20
_RESIZED_BYTES_PER_PIXEL = 0.3  # rough JPEG size estimate used to pick shard counts


@dataclass(frozen=True)
class ShardSpec:
    """One output file: which rows (positions in the table, an int64 array) go into it, in
    order.

    ``source_bytes`` is the size of its rows' image files (without images, an estimate of its
    records' size): the work it holds, for choosing how to run it (``runners.parallelism``).
    """

    split: str
    index: int
    num_shards: int
    positions: np.ndarray
    compression: str = None
    source_bytes: int = 0
    generation: int = 0

    @property
    def name(self):
        """File name, e.g. ``train-00000-of-00004.tfrecord`` (an appended generation's:
        ``train-g0001-00000-of-00004.tfrecord``)."""
        return shard_name(self.split, self.index, self.num_shards, self.compression,
                          generation=self.generation)


@dataclass(frozen=True, eq=False)
class WritePlan:
    """What to write, decided up front.

    Attributes:
        features: the FeatureSet of every record (its labels: ClassLabel with column, level,
            multi, vocabulary; its columns: Column with name, kind, shape, column dtype,
            missing).
        shards: every ShardSpec, split by split.
        paths, label_values, extras: per table position (paths: a TextColumn; label_values:
            one (id, text) per label field, a LabelColumns unless labels are lists or boxes;
            extras: tuple of values, one per column).
        image: ImageOptions, or None for a table without images.
        rejected: (position, reason) of rows refused before any image was read.
        splits: splits present in the table, in TRAIN, VALIDATION, TEST order.
        fingerprint: sha256 of everything above plus the image files' sizes and times.
        assignment: the split shares rows without a split were given, or None.
        members: per planned row, the table positions it stands for (None: itself).
        files: per planned row, the paths of its other files (one per ``file_columns``), or
            None when records have none.
        file_columns: the columns of those files (e.g. a mask's).
        file_format: the shard files' format (``formats``; TFRecord).
        record_kind: the RecordKind of the records (``record/kinds.py``).
        skipped: positions of rows an append leaves out, already in the output (sorted).
    """

    features: FeatureSet
    shards: tuple
    paths: TextColumn
    label_values: tuple
    extras: tuple
    image: ImageOptions
    compression: str
    rejected: tuple
    splits: tuple
    fingerprint: str
    sha256: bool = False
    assignment: tuple = None
    members: tuple = None
    record_kind: object = None
    files: tuple = None
    file_columns: tuple = ()
    file_format: object = DEFAULT
    skipped: tuple = ()

    def table_rows(self, position):
        """The table positions a planned row stands for: itself, or all the rows its table kind
        grouped into it (the boxes of one image)."""
        return self.members[position] if self.members is not None else (position,)

    def planned_labels(self, index):
        """The row labels of the planned rows, from the table's ``index``."""
        return index if self.members is None else index[[rows[0] for rows in self.members]]

    def planned_position(self, row):
        """The planned row (a record) that table position ``row`` is in."""
        if self.members is None:
            return row
        return next(i for i, rows in enumerate(self.members) if row in rows)

    @property
    def label_fields(self):
        """The ClassLabel of each label field."""
        return self.features.labels

    @property
    def labels(self):
        """Label id -> text: a list, or with label levels a dict level -> list."""
        if self.label_fields[0].level is None:
            return list(self.label_fields[0].vocabulary)
        return {f.level: list(f.vocabulary) for f in self.label_fields}

    @property
    def multi_label(self):
        """True when rows hold lists of labels."""
        return any(f.multi for f in self.label_fields)

    def task(self, shard, row_labels, threads=1):
        """The ShardTask of ``shard``: its rows only (``row_labels``: the table's index)."""
        positions = np.asarray(shard.positions, dtype=np.int64).tolist()
        values = self.label_values.take(positions) if isinstance(self.label_values, LabelColumns) \
            else [self.label_values[p] for p in positions]
        extras = [self.extras[p] for p in positions]
        files = [()] * len(positions) if self.files is None else \
            [self.files[p] for p in positions]
        by_position = isinstance(row_labels, pd.RangeIndex) and row_labels.start == 0 and \
            row_labels.step == 1  # each row's label is its position: one int for both
        rows = TaskRows(positions, None if by_position else row_labels[positions].tolist(),
                        self.paths.take(positions),
                        [(*labels_, *more) if more else labels_
                         for labels_, more in zip(values, extras)], files)
        return ShardTask(shard.name, rows, self.image, self.compression, self.features,
                         self.sha256, threads, self.file_columns, self.file_format.name)


def _shard_count(requested, split, n_rows, n_bytes):
    if isinstance(requested, dict):
        requested = {canonical(k): v for k, v in requested.items()}.get(split)
    if requested is None:
        wanted = math.ceil(n_bytes / TARGET_SHARD_BYTES)
    elif isinstance(requested, int) and not isinstance(requested, bool) and requested > 0:
        wanted = requested
    else:
        raise SchemaError(f"num_shards must be a positive integer, a dict per split or None, "
                          f"not {requested!r}")
    return max(1, min(wanted, n_rows))


def build_plan(prepared, write, image=ImageOptions(), storage_options=None, generation=0,
               skip=None):
    """Decide labels, order and shards; rows with problems go to ``rejected``.

    Args:
        prepared: the PreparedTable (``table.kinds.prepare``): the records of the table and
            its TableOptions.
        write: the WriteOptions (shards, compression, order, checksums).
        image: ImageOptions, or None for a table without images (``image_col=None``).
        storage_options: fsspec options for image URLs (see ``storage.options_for``).
        generation: 0 for a new output; ``k`` for the ``k``-th append to one (its shards are
            named for it).
        skip: for an append, a function of the plan as drafted (every row to write) giving
            the positions of the rows to leave out, their image already in the output
            (``append.already_there``): neither written nor rejected; None: no such rows.

    Returns:
        A WritePlan.
    """
    df, table, kind = prepared.frame, prepared.options, prepared.kind
    split_col, image_col, label_col = table.split_col, table.image_col, table.label_col
    assignment = table.assignment
    splits = schema.table_splits(df, split_col, image_col, assignment)
    problems = schema.row_problems(df, split_col, image_col, kind.label_column(table),
                                   table.label_map, assignment, table.label_sep, splits)
    reasons = dict(prepared.refused)
    positions_of = {row: i for i, row in enumerate(df.index)} if len(problems) else {}
    for row, _column, _value, problem in problems.itertuples(index=False):
        reasons.setdefault(positions_of[row], problem)

    used = schema.used_columns(split_col, image_col, label_col) | prepared.used
    extra, extras = columns.extra_columns(
        df, used, table.features, reserved=[key for _, level in labels.label_columns(label_col)
                                            for key in keys.label_keys(level)])
    compression = write.compression
    fingerprint = hashlib.sha256()
    if image_col is None:
        image, paths = None, TextColumn([[None] * len(df)])
        sizes = np.array([_ROW_BYTES + sum(len(v) * 8 if isinstance(v, list) else 8
                                           for v in values) for values in extras], dtype=np.int64)
    else:
        paths, sizes = stat_files(df[image_col], reasons, table.base_dir, image.max_bytes,
                                  storage_options, fingerprint)
    files = None
    for column in prepared.files:  # each record's other files: resolved and checked alike
        found, more = stat_files(df[column], reasons, table.base_dir,
                                 (image or ImageOptions()).max_bytes, storage_options,
                                 fingerprint, column)
        files = [(*previous, path) for previous, path in
                 zip(files or [()] * len(df), found.take(np.arange(len(df))))]
        sizes = sizes + more

    label_fields, label_values = kind.label_fields(prepared, table, reasons)
    written_values = kind.written_values(prepared, label_values)  # what is only checked
    features = FeatureSet(None if image is None else kind.image_feature(), label_fields, extra)
    refused = np.zeros(len(splits), dtype=bool)
    refused[list(reasons)] = True

    def shards_of(refused):
        """The shards of the rows not ``refused``, and the splits present."""
        shards, present = [], []
        for split_number, split in enumerate(SPLITS):
            in_split = splits.eq(split).to_numpy(dtype=bool)
            if not in_split.any():
                continue
            positions = np.flatnonzero(in_split & ~refused).astype(np.int64)
            present.append(split)
            if write.shuffle and len(positions):
                rng = np.random.default_rng([write.seed, split_number])
                positions = positions[rng.permutation(len(positions))]
            if image is not None and image.size is not None:
                n_bytes = (len(positions) * image.size[0] * image.size[1] * 3 *
                           _RESIZED_BYTES_PER_PIXEL)
            else:
                n_bytes = int(sizes[positions].sum())
            count = _shard_count(write.num_shards, split, len(positions), n_bytes)
            bounds = [len(positions) * i // count for i in range(count + 1)]
            shards += [ShardSpec(split, i, count, positions[a:b], compression,
                                 int(sizes[positions[a:b]].sum()), generation)
                       for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]
        return shards, present

    rejected = tuple(sorted(reasons.items()))

    def plan_of(shards, present, fingerprint, skipped):
        return WritePlan(
            features=features, shards=tuple(shards), paths=paths, label_values=written_values,
            extras=tuple(extras), image=image, compression=compression, rejected=rejected,
            splits=tuple(present), fingerprint=fingerprint, sha256=write.sha256,
            assignment=assignment, members=prepared.members, record_kind=kind.record,
            files=None if files is None else tuple(files), file_columns=prepared.files,
            skipped=skipped)

    shards, present = shards_of(refused)
    skipped = np.zeros(0, dtype=np.int64)
    if skip is not None:  # rows an append leaves out, found on the plan as drafted so far
        skipped = np.asarray(skip(plan_of(shards, present, None, skipped)), dtype=np.int64)
        if len(skipped):
            refused[skipped] = True
            shards, present = shards_of(refused)
    single = len(label_fields) == 1 and label_fields[0].level is None
    description = {
        "format_version": FORMAT_VERSION,
        # earlier outputs (one label per row, images, scalar columns) keep their fingerprint
        "labels": label_fields[0].vocabulary if single else
        [(f.level, f.vocabulary) for f in label_fields],
        **({"multi_label": True} if any(f.multi for f in label_fields) else {}),
        # max_bytes decides only which rows are rejected, and those are listed below; the
        # hashes are beside the records, never in them
        "image": None if image is None else
        {k: v for k, v in dataclasses.asdict(image).items()
         if k not in ("max_bytes", "phash", "content_hash")},
        # the default of the check keeps the fingerprint of outputs written before it existed
        **({"leakage": write.leakage} if image is not None and write.leakage is not None and
           write.leakage != leakage_for(None, image.check, image.size) else {}),
        "compression": compression, "extra_kinds": tuple(
            (c.name, c.kind) + ((c.shape,) if c.shape else ()) for c in extra),
        "rejected": rejected,
        **({"sha256": True} if write.sha256 else {}),
        **({"skipped": hashlib.sha256(skipped.tobytes()).hexdigest()} if len(skipped)
           else {}),
        **({"assignment": assignment} if assignment else {}),
        "shards": [(s.name, s.positions.tolist()) for s in shards],
        "label_ids": _label_ids_described(label_values, single),
        "extras": extras,
        **kind.fingerprint(prepared, table),
    }
    fingerprint.update(json.dumps(description, default=str, sort_keys=True).encode())
    return plan_of(shards, present, fingerprint.hexdigest(), skipped)


_ROW_BYTES = 64  # rough record size without images, beside its values (picks shard counts)


def _label_ids_described(label_values, single):
    """What the fingerprint takes of the rows' labels: one label field's ids, else the
    values."""
    if isinstance(label_values, LabelColumns):
        return label_values.ids[0].tolist() if single else list(label_values)
    return [v[0][0] for v in label_values] if single else label_values


def plan_table(df, image=ImageOptions(), storage_options=None, **options):
    """The WritePlan of ``df`` with the keyword options of ``to_tfrecord`` that TableOptions and
    WriteOptions take (``image``: ImageOptions, or None without images)."""
    table, write = table_and_write(**options)
    return build_plan(prepare(df, table), write, image, storage_options)
