"""A CSV file's text split into records, and whether its first row is a header (shared by the
readers of CSV formats)."""

import csv
import io
import itertools
import os
from dataclasses import dataclass

import pandas as pd

from . import annotation_files
from .. import redaction
from ..errors import SchemaError
from ..table import labels, schema

logger = redaction.logger(__name__)  # its records may name URLs

IMAGE_EXTENSIONS = {
    ".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".gif", ".bmp", ".dib", ".tif", ".tiff", ".webp",
    ".ppm", ".pgm", ".pbm", ".pnm", ".ico", ".tga", ".jp2", ".j2k",
}


@dataclass(frozen=True)
class CsvText:
    """A CSV file's text, its ``(line, fields)`` data records, whether it has a header row,
    and its columns (the header's, or ``split, image_uri, label`` as the caller names them)."""

    text: str
    records: list
    header: bool
    columns: list


def parse(data, name, encoding="utf-8", split_col="split", image_col="image_uri",
          label_col="label"):
    """The CsvText of a CSV file's bytes.

    Raises:
        SchemaError: the file is empty, is not in ``encoding``, or is no CSV.
    """
    text = annotation_files.decode(data, name, encoding)
    records = _records(text, name)
    first = next(records, None)
    if first is None:
        raise SchemaError(f"{name} is empty")
    label_cols = [c for c, _ in labels.label_columns(label_col)]
    header = _has_header(first[1], {split_col, image_col, *label_cols})
    if header:
        columns = [c.strip() for c in first[1][:length(first[1])]]
    else:
        columns = [split_col, image_col, *label_cols]
        records = itertools.chain([first], records)
        logger.info("%s has no header row; reading it as %s", name, ",".join(columns))
    return CsvText(text, list(records), header, columns)


def of_source(source):
    """The CsvText of a Source (parsed once)."""
    if "csv" not in source.memo:
        source.memo["csv"] = parse(source.data, source.path, source.options["encoding"],
                                   *source.columns)
    return source.memo["csv"]


def _records(text, name):
    """Yield ``(line, fields)`` for each non-blank record of CSV text, from the line it starts
    on (a quoted field may span lines), split as pandas splits them."""
    reader = csv.reader(io.StringIO(text, newline=""), skipinitialspace=True)
    line = 1
    try:
        for fields in reader:
            if fields:
                yield line, fields
            line = reader.line_num + 1
    except csv.Error as exc:
        raise SchemaError(f"{name}: line {line}: {exc}") from None


def length(fields):
    """The number of fields without the empty ones at the end."""
    n = len(fields)
    while n and not fields[n - 1].strip():
        n -= 1
    return n


def _looks_like_path(cell):
    """True for a path or URL (has a slash or backslash), or a file name of an image."""
    return "/" in cell or "\\" in cell or os.path.splitext(cell.lower())[1] in IMAGE_EXTENSIONS


def _has_header(first_row, columns):
    """Whether the first row is a header: it names one of ``columns``, or it is no data row (its
    first cell is no split value, UNASSIGNED or empty, and none of its cells is a path)."""
    cells = [c.strip() for c in first_row]
    if any(c in columns for c in cells):
        return True
    split = cells[0].upper()
    if split in ("", "UNASSIGNED") or schema.canonical_splits(pd.Series([split])).notna()[0]:
        return False
    return not any(_looks_like_path(c) for c in cells)
