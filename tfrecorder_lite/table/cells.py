"""What an empty cell is, once for every table check: pandas only, no I/O.

A *blank* cell holds nothing to read as a label or a split: missing (None, NaN, NA) or text of
only whitespace. A *missing* value is None, NaN or NA (text, even empty, and lists are values).
"""

import numpy as np
import pandas as pd

LISTS = (list, tuple, set, frozenset, np.ndarray)  # cells that hold several values


def is_missing(value):
    """Whether one cell holds no value: None, NaN or NA (text and lists are values)."""
    return value is None or (not isinstance(value, (str, *LISTS)) and bool(pd.isna(value)))


def is_blank(value):
    """Whether one cell is blank: missing, or text of only whitespace."""
    if isinstance(value, str):
        return not value.strip()
    return is_missing(value)


def text_series(values):
    """``values`` as pandas' string dtype; text that is not valid Unicode (a lone surrogate,
    which a string column refuses) has it replaced by U+FFFD (the checks then name it)."""
    try:
        return values.astype("string")
    except UnicodeEncodeError:
        return values.map(lambda v: v.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
                          if isinstance(v, str) else v).astype("string")


def blank_cells(values):
    """The mask of blank cells of a Series (vectorized :func:`is_blank`)."""
    return values.isna() | text_series(values).str.strip().eq("").fillna(True)
