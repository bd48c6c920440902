"""Vertex AI image dataset import and export files (JSON Lines or CSV) as a table.

JSON Lines hold one image a line: ``imageGcsUri``, its annotations, and its split in
``dataItemResourceLabels["aiplatform.googleapis.com/ml_use"]`` (``training``, ``validation``,
``test``; lines without it are UNASSIGNED). The annotations decide the table:

- ``classificationAnnotation`` (one label): ``split, image_uri, label``, as an AutoML
  classification CSV gives it;
- ``classificationAnnotations`` (several labels): the label column holds each image's list of
  labels (multi-label), as an AutoML multi-label CSV gives it;
- ``boundingBoxAnnotations`` (relative ``xMin``, ``yMin``, ``xMax``, ``yMax``, 0,0 top left,
  numbers or numeric strings): the per-box table of ``box_rows``;
- ``segmentationAnnotation`` / ``maskAnnotation`` (``maskGcsUri`` or ``categoryMaskGcsUri``
  with ``annotationSpecColors``): ``split, image_uri, mask_uri``, with
  ``table.attrs["mask_colors"] = {(r, g, b): label}``, marked ``table.attrs["task"] =
  "segmentation"``: a table of masks, whose masks are read through those colours;
- ``segmentationAnnotation`` as the REST API's ``ImageSegmentationAnnotation`` union, holding
  ``maskAnnotation``, ``polygonAnnotation`` or ``polylineAnnotation``: read as that member
  (its fields named ``segmentationAnnotation.polygonAnnotation...``);
- ``polygonAnnotation`` (one) / ``polygonAnnotations`` (a list; Google's samples write this),
  each ``{"displayName", "vertexes": [{"x", "y"}, ...]}`` relative to the image (a missing
  ``x`` or ``y`` is 0, as protobuf's JSON leaves zeros out): the per-box table with a ``mask``
  column, each polygon's extent its box and the polygon its instance mask (scaled to the
  image's pixel size when its record is written). A polyline (``polylineAnnotation(s)``) is an
  open line, not an area: it has no mask, so its image is refused with that reason, naming
  the line (``table.attrs[SOURCE_PROBLEMS]``).
Annotation resource labels and data item labels other than ``ml_use`` are Vertex AI's own
bookkeeping (``annotation_set_name``) or the user's tags: they are dropped (an info log names
them), never turned into record features. A Vertex AI CSV is ``[ML_USE,]GCS_FILE_PATH,LABEL``
(several label fields: multi-label) or an AutoML detection row, the ``ML_USE`` field optional.

The file is read whole, bounded as every annotation file is (``annotation_files``), in the
``encoding`` given (UTF-8 unless told). A line is a row: a malformed line (not JSON, no image,
an unknown ``ml_use``, a missing ``displayName``, a bad polygon, another kind of annotation
than the file's, its image in another split) is its row refused, for boxes and polygons its
image's rows, with reasons naming the line and field (``table.attrs[SOURCE_PROBLEMS]``); the
other lines are read. A box outside
[0, 1], inverted or without a number is left in the table, where the detection checks reject
its image whole with the box named (``table.attrs["csv_lines"]`` says each row's line).
"""

import csv
import io
import json
import math

import pandas as pd

from . import annotation_files, automl_csv, box_rows
from .. import redaction, storage
from ..redaction import shown
from .annotation_files import MAX_ANNOTATION_BYTES
from ..errors import SchemaError
from ..record.boxes import BOX_COLUMNS
from ..output import splits
from ..table.detection import MASK_COLUMN, SOURCE_PROBLEMS
from .paths import confined
from .source import refuse_options

DESCRIPTION = "Vertex AI import file (.jsonl or .csv)"  # as the CLI's help names it

logger = redaction.logger(__name__)  # its records may name URLs

