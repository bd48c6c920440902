"""Turn a conversion source (DataFrame, CSV file or image folder) into a table."""

import csv
import io
import itertools
import os

import pandas as pd

from . import annotation_files, detection_sources, labels, paths, schema, vertex, yolo
from .. import redaction, storage
from ..errors import SchemaError
from .schema import SOURCE_PROBLEMS

logger = redaction.logger(__name__)  # its records may name URLs

_IMAGE_EXTENSIONS = {
    ".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".gif", ".bmp", ".dib", ".tif", ".tiff", ".webp",
    ".ppm", ".pgm", ".pbm", ".pnm", ".ico", ".tga", ".jp2", ".j2k",
}

TASKS = detection_sources.TASKS  # how a CSV that its shape does not tell may be read


def read_source(source, *, split_col="split", image_col="image_uri", label_col="label",
                encoding="utf-8", storage_options=None, task=None, split=None, image_dir=None,
                include_masks=False, allow_outside_paths=False,
                max_annotation_bytes=detection_sources.MAX_ANNOTATION_BYTES):
    """Return ``(table, base_dir)``: the rows to convert and the folder relative paths start from.

    Args:
        source: a DataFrame, or the path or URL of a CSV file, of a COCO annotations file
            (``.json``), of a Vertex AI import file (JSON Lines, whatever its name, or a CSV
            whose rows start with the image: see ``vertex``), of a YOLO folder (holding
            ``data.yaml``) or its ``data.yaml``, of a Pascal VOC folder (``Annotations/`` and
            ``JPEGImages/``), or of an image folder laid out ``SPLIT/LABEL/FILE``. Detection
            sources give the per-box table (see ``detection_sources``).
        encoding: the text encoding of a CSV file or Vertex AI file.
        storage_options: fsspec options for a remote source (see ``storage.options_for``).
        task: how to read a CSV: ``"detection"`` (an AutoML detection CSV),
            ``"classification"``, or None to tell them apart by the file's shape.
        split, image_dir: a COCO file's split (default: from its name) and image folder
            (default: the file's folder), and ``include_masks`` (its boxes' instance masks);
            see ``detection_sources.read_coco``.
        allow_outside_paths: of an annotation file (COCO, Pascal VOC, Vertex AI, YOLO): read
            images it names outside the folder given too, and of a folder, files that are
            symbolic links leading out of it (see ``table.paths``).
        max_annotation_bytes: the largest annotation file read (COCO, Vertex AI, YOLO label
            files, Pascal VOC annotations and image lists, AutoML detection CSVs; see
            ``table.annotation_files``).
    """
    if task not in (None, *TASKS):
        raise SchemaError(f"task must be one of {TASKS} or None, not {task!r}")
    if isinstance(source, pd.DataFrame):
        _refuse_options("a DataFrame", split=split, image_dir=image_dir, task=task,
                        include_masks=include_masks or None,
                        allow_outside_paths=allow_outside_paths or None)
        return source, None
    if not isinstance(source, (str, os.PathLike)):
        raise SchemaError(f"source must be a DataFrame, or the path or URL of a CSV file, a "
                          f"COCO .json file or a folder, not {type(source).__name__}")
    path = storage.resolve(source)
    classification = task if task == "classification" else None
    columns = (split_col, image_col, label_col)
    if path.lower().endswith(".json"):
        data = annotation_files.read_annotation_bytes(path, storage_options,
                                                      max_annotation_bytes)
        coco = _coco_document(data, path, encoding)
        if coco is None:  # Vertex AI JSON Lines named .json
            _refuse_options("a Vertex AI JSON Lines file", task=task, split=split,
                            image_dir=image_dir, include_masks=include_masks or None)
            return _vertex(data, path, *columns, allow_outside_paths,
                           encoding), storage.parent(path)
        _refuse_options("a COCO annotations file", task=classification)
        table = detection_sources.coco_table(coco, path, image_dir, split, include_masks,
                                             allow_outside_paths=allow_outside_paths)
        return _named(table, *columns), storage.parent(path)
    _refuse_options(source, split=split, image_dir=image_dir, include_masks=include_masks or None)
    if path.lower().endswith((".yaml", ".yml")):
        _refuse_options("a YOLO data.yaml", task=classification)
        return _yolo(path, *columns, storage_options, allow_outside_paths, max_annotation_bytes)
    if storage.is_dir(path, storage_options):
        if yolo.find_yaml(path, storage_options) is not None:
            _refuse_options("a YOLO folder (it holds data.yaml)", task=classification)
            return _yolo(path, *columns, storage_options, allow_outside_paths,
                         max_annotation_bytes)
        if detection_sources.is_voc_folder(path, storage_options):
            _refuse_options("a Pascal VOC folder", task=classification)
            table = detection_sources.read_voc(path, storage_options,
                                               allow_outside_paths=allow_outside_paths,
                                               max_annotation_bytes=max_annotation_bytes)
            return _named(table, split_col, image_col, label_col), path
        _refuse_options("an image folder", task=task if task == "detection" else None)
        return read_image_folder(path, split_col, image_col, label_col, storage_options,
                                 allow_outside_paths), path
    try:
        if path.lower().endswith(".jsonl"):  # refused before it is read when too large
            data = annotation_files.read_annotation_bytes(path, storage_options,
                                                          max_annotation_bytes)
        else:
            data = storage.read_bytes(path, storage_options)
    except FileNotFoundError:
        raise SchemaError(f"source {source!r} is neither a DataFrame, a CSV file, a COCO .json "
                          "file nor a folder") from None
    if vertex.is_jsonl(data) or path.lower().endswith(".jsonl"):
        _refuse_options("a Vertex AI JSON Lines file", task=task)
    elif vertex.starts_with_image(data, encoding):  # a Vertex AI CSV without its ML_USE field
        _refuse_options("a Vertex AI CSV (rows start with the image)", task=task)
    else:
        _refuse_options(source, allow_outside_paths=allow_outside_paths or None)
        table = read_csv(data, path, *columns, encoding=encoding, task=task,
                         max_annotation_bytes=max_annotation_bytes)
        return table, storage.parent(path)
    annotation_files.check_size(path, data, max_annotation_bytes)
    return _vertex(data, path, *columns, allow_outside_paths, encoding), storage.parent(path)


