"""Ultralytics-style YOLO detection and instance segmentation datasets as the per-box table.

A YOLO folder holds ``data.yaml``: ``names`` (a list, or ``{class id: name}``) and ``train``,
``val``, ``test``: each a folder of images, a ``.txt`` file listing images, or a list of those,
relative to the folder (as Ultralytics does, a path starting ``../`` that does not exist is
tried without it: Roboflow's exports write ``../train/images``). Each image
``.../images/.../NAME.jpg`` has its labels in ``.../labels/.../NAME.txt``: one object a line,
``class cx cy w h``, the box's centre and size relative to the image, or (instance
segmentation) ``class x1 y1 x2 y2 ...``, a polygon of three points or more relative to the image.
An image without a label file, or with an empty one, is an image without objects.

The table is the per-box table of ``box_rows`` (boxes ``xmin, ymin, xmax, ymax``
relative, 0,0 top left), splits TRAIN (``train``), VALIDATION (``val``), TEST (``test``), and
``attrs["label_map"] = {name: class id + 1}`` so records keep YOLO's class order (id 0 is the
background of the Object Detection API's label maps). When the dataset holds polygons, the
table has a ``mask`` column: each polygon's extent is its box and the polygon its instance mask
(scaled to the image's pixel size when its record is written). Ultralytics reads a label file's
lines all as polygons once one is; here, in a dataset of polygons, an image with a box line has
no mask for that object and is refused, naming the line (``attrs[SOURCE_PROBLEMS]``).

A malformed label file or line (a class id not in ``names``, a line that is neither ``class cx
cy w h`` nor a polygon, a field that is no number, text that is not UTF-8) refuses its image:
one row, with the reasons naming the file, line and field (``attrs[SOURCE_PROBLEMS]``). Every
malformed ``data.yaml`` entry or image list, a label file without its image, too large or
unreadable, a symbolic link out of the folder, is a reason naming it, raised together as one
SchemaError. A box outside the image is left in the table, where the detection checks
reject its image whole (``attrs["csv_lines"]`` names each row's label file).
"""

import math
import os
import posixpath

from . import annotation_files, box_rows
from .. import storage
from .annotation_files import MAX_ANNOTATION_BYTES
from ..errors import SchemaError
from ..redaction import redact, shown
from ..record.boxes import BOX_COLUMNS
from ..table.detection import MASK_COLUMN, SOURCE_PROBLEMS
from .paths import confined, link_problem
from .source import refuse_options
from .problems import refuse

DESCRIPTION = "YOLO folder (data.yaml, images/, labels/)"  # as the CLI's help names it

YAML_NAMES = ("data.yaml", "data.yml")
SPLIT_KEYS = {"train": "TRAIN", "val": "VALIDATION", "test": "TEST"}
_IMAGE_EXTENSIONS = {".bmp", ".dng", ".jpeg", ".jpg", ".mpo", ".png", ".tif", ".tiff",
                     ".webp", ".pfm", ".heic", ".gif"}  # Ultralytics' IMG_FORMATS
_ROUNDING = 1e-9  # centre +- half size may pass 0 or 1 by float rounding alone


def recognizes(source):
    """Whether ``source`` is a YOLO folder (it holds ``data.yaml``) or its ``data.yaml``."""
    if source.named(".yaml", ".yml"):
        return True
    return source.is_dir and find_yaml(source.path, source.storage_options) is not None


def read(source):
    """``(the per-box table, base_dir)`` of a YOLO folder or its ``data.yaml``."""
    options = source.options
    named = source.named(".yaml", ".yml")
    refuse_options("a YOLO data.yaml" if named else "a YOLO folder (it holds data.yaml)",
                   task=options["task"] if options["task"] == "classification" else None)
    table = read_yolo(source.path, storage_options=source.storage_options,
                      allow_outside_paths=options["allow_outside_paths"],
                      max_annotation_bytes=options["max_annotation_bytes"])
    folder = storage.parent(source.path) if named else source.path
    return box_rows.named_columns(table, *source.columns), folder


def find_yaml(folder, storage_options=None):
    """The path of the ``data.yaml`` (or ``data.yml``) of a YOLO folder, or None."""
    for name in YAML_NAMES:
        path = storage.resolve(name, base=folder)
        if _is_file(path, storage_options):
            return path
    return None


