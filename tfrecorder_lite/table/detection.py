"""Detection tables: one row per box, turned into one row per image for the plan.

A detection table has the columns ``split, image_uri, label, xmin, ymin, xmax, ymax`` (boxes
relative to the image, 0,0 top left, or in pixels with ``box_units="pixels"``), plus any per-box
columns (``is_crowd``, ``difficult``, ``area``, ...), ``mask`` (each box's instance mask: COCO
polygons in pixels or an RLE, as ``read_coco(include_masks=True)`` gives them, or
``{"relative_polygons": [[x1, y1, ...]]}``, polygons relative to the image as Vertex AI and YOLO
files give them) and per-image columns. An image without
objects is one row with an empty label and empty coordinates. Rows are grouped by split and
image (boxes in table order); the image's first row stands for it in the plan, and every row of
a refused image is reported with the image's reason. pandas only, no I/O.
"""

import hashlib
import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import schema
from .cells import is_blank, is_missing
from .kind_base import TableKind
from ..errors import SchemaError
from ..record import keys
from ..record.boxes import BOX_COLUMNS, DETECTION, Boxes, box_problem
from ..record.features import ImageFeature
from .labels import label_problem
from .schema import SOURCE_PROBLEMS, parse_number  # noqa: F401 (sources set it here too)

BOX_UNITS = ("relative", "pixels")
MASK_COLUMN = "mask"  # each box's instance mask: COCO polygons or RLE, or relative polygons
PER_BOX = ("is_crowd", "iscrowd", "difficult", "truncated", "occluded", "area", "group_of",
           "weight", "depiction")  # columns that are per box when present


# ``df.attrs[DECLARED_SIZES]``: ``{row label: (height, width)}``, the image's size as the
# annotation file says it (its boxes were divided by it): checked against the image's own
# header when the image is read, a mismatch refuses the image.
DECLARED_SIZES = "declared_sizes"


def is_detection_table(df):
    """Whether ``df`` is a per-box detection table (it has the four coordinate columns)."""
    return all(column in df.columns for column in BOX_COLUMNS)


class DetectionTable(TableKind):
    """The table kind of per-box tables: one record per image, with its boxes."""

    record = DETECTION

    @staticmethod
    def recognizes(df, options):
        return options.image_col is not None and is_detection_table(df)

    @staticmethod
    def table_label_col(options):
        """The label column(s) the table must have."""
        return options.label_col

    @staticmethod
    def prepare(df, options):
        """``(records frame, members, refused, used columns, ImageTable)``: one row per
        image."""
        table = image_table(df, options.split_col, options.image_col, options.label_col,
                            options.box_units, options.box_columns)
        masks = {MASK_COLUMN} if MASK_COLUMN in table.images.columns else set()
        return table.images, table.members, dict(table.refused), \
            {"boxes", *table.box_columns, *masks}, table

    @staticmethod
    def check_labels(df, options):
        """Box labels are checked per image by ``label_fields`` (a label map may lack one)."""

    @staticmethod
    def label_column(options):
        return None  # an image without objects has an empty label cell

    @staticmethod
    def problems(df, prepared):
        """validate()'s problems of this kind: every row of an image with a bad box (the box
        named) or a label its label map lacks, and label spellings.

        Raises:
            SchemaError: what its records' label fields refuse (a per-box column that holds
                no numbers, a label map giving id 0), as ``to_tfrecord`` does.
        """
        refused = dict(prepared.refused)
        DetectionTable.label_fields(prepared, prepared.options, refused)
        return [(df.index[row], None, None, reason)
                for row, reason in prepared.rows_of(refused.items())] + \
            schema.label_spellings(df, prepared.options.label_col)

    @staticmethod
    def label_fields(prepared, options, refused):
        return box_fields(prepared.frame, options.label_col, options.label_map,
                          prepared.details.box_columns, options.box_units, refused,
                          declared_sizes=prepared.details.sizes is not None)

    @staticmethod
    def declared_sizes(prepared):
        """Per image, its ``(height, width)`` as its annotation file declares it (or None),
        or None when the table has none (see ``DECLARED_SIZES``)."""
        return prepared.details.sizes

    @staticmethod
    def written_values(prepared, label_values):
        """The label values as the records take them: with each image's size as its
        annotation file declares it, checked as the image is read (kept out of the
        fingerprint: the boxes divided by it are in it)."""
        sizes = prepared.details.sizes
        if sizes is None:
            return label_values
        return tuple(((*value[:4], size, *value[4:]),)
                     for (value,), size in zip(label_values, sizes))

    @staticmethod
    def image_feature():
        return ImageFeature(key_sha256=True)  # as the Object Detection API keeps it

    @staticmethod
    def fingerprint(prepared, options):
        """The box units, each image's rows, and the boxes' cells (coordinates, per-box
        columns, masks): a table whose boxes were corrected is another output."""
        cells = json.dumps({column: prepared.frame[column].tolist()
                            for column in sorted(prepared.used)}, default=str)
        return {"detection": {"units": options.box_units, "members": prepared.members,
                              "cells": hashlib.sha256(cells.encode()).hexdigest()}}


