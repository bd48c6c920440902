"""Object-detection sources as a per-box table: AutoML detection CSVs, COCO and Pascal VOC.

The per-box table has one row per box: ``split, image_uri, label, xmin, ymin, xmax, ymax``
(floats relative to the image, 0,0 at its top left), then the format's per-box columns
(``is_crowd``, ``difficult``, ``truncated``: nullable Int64 flags; ``area``: float) and per-image
columns (COCO's ``image_id``). An image without objects is one row with label None and NaN
coordinates. The rows of an image are consecutive, its boxes in the file's order. Splits are
TRAIN, VALIDATION, TEST (or UNASSIGNED where the source has none).
"""

import functools
import math
import posixpath
import re
import xml.etree.ElementTree as ElementTree
from xml.parsers import expat

import pandas as pd

from . import annotation_files, schema
from .. import redaction, storage
from ..errors import SchemaError
from ..images.masks import RELATIVE_POLYGONS
from ..record.boxes import BOX_COLUMNS, MAX_BOXES, box_problem  # noqa: F401 (public here too)
from .annotation_files import ALLOW_OUTSIDE, MAX_ANNOTATION_BYTES
from .detection import DECLARED_SIZES, SOURCE_PROBLEMS
from .labels import label_problem
from .paths import link_problem

logger = redaction.logger(__name__)  # every record redacted

TASKS = ("detection", "classification")
NEGATIVE_IMAGE = "NEGATIVE_IMAGE"  # AutoML's label of an image known to hold no objects
_AUTOML_FIELDS = 11
_AUTOML_FORMS = ("ML_USE,PATH,LABEL,x_min,y_min,x_max,y_min,x_max,y_max,x_min,y_max or "
                 "ML_USE,PATH,LABEL,x_min,y_min,,,x_max,y_max,,")
_TWO_VERTICES = (True, True, False, False, True, True, False, False)
_DTYPES = {**dict.fromkeys(BOX_COLUMNS, "float64"), "area": "float64",
           **dict.fromkeys(("is_crowd", "difficult", "truncated"), "Int64")}
_NO_BOX = (math.nan,) * 4


# ----------------------------------------------------------------------------- tables

@functools.lru_cache(maxsize=256)
def _split(text):
    """TRAIN / VALIDATION / TEST for a known split name, else the text itself (None if empty),
    left for the table checks to report."""
    text = (text or "").strip()
    canonical = schema.canonical_splits(pd.Series([text]))[0]
    return canonical if isinstance(canonical, str) else text or None


def _table(rows, columns):
    """The per-box table of ``rows`` (tuples in the order of ``columns``: split, image, label,
    coordinates, then other columns), typed per column: labels stay objects (None for no
    object), flags nullable ints, coordinates floats."""
    values = list(zip(*rows)) if rows else [()] * len(columns)
    dtypes = [None, None, object] + [_DTYPES.get(c) for c in columns[3:]]
    return pd.DataFrame({column: pd.Series(list(cells), dtype=dtype)
                         for column, cells, dtype in zip(columns, values, dtypes)})


def _number(text):
    """A number of an annotation file's text as a float (:func:`schema.parse_number`), NaN when
    it is missing or no number (reported later by :func:`box_problem` as a missing
    coordinate)."""
    try:
        number = schema.parse_number(text)
    except ValueError:
        return math.nan
    return number if math.isfinite(number) else math.nan


def polygon_object(xy):
    """``((xmin, ymin, xmax, ymax), mask)`` of one polygon relative to its image (``[x1, y1,
    x2, y2, ...]``, as Vertex AI and YOLO give them): its extent is its box, and it is the
    box's instance mask (the ``mask`` column's ``{"relative_polygons": [xy]}``, scaled to the
    image's pixel size when its record is written)."""
    xs, ys = xy[0::2], xy[1::2]
    return (min(xs), min(ys), max(xs), max(ys)), {RELATIVE_POLYGONS: [list(xy)]}


# ----------------------------------------------------------------------------- AutoML CSV

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
        images.setdefault(key, []).append((line, _split(split), label, box, reason))
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
                   *(_NO_BOX if reasons else box or _NO_BOX))
                  for _, split, label, box, _ in objects]
        lines += [number for number, *_ in objects]
    table = _table(table, [split_col, image_col, label_col, *BOX_COLUMNS])
    table.attrs["csv_lines"] = lines
    if problems:
        table.attrs[SOURCE_PROBLEMS] = problems
    return table


