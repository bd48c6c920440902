"""Extra columns: each is carried into every record as a feature of its own name, stored
exactly with its type, or refused up front with a SchemaError naming the column.

=================================  ==============  ==========================================
column                             feature         a missing value
=================================  ==============  ==========================================
int (numpy or nullable), bool      int64           refused (an int64 feature cannot hold one)
float (numpy or nullable)          float32         NaN
text, category, mixed objects      bytes           the empty string
bytes objects                      bytes           the empty string
datetime, timedelta                bytes (ISO)     the empty string
lists (tuples, arrays) of numbers  int64 / float32 the empty list (the list is then variable)
  or texts                         / bytes list
lists of equal-length lists        [N, k] list     the empty list
  (boxes: [[x0, y0, x1, y1], ...])
dicts, sets, complex               refused
=================================  ==============  ==========================================

A list column whose cells all hold the same number of values (and none is missing) has a fixed
shape (``[3]``); otherwise its first dimension is variable (``[None]``, ``[None, 4]``). The
``features=`` mapping declares a column's type instead of inferring it: ``"int64"``,
``"float32"``, ``"bytes"``, ``"bool"``, with a shape for lists (``"float32[None,4]"``,
``"int64[3]"``), or ``{"dtype": "float32", "shape": [None, 4]}`` as metadata.json writes it.
"""

import re
import numpy as np
import pandas as pd

from ..record import encoding as example
from ..record import keys
from ..record.features import Column
from ..errors import SchemaError, row_repr
from .cells import is_missing

_INT64_MIN, _INT64_MAX = -2**63, 2**63 - 1
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_LISTS = (list, tuple, np.ndarray)
_REFUSED = (dict, set, frozenset)
_DTYPES = {"int64": keys.INT64, "int": keys.INT64, "bool": keys.INT64,
           "float32": keys.FLOAT, "float": keys.FLOAT,
           "bytes": keys.BYTES, "string": keys.BYTES, "str": keys.BYTES}
_TYPE = re.compile(r"^\s*([a-z0-9]+)\s*(?:\[([^\]]*)\])?\s*$")


def feature_type(spec, name="features"):
    """``(kind, shape)`` of a declared type: ``"float32[None,4]"``, ``"int64"``, ``"bool"``,
    or ``{"dtype": ..., "shape": [...]}``.

    Raises:
        SchemaError: naming what is wrong with ``spec``.
    """
    usage = ('a type such as "int64", "float32", "bytes", "bool", "float32[None,4]" (a '
             'variable number of rows of 4) or {"dtype": "float32", "shape": [None, 4]}')
    if isinstance(spec, dict) and set(spec) <= {"dtype", "shape"} and "dtype" in spec:
        dtype, dims = spec["dtype"], spec.get("shape", [])
    elif isinstance(spec, str) and _TYPE.match(spec.lower()):
        dtype, dims = _TYPE.match(spec.lower()).groups()
        if dims is not None and not dims.strip():
            raise SchemaError(f"{name}: {spec!r}: write [None] for a list of any length, or "
                              f"[n] for n values (a single value takes no brackets)")
        dims = [] if dims is None else [d.strip() for d in dims.split(",")]
        dims = [None if d in ("none", "?", "-1") else d for d in dims]
    else:
        raise SchemaError(f"{name}: {spec!r} is not {usage}")
    try:
        shape = tuple(None if d is None else int(d) for d in dims)
    except (TypeError, ValueError):
        raise SchemaError(f"{name}: {spec!r}: dimensions are whole numbers or None") from None
    if dtype not in _DTYPES or len(shape) > 2 or any(d is not None and d < 0 for d in shape) \
            or None in shape[1:]:
        raise SchemaError(f"{name}: {spec!r} is not {usage} (only the first dimension may be "
                          f"None, and at most two)")
    return _DTYPES[dtype], shape


def extra_columns(df, used, declared=None, reserved=()):
    """Every column of ``df`` not in ``used``, typed, with its values.

    Args:
        df: the table.
        used: the split, image and label columns.
        declared: the ``features=`` mapping, column -> type (see :func:`feature_type`).
        reserved: record keys the columns must not take (the image and label features).

    Returns:
        ``(columns, rows)``: a tuple of Column, and one tuple of plain Python values (or
        lists of values) per table row (in column order).

    Raises:
        SchemaError: naming a column that cannot be stored exactly.
    """
    declared = dict(declared or {})
    unknown = [k for k in declared if k not in df.columns or k in used]
    if unknown:
        raise SchemaError(f"features= names {unknown}, which are not extra columns of the table "
                          f"(extra columns: {[c for c in df.columns if c not in used]})")
    columns, values = [], []
    for name in df.columns:
        if name in used:
            continue
        key = str(name)
        if key in keys.IMAGE_FEATURES or key in reserved:
            raise SchemaError(f"column '{key}' clashes with a record feature key; rename it")
        if name in declared:
            column, stored = _declared(key, df[name], *feature_type(declared[name], key))
        else:
            column, stored = _typed(key, df[name])
        columns.append(column)
        values.append(stored)
    return tuple(columns), tuple(zip(*values)) if values else ((),) * len(df)