def _coco_document(data, path, encoding="utf-8"):
    """The COCO document of a ``.json`` file's bytes, or None when they are Vertex AI JSON
    Lines (the first line an object with ``imageGcsUri``, or JSON objects a line that are not
    one document: a Vertex AI file with bad lines, which its reader names).

    Raises:
        SchemaError: the file is neither.
    """
    if vertex.is_vertex_jsonl(data, encoding):
        return None
    neither = (f"{path} is neither a COCO annotations file (one JSON document with an "
               "'images' list) nor a Vertex AI JSON Lines file (one JSON object a line, each "
               "with 'imageGcsUri')")
    try:
        document = annotation_files.parse_json(data, path)
    except SchemaError as exc:
        if vertex.is_json_lines(data, encoding):
            return None
        why = str(exc).removeprefix(path).lstrip(": ")  # "is not JSON: ...", "line 3 ..."
        raise SchemaError(f"{neither}: {'it ' if why.startswith('is ') else ''}{why}") from None
    if not isinstance(document, dict) or not isinstance(document.get("images"), list):
        kind = "an object" if isinstance(document, dict) else \
            f"a JSON {type(document).__name__}"
        raise SchemaError(f"{neither}: it is {kind} without an 'images' list")
    return document


def _yolo(path, split_col, image_col, label_col, storage_options, allow_outside_paths=False,
          max_annotation_bytes=detection_sources.MAX_ANNOTATION_BYTES):
    table = yolo.read_yolo(path, storage_options=storage_options,
                           allow_outside_paths=allow_outside_paths,
                           max_annotation_bytes=max_annotation_bytes)
    folder = storage.parent(path) if path.lower().endswith((".yaml", ".yml")) else path
    return _named(table, split_col, image_col, label_col), folder


def _vertex(data, path, split_col, image_col, label_col, allow_outside_paths=False,
            encoding="utf-8"):
    """The table of a Vertex AI file (a table of masks keeps its colour table in
    ``attrs["mask_colors"]``, which the masks are read through)."""
    return _named(vertex.vertex_table(data, path, allow_outside_paths, encoding), split_col,
                  image_col, label_col)


def _named(table, split_col, image_col, label_col):
    """A per-box table with the caller's names for its split, image and label columns."""
    if not isinstance(label_col, str):
        raise SchemaError(f"a detection source has one label column, not {label_col!r}")
    names = {"split": split_col, "image_uri": image_col, "label": label_col}
    return table.rename(columns={k: v for k, v in names.items() if v is not None})


