"""The write plan: label vocabulary, seeded shuffle, split -> shards. Frozen and picklable.

Everything that decides the output bytes is decided here, before any image is opened, so the
same table, options and seed give the same shards whatever the parallelism.
"""

import dataclasses
import functools
import hashlib
import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..table import columns, labels, schema
from .. import storage
from ..errors import SchemaError, UnsupportedURLError
from ..images.normalize import ImageOptions, unreadable_reason
from ..table.splits import SPLITS, canonical
from ..output.layout import shard_name
from ..output.manifest import FORMAT_VERSION
from ..record import keys
from ..record.features import Boxes, ClassLabel, FeatureSet, ImageFeature
from .task import ShardTask

TARGET_SHARD_BYTES = 128 * 2**20
_RESIZED_BYTES_PER_PIXEL = 0.3  # rough JPEG size estimate used to pick shard counts


@dataclass(frozen=True)
class ShardSpec:
    """One output file: which rows (positions in the table) go into it, in order.

    ``source_bytes`` is the size of its rows' image files (without images, an estimate of its
    records' size): the work it holds, for choosing how to run it (``runners.parallelism``).
    """

    split: str
    index: int
    num_shards: int
    positions: tuple
    compression: str = None
    source_bytes: int = 0

    @property
    def name(self):
        """File name, e.g. ``train-00000-of-00004.tfrecord``."""
        return shard_name(self.split, self.index, self.num_shards, self.compression)


@dataclass(frozen=True, eq=False)
class WritePlan:
    """What to write, decided up front.

    Attributes:
        features: the FeatureSet of every record (its labels: ClassLabel with column, level,
            multi, vocabulary; its columns: Column with name, kind, shape, column dtype,
            missing).
        shards: every ShardSpec, split by split.
        paths, label_values, extras: per table position (label_values: one (id, text) per
            label field; extras: tuple of values, one per column).
        image: ImageOptions, or None for a table without images.
        rejected: (position, reason) of rows refused before any image was read.
        splits: splits present in the table, in TRAIN, VALIDATION, TEST order.
        fingerprint: sha256 of everything above plus the image files' sizes and times.
        assignment: the split shares rows without a split were given, or None.
    """

    features: FeatureSet
    shards: tuple
    paths: tuple
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

    def table_rows(self, position):
        """The table positions a planned row stands for: itself, or all rows of an image of a
        detection table."""
        return self.members[position] if self.members is not None else (position,)

    def planned_labels(self, index):
        """The row labels of the planned rows, from the table's ``index``."""
        return index if self.members is None else index[[rows[0] for rows in self.members]]

    def planned_position(self, row):
        """The planned row (image of a detection table) that table position ``row`` is in."""
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
        rows = tuple((p, row_labels[p], self.paths[p], (*self.label_values[p], *self.extras[p]))
                     for p in shard.positions)
        return ShardTask(shard.name, rows, self.image, self.compression, self.features,
                         self.sha256, threads)


def _label_ids(values, label_map, skip):
    """Return (ids per label as a list, id -> text tuple).

    Blank labels and those marked in ``skip`` get id -1: a label only rejected rows carry
    takes no id (unless ``label_map`` gives it one).
    """
    skip = [a or b for a, b in zip(
        skip, (values.isna() | labels.text_series(values).str.strip().eq("").fillna(True)
               ).tolist())]
    cells = values.tolist()  # plain Python values: iterating the Series is slower
    if label_map is not None:
        mapping = schema.label_map_ids(label_map)
        found = [None if b else schema.lookup_label(mapping, v) for v, b in zip(cells, skip)]
        ids = [-1 if i is None else i for i in found]
        texts = [""] * (max(mapping.values(), default=-1) + 1)
        for text, i in mapping.items():
            texts[i] = schema.label_text(text)
        return ids, tuple(texts)
    if schema.is_integer_labels(values):
        ids = [-1 if b or v < 0 else int(v) for v, b in zip(cells, skip)]
        return ids, tuple(str(i) for i in range(max(ids, default=-1) + 1))
    text = [None if b else _label_text(v) for v, b in zip(cells, skip)]
    index = {t: i for i, t in enumerate(sorted({t for t in text if t is not None}))}
    return [-1 if t is None else index[t] for t in text], tuple(index)


