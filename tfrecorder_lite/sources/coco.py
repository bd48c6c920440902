"""COCO ``instances_*.json``: its images and their boxes as the per-box table."""

import math
import re

from . import annotation_files, box_rows, vertex
from .. import redaction, storage
from ..errors import SchemaError
from ..record.boxes import BOX_COLUMNS
from ..table import schema
from ..table.detection import DECLARED_SIZES, SOURCE_PROBLEMS
from ..table.labels import label_problem
from .annotation_files import MAX_ANNOTATION_BYTES
from .source import refuse_options

DESCRIPTION = "COCO instances_*.json"  # as the CLI's help names it

logger = redaction.logger(__name__)  # every record redacted


#: the options only a COCO file takes: refused, by name, for any source that cannot be one
OWN_OPTIONS = ("split", "image_dir", "include_masks")


def may_be(source):
    """Whether ``source`` may be a COCO file by its name (``.json``)."""
    return source.named(".json")


def recognizes(source):
    """Whether ``source`` is a COCO annotations file: named ``.json``, one JSON document with an
    ``images`` list (JSON Lines are Vertex AI's).

    Raises:
        SchemaError: a ``.json`` file that is neither.
    """
    if not may_be(source):
        return False
    source.memo["coco"] = _coco_document(source.data, source.path, source.options["encoding"])
    return source.memo["coco"] is not None


def read(source):
    """``(the per-box table, base_dir)`` of a COCO annotations file."""
    options = source.options
    refuse_options("a COCO annotations file",
                   task=options["task"] if options["task"] == "classification" else None)
    table = coco_table(source.memo["coco"], source.path, options["image_dir"],
                       options["split"], options["include_masks"],
                       allow_outside_paths=options["allow_outside_paths"])
    return box_rows.named_columns(table, *source.columns), storage.parent(source.path)


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
            objects = [(split, uri, None, *box_rows.NO_BOX, None, math.nan,
                        id_ if key else redaction.shown(id_), *((None,) if include_masks else ()))]
        rows += objects or [(split, uri, None, *box_rows.NO_BOX, None, math.nan, id_,
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
    table = box_rows.per_box_table(rows, ["split", "image_uri", "label", *BOX_COLUMNS,
                                          "is_crowd", "area", "image_id",
                                          *(["mask"] if include_masks else [])])
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
    canonical = box_rows.split_value(str(split))
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
    ``images.instance_masks.instance_mask``; checked against its image when its record is
    written)."""
    from ..images.instance_masks import MaskRejected, instance_mask  # numpy, Pillow: masks only

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