KIND = DetectionTable()


@dataclass(frozen=True)
class ImageTable:
    """The images of a detection table.

    Attributes:
        images: one row per image, indexed by its first row's label: the split and image
            columns, ``boxes`` (a tuple of ``(xmin, ymin, xmax, ymax)``), the label column (a
            tuple of box labels), one tuple per per-box column, and the per-image columns.
        members: per image, the table positions of its rows.
        box_columns: the per-box columns (beside the coordinates and the label).
        refused: ``{image position: reason}`` of images refused by their boxes alone.
        sizes: per image, its ``(height, width)`` as its annotation file declares it (or
            None), when the table has ``attrs[DECLARED_SIZES]``; else None.
    """

    images: pd.DataFrame
    members: tuple
    box_columns: tuple
    refused: dict
    sizes: tuple = None

    def rows_of(self, rejected):
        """``(table position, reason)`` of every row of the images in ``rejected``
        (``(image position, reason)`` pairs), in table order."""
        return sorted((row, reason) for image, reason in rejected
                      for row in self.members[image])


def image_table(df, split_col, image_col, label_col, box_units="relative", box_columns=None):
    """Group a per-box table into an ImageTable.

    Args:
        df: the per-box table.
        box_units: ``"relative"`` or ``"pixels"`` (checked against the image's size later).
        box_columns: the per-box columns; default: those of ``df`` named in ``PER_BOX``.

    Raises:
        SchemaError: a bad ``box_units``, or a label column that is not one column.
    """
    if box_units not in BOX_UNITS:
        raise SchemaError(f"box_units must be one of {BOX_UNITS}, not {box_units!r}")
    if not isinstance(label_col, str):
        raise SchemaError("a detection table has one label column (each box's label)")
    used = {c for c in (split_col, image_col, label_col, *BOX_COLUMNS) if c is not None}
    masks = MASK_COLUMN in df.columns and MASK_COLUMN not in used
    if masks:
        used.add(MASK_COLUMN)
    if box_columns is None:
        box_columns = [c for c in df.columns if c in PER_BOX and c not in used]
    unknown = [c for c in box_columns if c not in df.columns or c in used]
    if unknown:
        raise SchemaError(f"box_columns names {unknown}, which are not per-box columns of the "
                          f"table")
    keys = list(zip(*(df[c].astype(str).tolist() for c in (split_col, image_col)
                      if c is not None)))
    source_problems = schema.source_problems(df)  # every row of such an image has one
    for position, reason in source_problems.items():  # a refused image may have no path:
        keys[position] += (reason,)                    # its reason keeps it apart
    first, members = {}, []
    for position, key in enumerate(keys):
        if key not in first:
            first[key] = len(members)
            members.append([])
        members[first[key]].append(position)
    coordinates = df[list(BOX_COLUMNS)].to_numpy(dtype=object).tolist()
    labels = df[label_col].tolist()
    per_box = {c: df[c].tolist() for c in box_columns}
    mask_cells = df[MASK_COLUMN].tolist() if masks else None
    if masks:
        from ..images.instance_masks import instance_mask_problem  # numpy, Pillow: masks only
    rows, refused = [], {}
    for image, positions in enumerate(members):
        boxes, box_labels, values = [], [], {c: [] for c in box_columns}
        image_masks = []
        for p in positions:
            box, label = [_number(v) for v in coordinates[p]], labels[p]
            if is_blank(label) and all(v is None for v in box):
                continue  # the row of an image without objects
            boxes.append(tuple(box))
            box_labels.append(None if is_blank(label) else label)
            for c in box_columns:
                values[c].append(per_box[c][p])
            if masks:
                image_masks.append(mask_cells[p])
        reason = next((source_problems[p] for p in positions if p in source_problems), None)
        unstorable = [(n, p) for n, p in enumerate(map(label_problem, box_labels), 1) if p]
        if reason:
            pass
        elif None in box_labels:
            reason = f"box {box_labels.index(None) + 1} of {len(boxes)}: empty label"
        elif unstorable:
            reason = f"box {unstorable[0][0]} of {len(boxes)}: {unstorable[0][1]}"
        elif box_units == "relative":
            reason = box_problem(boxes)
        if masks and not reason:
            reason = instance_mask_problem(image_masks)
        if reason:
            refused[image] = reason
        rows.append((tuple(boxes), tuple(box_labels), *(tuple(values[c]) for c in box_columns),
                     *((tuple(image_masks),) if masks else ())))
    head = df.iloc[[positions[0] for positions in members]]
    per_image = [c for c in df.columns if c not in used and c not in box_columns]
    images = head[[c for c in (split_col, image_col) if c is not None] + per_image].copy()
    columns = list(zip(*rows)) if rows else [()] * (2 + len(box_columns) + masks)
    images.insert(len(images.columns), "boxes", list(columns[0]))
    images.insert(len(images.columns), label_col, list(columns[1]))
    for c, values in zip(box_columns, columns[2:]):
        images.insert(len(images.columns), c, list(values))
    if masks:
        images.insert(len(images.columns), MASK_COLUMN, list(columns[-1]))
    declared = df.attrs.get(DECLARED_SIZES)
    sizes = None
    if declared:
        labels_ = df.index
        sizes = tuple(declared.get(labels_[positions[0]]) for positions in members)
    return ImageTable(images, tuple(tuple(m) for m in members), tuple(box_columns), refused,
                      sizes)