@functools.lru_cache(maxsize=4096)
def _cached_label_text(kind, value):
    return schema.label_text(value)


def _label_text(value):
    """``schema.label_text``, made once per label (labels repeat from row to row)."""
    try:
        return _cached_label_text(type(value), value)  # the type keeps True apart from 1
    except TypeError:  # an unhashable cell
        return schema.label_text(value)


def _label_fields(df, label_col, label_map, label_sep, refused):
    """``(label fields, per row: one (id, text) per field)``; rows in ``refused`` take no id."""
    fields, per_field = [], []
    for column, level in labels.label_columns(label_col):
        elements, positions, multi = labels.elements(df[column],
                                                     label_sep if level is None else None)
        ids, vocabulary = _label_ids(elements, schema.level_map(label_map, level),
                                     [int(p) in refused for p in positions])
        texts = [vocabulary[i] if i >= 0 else "" for i in ids]
        fields.append(ClassLabel(level, multi, vocabulary, column))
        per_field.append(zip(*labels.row_values(ids, texts, positions, len(df), multi)))
    return tuple(fields), tuple(zip(*per_field)) if per_field else ()


def _box_fields(images, label_col, label_map, detection, units, refused):
    """``(label fields, per image: one Boxes value)`` of a detection table's images; an image
    with a label its label map lacks is refused (added to ``refused``)."""
    cells = images[label_col].tolist()
    if label_map is not None:
        mapping = schema.label_map_ids(label_map)
        if isinstance(label_map, (list, tuple)):  # a list of names: ids from 1
            mapping = {text: i + 1 for text, i in mapping.items()}
        if 0 in mapping.values():
            raise SchemaError("detection label ids start at 1 (0 is the background class of "
                              "the Object Detection API's label maps): label_map gives "
                              f"{[t for t, i in mapping.items() if i == 0]} id 0")
    else:
        texts = sorted({_label_text(v) for p, labels_ in enumerate(cells) if p not in refused
                        for v in labels_})
        mapping = {text: i + 1 for i, text in enumerate(texts)}
    vocabulary = [""] * (max(mapping.values(), default=0) + 1)
    for text, i in mapping.items():
        vocabulary[i] = schema.label_text(text)
    ids, texts = [], []
    for position, labels_ in enumerate(cells):
        found = [schema.lookup_label(mapping, v) for v in labels_]
        if None in found and position not in refused:
            box = found.index(None)
            refused[position] = (f"box {box + 1} of {len(found)}: label "
                                 f"{str(labels_[box])!r} not in label_map")
        found = tuple(-1 if i is None else i for i in found)
        ids.append(found)
        texts.append(tuple(vocabulary[i] if i >= 0 else "" for i in found))
    source_ids = images["image_id"].astype(str).tolist() if "image_id" in images.columns \
        else [str(p) for p in range(len(images))]
    box_columns, per_box = [], []
    for column in detection.box_columns:
        kind, values = _box_column(images[column].tolist(), column in _FLOAT_BOX_COLUMNS)
        box_columns.append((column, kind))
        per_box.append(values)
    field = Boxes(vocabulary=tuple(vocabulary), column=label_col,
                  box_columns=tuple(box_columns), units=units,
                  declared_sizes=detection.sizes is not None)
    values = [((i, t, s, b, *cols),) for i, t, s, b, *cols in zip(
        ids, texts, source_ids, images["boxes"].tolist(), *per_box)]
    return (field,), tuple(values)