ML_USE = "aiplatform.googleapis.com/ml_use"
_BOX_FIELDS = ("xMin", "yMin", "xMax", "yMax")
_MASK_KEYS = ("segmentationAnnotation", "maskAnnotation")
_MASK_URIS = ("maskGcsUri", "categoryMaskGcsUri")
_POLYGON_KEYS = ("polygonAnnotation", "polygonAnnotations", "polylineAnnotation",
                 "polylineAnnotations")
# ImageSegmentationAnnotation's union members, and the keys a line's are read under
_UNION = ("maskAnnotation", "polygonAnnotation", "polylineAnnotation")
_MASK_KEYS += ("segmentationAnnotation.maskAnnotation",)
_POLYGON_KEYS += ("segmentationAnnotation.polygonAnnotation",
                  "segmentationAnnotation.polylineAnnotation")
_KINDS = {"classificationAnnotation": "classification",
          "classificationAnnotations": "multi-label",
          "boundingBoxAnnotations": "detection",
          **dict.fromkeys(_MASK_KEYS, "segmentation"),
          **dict.fromkeys(_POLYGON_KEYS, "polygon")}


def is_jsonl(data):
    """Whether a file's bytes are JSON Lines: the first non-blank character is ``{``."""
    return data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{"


def _first_line(data):
    head = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    end = head.find(b"\n")
    return head if end < 0 else head[:end]


def first_line_object(data, encoding="utf-8"):
    """The first non-blank line of a file's bytes parsed as a JSON object, or None when it is
    not one (not JSON, or JSON of another kind: a pretty-printed document's ``{``)."""
    try:
        item = json.loads(_first_line(data).decode(encoding, errors="replace"))
    except (ValueError, RecursionError, LookupError):
        return None
    return item if isinstance(item, dict) else None


def is_json_lines(data, encoding="utf-8"):
    """Whether a file's bytes are JSON objects a line: its first non-blank line is one, and
    its second non-blank line starts as one."""
    rest = data.lstrip(b"\xef\xbb\xbf \t\r\n")[len(_first_line(data)):].lstrip()
    return first_line_object(data, encoding) is not None and rest[:1] == b"{"


def is_vertex_jsonl(data, encoding="utf-8"):
    """Whether a file's bytes are a Vertex AI JSON Lines file, whatever its name: its first
    non-blank line is a JSON object with ``imageGcsUri`` (a COCO file on one line is one
    object too, without it)."""
    if b"imageGcsUri" not in _first_line(data):  # a large document is not parsed twice
        return False
    return "imageGcsUri" in (first_line_object(data, encoding) or {})


def is_vertex_csv(fields):
    """Whether a CSV row is a Vertex AI row without its optional ``ML_USE`` field: its first
    field is an image's path or URL (``gs://bucket/a.jpg``), not a split."""
    first = fields[0].strip() if fields else ""
    return bool(first) and splits.canonical(first) is None and first.upper() != \
        splits.UNASSIGNED and ("/" in first or "\\" in first or "://" in first)


def starts_with_image(data, encoding="utf-8"):
    """Whether CSV bytes are a Vertex AI CSV without ``ML_USE``: the first row's first field
    is an image's path or URL (see :func:`is_vertex_csv`)."""
    try:
        text = data[:1 << 16].decode(encoding, errors="replace").removeprefix("\ufeff")
    except LookupError:  # an unknown encoding: read_csv says so
        return False
    try:
        for fields in csv.reader(io.StringIO(text, newline=""), skipinitialspace=True):
            if any(f.strip() for f in fields):
                return is_vertex_csv(fields)
    except csv.Error:
        return False
    return False


def recognizes(source):
    """Whether ``source`` is a Vertex AI import file, by its content: JSON Lines (a ``.json``
    file a COCO document is not), or a CSV whose rows start with the image."""
    if source.named(".json"):
        return is_vertex_jsonl(source.data, source.options["encoding"]) or \
            is_json_lines(source.data, source.options["encoding"])
    if source.named(".yaml", ".yml") or source.is_dir:
        return False
    return _is_jsonl_source(source) or starts_with_image(source.data,
                                                         source.options["encoding"])


def _is_jsonl_source(source):
    return is_jsonl(source.data) or source.named(".jsonl")


def read(source):
    """``(table, base_dir)`` of a Vertex AI import file (see :func:`read_vertex`)."""
    options = source.options
    what = "a Vertex AI JSON Lines file" if source.named(".json") or _is_jsonl_source(source) \
        else "a Vertex AI CSV (rows start with the image)"
    refuse_options(what, task=options["task"], split=options["split"],
                   image_dir=options["image_dir"], include_masks=options["include_masks"] or None)
    annotation_files.check_size(source.path, source.data, options["max_annotation_bytes"])
    table = vertex_table(source.data, source.path, options["allow_outside_paths"],
                         options["encoding"])
    return box_rows.named_columns(table, *source.columns), storage.parent(source.path)


def read_vertex(path_or_url, *, storage_options=None, allow_outside_paths=False,
                encoding="utf-8", max_annotation_bytes=MAX_ANNOTATION_BYTES):
    """The table of a Vertex AI image dataset import or export file (JSON Lines or CSV).

    Args:
        path_or_url: the file's path or URL (``.jsonl``, ``.json``, ``.csv``; told apart by
            content).
        storage_options: fsspec options for a remote file.
        allow_outside_paths: accept image paths that are neither ``gs://`` URLs nor inside
            the file's folder (``../``, absolute local paths, other URLs).
        encoding: the file's text encoding (Vertex AI writes UTF-8).
        max_annotation_bytes: a larger file is refused before it is read (it is read whole).

    Returns:
        A DataFrame: ``split, image_uri, label`` (classification; multi-label: lists of
        labels), the per-box table (bounding boxes), or ``split, image_uri, mask_uri``
        (segmentation masks; see the module's docstring). ``attrs["csv_lines"]`` holds each
        row's line in the file.

    Raises:
        SchemaError: the file is too large, empty, not in ``encoding``, or a CSV whose
            quoting is broken (a malformed line refuses its own row; see the module).
    """
    path = storage.resolve(path_or_url)
    data = annotation_files.read_annotation_bytes(path, storage_options, max_annotation_bytes)
    return vertex_table(data, path, allow_outside_paths, encoding)


def vertex_table(data, path, allow_outside_paths=False, encoding="utf-8"):
    """The table of a Vertex AI file's bytes (see :func:`read_vertex`); ``path``: where they
    were read, for messages and the folder relative image paths stay in."""
    reader = _Lines(path, storage.parent(path), allow_outside_paths, encoding)
    return reader.jsonl(data) if is_jsonl(data) else reader.csv(data)


class _Lines:
    """The lines of one Vertex AI file, read into rows; a line's problems refuse its row (its
    image's rows), with the line and field named (``attrs[SOURCE_PROBLEMS]``)."""

    def __init__(self, name, folder, allow_outside_paths, encoding="utf-8"):
        self.name, self.folder, self.allow_outside_paths = name, folder, allow_outside_paths
        self.encoding = encoding
        self.problems, self.dropped = {}, set()  # line number -> [problem texts]
        self.refused = {}  # line number -> why its image cannot be written (a polyline)

    # ------------------------------------------------------------------ JSON Lines

    def jsonl(self, data):
        text = self._text(data)
        lines = []  # (line, split, image, kind, payload)
        # split at newlines only: splitlines() also splits at U+2028, which JSON strings hold
        for number, raw in enumerate(text.split("\n"), 1):
            if raw.strip():
                lines.append((number, *(self._item(number, raw) or (None, None, None, ()))))
        if not lines:
            raise SchemaError(redaction.redact(f"{self.name} is empty"))
        kinds = self._kinds(lines)
        if self.dropped:
            logger.info("%s: resource labels dropped (not record features): %s", self.name,
                        ", ".join(sorted(self.dropped)))
        kind = next(iter(kinds), "classification")
        if kind in ("detection", "polygon"):
            return self._detection(lines, masks=kind == "polygon")
        if kind == "segmentation":
            return self._segmentation(lines)
        multi = kind == "multi-label"
        rows, numbers, problems = [], [], {}
        for number, split, image, _, labels in lines:
            reason = self._reason(number)
            if reason:
                problems[len(rows)] = reason
                labels = ()
            label = list(labels) if multi else (labels[0] if labels else None)
            rows.append((split, image, label))
            numbers.append(number)
        return self._lined(pd.DataFrame(rows, columns=["split", "image_uri", "label"]),
                           numbers, "JSON line", problems)

    def _text(self, data):
        try:
            return annotation_files.decode(data, self.name, self.encoding)
        except SchemaError as exc:
            raise SchemaError(redaction.redact(str(exc))) from None

    def _problem(self, number, field, reason):
        self.problems.setdefault(number, []).append(
            f"line {number}: {field}{': ' if field else ''}{reason}")

    def _reason(self, number):
        """Why the row(s) of line ``number`` cannot be written (its problems, and a polyline
        it holds), or None."""
        reasons = [*self.problems.get(number, ()), *filter(None, [self.refused.get(number)])]
        return "; ".join(reasons) or None

    def _item(self, number, raw):
        """``(split, image, kind, payload)`` of one JSON line, or None (a problem noted)."""
        try:
            item = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            self._problem(number, "", f"not JSON ({exc})")
            return None
        if not isinstance(item, dict):
            self._problem(number, "", f"a JSON {type(item).__name__}, not an object")
            return None
        image = self._image(number, "imageGcsUri", item.get("imageGcsUri"))
        split = self._ml_use(number, item.get("dataItemResourceLabels"))
        item = self._flat_union(number, item)
        found = [key for key in _KINDS if key in item]
        kinds = {_KINDS[key] for key in found}
        if kinds == {"classification", "multi-label"}:  # one label is a list of one
            kinds = {"multi-label"}
        masks = [key for key in found if key in _MASK_KEYS]
        if len(kinds) > 1 or len(masks) > 1:
            self._problem(number, " and ".join(found), "one line holds one kind of "
                                                       "annotation")
            return None
        if not kinds:
            return split, image, None, ()
        kind = kinds.pop()
        if kind == "detection":
            payload = self._boxes(number, item["boundingBoxAnnotations"])
        elif kind == "polygon":
            payload = self._polygons(number, item, found)
        elif kind == "segmentation":
            payload = self._mask(number, masks[0], item[masks[0]])
        else:
            payload = [label for key in found
                       for label in self._labels(number, key, item[key], key.endswith("s"))]
        return split, image, kind, payload

    def _flat_union(self, number, item):
        """``item`` with a ``segmentationAnnotation`` that holds the REST union's members
        replaced by them, each under ``segmentationAnnotation.<member>``."""
        inner = item.get("segmentationAnnotation")
        members = [key for key in _UNION if isinstance(inner, dict) and key in inner]
        if not members:
            return item
        flat_fields = [key for key in _MASK_URIS if key in inner]
        if flat_fields:
            self._problem(number, "segmentationAnnotation",
                          f"holds both {members[0]} and {flat_fields[0]}: one annotation")
        # what else it holds (its annotationResourceLabels) is dropped, as elsewhere
        self.dropped.update(f"segmentationAnnotation.{key}" for key in inner
                            if key not in _UNION and key not in _MASK_URIS)
        flat = {key: value for key, value in item.items() if key != "segmentationAnnotation"}
        flat.update((f"segmentationAnnotation.{key}", inner[key]) for key in members)
        return flat

    def _image(self, number, field, value):
        if not isinstance(value, str) or not value.strip():
            self._problem(number, field, "missing" if value is None else
                          f"{shown(value)} is not a path or URL")
            return None
        value = value.strip()
        if storage.protocol_of(value) == "gs":  # the form the format names images in
            return value
        try:
            return confined(value, self.folder, f"{self.name}: line {number}: {field}",
                            self.allow_outside_paths)
        except SchemaError as exc:
            self.problems.setdefault(number, []).append(
                str(exc).removeprefix(f"{self.name}: "))
            return None

    def _ml_use(self, number, labels):
        if labels is None:
            return splits.UNASSIGNED
        if not isinstance(labels, dict):
            self._problem(number, "dataItemResourceLabels", "not an object")
            return None
        self.dropped.update(f"dataItemResourceLabels.{k}" for k in labels if k != ML_USE)
        value = labels.get(ML_USE)
        return self._split(number, f'dataItemResourceLabels["{ML_USE}"]', value)

    def _split(self, number, field, value):
        if value is None or (isinstance(value, str) and not value.strip()):
            return splits.UNASSIGNED
        text = str(value).strip()
        if text.upper() == splits.UNASSIGNED:
            return splits.UNASSIGNED
        split = splits.canonical(text) if isinstance(value, str) else None
        if split is None:
            self._problem(number, field, f"{shown(value)} is no ml_use: expected training, "
                                         "validation or test (or none: UNASSIGNED)")
        return split

    def _labels(self, number, key, value, many):
        annotations = value if many else [value]
        if many and not isinstance(value, list):
            self._problem(number, key, "not a list of annotations")
            return []
        labels = []
        for i, annotation in enumerate(annotations):
            field = f"{key}[{i}]" if many else key
            label = self._display_name(number, field, annotation)
            if label is not None:
                labels.append(label)
        return labels

    def _display_name(self, number, field, annotation):
        if not isinstance(annotation, dict):
            self._problem(number, field, "not an object")
            return None
        resource = annotation.get("annotationResourceLabels")
        if isinstance(resource, dict):
            self.dropped.update(f"annotationResourceLabels.{k}" for k in resource)
        name = annotation.get("displayName")
        if not isinstance(name, str) or not name.strip():
            self._problem(number, f"{field}.displayName", "missing" if name is None else
                          f"{shown(name)} is no label")
            return None
        return name.strip()

    def _boxes(self, number, value):
        if not isinstance(value, list):
            self._problem(number, "boundingBoxAnnotations", "not a list of annotations")
            return []
        boxes = []
        for i, box in enumerate(value):
            field = f"boundingBoxAnnotations[{i}]"
            label = self._display_name(number, field, box)
            if label is not None:
                boxes.append((label, *(_coordinate(box.get(k)) for k in _BOX_FIELDS)))
        return boxes

    def _polygons(self, number, item, keys):
        """``[(label, xmin, ymin, xmax, ymax, mask)]`` of a line's polygons; a polyline is
        noted in ``self.refused`` (its image cannot be written)."""
        objects = []
        for key in keys:
            polyline = key.rpartition(".")[2].startswith("polyline")
            many, value = key.endswith("s"), item[key]
            if many and not isinstance(value, list):
                self._problem(number, key, "not a list of annotations")
                continue
            for i, annotation in enumerate(value if many else [value]):
                field = f"{key}[{i}]" if many else key
                label = self._display_name(number, field, annotation)
                xy = self._vertexes(number, field, annotation, 2 if polyline else 3)
                if label is None or xy is None:
                    continue
                if polyline:
                    self.refused.setdefault(number, (
                        f"line {number}: {field} ({label}): a polyline is an open line, not "
                        "an area, so it has no instance mask; draw the object as a polygon, "
                        "or leave the polyline out"))
                    continue
                box, mask = box_rows.polygon_object(xy)
                objects.append((label, *box, mask))
        return objects

    def _vertexes(self, number, field, annotation, least):
        """``[x1, y1, x2, y2, ...]`` of an annotation's ``vertexes``, or None (a problem
        noted)."""
        if not isinstance(annotation, dict):
            return None  # _display_name said so
        vertexes = annotation.get("vertexes")
        if not isinstance(vertexes, list) or len(vertexes) < least:
            self._problem(number, f"{field}.vertexes",
                          f"{'missing' if vertexes is None else shown(vertexes, 60)}: expected "
                          f"a list of {least} vertexes {{\"x\", \"y\"}} at least")
            return None
        xy = []
        for j, vertex in enumerate(vertexes):
            if not isinstance(vertex, dict):
                self._problem(number, f"{field}.vertexes[{j}]", "not an object {\"x\", \"y\"}")
                return None
            for axis in ("x", "y"):
                value = _coordinate(vertex.get(axis, 0))  # protobuf's JSON leaves zeros out
                if not math.isfinite(value):
                    self._problem(number, f"{field}.vertexes[{j}].{axis}",
                                  f"{shown(vertex.get(axis))} is not a number")
                    return None
                xy.append(value)
        return xy

    def _mask(self, number, key, value):
        if not isinstance(value, dict):
            self._problem(number, key, "not an object")
            return None
        uris = [k for k in _MASK_URIS if k in value]
        if len(uris) != 1:
            self._problem(number, key, f"needs one of {' or '.join(_MASK_URIS)}")
            return None
        mask = self._image(number, f"{key}.{uris[0]}", value[uris[0]])
        colors = {}
        specs = value.get("annotationSpecColors")
        if not isinstance(specs, list) or not specs:
            self._problem(number, f"{key}.annotationSpecColors", "missing or not a list")
        for i, spec in enumerate(specs if isinstance(specs, list) else []):
            field = f"{key}.annotationSpecColors[{i}]"
            label = self._display_name(number, field, spec)
            color = _color(spec.get("color") if isinstance(spec, dict) else None)
            if color is None:
                self._problem(number, f"{field}.color", "needs red, green, blue in [0, 1]")
            elif label is not None:
                if colors.setdefault(color, label) != label:
                    self._problem(number, field, f"colour {color} is {shown(colors[color])} and "
                                                 f"{shown(label)}")
        return mask, colors

    def _kinds(self, lines):
        """The file's kind of annotation; a problem for lines of another kind."""
        first = {}
        for number, _, _, kind, _ in lines:
            if kind is not None:
                first.setdefault(kind, number)
        if set(first) == {"classification", "multi-label"}:  # one label is a list of one
            first = {"multi-label": min(first.values())}
        if len(first) > 1:
            (kind, number), *others = sorted(first.items(), key=lambda item: item[1])
            for other, line in others:
                self._problem(line, "", f"{other} annotations, but line {number} holds "
                                        f"{kind} annotations: one file holds one kind")
        return first

    def _detection(self, lines, masks=False):
        """The per-box table of the lines (with ``masks``: the polygons' ``mask`` column); an
        image named on a line with a problem is one row, refused with it."""
        images, order = {}, []  # image (or its line, when it has none) -> [line, split,
        for number, split, image, _, boxes in lines:  # boxes, reasons]
            key = image if image is not None else ("line", number)
            if key not in images:
                images[key] = [number, split, [], []]
                order.append(key)
            first, known, _, reasons = images[key]
            if split is not None and known is not None and split != known:
                reasons.append(f"line {number}: imageGcsUri: {image} is {split} here and "
                               f"{known} on line {first}; an image belongs to one split")
            reason = self._reason(number)
            if reason:
                reasons.append(reason)
            images[key][2].extend((number, box) for box in boxes or ())
        rows, numbers, problems = [], [], {}
        empty = (None, *(math.nan,) * 4, *((None,) if masks else ()))
        for key in order:
            number, split, boxes, reasons = images[key]
            if reasons:  # one row, refused with the reasons
                problems[len(rows)] = "; ".join(reasons)
                boxes = []
            for line, (label, *box) in boxes or [(number, empty)]:
                rows.append((split, None if isinstance(key, tuple) else key, label, *box))
                numbers.append(line)
        table = box_rows.per_box_table(rows, ["split", "image_uri", "label", *BOX_COLUMNS,
                                              *([MASK_COLUMN] if masks else [])])
        return self._lined(table, numbers, "JSON line", problems)

    def _segmentation(self, lines):
        rows, numbers, colors, problems = [], [], {}, {}
        for number, split, image, kind, payload in lines:
            mask, line_colors = payload if kind and payload else (None, {})
            for color, label in line_colors.items() if not self._reason(number) else ():
                if colors.get(color, (label,))[0] != label:
                    self._problem(number, "annotationSpecColors",
                                  f"colour {color} is {shown(label)} here and "
                                  f"{shown(colors[color][0])} on line {colors[color][1]}")
            if not self._reason(number):  # the colours of a line that can be written
                for color, label in line_colors.items():
                    colors.setdefault(color, (label, number))
            reason = self._reason(number)
            if reason:
                problems[len(rows)] = reason
                mask = None
            rows.append((split, image, mask))
            numbers.append(number)
        table = pd.DataFrame(rows, columns=["split", "image_uri", "mask_uri"])
        table.attrs["task"] = "segmentation"
        table.attrs["mask_colors"] = {color: label for color, (label, _) in colors.items()}
        return self._lined(table, numbers, "JSON line", problems)

    def _lined(self, table, numbers, what=None, problems=None):
        """``table`` with each row's line in ``attrs["csv_lines"]`` (numbers of a CSV file,
        else text such as ``"JSON line 3 of export.jsonl"``, as errors show it), and
        ``problems`` (``{row: reason}`` of the rows refused) in ``attrs[SOURCE_PROBLEMS]``."""
        where = f" of {storage.basename(self.name)}"
        table.attrs["csv_lines"] = numbers if what is None else [
            f"{what} {n}{where}" for n in numbers]
        if problems:
            table.attrs[SOURCE_PROBLEMS] = problems
        return table

    # ------------------------------------------------------------------ CSV

    def csv(self, data):
        text = self._text(data)
        records = []
        try:
            reader = csv.reader(io.StringIO(text, newline=""), skipinitialspace=True)
            line = 1
            for fields in reader:
                if any(f.strip() for f in fields):
                    records.append((line, fields))
                line = reader.line_num + 1
        except csv.Error as exc:
            raise SchemaError(redaction.redact(f"{self.name}: line {line}: {exc}")) from None
        if not records:
            raise SchemaError(redaction.redact(f"{self.name} is empty"))
        rows = []
        for number, fields in records:
            if is_vertex_csv(fields):
                fields = ["", *fields]
            split = self._split(number, "ML_USE", fields[0])
            image = self._image(number, "GCS_FILE_PATH", fields[1] if len(fields) > 1
                                else None)
            rows.append((number, [split or "", image or "", *fields[2:]]))
        boxes = automl_csv.automl_rows(rows, self.name)
        if boxes is not None:  # a line's own problems first, then those of its box
            return automl_csv.automl_detection_table(
                [(*row, self._reason(row[0]) or reason) for *row, reason in boxes], self.name)
        multi = any(len([f for f in fields[2:] if f.strip()]) > 1 for _, fields in rows)
        table = pd.DataFrame(
            [(fields[0] or None, fields[1] or None,
              [f.strip() for f in fields[2:] if f.strip()] if multi
              else next((f.strip() for f in fields[2:] if f.strip()), None))
             for _, fields in rows], columns=["split", "image_uri", "label"])
        problems = {row: self._reason(number) for row, (number, _) in enumerate(rows)
                    if self._reason(number)}
        return self._lined(table, [number for number, _ in rows], problems=problems)


def _coordinate(value):
    """A box coordinate as a float; NaN when missing or no number (the detection checks name
    it, and reject the image)."""
    if type(value) is float:  # noqa: E721 (the common case, bool aside)
        return value
    if isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _color(value):
    """``(r, g, b)`` in 0-255 of a Vertex AI colour (floats in [0, 1]; a missing component is
    0, as protobuf's JSON leaves zeros out), or None."""
    if not isinstance(value, dict):
        return None
    channels = []
    for key in ("red", "green", "blue"):
        channel = value.get(key, 0)
        if isinstance(channel, bool) or not isinstance(channel, (int, float)) or \
                not 0 <= channel <= 1:
            return None
        channels.append(round(channel * 255))
    return tuple(channels)