# ----------------------------------------------------------------------------- COCO

def read_coco(annotations_json, image_dir=None, split=None, storage_options=None,
              include_masks=False, *, allow_outside_paths=False,
              max_annotation_bytes=MAX_ANNOTATION_BYTES):
    """The per-box table of a COCO ``instances_*.json`` file.

    Boxes (``bbox`` ``[x, y, w, h]`` in pixels) are divided by their image's ``width`` and
    ``height``; ``iscrowd`` becomes ``is_crowd``, ``area`` is kept as COCO has it (pixels), and
    the COCO image id is ``image_id``. Labels are category names; ``table.attrs["label_map"]``
    maps them to COCO's category ids (which have gaps), so records can keep those ids. As the
    TF Model Garden's ``create_coco_tf_record.py`` does, boxes with a width or height <= 0 or
    reaching past the image's edge are left out (a warning counts them); images without
    annotations are kept.

    Values are taken as COCO defines them, never guessed: an image whose ``file_name`` is
    missing or names a file outside ``image_dir``, whose id is no integer (or text) or is
    shared with another image, whose size is no positive number, or one of whose annotations
    has a ``bbox`` that is not four numbers, an ``iscrowd`` other than 0 or 1 or an ``area``
    that is no number, is one row refused with that reason (``table.attrs`` carries it to
    ``to_tfrecord`` and ``validate``).

    Args:
        annotations_json: path or URL of the JSON file.
        image_dir: folder (path or URL) of the images; default: the JSON file's folder.
        split: the split of every image (``"train"``, ``"validation"``, ``"test"`` or
            ``"UNASSIGNED"``); default: read from the file name (``instances_val2017.json`` ->
            VALIDATION).
        storage_options: fsspec options for a remote file.
        include_masks: also a ``mask`` column: each box's ``segmentation`` as COCO has it
            (polygons in pixels, or an RLE for ``iscrowd`` boxes), rasterized when its record
            is written (``image/object/mask``, one PNG of 0/1 per box).
        allow_outside_paths: read images the file names outside ``image_dir`` (``../``,
            absolute paths, URLs) too.
        max_annotation_bytes: a larger file is refused before it is read (it is read whole).

    Raises:
        SchemaError: the split cannot be told from the name, the file is too large, not UTF-8,
            no COCO JSON, or an annotation names an unknown category.
    """
    path = storage.resolve(annotations_json)
    split = _coco_split(split, path)  # before the file is read
    data = annotation_files.read_json(path, storage_options, max_annotation_bytes)
    return coco_table(data, path, image_dir, split, include_masks,
                      allow_outside_paths=allow_outside_paths)