_FLOAT_BOX_COLUMNS = {"area", "weight"}  # float32 in the Object Detection API, whatever they hold


def _box_column(cells, real=False):
    """``(kind, values)`` of a per-box column (a tuple of values per image): whole numbers and
    flags are int64 (a missing one 0), other numbers (and ``real`` columns) float32 (a missing
    one NaN)."""
    flat = [v for cell in cells for v in cell if not _missing(v)]
    whole = not real and all(isinstance(v, (bool, int, np.bool_, np.integer)) or
                (isinstance(v, (float, np.floating)) and float(v).is_integer()) for v in flat)
    if whole:
        return keys.INT64, [[0 if _missing(v) else int(v) for v in cell] for cell in cells]
    try:
        return keys.FLOAT, [[float("nan") if _missing(v) else float(v) for v in cell]
                            for cell in cells]
    except (TypeError, ValueError):
        raise SchemaError(f"a per-box column holds {flat[:3]}: per-box columns hold numbers"
                          ) from None


def _missing(value):
    return value is None or (not isinstance(value, str) and pd.isna(value))


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


def build_plan(df, *, split_col, image_col, label_col, base_dir=None, label_map=None,
               num_shards=None, compression=None, image=ImageOptions(), shuffle=True, seed=0,
               sha256=False, storage_options=None, assignment=None, label_sep=None,
               features=None, detection=None, box_units="relative"):
    """Decide labels, order and shards; rows with problems go to ``rejected``.

    Args:
        df: the table (already checked for its columns).
        image_col: the image column, or None for a table without images.
        base_dir: folder (path or URL) relative image paths resolve against.
        storage_options: fsspec options for image URLs (see ``storage.options_for``).
        assignment: split shares for rows without a split (``schema.split_assignment``), or
            None to reject them.
        detection: the ImageTable of a detection table (``df`` is then its ``images``), or
            None.
        Other arguments: as in ``to_tfrecord``.

    Returns:
        A WritePlan.
    """
    splits = schema.table_splits(df, split_col, image_col, assignment)
    problems = schema.row_problems(df, split_col, image_col,
                                   None if detection else label_col, label_map, assignment,
                                   label_sep, splits)
    reasons = dict(detection.refused) if detection else {}
    positions_of = {row: i for i, row in enumerate(df.index)} if len(problems) else {}
    for row, _column, _value, problem in problems.itertuples(index=False):
        reasons.setdefault(positions_of[row], problem)

    splits = splits.tolist()
    used = schema.used_columns(split_col, image_col, label_col)
    if detection:
        used |= {"boxes", *detection.box_columns}
    extra, extras = columns.extra_columns(
        df, used, features, reserved=[key for _, level in labels.label_columns(label_col)
                                      for key in keys.label_keys(level)])
    compression = compression and compression.upper()
    fingerprint = hashlib.sha256()
    if image_col is None:
        image, paths = None, (None,) * len(df)
        sizes = [_ROW_BYTES + sum(len(v) * 8 if isinstance(v, list) else 8 for v in values)
                 for values in extras]
    else:
        paths, sizes = _stat_images(df[image_col].tolist(), reasons, base_dir, image,
                                    storage_options, fingerprint)

    if detection:
        label_fields, label_values = _box_fields(df, label_col, label_map, detection, box_units,
                                                 reasons)
    else:
        label_fields, label_values = _label_fields(df, label_col, label_map, label_sep, reasons)
    shards, present = [], []
    for split_number, split in enumerate(SPLITS):
        positions = np.array([p for p, s in enumerate(splits) if s == split and p not in reasons],
                             dtype=np.int64)
        if not any(s == split for s in splits):
            continue
        present.append(split)
        if shuffle and len(positions):
            rng = np.random.default_rng([seed, split_number])
            positions = positions[rng.permutation(len(positions))]
        if image is not None and image.size is not None:
            n_bytes = len(positions) * image.size[0] * image.size[1] * 3 * _RESIZED_BYTES_PER_PIXEL
        else:
            n_bytes = sum(sizes[p] for p in positions)
        count = _shard_count(num_shards, split, len(positions), n_bytes)
        bounds = [len(positions) * i // count for i in range(count + 1)]
        shards += [ShardSpec(split, i, count, tuple(int(p) for p in positions[a:b]), compression,
                             sum(sizes[p] for p in positions[a:b]))
                   for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]

    rejected = tuple(sorted(reasons.items()))
    single = len(label_fields) == 1 and label_fields[0].level is None
    description = {
        "format_version": FORMAT_VERSION,
        # earlier outputs (one label per row, images, scalar columns) keep their fingerprint
        "labels": label_fields[0].vocabulary if single else
        [(f.level, f.vocabulary) for f in label_fields],
        **({"multi_label": True} if any(f.multi for f in label_fields) else {}),
        # max_bytes decides only which rows are rejected, and those are listed below
        "image": None if image is None else
        {k: v for k, v in dataclasses.asdict(image).items() if k != "max_bytes"},
        "compression": compression, "extra_kinds": tuple(
            (c.name, c.kind) + ((c.shape,) if c.shape else ()) for c in extra),
        "rejected": rejected,
        **({"sha256": True} if sha256 else {}),
        **({"assignment": assignment} if assignment else {}),
        "shards": [(s.name, s.positions) for s in shards],
        "label_ids": [v[0][0] for v in label_values] if single else label_values,
        "extras": extras,
        **({"detection": {"units": box_units, "members": detection.members}}
           if detection else {}),
    }
    fingerprint.update(json.dumps(description, default=str, sort_keys=True).encode())
    if detection and detection.sizes is not None:  # checked as each image is read; the boxes,
        label_values = tuple(((*value[:4], size, *value[4:]),)  # divided by it, are above
                             for (value,), size in zip(label_values, detection.sizes))
    return WritePlan(
        features=FeatureSet(None if image is None else ImageFeature(key_sha256=bool(detection)),
                            label_fields, extra),
        shards=tuple(shards), paths=tuple(paths),
        label_values=label_values, extras=tuple(extras), image=image,
        compression=compression, rejected=rejected, splits=tuple(present),
        fingerprint=fingerprint.hexdigest(), sha256=sha256, assignment=assignment,
        members=detection.members if detection else None,
    )


_ROW_BYTES = 64  # rough record size without images, beside its values (picks shard counts)


def _stat_images(uris, reasons, base_dir, image, storage_options, fingerprint):
    """Resolve and stat every image of rows not in ``reasons`` (which takes the refused ones).

    Returns:
        ``(paths, sizes)`` per row; each found file's path, size and time go to ``fingerprint``.
    """
    paths, sizes, to_stat = [], [0] * len(uris), []
    for position, uri in enumerate(uris):
        path = None if pd.isna(uri) else str(uri)  # reported as is if refused
        if position not in reasons:
            try:
                path = storage.resolve(uri, base_dir)
            except UnsupportedURLError as exc:
                reasons[position] = str(exc)
            else:
                to_stat.append(position)
        paths.append(path)
    found = storage.stat_many([paths[p] for p in to_stat], storage_options)
    identities = []
    for position, stat in zip(to_stat, found):
        if isinstance(stat, Exception):
            reasons[position] = unreadable_reason(stat)
            if isinstance(stat, FileNotFoundError):
                reasons[position] += storage.relative_path_hint(uris[position], paths[position],
                                                                base_dir)
        elif stat[0] > image.max_bytes:
            reasons[position] = unreadable_reason(
                storage.too_large(paths[position], stat[0], image.max_bytes))
        else:
            sizes[position] = stat[0]
            identities.append(f"{paths[position]}\0{stat[0]}\0{stat[1]}\n")
    fingerprint.update("".join(identities).encode())
    return paths, sizes
