"""Pascal VOC folders (``Annotations/*.xml``, ``JPEGImages/``, ``ImageSets/Main/*.txt``): their
images and boxes as the per-box table."""

import functools
import posixpath
import xml.etree.ElementTree as ElementTree
from xml.parsers import expat

from . import annotation_files, box_rows
from .. import redaction, storage
from ..errors import SchemaError
from ..record.boxes import BOX_COLUMNS
from ..table import schema
from ..table.detection import DECLARED_SIZES, SOURCE_PROBLEMS
from .annotation_files import ALLOW_OUTSIDE, MAX_ANNOTATION_BYTES
from .paths import link_problem
from .source import refuse_options

DESCRIPTION = "Pascal VOC folder (Annotations/, JPEGImages/)"  # as the CLI's help names it

logger = redaction.logger(__name__)  # every record redacted


_VOC_SETS = {"train": "TRAIN", "val": "VALIDATION", "trainval": "TRAIN", "test": "TEST"}


def recognizes(source):
    """Whether ``source`` is a Pascal VOC folder (see :func:`is_voc_folder`)."""
    return source.is_dir and is_voc_folder(source.path, source.storage_options)


def read(source):
    """``(the per-box table, base_dir)`` of a Pascal VOC folder."""
    options = source.options
    refuse_options("a Pascal VOC folder",
                   task=options["task"] if options["task"] == "classification" else None)
    table = read_voc(source.path, source.storage_options,
                     allow_outside_paths=options["allow_outside_paths"],
                     max_annotation_bytes=options["max_annotation_bytes"])
    return box_rows.named_columns(table, *source.columns), source.path


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
            rows.append((split, uri, None, *box_rows.NO_BOX, None, None))
            continue
        width, height = (box_rows.number(annotation.findtext(f"size/{k}"))
                         for k in ("width", "height"))
        if width > 0 and height > 0:
            sizes[len(rows)] = (height, width)  # its first row stands for the image
        rows += objects
    table = box_rows.per_box_table(rows, ["split", "image_uri", "label", *BOX_COLUMNS,
                                          "difficult", "truncated"])
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
        return [(split, uri, None, *box_rows.NO_BOX, None, None)]
    width, height = (box_rows.number(annotation.findtext(f"size/{k}")) for k in ("width", "height"))
    if not (width > 0 and height > 0):
        raise SchemaError(f"{path}: size/width and size/height must be the image's size in "
                          f"pixels, not {annotation.findtext('size/width')!r} and "
                          f"{annotation.findtext('size/height')!r}")
    rows = []
    for number, element in enumerate(objects, 1):
        x0, y0, x1, y1 = (box_rows.number(element.findtext(f"bndbox/{k}")) for k in BOX_COLUMNS)
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
