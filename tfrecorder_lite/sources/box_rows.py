"""The per-box table every detection source gives (the source formats of boxes), and the
helpers its readers share.

The per-box table has one row per box: ``split, image_uri, label, xmin, ymin, xmax, ymax``
(floats relative to the image, 0,0 at its top left), then the format's per-box columns
(``is_crowd``, ``difficult``, ``truncated``: nullable Int64 flags; ``area``: float) and per-image
columns (e.g. ``image_id``). An image without objects is one row with label None and NaN
coordinates. The rows of an image are consecutive, its boxes in the file's order. Splits are
TRAIN, VALIDATION, TEST (or UNASSIGNED where the source has none).
"""

import functools
import math

import pandas as pd

from ..errors import SchemaError
from ..images.instance_masks import RELATIVE_POLYGONS
from ..record.boxes import BOX_COLUMNS
from ..table import schema

_DTYPES = {**dict.fromkeys(BOX_COLUMNS, "float64"), "area": "float64",
           **dict.fromkeys(("is_crowd", "difficult", "truncated"), "Int64")}
NO_BOX = (math.nan,) * 4  # the coordinates of an image without objects


@functools.lru_cache(maxsize=256)
def split_value(text):
    """TRAIN / VALIDATION / TEST for a known split name, else the text itself (None if empty),
    left for the table checks to report."""
    text = (text or "").strip()
    canonical = schema.canonical_splits(pd.Series([text]))[0]
    return canonical if isinstance(canonical, str) else text or None


def per_box_table(rows, columns):
    """The per-box table of ``rows`` (tuples in the order of ``columns``: split, image, label,
    coordinates, then other columns), typed per column: labels stay objects (None for no
    object), flags nullable ints, coordinates floats."""
    values = list(zip(*rows)) if rows else [()] * len(columns)
    dtypes = [None, None, object] + [_DTYPES.get(c) for c in columns[3:]]
    return pd.DataFrame({column: pd.Series(list(cells), dtype=dtype)
                         for column, cells, dtype in zip(columns, values, dtypes)})


def number(text):
    """A number of an annotation file's text as a float (:func:`schema.parse_number`), NaN when
    it is missing or no number (reported later by :func:`box_problem` as a missing
    coordinate)."""
    try:
        number = schema.parse_number(text)
    except ValueError:
        return math.nan
    return number if math.isfinite(number) else math.nan


def polygon_object(xy):
    """``((xmin, ymin, xmax, ymax), mask)`` of one polygon relative to its image (``[x1, y1,
    x2, y2, ...]``, as some formats give them): its extent is its box, and it is the
    box's instance mask (the ``mask`` column's ``{"relative_polygons": [xy]}``, scaled to the
    image's pixel size when its record is written)."""
    xs, ys = xy[0::2], xy[1::2]
    return (min(xs), min(ys), max(xs), max(ys)), {RELATIVE_POLYGONS: [list(xy)]}


def named_columns(table, split_col, image_col, label_col):
    """A per-box table with the caller's names for its split, image and label columns."""
    if not isinstance(label_col, str):
        raise SchemaError(f"a detection source has one label column, not {label_col!r}")
    names = {"split": split_col, "image_uri": image_col, "label": label_col}
    return table.rename(columns={k: v for k, v in names.items() if v is not None})
