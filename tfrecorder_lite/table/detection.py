"""Detection tables: one row per box, turned into one row per image for the plan.

A detection table has the columns ``split, image_uri, label, xmin, ymin, xmax, ymax`` (boxes
relative to the image, 0,0 top left, or in pixels with ``box_units="pixels"``), plus any per-box
columns (``is_crowd``, ``difficult``, ``area``, ...) and per-image columns. An image without
objects is one row with an empty label and empty coordinates. Rows are grouped by split and
image (boxes in table order); the image's first row stands for it in the plan, and every row of
a refused image is reported with the image's reason. pandas only, no I/O.
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import SchemaError
from ..record.boxes import BOX_COLUMNS, box_problem
from .labels import label_problem
from .schema import parse_number

BOX_UNITS = ("relative", "pixels")
PER_BOX = ("is_crowd", "iscrowd", "difficult", "truncated", "occluded", "area", "group_of",
           "weight", "depiction")  # columns that are per box when present


# ``df.attrs[SOURCE_PROBLEMS]``: ``{row label: reason}`` of rows a source refused (an
# annotation naming a file outside its image folder, a value of the wrong type); every row of
# such an image carries its reason, and the image is refused with it.
SOURCE_PROBLEMS = "source_problems"
# ``df.attrs[DECLARED_SIZES]``: ``{row label: (height, width)}``, the image's size as the
# annotation file says it (its boxes were divided by it): checked against the image's own
# header when the image is read, a mismatch refuses the image.
DECLARED_SIZES = "declared_sizes"


def is_detection_table(df):
    """Whether ``df`` is a per-box detection table (it has the four coordinate columns)."""
    return all(column in df.columns for column in BOX_COLUMNS)


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
    if box_columns is None:
        box_columns = [c for c in df.columns if c in PER_BOX and c not in used]
    unknown = [c for c in box_columns if c not in df.columns or c in used]
    if unknown:
        raise SchemaError(f"box_columns names {unknown}, which are not per-box columns of the "
                          f"table")
    keys = list(zip(*(df[c].astype(str).tolist() for c in (split_col, image_col)
                      if c is not None)))
    source_problems = _source_problems(df)
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
    rows, refused = [], {}
    for image, positions in enumerate(members):
        boxes, box_labels, values = [], [], {c: [] for c in box_columns}
        for p in positions:
            box, label = [_number(v) for v in coordinates[p]], labels[p]
            if _blank(label) and all(v is None for v in box):
                continue  # the row of an image without objects
            boxes.append(tuple(box))
            box_labels.append(None if _blank(label) else label)
            for c in box_columns:
                values[c].append(per_box[c][p])
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
        if reason:
            refused[image] = reason
        rows.append((tuple(boxes), tuple(box_labels), *(tuple(values[c]) for c in box_columns)))
    head = df.iloc[[positions[0] for positions in members]]
    per_image = [c for c in df.columns if c not in used and c not in box_columns]
    images = head[[c for c in (split_col, image_col) if c is not None] + per_image].copy()
    columns = list(zip(*rows)) if rows else [()] * (2 + len(box_columns))
    images.insert(len(images.columns), "boxes", list(columns[0]))
    images.insert(len(images.columns), label_col, list(columns[1]))
    for c, values in zip(box_columns, columns[2:]):
        images.insert(len(images.columns), c, list(values))
    declared = df.attrs.get(DECLARED_SIZES)
    sizes = None
    if declared:
        labels_ = df.index
        sizes = tuple(declared.get(labels_[positions[0]]) for positions in members)
    return ImageTable(images, tuple(tuple(m) for m in members), tuple(box_columns), refused,
                      sizes)


def _source_problems(df):
    """``{table position: reason}`` of the rows ``df.attrs[SOURCE_PROBLEMS]`` names."""
    problems = df.attrs.get(SOURCE_PROBLEMS) or {}
    if not problems:
        return {}
    position_of = {row: p for p, row in enumerate(df.index)}
    return {position_of[row]: reason for row, reason in problems.items() if row in position_of}


def _blank(value):
    if isinstance(value, str):
        return not value.strip()
    return value is None or (np.isscalar(value) and pd.isna(value))


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