def read_yolo(folder, *, storage_options=None, allow_outside_paths=False,
              max_annotation_bytes=MAX_ANNOTATION_BYTES):
    """The per-box table of a YOLO dataset folder (Ultralytics' layout; see the module).

    Args:
        folder: the dataset's folder (path or URL) holding ``data.yaml``, or the path of the
            ``.yaml`` file itself.
        storage_options: fsspec options for a remote folder.
        allow_outside_paths: accept ``data.yaml`` entries and image lists that name files
            outside the folder.
        max_annotation_bytes: ``data.yaml``, an image list or a label file larger than this
            is refused before it is read.

    Raises:
        SchemaError: no ``data.yaml``, or naming every malformed entry and file (up to
            ten): a folder that does not exist or leads outside, a list or label file over
            ``max_annotation_bytes``, a label file without its image (a malformed label file
            refuses its own image only; see the module).
    """
    path = storage.resolve(folder)
    if path.lower().endswith((".yaml", ".yml")):
        yaml_path, root = path, storage.parent(path)
    else:
        root, yaml_path = path, find_yaml(path, storage_options)
        if yaml_path is None:
            raise SchemaError(redact(f"{path} has no data.yaml: a YOLO folder names its classes "
                                     "and image folders there (names:, train:, val:)"))
    config = _config(yaml_path, storage_options, max_annotation_bytes)
    names = _names(config, yaml_path)
    reader = _Reader(root, yaml_path, names, storage_options, allow_outside_paths,
                     config.get("path"), max_annotation_bytes)
    images = reader.images(config)
    rows, lines, masks, problems = reader.rows(images)
    table = box_rows.per_box_table(rows, ["split", "image_uri", "label", *BOX_COLUMNS,
                                          *([MASK_COLUMN] if masks else [])])
    table.attrs["label_map"] = {name: class_id + 1 for class_id, name in names.items()}
    if problems:
        table.attrs[SOURCE_PROBLEMS] = problems
    table.attrs["csv_lines"] = lines
    return table


def _config(yaml_path, storage_options, max_bytes=MAX_ANNOTATION_BYTES):
    """The mapping of ``data.yaml``, read without YAML aliases (see :func:`_load`)."""
    import yaml  # PyYAML: only when a YOLO folder is read

    try:
        config = _load(annotation_files.read_annotation_bytes(yaml_path, storage_options,
                                                              max_bytes), yaml_path)
    except FileNotFoundError:
        raise SchemaError(redact(f"{yaml_path} not found")) from None
    except yaml.YAMLError as exc:
        why = " ".join(str(exc).split())
        raise SchemaError(redact(f"{yaml_path} is not YAML: {why}")) from None
    if not isinstance(config, dict):
        raise SchemaError(redact(f"{yaml_path}: expected a mapping (names:, train:, val:), "
                                 f"not {type(config).__name__}"))
    return config


def _load(data, yaml_path):
    """The document of a YAML file's bytes, as ``yaml.safe_load`` reads it, with aliases
    (``*name``) refused: a data.yaml needs none, and nested ones expand without bound (a
    few hundred bytes of "billion laughs" compose billions of values).

    Raises:
        SchemaError: the document holds an alias, naming the file, its line and the alias.
        yaml.YAMLError: it is not YAML.
    """
    import yaml

    class Loader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise SchemaError(redact(
                    f"{yaml_path}: line {event.start_mark.line + 1}: the YAML alias "
                    f"*{event.anchor[:40]} is refused: aliases repeat other "
                    "values, nested ones without bound, and a data.yaml needs none; write "
                    "the value out"))
            return super().compose_node(parent, index)

    loader = Loader(data)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _names(config, yaml_path):
    """``{class id: name}`` of ``names`` (a list, or a mapping of ids to names)."""
    names = config.get("names")
    if isinstance(names, list):
        names = dict(enumerate(names))
    if not isinstance(names, dict) or not names:
        raise SchemaError(redact(f"{yaml_path}: names: expected the class names, a list or "
                                 f"{{id: name}}, not {shown(names)}"))
    checked, problems = {}, []
    for class_id, name in names.items():
        if isinstance(class_id, bool) or not isinstance(class_id, int) or class_id < 0:
            problems.append(f"names: class id {shown(class_id)} is not a whole number >= 0")
        elif not isinstance(name, (str, int)) or not str(name).strip():
            problems.append(f"names: class {class_id} has no name ({shown(name)})")
        elif str(name).strip() in checked.values():
            problems.append(f"names: {shown(str(name).strip())} names two classes")
        else:
            checked[class_id] = str(name).strip()
    count = config.get("nc")
    if count is not None and count != len(names):
        problems.append(f"nc: {shown(count)}, but names has {len(names)} classes")
    refuse(yaml_path, "a YOLO data.yaml", problems)
    return checked


def label_path(image):
    """The label file of an image: its last ``images`` folder named ``labels``, ``.txt``
    (as Ultralytics finds it)."""
    sep = "/" if storage.is_remote(image) else os.sep
    head, found, tail = image.rpartition(f"{sep}images{sep}")
    path = f"{head}{sep}labels{sep}{tail}" if found else image
    stem, dot, extension = path.rpartition(".")
    return (stem if dot and sep not in extension else path) + ".txt"