def coco_table(data, path, image_dir=None, split=None, include_masks=False, *,
               allow_outside_paths=False):
    """The per-box table of a COCO document already read from ``path`` (see
    :func:`read_coco`)."""
    split = _coco_split(split, path)
    image_dir = storage.parent(path) if image_dir is None else storage.resolve(image_dir)
    images, annotations, categories = _coco_lists(data, path)
    names = _coco_categories(categories, annotations, path)
    boxes_of = {}
    for annotation in annotations:
        boxes_of.setdefault(_coco_key(annotation.get("image_id")), []).append(annotation)
    shared = _shared_ids(images)
    rows, problems, sizes = [], {}, {}
    skipped = {"with a width or height <= 0": [], "reaching past the image's edge": []}
    for image in images:
        height, width = (annotation_files.number(image.get(k)) for k in ("height", "width"))
        if height and width and height > 0 and width > 0:
            sizes[len(rows)] = (height, width)  # its first row stands for the image
        id_, key = image.get("id"), _coco_key(image.get("id"))
        uri, problem = annotation_files.image_path(image.get("file_name"), image_dir,
                                                   allow_outside_paths)
        problem = problem or _coco_id_problem(id_, key, shared)
        objects, own = [], boxes_of.pop(key, []) if key is not None else []
        for annotation in own if not problem else ():
            box, reason = _coco_box(annotation, image)
            if reason in skipped:
                skipped[reason].append(f"annotation {annotation.get('id')} of {uri}")
                continue
            flag, area, problem = _coco_values(annotation)
            problem = reason or problem or (include_masks and _coco_mask_problem(annotation))
            if problem:
                break
            objects.append((split, uri, names[annotation["category_id"]], *box, flag, area,
                            id_, *((annotation.get("segmentation"),) if include_masks else ())))
        if problem:  # one row, refused with the reason (an id that is no id, as text)
            problems[len(rows)] = (f"image {redaction.shown(id_)} "
                                   f"({redaction.shown(image.get('file_name'))}) "
                                   f"of {storage.basename(path)}: {problem}")
            objects = [(split, uri, None, *_NO_BOX, None, math.nan,
                        id_ if key else redaction.shown(id_), *((None,) if include_masks else ()))]
        rows += objects or [(split, uri, None, *_NO_BOX, None, math.nan, id_,
                             *((None,) if include_masks else ()))]
    for reason, where in skipped.items():
        if where:
            logger.warning("%s: %d box(es) %s left out (as the TF Model Garden's "
                           "create_coco_tf_record.py does), e.g. %s", path, len(where), reason,
                           where[0])
    if boxes_of:
        logger.warning("%s: %d annotation(s) name image ids that are not in 'images' and were "
                       "left out, e.g. image_id %r", path, sum(map(len, boxes_of.values())),
                       next(iter(boxes_of.values()))[0].get("image_id"))
    table = _table(rows, ["split", "image_uri", "label", *BOX_COLUMNS, "is_crowd", "area",
                          "image_id", *(["mask"] if include_masks else [])])
    table.attrs["label_map"] = {name: id_ for id_, name in names.items()}
    if problems:
        table.attrs[SOURCE_PROBLEMS] = problems
    table.attrs[DECLARED_SIZES] = sizes
    return table


def _coco_key(value):
    """The key of a COCO image id (an integer, or text as some tools write): ``(kind, id)``,
    so that ``1``, ``1.0`` and ``true`` never meet; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    return type(value).__name__, value


def _coco_id_problem(id_, key, shared):
    """What is wrong with an image's id (not an integer or text, or shared), or None."""
    if key is None:
        return f"image id {redaction.shown(id_)} is not an integer (COCO image ids are integers)"
    others = shared.get(str(id_))
    if others:
        return (f"image id {redaction.shown(id_)} is the id of {len(others)} images "
                f"({', '.join(map(redaction.shown, others[:3]))}"
                f"{', ...' if len(others) > 3 else ''}): "
                "COCO image ids are unique, so their annotations cannot be told apart")
    return None


def _shared_ids(images):
    """``{id text: [file names]}`` of the image ids (as their text: the records' source_id)
    that more than one image has."""
    files = {}
    for image in images:
        if _coco_key(image.get("id")) is not None:
            files.setdefault(str(image["id"]), []).append(image.get("file_name"))
    return {id_: names for id_, names in files.items() if len(names) > 1}


def _coco_split(split, path):
    """The split of a COCO file: ``split``, or the one its name says."""
    if split is None:
        found = set(re.findall(r"train|val|test", storage.basename(path).lower()))
        if len(found) != 1:
            raise SchemaError(
                f"cannot tell the split of {storage.basename(path)} from its name; pass "
                "split=\"train\", \"validation\" or \"test\" (--split train)")
        split = found.pop()
    canonical = _split(str(split))
    canonical = schema.UNASSIGNED if canonical.upper() == schema.UNASSIGNED else canonical
    if canonical not in (*schema.SPLITS, schema.UNASSIGNED):
        raise SchemaError(f"split={split!r} is no split: expected train, validation, test or "
                          "UNASSIGNED")
    return canonical


def _coco_lists(data, path):
    """The images, annotations and categories lists of a COCO JSON document."""
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise SchemaError(f"{path} is not a COCO annotations file: it has no 'images' list")
    lists = [data["images"], data.get("annotations", []), data.get("categories", [])]
    for key, items in zip(("images", "annotations", "categories"), lists):
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise SchemaError(f"{path}: '{key}' must be a list of objects")
    return lists


