"""A CSV file of ``split, image_uri, label`` rows (with or without a header; several labels a
row: multi-label), read into a table."""

import io

import pandas as pd

from . import csv_text
from .. import storage
from ..errors import SchemaError
from .source import refuse_options

DESCRIPTION = "CSV file (split,image_uri,label)"  # as the CLI's help names it


def recognizes(source):
    """Any file the formats before it do not take is read as a CSV file."""
    return not source.is_dir


def read(source):
    """``(table, base_dir)`` of a CSV file (see :func:`read_csv`)."""
    refuse_options(source.given,
                   allow_outside_paths=source.options["allow_outside_paths"] or None)
    return table_of(csv_text.of_source(source), source.path, source.options["label_col"]), \
        storage.parent(source.path)


def table_of(parsed, name, label_col="label"):
    """The table of a CSV file's CsvText of ``split, image_uri, label`` rows."""
    records, columns, header = parsed.records, parsed.columns, parsed.header
    ragged = _ragged_rows(records, columns)
    if ragged and isinstance(label_col, str) and columns[-1] == label_col:
        return _multi_label_table(records, columns)
    if ragged:
        _refuse_ragged(ragged, columns, name, header)
    table = pd.read_csv(io.StringIO(parsed.text), header=0 if header else None,
                        names=None if header else columns, usecols=range(len(columns)),
                        index_col=False, skipinitialspace=True, keep_default_na=False,
                        na_values=[""])
    lines = [line for line, _ in records]
    if len(lines) == len(table):  # pandas read the same records: each row's line is known
        table.attrs["csv_lines"] = lines
    return table


def _ragged_rows(records, columns):
    """``(line, field count)`` of the rows with more (non-empty) fields than ``columns``."""
    return [(line, csv_text.length(fields)) for line, fields in records
            if len(fields) > len(columns) and csv_text.length(fields) > len(columns)]


def _refuse_ragged(ragged, columns, name, header):
    """Raise SchemaError listing the rows with more fields than ``columns``."""
    (line, count), more = ragged[0], ragged[1:]
    where = ",".join(columns) + ("" if header else "; the file has no header row")
    also = ", ".join(f"{n} ({c} fields)" for n, c in more[:10])
    also += f" and {len(more) - 10} more" if len(more) > 10 else ""
    raise SchemaError(
        f"{name}: line {line} has {count} fields, expected {len(columns)} ({where})"
        + (f"; also lines {also}" if more else "")
        + ". Several labels on a row (multi-label) are read when the label column is the "
          "last one; quote fields that hold commas")


def _multi_label_table(records, columns):
    """The table of a multi-label CSV: the last column holds each row's list of labels."""
    head = len(columns) - 1
    rows = []
    for _, fields in records:
        cells = [f.strip() or None for f in fields[:head]]
        cells += [None] * (head - len(cells))
        rows.append(cells + [[f.strip() for f in fields[head:] if f.strip()]])
    return pd.DataFrame(rows, columns=columns)