_CONVERT = "drop the column, or convert it to int, float or text"


def _refuse(name, series, mask, problem, advice=_CONVERT):
    _refuse_row(name, series.index[np.flatnonzero(np.asarray(mask))[0]], problem, advice)


def _refuse_row(name, row, problem, advice=_CONVERT):
    raise SchemaError(f"column '{name}' {problem} at row {row_repr(row)}: {advice}")


def _typed(name, series):
    """``(Column, values)`` of one column."""
    dtype, missing = series.dtype, series.isna()
    dtype_text = str(dtype)
    if dtype.kind in "biu":
        if missing.any():
            _refuse(name, series, missing, "has a missing value, which an int64 feature "
                    "cannot hold,", "fill it (df[col].fillna(...)), make the column float "
                    "(missing values are then NaN), or drop it")
        if dtype.kind == "b":
            return Column(name, keys.INT64, dtype_text), [int(v) for v in series]
        stored = [int(v) for v in series]
        _check_range(name, series, keys.INT64, [[v] for v in stored])
        return Column(name, keys.INT64, dtype_text), stored
    if dtype.kind == "f":
        stored = series.astype("float64").tolist()
        _check_range(name, series, keys.FLOAT, [[v] for v in stored])
        return Column(name, keys.FLOAT, dtype_text,
                           "NaN" if missing.any() else None), stored
    if dtype.kind == "c":
        _refuse(name, series, [True] * len(series), "holds complex numbers")
    if dtype.kind in "mM":
        stored = ["" if pd.isna(v) else v.isoformat() for v in series]
    else:
        values = series.astype(object).tolist()
        refused = [isinstance(v, _REFUSED) for v in values]
        if any(refused):
            _refuse(name, series, refused, "holds dicts or sets",
                    "drop the column, or make each cell a list of numbers or texts")
        if any(isinstance(v, _LISTS) for v in values):
            return _list_column(name, series, values)
        stored = [v if isinstance(v, bytes) else "" if pd.isna(v) else str(v) for v in values]
    return Column(name, keys.BYTES, dtype_text,
                       "empty string" if missing.any() else None), stored


def _check_range(name, series, kind, cells):
    """Refuse values an int64 or float32 feature cannot hold exactly."""
    if kind == keys.INT64:
        bad = [any(not _INT64_MIN <= v <= _INT64_MAX for v in cell) for cell in cells]
        if any(bad):
            _refuse(name, series, bad, "holds a value outside int64")
    elif kind == keys.FLOAT:
        bad = [any(abs(v) > _FLOAT32_MAX and np.isfinite(v) for v in cell) for cell in cells]
        if any(bad):
            _refuse(name, series, bad, "holds a value beyond float32")


def _cells(name, series, values):
    """Each cell as ``(flat values, rows, row length)`` (row length None for a flat list), or
    None for a missing cell."""
    cells = []
    for row, value in zip(series.index, values):
        if is_missing(value):
            cells.append(None)
            continue
        if not isinstance(value, _LISTS):
            _refuse_row(name, row, f"mixes lists and single values ({value!r})",
                        "make every cell a list (or missing)")
        items = value.tolist() if isinstance(value, np.ndarray) else list(value)
        nested = [isinstance(v, _LISTS) for v in items]
        if any(nested) and not all(nested):
            _refuse_row(name, row, "mixes lists and values in one cell",
                        "make each cell a list of values, or a list of equal-length lists")
        if items and all(nested):
            rows = [v.tolist() if isinstance(v, np.ndarray) else list(v) for v in items]
            widths = {len(r) for r in rows}
            if len(widths) != 1 or any(isinstance(x, _LISTS) for r in rows for x in r):
                _refuse_row(name, row, "holds lists of lists of different lengths (or deeper)",
                            "give every row the same length, as boxes [[x0, y0, x1, y1], ...] "
                            "do")
            cells.append(([x for r in rows for x in r], len(rows), widths.pop()))
        else:
            cells.append((items, len(items), None))
    return cells


