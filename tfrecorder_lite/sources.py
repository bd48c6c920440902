"""Turn a conversion source (DataFrame, CSV file or image folder) into a table."""

import csv
import io
import logging
import os

import pandas as pd

from . import schema, storage
from .errors import SchemaError

logger = logging.getLogger(__name__)

_IMAGE_EXTENSIONS = {
    ".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".gif", ".bmp", ".dib", ".tif", ".tiff", ".webp",
    ".ppm", ".pgm", ".pbm", ".pnm", ".ico", ".tga", ".jp2", ".j2k",
}


def read_source(source, *, split_col="split", image_col="image_uri", label_col="label",
                storage_options=None):
    """Return ``(table, base_dir)``: the rows to convert and the folder relative paths start from.

    Args:
        source: a DataFrame, or the path or URL of a CSV file or of an image folder laid out
            ``SPLIT/LABEL/FILE``.
        storage_options: fsspec options for a remote source (see ``storage.options_for``).
    """
    if isinstance(source, pd.DataFrame):
        return source, None
    if not isinstance(source, (str, os.PathLike)):
        raise SchemaError(f"source must be a DataFrame, or the path or URL of a CSV file or an "
                          f"image folder, not {type(source).__name__}")
    path = storage.resolve(source)
    if storage.is_dir(path, storage_options):
        return read_image_folder(path, split_col, image_col, label_col, storage_options), path
    try:
        data = storage.read_bytes(path, storage_options)
    except FileNotFoundError:
        raise SchemaError(f"source {source!r} is neither a DataFrame, a CSV file nor a "
                          "folder") from None
    return read_csv(data, path, split_col, image_col, label_col), storage.parent(path)


def _has_header(first_row, expected):
    cells = [c.strip() for c in first_row]
    if any(c in expected for c in cells):
        return True
    is_split = schema.canonical_splits(pd.Series(cells[:1])).notna().iloc[0] if cells else False
    return not is_split


def read_csv(data, name, split_col="split", image_col="image_uri", label_col="label"):
    """Read an image CSV from its bytes; without a header row its columns are
    ``split, image_uri, label``. ``name`` (its path or URL) is used in messages."""
    first_line = data.split(b"\n", 1)[0].decode("utf-8", errors="replace")
    first_row = next(csv.reader([first_line]), [])
    if not first_row:
        raise SchemaError(f"{name} is empty")
    options = dict(skipinitialspace=True, keep_default_na=False, na_values=[""])
    if _has_header(first_row, {split_col, image_col, label_col}):
        return pd.read_csv(io.BytesIO(data), **options)
    if len(first_row) != 3:
        raise SchemaError(
            f"{name} has no header and {len(first_row)} columns; a header-less CSV must have "
            f"exactly 3: {split_col},{image_col},{label_col} (multi-label rows are not supported)"
        )
    logger.info("%s has no header row; reading it as %s,%s,%s", name, split_col, image_col,
                label_col)
    return pd.read_csv(io.BytesIO(data), header=None, names=[split_col, image_col, label_col],
                       **options)


def read_image_folder(root, split_col="split", image_col="image_uri", label_col="label",
                      storage_options=None):
    """Table of a folder (path or URL) laid out ``SPLIT/LABEL/FILE`` (split names as in a CSV)."""
    rows, skipped = [], []
    for parts, path in storage.walk_files(root, storage_options):
        if len(parts) == 3 and os.path.splitext(parts[2])[1].lower() in _IMAGE_EXTENSIONS:
            rows.append((parts[0], path, parts[1]))
        else:
            skipped.append("/".join(parts))
    if skipped:
        logger.warning("%d file(s) in %s are not SPLIT/LABEL/IMAGE and were left out, e.g. %s",
                       len(skipped), root, skipped[:3])
    if not rows:
        raise SchemaError(f"no images found in {root}: expected SPLIT/LABEL/FILE, e.g. "
                          "train/cat/001.jpg")
    return pd.DataFrame(rows, columns=[split_col, image_col, label_col])
