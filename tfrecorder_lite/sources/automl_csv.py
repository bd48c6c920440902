"""AutoML Vision's object detection CSV: ``ML_USE,PATH,LABEL`` and a box's vertices a row."""

import math

from . import annotation_files, box_rows, csv_text
from .. import storage
from ..errors import SchemaError
from ..record.boxes import BOX_COLUMNS
from ..table import schema
from ..table.detection import SOURCE_PROBLEMS
from .source import refuse_options

DESCRIPTION = "AutoML's detection CSV"  # as the CLI's help names it

TASKS = ("detection", "classification")  # how a CSV that its shape does not tell may be read
NEGATIVE_IMAGE = "NEGATIVE_IMAGE"  # AutoML's label of an image known to hold no objects
_AUTOML_FIELDS = 11
_AUTOML_FORMS = ("ML_USE,PATH,LABEL,x_min,y_min,x_max,y_min,x_max,y_max,x_min,y_max or "
                 "ML_USE,PATH,LABEL,x_min,y_min,,,x_max,y_max,,")
_TWO_VERTICES = (True, True, False, False, True, True, False, False)


def recognizes(source):
    """Whether ``source`` is an AutoML detection CSV, by its rows (or ``task="detection"``)."""
    if source.is_dir:
        return False
    source.memo["automl"] = rows_of(csv_text.of_source(source), source.path,
                                    source.options["task"])
    return source.memo["automl"] is not None


def read(source):
    """``(the per-box table, base_dir)`` of an AutoML detection CSV."""
    refuse_options(source.given,
                   allow_outside_paths=source.options["allow_outside_paths"] or None)
    annotation_files.check_size(source.path, source.data,
                                source.options["max_annotation_bytes"])
    return automl_detection_table(source.memo["automl"], source.path, *source.columns), \
        storage.parent(source.path)


def rows_of(parsed, name, task=None):
    """:func:`automl_rows` of a CSV file's CsvText, or None when it is no AutoML detection CSV
    (a header naming the box columns: a table of boxes)."""
    if parsed.header and set(BOX_COLUMNS) <= set(parsed.columns):
        return None
    return automl_rows(parsed.records, name, task)


def automl_row(fields):
    """``(split, image, label, box)`` of one AutoML detection CSV row.

    ``box`` is ``(xmin, ymin, xmax, ymax)``, or None for a row without coordinates; the label of
    an image without objects (empty or ``NEGATIVE_IMAGE``) is None.

    Raises:
        ValueError: the row is no AutoML detection row; the message says why.
    """
    cells = [f.strip() for f in fields]
    while len(cells) > _AUTOML_FIELDS and not cells[-1]:
        cells.pop()
    if len(cells) > _AUTOML_FIELDS:
        raise ValueError(f"{len(cells)} fields, at most {_AUTOML_FIELDS}")
    cells += [""] * (_AUTOML_FIELDS - len(cells))
    values = [_coordinate(c) for c in cells[3:]]
    present = tuple(v is not None for v in values)
    if not any(present):
        box = None
    elif present == _TWO_VERTICES:
        box = (values[0], values[1], values[4], values[5])
    elif all(present):
        if (values[2], values[3], values[6], values[7]) != (values[4], values[1], values[0],
                                                             values[5]):
            raise ValueError("its four vertices are not x_min,y_min,x_max,y_min,x_max,y_max,"
                             "x_min,y_max")
        box = (values[0], values[1], values[4], values[5])
    else:
        raise ValueError("its coordinates are neither four vertices nor two")
    label = cells[2] or None
    if box is None and label == NEGATIVE_IMAGE:
        label = None
    return cells[0], cells[1], label, box


def _is_fraction(cell):
    """True for a cell holding a finite number that is not whole (``.3``, ``0.25``)."""
    try:
        value = schema.parse_number(cell)
    except ValueError:
        return False
    return math.isfinite(value) and not value.is_integer()