def _coco_categories(categories, annotations, path):
    """``{category id: name}`` of the categories (ids from 1: 0 is the background class)."""
    names = {}
    for category in categories:
        id_, name = category.get("id"), category.get("name")
        if not isinstance(id_, int) or isinstance(id_, bool) or not isinstance(name, str):
            raise SchemaError(f"{path}: category {category!r} needs an integer 'id' and a "
                              "'name'")
        problem = label_problem(name)
        if problem:
            raise SchemaError(f"{path}: category {id_}: {problem}")
        if name in names.values() or id_ in names:
            raise SchemaError(f"{path}: category id {id_} or name {name!r} is used twice")
        names[id_] = name
    for annotation in annotations:
        category = annotation.get("category_id")
        if isinstance(category, bool) or not isinstance(category, int) or category not in names:
            raise SchemaError(f"{path}: annotation {annotation.get('id')} names category_id "
                              f"{annotation.get('category_id')!r}, which is not in 'categories'")
    used = {a["category_id"] for a in annotations}
    for id_ in [i for i in names if i < 1]:
        if id_ in used:
            raise SchemaError(f"{path}: category {names[id_]!r} has id {id_}; detection label "
                              "ids start at 1 (0 is the background class): renumber it")
        logger.info("%s: category %r (id %d, no box) left out of the label map", path,
                    names.pop(id_), id_)
    return names


def _coco_box(annotation, image):
    """``((xmin, ymin, xmax, ymax) relative, None)``, ``(None, reason)`` for a box left out
    as the Model Garden leaves it out (a key of the ``skipped`` counts), or ``(None,
    problem)`` for a box that refuses its image."""
    bbox = annotation.get("bbox")
    values = [annotation_files.number(v) for v in bbox] if isinstance(bbox, list) else []
    if len(values) != 4 or None in values:
        return None, (f"annotation {redaction.shown(annotation.get('id'))} has bbox "
                      f"{redaction.shown(bbox)}, not four numbers [x, y, width, height]")
    x, y, w, h = values
    if w <= 0 or h <= 0:
        return None, "with a width or height <= 0"
    width, height = (annotation_files.number(image.get(k)) for k in ("width", "height"))
    if not (width and width > 0 and height and height > 0):
        return None, (f"width {redaction.shown(image.get('width'))} and height "
                      f"{redaction.shown(image.get('height'))} are not the image's size in pixels "
                      "(numbers > 0), which its boxes are divided by")
    if x + w > width or y + h > height:
        return None, "reaching past the image's edge"
    return (x / width, y / height, (x + w) / width, (y + h) / height), None


def _coco_mask_problem(annotation):
    """None, or what is wrong with an annotation's ``segmentation`` as an instance mask (see
    ``images.masks.instance_mask``; checked against its image when its record is written)."""
    from ..images.masks import MaskRejected, instance_mask  # numpy, Pillow: masks only

    try:
        instance_mask(annotation.get("segmentation"))
    except MaskRejected as exc:
        return f"annotation {redaction.shown(annotation.get('id'))} has segmentation: {exc}"
    return None


def _coco_values(annotation):
    """``(is_crowd, area, problem)`` of an annotation: ``iscrowd`` 0 or 1 (0 when absent),
    ``area`` a number (NaN when absent); problem None, or what is wrong with either."""
    flag, area = annotation.get("iscrowd", 0), annotation.get("area")
    problem = None
    if flag not in (0, 1) or isinstance(flag, (bool, float)):
        problem = f"iscrowd {redaction.shown(flag)}, expected 0 or 1"
        flag = None
    value = math.nan if area is None else annotation_files.number(area)
    if value is None:
        problem = problem or f"area {redaction.shown(area)} is not a number"
    if problem:
        problem = f"annotation {redaction.shown(annotation.get('id'))} has {problem}"
    return flag, value, problem


# ----------------------------------------------------------------------------- Pascal VOC

_VOC_SETS = {"train": "TRAIN", "val": "VALIDATION", "trainval": "TRAIN", "test": "TEST"}


def is_voc_folder(path, storage_options=None):
    """True for a Pascal VOC folder: it holds ``Annotations/`` and ``JPEGImages/``."""
    return all(storage.is_dir(storage.resolve(sub, base=path), storage_options)
               for sub in ("Annotations", "JPEGImages"))