def _element_kind(name, series, flat):
    """The feature kind of a list column's elements (all of one kind)."""
    elements = [x for cell in flat if cell for x in cell[0]]
    if not elements:
        _refuse(name, series, [True] * len(series), "holds only empty lists, so its type "
                "cannot be told", "declare it, e.g. features={'%s': 'float32[None]'}" % name)
    if all(isinstance(x, (bool, np.bool_)) for x in elements):
        return keys.INT64
    if all(isinstance(x, (int, np.integer)) for x in elements):
        return keys.INT64
    if all(isinstance(x, (int, float, np.integer, np.floating)) for x in elements):
        return keys.FLOAT
    if all(isinstance(x, (str, bytes)) for x in elements):
        return keys.BYTES
    odd = [any(not isinstance(x, type(elements[0])) for x in cell[0]) if cell else False
           for cell in flat]
    _refuse(name, series, odd if any(odd) else [True] * len(series),
            "holds lists of values of different kinds",
            "make every value a number, or every value a text")


def _list_column(name, series, values, kind=None, shape=None):
    """``(Column, values)`` of a column of lists (inferred, or declared ``kind, shape``)."""
    cells = _cells(name, series, values)
    kind = kind or _element_kind(name, series, cells)
    widths = {cell[2] for cell in cells if cell and cell[1]}
    missing = any(cell is None for cell in cells)
    if shape is None:
        if len(widths) > 1:
            _refuse(name, series, [c is not None and c[2] is None for c in cells],
                    "mixes flat lists and lists of lists", "make every cell the same kind")
        width = widths.pop() if widths else None
        lengths = {cell[1] for cell in cells if cell}
        first = lengths.pop() if len(lengths) == 1 and not missing else None
        shape = (first,) if width is None else (first, width)
    for row, cell in zip(series.index, cells):
        if cell is None:
            if shape[:1] != (None,):
                raise SchemaError(f"column '{name}' has a missing value at row "
                                  f"{row_repr(row)}, which a "
                                  f"feature of shape {list(shape)} cannot hold: fill it, or "
                                  f"declare the first dimension None (stored as an empty list)")
            continue
        items, length, width = cell
        # a declared [None, 4] also takes flat lists of 4 values a row (x0, y0, x1, y1, ...)
        fits = example.value_count_fits(list(shape), len(items)) and (
            width is None if len(shape) == 1 else width in (None, shape[1]) or length == 0)
        if not fits:
            raise SchemaError(f"column '{name}' holds {_shape_text(length, width)} at row "
                              f"{row_repr(row)}, which does not fit its shape {list(shape)}")
    flat = [[] if cell is None else cell[0] for cell in cells]
    flat = [[_as_kind(name, series, row, kind, x) for x in cell]
            for row, cell in zip(series.index, flat)]
    _check_range(name, series, kind, flat)
    return Column(name, kind, str(series.dtype), "empty list" if missing else None,
                       shape), flat


def _shape_text(length, width):
    return f"{length} values" if width is None else f"{length} rows of {width}"


def _as_kind(name, series, row, kind, value):
    """One list element as the Python value its feature stores."""
    if kind == keys.BYTES:
        if isinstance(value, (str, bytes)):
            return value
    elif kind == keys.INT64:
        if isinstance(value, (bool, int, np.integer, np.bool_)) or (
                isinstance(value, (float, np.floating)) and float(value).is_integer()):
            return int(value)
    elif isinstance(value, (int, float, np.integer, np.floating)) and \
            not isinstance(value, (bool, np.bool_)):
        return float(value)
    wanted = {keys.BYTES: "text", keys.INT64: "a whole number"}.get(kind, "a number")
    raise SchemaError(f"column '{name}' holds {value!r} at row {row_repr(row)}, which is not "
                      f"{wanted}")


def _declared(name, series, kind, shape):
    """``(Column, values)`` of a column whose type ``features=`` declares."""
    if shape:
        values = series.astype(object).tolist()
        return _list_column(name, series, values, kind, shape)
    column, stored = _typed(name, series)
    if column.shape:
        raise SchemaError(f"column '{name}' holds lists, but features= declares one value")
    if column.kind == kind:
        return column, stored
    if kind == keys.INT64 and column.missing:
        _refuse(name, series, series.isna(), "has a missing value, which an int64 feature "
                "cannot hold,", "fill it, or declare the column float32")
    converted = []
    for row, value in zip(series.index, stored):
        if kind == keys.FLOAT and isinstance(value, str) and value == "":
            converted.append(float("nan"))
        elif kind == keys.BYTES:
            converted.append(value if isinstance(value, (str, bytes)) else str(value))
        else:
            converted.append(_as_kind(name, series, row, kind, value))
    missing = column.missing if kind != keys.FLOAT else ("NaN" if column.missing else None)
    return Column(name, kind, column.column_dtype, missing), converted
