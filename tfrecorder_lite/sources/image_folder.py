"""An image folder laid out ``SPLIT/LABEL/FILE``, read into a table."""

import os

import pandas as pd

from . import annotation_files, paths
from .. import redaction, storage
from ..errors import SchemaError
from ..table.schema import SOURCE_PROBLEMS
from .csv_text import IMAGE_EXTENSIONS
from .source import refuse_options

DESCRIPTION = "folder SPLIT/LABEL/FILE"  # as the CLI's help names it
TASK = "classification"  # the one ``task`` a folder of labelled images may be read as

logger = redaction.logger(__name__)  # its records may name URLs


def recognizes(source):
    """Any folder the formats before it do not take is an image folder."""
    return source.is_dir


def read(source):
    """``(table, base_dir)`` of an image folder."""
    task = source.options["task"]
    refuse_options("an image folder", task=None if task in (None, TASK) else task)
    return read_image_folder(source.path, *source.columns, source.storage_options,
                             source.options["allow_outside_paths"]), source.path


def read_image_folder(root, split_col="split", image_col="image_uri", label_col="label",
                      storage_options=None, allow_outside_paths=False):
    """Table of a folder (path or URL) laid out ``SPLIT/LABEL/FILE`` (split names as in a CSV).

    An image that is a symbolic link leading outside the folder is a row refused with that
    reason (``attrs[SOURCE_PROBLEMS]``), unless ``allow_outside_paths``.
    """
    rows, skipped, problems = [], [], {}
    for parts, path in storage.walk_files(root, storage_options):
        if len(parts) == 3 and os.path.splitext(parts[2])[1].lower() in IMAGE_EXTENSIONS:
            # a folder walk enters no linked folder: only a file can be a link
            problem = None if allow_outside_paths or storage.is_remote(path) or \
                not os.path.islink(path) else \
                paths.link_problem(path, root, "/".join(parts), annotation_files.ALLOW_OUTSIDE)
            if problem:
                problems[len(rows)] = problem
            rows.append((parts[0], path, parts[1]))
        else:
            skipped.append("/".join(parts))
    if skipped:
        logger.warning("%d file(s) in %s are not SPLIT/LABEL/IMAGE and were left out, e.g. %s",
                       len(skipped), root, skipped[:3])
    if not rows:
        raise SchemaError(f"no images found in {root}: expected SPLIT/LABEL/FILE, e.g. "
                          "train/cat/001.jpg")
    table = pd.DataFrame(rows, columns=[split_col, image_col, label_col])
    if problems:
        table.attrs[SOURCE_PROBLEMS] = problems
    return table