def read_voc(folder, storage_options=None, *, allow_outside_paths=False,
             max_annotation_bytes=MAX_ANNOTATION_BYTES):
    """The per-box table of a Pascal VOC folder (``VOCdevkit/VOC2012``).

    Images and splits come from ``ImageSets/Main/{train,val,test}.txt`` (TRAIN, VALIDATION,
    TEST), in the lists' order; ``trainval.txt`` is read as TRAIN only when neither
    ``train.txt`` nor ``val.txt`` exists (it is their union). Annotations the lists do not name
    are left out (a warning counts them); without ``ImageSets/Main`` every annotation is read,
    as UNASSIGNED (``unassigned="assign"`` gives them splits). Boxes (``bndbox``, 1-based
    pixels) are divided by ``size/width`` and ``size/height`` as the TF Object Detection API's
    ``create_pascal_tf_record.py`` does; ``difficult`` and ``truncated`` are kept (0 when
    absent). Images are ``JPEGImages/<filename>``; a ``<filename>`` outside ``JPEGImages/``
    (``../``, an absolute path, a URL, a symbolic link out of the folder) refuses its image
    unless ``allow_outside_paths``; an annotation, image list or ``Annotations/`` that is a
    symbolic link out of the folder refuses the folder (SchemaError) unless it. The
    size the boxes were divided by is compared with the image's own when it is written.
    Each annotation and image list is refused past ``max_annotation_bytes`` before it is read.

    An annotation that is unsafe or malformed XML, has no usable size for its boxes, or a
    ``difficult`` or ``truncated`` other than 0 or 1 refuses its image: one row, with the
    reason naming the file and field (``table.attrs[SOURCE_PROBLEMS]``).

    Raises:
        SchemaError: an image list names an annotation that does not exist, an image is in two
            lists, or an annotation file or list is too large or unreadable.
    """
    root = storage.resolve(folder)
    inside = functools.partial(_voc_inside, root=root, allow=allow_outside_paths)
    found = {parts[0][:-4]: inside(path) for parts, path in
             storage.walk_files(inside(storage.resolve("Annotations", base=root)),
                                storage_options)
             if len(parts) == 1 and parts[0].lower().endswith(".xml")}
    listed = _voc_image_sets(root, storage_options, max_annotation_bytes, inside)
    if listed is None:
        logger.info("%s has no ImageSets/Main/{train,val,trainval,test}.txt: its %d "
                    "annotation(s) are read as UNASSIGNED", root, len(found))
        listed = {image_id: schema.UNASSIGNED for image_id in sorted(found)}
    missing = [i for i in listed if i not in found]
    if missing:
        raise SchemaError(f"{root}: ImageSets/Main names {len(missing)} image(s) without "
                          f"Annotations/<id>.xml, e.g. {missing[0]!r}")
    unlisted = sorted(set(found) - set(listed))
    if unlisted:
        logger.warning("%s: %d annotation(s) are in no ImageSets/Main list and were left out, "
                       "e.g. Annotations/%s.xml", root, len(unlisted), unlisted[0])
    paths = [found[i] for i in listed]
    image_dir = storage.resolve("JPEGImages", base=root)
    rows, problems, sizes = [], {}, {}
    contents = storage.read_many(paths, storage_options, max_bytes=max_annotation_bytes)
    for (image_id, split), path, data in zip(listed.items(), paths, contents):
        _refuse_unread(path, data, max_annotation_bytes)
        uri, problem = annotation_files.image_path(f"{image_id}.jpg", image_dir)[0], None
        try:  # (its image by VOC's naming, until its <filename> is read)
            annotation = parse_xml(data, path)
            filename = (annotation.findtext("filename") or "").strip() or f"{image_id}.jpg"
            uri, problem = annotation_files.image_path(filename, image_dir,
                                                       allow_outside_paths, "<filename>")
            problem = problem and f"{path}: {problem}"
            objects = [] if problem else _voc_rows(annotation, path, split, uri)
        except SchemaError as exc:  # unsafe or malformed XML, a size or flag of no value
            problem = str(exc)
        if problem:  # one row, refused with the reason
            problems[len(rows)] = problem
            rows.append((split, uri, None, *_NO_BOX, None, None))
            continue
        width, height = (_number(annotation.findtext(f"size/{k}")) for k in ("width", "height"))
        if width > 0 and height > 0:
            sizes[len(rows)] = (height, width)  # its first row stands for the image
        rows += objects
    table = _table(rows, ["split", "image_uri", "label", *BOX_COLUMNS, "difficult",
                          "truncated"])
    if problems:
        table.attrs[SOURCE_PROBLEMS] = problems
    table.attrs[DECLARED_SIZES] = sizes
    return table


