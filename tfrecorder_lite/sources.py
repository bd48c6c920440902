"""Turn a conversion source (DataFrame, CSV file or image folder) into a table."""

import csv
import logging
import os

import pandas as pd

from . import files, schema
from .errors import SchemaError

logger = logging.getLogger(__name__)

_IMAGE_EXTENSIONS = {
    ".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".gif", ".bmp", ".dib", ".tif", ".tiff", ".webp",
    ".ppm", ".pgm", ".pbm", ".pnm", ".ico", ".tga", ".jp2", ".j2k",
}


def read_source(source, *, split_col="split", image_col="image_uri", label_col="label"):
    """Return ``(table, base_dir)``: the rows to convert and the folder relative paths start from.

    Args:
        source: a DataFrame, a CSV file path or an image folder laid out ``SPLIT/LABEL/FILE``.
    """
    if isinstance(source, pd.DataFrame):
        return source, None
    path = files.resolve(os.fspath(source))
    if files.is_dir(path):
        return read_image_folder(path, split_col, image_col, label_col), path
    if files.is_file(path):
        return read_csv(path, split_col, image_col, label_col), os.path.dirname(path)
    raise SchemaError(f"source {source!r} is neither a DataFrame, a CSV file nor a folder")


def _has_header(first_row, expected):
    cells = [c.strip() for c in first_row]
    if any(c in expected for c in cells):
        return True
    is_split = schema.canonical_splits(pd.Series(cells[:1])).notna().iloc[0] if cells else False
    return not is_split


def read_csv(path, split_col="split", image_col="image_uri", label_col="label"):
    """Read an image CSV; without a header row its columns are ``split, image_uri, label``."""
    with open(path, newline="", encoding="utf-8") as f:
        first_row = next(csv.reader(f), [])
    if not first_row:
        raise SchemaError(f"{path} is empty")
    options = dict(skipinitialspace=True, keep_default_na=False, na_values=[""])
    if _has_header(first_row, {split_col, image_col, label_col}):
        return pd.read_csv(path, **options)
    if len(first_row) != 3:
        raise SchemaError(
            f"{path} has no header and {len(first_row)} columns; a header-less CSV must have "
            f"exactly 3: {split_col},{image_col},{label_col} (multi-label rows are not supported)"
        )
    logger.info("%s has no header row; reading it as %s,%s,%s", path, split_col, image_col,
                label_col)
    return pd.read_csv(path, header=None, names=[split_col, image_col, label_col], **options)


def read_image_folder(root, split_col="split", image_col="image_uri", label_col="label"):
    """Table of a folder laid out ``SPLIT/LABEL/FILE`` (split names as in the CSV)."""
    rows, skipped = [], []
    for parts, path in files.walk_files(root):
        if len(parts) == 3 and os.path.splitext(parts[2])[1].lower() in _IMAGE_EXTENSIONS:
            rows.append((parts[0], path, parts[1]))
        else:
            skipped.append(os.path.join(*parts))
    if skipped:
        logger.warning("%d file(s) in %s are not SPLIT/LABEL/IMAGE and were left out, e.g. %s",
                       len(skipped), root, skipped[:3])
    if not rows:
        raise SchemaError(f"no images found in {root}: expected SPLIT/LABEL/FILE, e.g. "
                          "train/cat/001.jpg")
    return pd.DataFrame(rows, columns=[split_col, image_col, label_col])
