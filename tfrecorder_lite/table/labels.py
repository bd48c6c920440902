"""Label columns: one label per row, several (multi-label), or one per level (coarse, fine).

A label column is read into *elements*: one per label of a row, each tagged with its row's
position, so that the checks and the vocabulary are the same whether a row holds one label or
several. pandas only, no I/O.
"""

import numpy as np
import pandas as pd

from ..errors import SchemaError
from ..output.layout import CONTROL, label_problem  # noqa: F401 (the label rule, here too)
from ..record import keys
from .cells import LISTS, is_blank

_SCALARS = {"string", "bytes", "integer", "floating", "mixed-integer-float", "boolean", "empty"}


def unstorable(values):
    """Mask of the labels :func:`label_problem` refuses (one pass in C when it can)."""
    try:
        text = values.astype("string")
    except UnicodeEncodeError:
        return values.map(lambda v: label_problem(v) is not None).astype(bool)
    return text.str.contains(CONTROL).fillna(False).astype(bool)


def label_columns(label_col):
    """``[(column, level), ...]`` of the ``label_col`` option: one column (level None), or a
    list of columns, one level each (the level is named after its column).

    Raises:
        SchemaError: an empty list, or a level name unfit for a file name.
    """
    if isinstance(label_col, (list, tuple)):
        if not label_col:
            raise SchemaError("label_col is an empty list: give one column, or one per level")
        bad = [c for c in label_col if not isinstance(c, str) or not keys.LEVEL_NAME.match(c)]
        if bad:
            raise SchemaError(f"label levels are named after their columns, which must be "
                              f"letters, digits, '_', '.' or '-': {bad}")
        if len(set(label_col)) != len(label_col):
            raise SchemaError(f"label_col names a column twice: {list(label_col)}")
        return [(c, c) for c in label_col]
    return [(label_col, None)]


def is_multi(series, label_sep=None):
    """Whether a label column holds several labels per row: ``label_sep`` is given, or a
    cell is a list (tuple, set, array)."""
    if label_sep is not None:
        return True
    if series.dtype != object or pd.api.types.infer_dtype(series, skipna=True) in _SCALARS:
        return False  # (infer_dtype runs in C: a quick answer for long label columns)
    return any(isinstance(v, LISTS) for v in series.tolist())


def elements(series, label_sep=None):
    """The labels of a label column, one per element, and the row position of each.

    Args:
        series: the label column.
        label_sep: split text cells on this separator (multi-label), or None.

    Returns:
        ``(elements, positions, multi)``: a Series indexed by the rows' labels (one entry per
        label; a single-label column is returned as it is), the row position of each element,
        and whether the column is multi-label. Blank labels in a list are dropped, so a row
        whose list is empty has no element.
    """
    if not is_multi(series, label_sep):
        return series, np.arange(len(series)), False
    cells = []
    for value in series.tolist():
        if isinstance(value, LISTS):
            items = list(value.tolist() if isinstance(value, np.ndarray) else value)
            if isinstance(value, (set, frozenset)):
                items = sorted(items, key=str)
        elif value is None or (not isinstance(value, str) and pd.isna(value)):
            items = []
        elif label_sep is not None and isinstance(value, str):
            items = [item.strip() for item in value.split(label_sep)]  # "cat, dog"
        else:
            items = [value]
        cells.append([v for v in items if not is_blank(v)])
    positions = np.array([p for p, items in enumerate(cells) for _ in items], dtype=np.int64)
    flat = pd.Series([v for items in cells for v in items], index=series.index[positions],
                     dtype=object)
    return flat.infer_objects(), positions, True


def row_values(ids, texts, positions, n_rows, multi):
    """Per row, the label id and text (single) or the tuples of ids and texts (multi).

    Args:
        ids, texts: per element, its id (-1: none) and text.
        positions: per element, its row position.

    Returns:
        ``(ids, texts)`` per row; a multi-label row's ids are sorted and unique.
    """
    if not multi:
        return list(ids), list(texts)
    per_row = [set() for _ in range(n_rows)]
    text_of = {}
    for i, text, position in zip(ids, texts, positions):
        if i >= 0:
            per_row[position].add(i)
            text_of[i] = text
    row_ids = [tuple(sorted(found)) for found in per_row]
    return row_ids, [tuple(text_of[i] for i in found) for found in row_ids]