class _Reader:
    """The images and label files of one YOLO folder; problems gathered, then raised."""

    def __init__(self, root, yaml_path, names, storage_options, allow_outside_paths, path=None,
                 max_bytes=MAX_ANNOTATION_BYTES):
        self.root, self.yaml_path, self.names, self.path = root, yaml_path, names, path
        self.options, self.allow_outside_paths = storage_options, allow_outside_paths
        self.max_bytes = max_bytes
        self.yaml_name = storage.basename(yaml_path)
        self.problems, self.label_dirs = [], []

    def _relative(self, path):
        return path[len(self.root):].lstrip("/\\") if path.startswith(self.root) else path

    def _entry(self, key, entry):
        """The path of one ``data.yaml`` entry (a folder or image list), or None."""
        where = f"{self.yaml_name}: {key}"
        if not isinstance(entry, str) or not entry.strip():
            self.problems.append(f"{where}: {shown(entry)} is not a path")
            return None
        entry = entry.strip()
        candidates = [entry] + ([entry[3:]] if entry.startswith("../") else [])
        refused = None
        for candidate in candidates:
            try:
                path = confined(candidate, self.root, where, self.allow_outside_paths)
            except SchemaError as exc:
                refused = refused or str(exc)
                continue
            if storage.is_dir(path, self.options) or _is_file(path, self.options):
                return path
        hint = f" (data.yaml's path: {shown(self.path)} is not followed: name the dataset's " \
            "folder itself)" if self.path else ""
        self.problems.append(refused or f"{where}: {entry} does not exist in {self.root}{hint}")
        return None

    def images(self, config):
        """``[(split, image path)]`` of every entry of ``train``, ``val``, ``test``."""
        images, split_of = [], {}
        for key, split in SPLIT_KEYS.items():
            value = config.get(key)
            entries = value if isinstance(value, list) else [] if value in (None, "") \
                else [value]
            for entry in entries:
                path = self._entry(key, entry)
                if path is None:
                    continue
                for image in self._listed(key, path):
                    if image in split_of:
                        self.problems.append(f"{self._relative(image)} is listed in "
                                             f"{split_of[image]} and in {key}; an image "
                                             "belongs to one split, once")
                        continue
                    split_of[image] = key
                    images.append((split, image))
        if not any(config.get(key) for key in SPLIT_KEYS):
            self.problems.append(f"{self.yaml_name}: names no train, val or test images")
        refuse(self.root, "a YOLO folder", self.problems)
        return images

    def _listed(self, key, path):
        """The images of one entry: a folder's (recursively, sorted), or a list file's."""
        if storage.is_dir(path, self.options):
            labels = label_path(posixpath.join(path, "x.jpg") if storage.is_remote(path)
                                else os.path.join(path, "x.jpg"))
            self.label_dirs.append(storage.parent(labels))
            return [image for image in (
                _below(path, parts) for parts, _ in storage.walk_files(path, self.options)
                if os.path.splitext(parts[-1])[1].lower() in _IMAGE_EXTENSIONS)
                if self._inside(image)]
        try:
            text = annotation_files.read_annotation_bytes(path, self.options,
                                                          self.max_bytes).decode("utf-8")
        except UnicodeDecodeError:
            self.problems.append(f"{self._relative(path)} ({key}): not a UTF-8 list of images")
            return []
        except SchemaError as exc:  # too large
            self.problems.append(str(exc))
            return []
        images, folder = [], storage.parent(path)
        for number, line in enumerate(text.splitlines(), 1):
            name = line.strip()
            if not name:
                continue
            try:
                images.append(confined(name, self.root, f"{self._relative(path)} line {number}",
                                       self.allow_outside_paths, base=folder))
            except SchemaError as exc:
                self.problems.append(str(exc))
        return images

    def _inside(self, path):
        """Whether a file found in the folder stays in it (a problem noted when a symbolic
        link leads it out, unless ``allow_outside_paths``)."""
        problem = None if self.allow_outside_paths else \
            link_problem(path, self.root, self._relative(path))
        if problem:
            self.problems.append(problem)
        return problem is None

    def rows(self, images):
        """``(rows, label file of each row, masks, problems)``: the per-box rows of
        ``images`` (with ``masks``, when any label file holds a polygon, each row's mask
        last), and ``{row: reason}`` of the images refused: a label file that is not UTF-8,
        a line that is no object (a class not in ``names``, a field that is no number), a box
        among polygons; such an image is one row."""
        labels = [label_path(image) for _, image in images]
        images = [(split, image) for (split, image), label in zip(images, labels)
                  if self._inside(label)]
        labels = [label_path(image) for _, image in images]
        contents = storage.read_many(labels, self.options, max_bytes=self.max_bytes)
        found = []  # (split, image, label file, objects, reasons)
        for (split, image), label, content in zip(images, labels, contents):
            name = self._relative(label)
            if isinstance(content, FileNotFoundError):
                content = b""
            elif isinstance(content, storage.FileTooLarge):
                self.problems.append(str(annotation_files.too_large(name, content.size,
                                                                    self.max_bytes)))
                continue
            elif isinstance(content, Exception):
                self.problems.append(f"{name}: cannot be read ({content})")
                continue
            reasons = []
            found.append((split, image, name, self._objects(name, content, reasons), reasons))
        self._orphans({label for label, content in zip(labels, contents)
                       if not isinstance(content, FileNotFoundError)})
        refuse(self.root, "a YOLO folder", self.problems)
        masks = any(mask is not None for *_, objects, _ in found for *_, mask in objects)
        rows, lines, problems = [], [], {}
        for split, image, name, objects, reasons in found:
            box = next((n for n, *_, mask in objects if mask is None), None) if masks else None
            if box is not None:
                reasons.append(
                    f"{name} line {box}: a box (class cx cy w h) in a dataset of polygons "
                    "(class x1 y1 x2 y2 ...): every object needs its polygon, its instance "
                    "mask")
            if reasons:  # one row, refused with the reasons
                problems[len(rows)] = "; ".join(reasons)
                objects = []
            for _, label_text, corners, mask in objects:
                rows.append((split, image, label_text, *corners, *((mask,) if masks else ())))
            if not objects:
                rows.append((split, image, None, *(math.nan,) * 4, *((None,) if masks else ())))
            lines += [name] * max(len(objects), 1)  # an image's reason names its box
        return rows, lines, masks, problems

    def _objects(self, name, content, problems):
        """``[(line, label, (xmin, ymin, xmax, ymax), mask or None)]`` of one label file: a
        box line's mask is None, a polygon's is the polygon (see
        ``box_rows.polygon_object``); each line that is no object is a text added
        to ``problems``, naming the file, line and field."""
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError:
            problems.append(f"{name}: not UTF-8 text")
            return []
        objects = []
        for number, line in enumerate(text.splitlines(), 1):
            fields = line.split()
            if not fields:
                continue
            where = f"{name} line {number}"
            polygon = len(fields) >= 7 and len(fields) % 2 == 1
            if len(fields) != 5 and not polygon:
                problems.append(f"{where}: {len(fields)} fields, expected 5 (class cx cy w h) "
                                "or an odd number from 7 (a polygon: class x1 y1 x2 y2 x3 y3 "
                                "...)")
                continue
            class_id = _class_id(fields[0])
            if class_id not in self.names:
                problems.append(f"{where}: class {shown(fields[0])} is not in names "
                                f"({_ids(self.names)})")
                continue
            names = [f"{axis}{i}" for i in range(1, len(fields) // 2 + 1) for axis in "xy"] \
                if polygon else ["cx", "cy", "w", "h"]
            values = []
            for field, text in zip(names, fields[1:]):
                try:
                    value = float(text)
                except ValueError:
                    value = math.nan
                if not math.isfinite(value):
                    problems.append(f"{where}: {field} {shown(text)} is not a number")
                    break
                values.append(value)
            else:
                label = self.names[class_id]
                if polygon:
                    objects.append((number, label,
                                    *box_rows.polygon_object(values)))
                else:
                    objects.append((number, label, _corners(*values), None))
        return objects

    def _orphans(self, found):
        """A problem for each label file of the listed folders whose image is not listed."""
        claimed = set(found)
        for folder in dict.fromkeys(self.label_dirs):
            if not storage.is_dir(folder, self.options):
                continue
            for parts, _ in storage.walk_files(folder, self.options):
                path = _below(folder, parts)
                if parts[-1].endswith(".txt") and parts[-1] != "classes.txt" and \
                        path not in claimed:
                    self.problems.append(f"{self._relative(path)}: a label file without its "
                                         "image (no image of that name in the images folder)")


def _below(folder, parts):
    """The path or URL of ``parts`` below ``folder``, spelled as ``folder`` is."""
    return storage.resolve("/".join(parts), base=folder)


def _is_file(path, storage_options):
    return not isinstance(storage.stat_many([path], storage_options)[0], Exception)


def _class_id(text):
    """A class id field as an int (``3`` or ``3.0``), or None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if value.is_integer() else None


def _ids(names):
    ids = sorted(names)
    return f"0-{ids[-1]}" if ids == list(range(len(ids))) else ", ".join(map(str, ids))


def _corners(cx, cy, w, h):
    """``(xmin, ymin, xmax, ymax)`` of a centre and size, a rounding step past 0 or 1
    clamped."""
    corners = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
    return tuple(0.0 if -_ROUNDING < v < 0 else 1.0 if 1 < v < 1 + _ROUNDING else v
                 for v in corners)