def _coordinate(cell):
    """A coordinate cell as a float, None when empty; ValueError for anything else."""
    if not cell:
        return None
    value = schema.parse_number(cell)  # ValueError: no number
    if not math.isfinite(value):
        raise ValueError(f"coordinate {cell!r} is not a finite number")
    return value


def automl_rows(records, name, task=None):
    """The rows of an AutoML detection CSV, or None when ``records`` are a classification CSV.

    Args:
        records: ``(line, fields)`` of the file's data rows (no header).
        name: the file's path or URL, for messages.
        task: ``"detection"``, ``"classification"`` (returns None), or None to recognize the
            file by its shape: a number with a fraction after the label column makes it a
            detection CSV.

    Returns:
        ``[(line, split, image, label, box, reason), ...]`` (see :func:`automl_row`), or
        None. ``reason`` is None, or why a row that is no AutoML detection row (too many
        fields, a coordinate that is no number, vertices of no box) cannot be written: its
        image is refused with it.

    Raises:
        SchemaError: a file whose coordinates are all whole numbers (it could be integer
            labels of a multi-label CSV) without ``task``.
    """
    if task == "classification":
        return None
    rows, bad, fraction = [], False, False
    for line, fields in records:
        try:
            rows.append((line, *automl_row(fields), None))
        except ValueError as exc:
            cells = [f.strip() for f in fields[:2]] + ["", ""]
            rows.append((line, cells[0], cells[1], None, None,
                         f"line {line}: not an AutoML detection row ({_AUTOML_FORMS}): {exc}"))
            bad = True
        fraction = fraction or any(_is_fraction(cell) for cell in fields[3:])
    if task is None and not fraction:
        if bad or not any(row[4] for row in rows):
            return None
        raise SchemaError(
            f"{name}: every row has the shape of an AutoML detection CSV ({_AUTOML_FORMS}) "
            "with whole-number coordinates, which could also be the integer labels of a "
            "multi-label CSV; pass task=\"detection\" or task=\"classification\" "
            "(--task detection | classification)")
    return rows


def automl_detection_table(rows, name, split_col="split", image_col="image_uri",
                           label_col="label"):
    """The per-box table of :func:`automl_rows`: images in the order they first appear, each
    with its boxes in file order (an image named on several rows gets all their boxes), each
    row's line in ``attrs["csv_lines"]``. An image named on a row with a reason is one row
    refused with the reasons (``attrs[SOURCE_PROBLEMS]``).

    Raises:
        SchemaError: one image named with two splits.
    """
    if not isinstance(label_col, str):
        raise SchemaError(f"{name} is a detection CSV: it has one label column, not "
                          f"{label_col!r}")
    images, spelled = {}, {}
    for line, split, image, label, box, reason in rows:
        key = storage.normalized(image) if image else ("line", line)  # ./a.jpg is a.jpg
        spelled.setdefault(key, image)
        images.setdefault(key, []).append((line, box_rows.split_value(split), label, box, reason))
    table, lines, problems = [], [], {}
    for key, boxes in images.items():
        image = spelled[key]
        line, split = boxes[0][:2]
        for other_line, other_split, *_ in boxes:
            if other_split != split:
                raise SchemaError(f"{name}: image {image} is {split} on line {line} and "
                                  f"{other_split} on line {other_line}; an image belongs to one "
                                  "split")
        reasons = [reason for *_, reason in boxes if reason]
        if reasons:  # one row, refused with the reasons
            problems[len(table)] = "; ".join(reasons)
            boxes = boxes[:1]
        # an image's "no objects" row is dropped when other rows give it boxes
        objects = [b for b in boxes if b[2] is not None or b[3] is not None] or boxes[:1]
        table += [(split, image or None, None if reasons else label,
                   *(box_rows.NO_BOX if reasons else box or box_rows.NO_BOX))
                  for _, split, label, box, _ in objects]
        lines += [number for number, *_ in objects]
    table = box_rows.per_box_table(table, [split_col, image_col, label_col, *BOX_COLUMNS])
    table.attrs["csv_lines"] = lines
    if problems:
        table.attrs[SOURCE_PROBLEMS] = problems
    return table