def _number(value):
    """A coordinate as a float, None when missing, or the value as it is (box_problem names it)."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            return parse_number(value)  # "0.5_0", "nan", "inf" are no numbers
        except ValueError:
            return value  # box_problem names it
    return value


def box_fields(images, label_col, label_map, per_box_columns, units, refused,
               declared_sizes=False):
    """``(label fields, per image: one Boxes value)`` of a detection table's images; an image
    with a label its label map lacks is refused (added to ``refused``); ``declared_sizes``:
    see ``Boxes``."""
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
        texts = sorted({schema.cached_label_text(v) for p, labels_ in enumerate(cells) if p not in refused
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
    for column in per_box_columns:
        kind, values = _box_column(images[column].tolist(), column in _FLOAT_BOX_COLUMNS)
        box_columns.append((column, kind))
        per_box.append(values)
    masks = MASK_COLUMN in images.columns
    if masks:
        per_box.append(images[MASK_COLUMN].tolist())
    field = Boxes(vocabulary=tuple(vocabulary), column=label_col,
                  box_columns=tuple(box_columns), units=units, masks=masks,
                  declared_sizes=declared_sizes)
    values = [((i, t, s, b, *cols),) for i, t, s, b, *cols in zip(
        ids, texts, source_ids, images["boxes"].tolist(), *per_box)]
    return (field,), tuple(values)


_FLOAT_BOX_COLUMNS = {"area", "weight"}  # float32 in the Object Detection API, whatever they hold


def _box_column(cells, real=False):
    """``(kind, values)`` of a per-box column (a tuple of values per image): whole numbers and
    flags are int64 (a missing one 0), other numbers (and ``real`` columns) float32 (a missing
    one NaN)."""
    flat = [v for cell in cells for v in cell if not is_missing(v)]
    whole = not real and all(isinstance(v, (bool, int, np.bool_, np.integer)) or
                (isinstance(v, (float, np.floating)) and float(v).is_integer()) for v in flat)
    if whole:
        return keys.INT64, [[0 if is_missing(v) else int(v) for v in cell] for cell in cells]
    try:
        return keys.FLOAT, [[float("nan") if is_missing(v) else float(v) for v in cell]
                            for cell in cells]
    except (TypeError, ValueError):
        raise SchemaError(f"a per-box column holds {flat[:3]}: per-box columns hold numbers"
                          ) from None
