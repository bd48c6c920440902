"""The text of the CSV files the library writes from a table (``rejected.csv``, the hashes
and near-duplicate pairs files): every cell redacted (``redaction``) and safe to open in a
spreadsheet (a cell it would run as a formula gets a leading ``'``).
"""

import re

import pandas as pd

from .. import redaction

# Cells a spreadsheet would run as a formula (OWASP "CSV injection"); plain numbers are data.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def spreadsheet_safe(value):
    """``value``, with a leading ``'`` when it is text that a spreadsheet would run as a formula."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and \
            not _PLAIN_NUMBER.match(value):
        return "'" + value
    return value


def index_label(index):
    """Column header(s) for the row labels in rejected.csv, one per index level."""
    if isinstance(index, pd.MultiIndex):
        return [name or f"level_{i}" for i, name in enumerate(index.names)]
    return index.name or "row"


def safe_cells(values):
    """``values`` as cells bound for a file, as :func:`safe_csv` makes them (an int, and
    plain ASCII text that is no URL and no formula, are kept as they are without a call)."""
    return [value if type(value) is int or type(value) is str and value.isascii()
            and "://" not in value and not value.startswith(_FORMULA_START)
            else "" if _missing(value)  # as pandas writes it
            else spreadsheet_safe(redaction.redact_cell(value)) for value in values]


def _missing(value):
    """True for None, NaN and pd.NA."""
    return value is None or value is pd.NA or isinstance(value, float) and value != value


def index_text(label):
    """The text a row label is written as in the index of :func:`safe_csv`'s CSV (to find the
    table's row of a label read back)."""
    return str(spreadsheet_safe(redaction.redact(label)))


def safe_csv(frame, index_header, header=True):
    """The CSV text of a frame bound for a file: redacted and spreadsheet-safe, its index
    under ``index_header`` (see :func:`index_label`); without the header line when
    ``header`` is False (a file's later rows)."""
    safe = redaction.redact_frame(frame).map(spreadsheet_safe)
    safe.index = safe.index.map(spreadsheet_safe)
    return safe.to_csv(index_label=index_header, header=header)