def _refuse_unread(path, data, max_bytes):
    """Raise the SchemaError of a VOC file that ``read_many`` gave as an error, if it did."""
    if isinstance(data, storage.FileTooLarge):
        raise annotation_files.too_large(path, data.size, max_bytes)
    if isinstance(data, Exception):
        raise SchemaError(f"cannot read {path}: {data}")


def _voc_inside(path, root, allow):
    """``path``, a file or folder of the VOC folder ``root``; SchemaError when a symbolic
    link leads it outside ``root`` (unless ``allow``)."""
    problem = None if allow else link_problem(path, root, path, ALLOW_OUTSIDE)
    if problem:
        raise SchemaError(problem)
    return path


def _voc_image_sets(root, storage_options, max_bytes, inside=lambda path: path):
    """``{image id: split}`` from ``ImageSets/Main``, in the lists' order; None without lists
    (``inside``: each list's path checked by it)."""
    main = storage.resolve(posixpath.join("ImageSets", "Main"), base=root)
    paths = {name: inside(storage.resolve(f"{name}.txt", base=main)) for name in _VOC_SETS}
    texts = dict(zip(paths, storage.read_many(list(paths.values()), storage_options,
                                              max_bytes=max_bytes)))
    texts = {n: t for n, t in texts.items() if not isinstance(t, FileNotFoundError)}
    if "train" in texts or "val" in texts:
        texts.pop("trainval", None)
    if not texts:
        return None
    listed, source = {}, {}
    for name, text in texts.items():
        _refuse_unread(paths[name], text, max_bytes)
        text = annotation_files.decode_text(text, paths[name])
        for image_id in (line.split()[0] for line in text.splitlines() if line.strip()):
            if listed.setdefault(image_id, _VOC_SETS[name]) != _VOC_SETS[name]:
                raise SchemaError(f"{root}: image {image_id!r} is in ImageSets/Main/"
                                  f"{source[image_id]}.txt and {name}.txt; an image belongs "
                                  "to one split")
            source.setdefault(image_id, name)
    return listed


def _voc_rows(annotation, path, split, uri):
    """The per-box rows of one VOC annotation (an ElementTree element)."""
    objects = annotation.findall("object")
    if not objects:
        return [(split, uri, None, *_NO_BOX, None, None)]
    width, height = (_number(annotation.findtext(f"size/{k}")) for k in ("width", "height"))
    if not (width > 0 and height > 0):
        raise SchemaError(f"{path}: size/width and size/height must be the image's size in "
                          f"pixels, not {annotation.findtext('size/width')!r} and "
                          f"{annotation.findtext('size/height')!r}")
    rows = []
    for number, element in enumerate(objects, 1):
        x0, y0, x1, y1 = (_number(element.findtext(f"bndbox/{k}")) for k in BOX_COLUMNS)
        rows.append((split, uri, (element.findtext("name") or "").strip() or None,
                     x0 / width, y0 / height, x1 / width, y1 / height,
                     _flag(element, "difficult", path, number),
                     _flag(element, "truncated", path, number)))
    return rows


def _flag(element, key, path, number):
    """A 0/1 flag of a VOC object (0 when absent)."""
    text = (element.findtext(key) or "0").strip()
    if text not in ("0", "1"):
        raise SchemaError(f"{path}: object {number} has {key} {text!r}, expected 0 or 1")
    return int(text)


def parse_xml(data, name):
    """The root element of an XML document, refusing DOCTYPE and ENTITY declarations (no
    entity expansion, no external references).

    Raises:
        SchemaError: the document declares a DOCTYPE or an entity, or is no well-formed XML.
    """
    builder = ElementTree.TreeBuilder()
    parser = expat.ParserCreate()

    def refuse(*_):
        raise SchemaError(f"{name}: declares a DOCTYPE or ENTITY, which annotation files do not "
                          "need; refused (entities can expand without bound or read other "
                          "files). Remove the declaration")

    parser.StartDoctypeDeclHandler = parser.EntityDeclHandler = refuse
    parser.UnparsedEntityDeclHandler = parser.ExternalEntityRefHandler = refuse
    parser.StartElementHandler = builder.start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.data
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise SchemaError(f"{name} is not well-formed XML: {exc}") from None
    return builder.close()
