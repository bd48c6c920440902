"""The source formats, registered in one place, and the one call that reads any source.

A source format is one module of this package with ``recognizes(source)`` (whether a
:class:`~tfrecorder_lite.sources.source.Source` is of its kind, by its content) and
``read(source)`` (``(table, base_dir)``); the first format in ``FORMATS`` that recognizes a
source reads it. A new format is one module and one line here.
"""

import os

import pandas as pd

from . import (annotation_files, automl_csv, coco, csv_table, csv_text, image_folder, vertex,
               voc, yolo)
from .. import storage
from ..errors import SchemaError
from .annotation_files import MAX_ANNOTATION_BYTES
from .source import Source, refuse_options

#: the formats, in the order they are asked (the last of files and of folders takes any)
FORMATS = (coco, vertex, yolo, voc, image_folder, automl_csv, csv_table)

TASKS = automl_csv.TASKS  # how a CSV that its shape does not tell may be read


def described():
    """The formats as the CLI's help lists them, the most general first."""
    texts = [kind.DESCRIPTION for kind in reversed(FORMATS)]
    return f"{', '.join(texts[:-1])} or {texts[-1]}"


def read_csv(data, name, split_col="split", image_col="image_uri", label_col="label",
             encoding="utf-8", task=None,
             max_annotation_bytes=annotation_files.MAX_ANNOTATION_BYTES):
    """Read an image CSV from its bytes.

    Without a header row its columns are ``split, image_uri, label``. A byte order mark is
    skipped, and empty fields at the end of a row (Excel writes them) are dropped. An AutoML
    detection CSV (``ML_USE,PATH,LABEL`` and a box's vertices) gives the per-box table (see
    ``automl_csv.automl_rows``). When the label column is the last of the file and rows
    have more fields than columns (AutoML's multi-label CSV, ``TRAIN,gs://b/img.jpg,cat,dog``),
    the label column holds the list of every row's labels.

    Args:
        data: the file's bytes.
        name: its path or URL, for messages.
        encoding: the text encoding of ``data``.
        task: ``"detection"``, ``"classification"``, or None to tell them apart by the shape.
        max_annotation_bytes: the largest AutoML detection CSV read (it is read whole, an
            annotation file; see ``sources.annotation_files``); classification CSVs are not
            bounded.

    Raises:
        SchemaError: the file is empty, is not in ``encoding``, has rows with more fields
            than it has columns, or is a detection CSV with bad rows or one that its shape
            alone does not tell from a multi-label CSV.
    """
    parsed = csv_text.parse(data, name, encoding, split_col, image_col, label_col)
    boxes = automl_csv.rows_of(parsed, name, task)
    if boxes is not None:
        annotation_files.check_size(name, data, max_annotation_bytes)
        return automl_csv.automl_detection_table(boxes, name, split_col, image_col, label_col)
    return csv_table.table_of(parsed, name, label_col)


def read_source(source, *, split_col="split", image_col="image_uri", label_col="label",
                encoding="utf-8", storage_options=None, task=None, split=None, image_dir=None,
                include_masks=False, allow_outside_paths=False,
                max_annotation_bytes=MAX_ANNOTATION_BYTES):
    """Return ``(table, base_dir)``: the rows to convert and the folder relative paths start from.

    Args:
        source: a DataFrame, or the path or URL of a CSV file, of a COCO annotations file
            (``.json``), of a Vertex AI import file (JSON Lines, whatever its name, or a CSV
            whose rows start with the image: see ``vertex``), of a YOLO folder (holding
            ``data.yaml``) or its ``data.yaml``, of a Pascal VOC folder (``Annotations/`` and
            ``JPEGImages/``), or of an image folder laid out ``SPLIT/LABEL/FILE``. Detection
            sources give the per-box table (see ``box_rows``).
        encoding: the text encoding of a CSV file or Vertex AI file.
        storage_options: fsspec options for a remote source (see ``storage.options_for``).
        task: how to read a CSV: ``"detection"`` (an AutoML detection CSV),
            ``"classification"``, or None to tell them apart by the file's shape.
        split, image_dir: a COCO file's split (default: from its name) and image folder
            (default: the file's folder), and ``include_masks`` (its boxes' instance masks);
            see ``coco.read_coco``.
        allow_outside_paths: of an annotation file (COCO, Pascal VOC, Vertex AI, YOLO): read
            images it names outside the folder given too, and of a folder, files that are
            symbolic links leading out of it (see ``sources.paths``).
        max_annotation_bytes: the largest annotation file read (COCO, Vertex AI, YOLO label
            files, Pascal VOC annotations and image lists, AutoML detection CSVs; see
            ``sources.annotation_files``).
    """
    if task not in (None, *TASKS):
        raise SchemaError(f"task must be one of {TASKS} or None, not {task!r}")
    if isinstance(source, pd.DataFrame):
        refuse_options("a DataFrame", split=split, image_dir=image_dir, task=task,
                       include_masks=include_masks or None,
                       allow_outside_paths=allow_outside_paths or None)
        return source, None
    if not isinstance(source, (str, os.PathLike)):
        raise SchemaError(f"source must be a DataFrame, or the path or URL of a CSV file, a "
                          f"COCO .json file or a folder, not {type(source).__name__}")
    options = dict(split_col=split_col, image_col=image_col, label_col=label_col,
                   encoding=encoding, storage_options=storage_options, task=task, split=split,
                   image_dir=image_dir, include_masks=include_masks,
                   allow_outside_paths=allow_outside_paths,
                   max_annotation_bytes=max_annotation_bytes)
    located = Source(source, storage.resolve(source), options)
    for kind in FORMATS:  # a format's own options, refused by name before anything is read
        if getattr(kind, "OWN_OPTIONS", ()) and not kind.may_be(located):
            refuse_options(source, **{name: None if options[name] is False else options[name]
                                      for name in kind.OWN_OPTIONS})
    kind = next(kind for kind in FORMATS if kind.recognizes(located))
    return kind.read(located)
