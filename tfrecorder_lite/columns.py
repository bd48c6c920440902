"""Extra columns: each is carried into every record as a feature of its own name, stored
exactly with its type, or refused up front with a SchemaError naming the column.

=================================  ===========  =============================================
column                             feature      a missing value
=================================  ===========  =============================================
int (numpy or nullable), bool      int64        refused (an int64 feature cannot hold one)
float (numpy or nullable)          float32      NaN
text, category, mixed objects      bytes        the empty string
bytes objects                      bytes        the empty string
datetime, timedelta                bytes (ISO)  the empty string
lists, dicts, sets, arrays         refused      (list features are not supported yet)
complex                            refused
=================================  ===========  =============================================
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import example
from .errors import SchemaError

_INT64_MIN, _INT64_MAX = -2**63, 2**63 - 1
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_CONTAINERS = (list, tuple, dict, set, frozenset, np.ndarray)


@dataclass(frozen=True)
class ExtraColumn:
    """How one extra column is stored.

    Attributes:
        name: the feature key (the column name as text).
        kind: the feature kind: ``example.INT64``, ``FLOAT`` or ``BYTES``.
        column_dtype: the column's pandas dtype, as text.
        missing: how a missing value is stored ("NaN", "empty string"), or None when the
            column has none.
    """

    name: str
    kind: str
    column_dtype: str
    missing: str = None

    def describe(self):
        """The column's entry in metadata.json's ``features``."""
        return {"dtype": self.kind, "shape": [], "column_dtype": self.column_dtype,
                **({"missing": self.missing} if self.missing else {})}


def extra_columns(df, used):
    """Every column of ``df`` not in ``used``, typed, with its values.

    Returns:
        ``(columns, rows)``: a tuple of ExtraColumn, and one tuple of plain Python values per
        table row (in column order).

    Raises:
        SchemaError: naming a column that cannot be stored exactly.
    """
    columns, values = [], []
    for name in df.columns:
        if name in used:
            continue
        key = str(name)
        if key in example.IMAGE_FEATURES:
            raise SchemaError(f"column '{key}' clashes with a record feature key; rename it")
        column, stored = _typed(key, df[name])
        columns.append(column)
        values.append(stored)
    return tuple(columns), tuple(zip(*values)) if values else ((),) * len(df)


_CONVERT = "drop the column, or convert it to int, float or text"


def _refuse(name, series, mask, problem, advice=_CONVERT):
    row = series.index[np.flatnonzero(np.asarray(mask))[0]]
    raise SchemaError(f"column '{name}' {problem} at row {row!r}: {advice}")


def _typed(name, series):
    """``(ExtraColumn, values)`` of one column."""
    dtype, missing = series.dtype, series.isna()
    dtype_text = str(dtype)
    if dtype.kind in "biu":
        if missing.any():
            _refuse(name, series, missing, "has a missing value, which an int64 feature "
                    "cannot hold,", "fill it (df[col].fillna(...)), make the column float "
                    "(missing values are then NaN), or drop it")
        if dtype.kind == "b":
            return ExtraColumn(name, example.INT64, dtype_text), [int(v) for v in series]
        stored = [int(v) for v in series]
        out_of_range = [not _INT64_MIN <= v <= _INT64_MAX for v in stored]
        if any(out_of_range):
            _refuse(name, series, out_of_range, "holds a value outside int64")
        return ExtraColumn(name, example.INT64, dtype_text), stored
    if dtype.kind == "f":
        stored = series.astype("float64").tolist()
        too_large = [abs(v) > _FLOAT32_MAX and np.isfinite(v) for v in stored]
        if any(too_large):
            _refuse(name, series, too_large, "holds a value beyond float32")
        return ExtraColumn(name, example.FLOAT, dtype_text,
                           "NaN" if missing.any() else None), stored
    if dtype.kind == "c":
        _refuse(name, series, [True] * len(series), "holds complex numbers")
    if dtype.kind in "mM":
        stored = ["" if pd.isna(v) else v.isoformat() for v in series]
    else:
        values = series.astype(object).tolist()
        containers = [isinstance(v, _CONTAINERS) for v in values]
        if any(containers):
            _refuse(name, series, containers, "holds lists (list features are not supported "
                                              "yet)")
        stored = [v if isinstance(v, bytes) else "" if pd.isna(v) else str(v) for v in values]
    return ExtraColumn(name, example.BYTES, dtype_text,
                       "empty string" if missing.any() else None), stored