def _refuse_options(source, **options):
    """Raise SchemaError when an option is given (not None) that ``source`` does not use."""
    given = [f"{k}={v!r}" for k, v in options.items() if v is not None]
    if given:
        raise SchemaError(f"{', '.join(given)} does not apply to {source}: split=, "
                          "image_dir= and include_masks= are for a COCO .json file, "
                          "allow_outside_paths= for an annotation file (COCO, VOC, Vertex AI, "
                          "YOLO) or an image folder, task= tells an AutoML detection CSV from a "
                          "classification CSV")


def read_csv(data, name, split_col="split", image_col="image_uri", label_col="label",
             encoding="utf-8", task=None,
             max_annotation_bytes=detection_sources.MAX_ANNOTATION_BYTES):
    """Read an image CSV from its bytes.

    Without a header row its columns are ``split, image_uri, label``. A byte order mark is
    skipped, and empty fields at the end of a row (Excel writes them) are dropped. An AutoML
    detection CSV (``ML_USE,PATH,LABEL`` and a box's vertices) gives the per-box table (see
    ``detection_sources.automl_rows``). When the label column is the last of the file and rows
    have more fields than columns (AutoML's multi-label CSV, ``TRAIN,gs://b/img.jpg,cat,dog``),
    the label column holds the list of every row's labels.

    Args:
        data: the file's bytes.
        name: its path or URL, for messages.
        encoding: the text encoding of ``data``.
        task: ``"detection"``, ``"classification"``, or None to tell them apart by the shape.
        max_annotation_bytes: the largest AutoML detection CSV read (it is read whole, an
            annotation file; see ``table.annotation_files``); classification CSVs are not
            bounded.

    Raises:
        SchemaError: the file is empty, is not in ``encoding``, has rows with more fields
            than it has columns, or is a detection CSV with bad rows or one that its shape
            alone does not tell from a multi-label CSV.
    """
    text = annotation_files.decode(data, name, encoding)
    records = _records(text, name)
    first = next(records, None)
    if first is None:
        raise SchemaError(f"{name} is empty")
    label_cols = [c for c, _ in labels.label_columns(label_col)]
    header = _has_header(first[1], {split_col, image_col, *label_cols})
    if header:
        columns = [c.strip() for c in first[1][:_length(first[1])]]
    else:
        columns = [split_col, image_col, *label_cols]
        records = itertools.chain([first], records)
        logger.info("%s has no header row; reading it as %s", name, ",".join(columns))
    records = list(records)
    if not (header and set(detection_sources.BOX_COLUMNS) <= set(columns)):  # per-box table
        boxes = detection_sources.automl_rows(records, name, task)
        if boxes is not None:
            annotation_files.check_size(name, data, max_annotation_bytes)
            return detection_sources.automl_detection_table(boxes, name, split_col, image_col,
                                                            label_col)
    ragged = _ragged_rows(records, columns)
    if ragged and isinstance(label_col, str) and columns[-1] == label_col:
        return _multi_label_table(records, columns)
    if ragged:
        _refuse_ragged(ragged, columns, name, header)
    table = pd.read_csv(io.StringIO(text), header=0 if header else None,
                        names=None if header else columns, usecols=range(len(columns)),
                        index_col=False, skipinitialspace=True, keep_default_na=False,
                        na_values=[""])
    lines = [line for line, _ in records]
    if len(lines) == len(table):  # pandas read the same records: each row's line is known
        table.attrs["csv_lines"] = lines
    return table


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


def _length(fields):
    """The number of fields without the empty ones at the end."""
    n = len(fields)
    while n and not fields[n - 1].strip():
        n -= 1
    return n


def _looks_like_path(cell):
    """True for a path or URL (has a slash or backslash), or a file name of an image."""
    return "/" in cell or "\\" in cell or os.path.splitext(cell.lower())[1] in _IMAGE_EXTENSIONS


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


def _ragged_rows(records, columns):
    """``(line, field count)`` of the rows with more (non-empty) fields than ``columns``."""
    return [(line, _length(fields)) for line, fields in records
            if len(fields) > len(columns) and _length(fields) > len(columns)]


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


def read_image_folder(root, split_col="split", image_col="image_uri", label_col="label",
                      storage_options=None, allow_outside_paths=False):
    """Table of a folder (path or URL) laid out ``SPLIT/LABEL/FILE`` (split names as in a CSV).

    An image that is a symbolic link leading outside the folder is a row refused with that
    reason (``attrs[SOURCE_PROBLEMS]``), unless ``allow_outside_paths``.
    """
    rows, skipped, problems = [], [], {}
    for parts, path in storage.walk_files(root, storage_options):
        if len(parts) == 3 and os.path.splitext(parts[2])[1].lower() in _IMAGE_EXTENSIONS:
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
