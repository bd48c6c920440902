"""Annotation files (the files of every source format that comes with one, and the label files
of a folder format) read with limits: a bounded size, JSON no deeper than
the parser can go, text that is not UTF-8 (or the encoding given) named by file and line, and
the images such a file may name.

An annotation file may only name images inside the image folder its user gave (the rule of
``sources/paths.py``): a path that climbs out of it (``../``), an absolute path elsewhere, a
``file://`` or another URL is the rejected row of its image, with a reason that says how to
allow it (``allow_outside_paths``). Sources that refuse such an image row by row call
:func:`image_path` for every image name they read; ``paths.confined`` refuses the whole file.
"""

import json
import math

from .. import storage
from ..errors import SchemaError, UnsupportedURLError
from .paths import is_inside

# Annotation files are read whole (a JSON document has no parts). The largest public
# annotation file known here (instances_train2017.json) is 448 MB; parsed it takes several times that in memory.
MAX_ANNOTATION_BYTES = 2**30

ALLOW_OUTSIDE = "allow_outside_paths=True (--allow-outside-paths)"


def read_annotation_bytes(path, storage_options=None, max_bytes=MAX_ANNOTATION_BYTES):
    """The content of an annotation file, refused past ``max_bytes`` before it is read.

    Raises:
        SchemaError: the file is larger than ``max_bytes``.
        FileNotFoundError, OSError: it cannot be read.
    """
    stat, = storage.stat_many([path], storage_options)
    if isinstance(stat, tuple) and stat[0] > max_bytes:
        raise too_large(path, stat[0], max_bytes)
    data = storage.read_bytes(path, storage_options)
    check_size(path, data, max_bytes)  # a server that did not say its size
    return data


def check_size(path, data, max_bytes=MAX_ANNOTATION_BYTES):
    """Raise :func:`too_large` when ``data``, the bytes of the annotation file ``path`` (read
    before it was known to be one), are over ``max_bytes``."""
    if len(data) > max_bytes:
        raise too_large(path, len(data), max_bytes)


def too_large(path, size, max_bytes):
    """The SchemaError of an annotation file of ``size`` bytes (None: over ``max_bytes``, how
    much is not known) larger than the bound."""
    bound = storage.human_size(max_bytes)
    found = f"over {bound}" if size is None else storage.human_size(size)
    if found == bound:  # 1.4 kB over 1.4 kB says nothing
        found, bound = f"{size} bytes", f"{max_bytes} bytes"
    return SchemaError(
        f"{path} is {found}; annotation files are read whole, up to "
        f"{bound} (max_annotation_bytes={max_bytes}). Pass a larger "
        "max_annotation_bytes if the machine has the memory (parsed, an annotation file takes "
        "several times its size), or split the file")


def decode_text(data, name):
    """``data`` (bytes of an annotation file) as text; a UTF-8 byte-order mark is dropped.

    Raises:
        SchemaError: the bytes are not UTF-8, naming the file, the line and the byte.
    """
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SchemaError(f"{name}: line {line} is not UTF-8 text: byte "
                          f"0x{data[exc.start]:02x} at offset {exc.start}; annotation files "
                          "are read as UTF-8 (save it as UTF-8)") from None


def decode(data, name, encoding="utf-8"):
    """The text of ``data`` without a byte order mark; SchemaError names an undecodable byte."""
    try:
        return data.decode(encoding).removeprefix("\ufeff")
    except LookupError:
        raise SchemaError(f"unknown encoding {encoding!r}") from None
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        shown = data[max(line_start, exc.start - 40):exc.start + 1].decode(encoding,
                                                                            "backslashreplace")
        raise SchemaError(
            f"{name}: line {line} is not {encoding}: byte "
            f"0x{data[exc.start]:02x} in '{shown}'; save the file as UTF-8 (Excel: \"CSV "
            f"UTF-8\"), or pass its encoding, e.g. encoding=\"latin-1\" (--encoding latin-1)"
        ) from None


def _refuse_constant(name):
    raise ValueError(f"{name} is not a JSON value")


def read_json(path, storage_options=None, max_bytes=MAX_ANNOTATION_BYTES):
    """The document of a JSON annotation file, read with :func:`read_annotation_bytes`'s
    bound; ``NaN`` and ``Infinity`` (which JSON does not have) are refused.

    Raises:
        SchemaError: too large, not UTF-8, not JSON, or nested deeper than the parser goes.
    """
    return parse_json(read_annotation_bytes(path, storage_options, max_bytes), path)


def parse_json(data, path):
    """The document of a JSON annotation file's bytes (see :func:`read_json`).

    Raises:
        SchemaError: not UTF-8, not JSON, or nested deeper than the parser goes.
    """
    text = decode_text(data, path)
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise SchemaError(f"{path} is not JSON: {exc}") from None
    except RecursionError:
        raise SchemaError(f"{path}: its JSON is nested too deeply to be read (annotation "
                          "files nest a few levels: lists of objects holding lists)") from None


def image_path(name, image_dir, allow_outside=False, what="file_name"):
    """``(path or URL, None)`` of an image an annotation file names, or ``(None, reason)``.

    Args:
        name: the name as the file has it, relative to ``image_dir``.
        image_dir: the image folder (path or URL) its user gave.
        allow_outside: accept names outside ``image_dir`` (``../``, absolute paths, URLs).
        what: how the file calls the name, for the reason (``file_name``, ``<filename>``).
    """
    if not isinstance(name, str) or not name.strip():
        return None, f"{what} {name!r} names no image file"
    try:
        uri = storage.resolve(name, base=image_dir)
        inside = allow_outside or is_inside(uri, image_dir)
    except UnsupportedURLError as exc:
        return None, f"{what} {name!r}: {exc}"
    if not inside:
        link = " (through a symbolic link)" if storage.is_within(uri, image_dir) else ""
        return None, (f"{what} {name!r} names a file outside the image folder "
                      f"{image_dir}{link}; an annotation file may only name images inside "
                      f"it. Pass {ALLOW_OUTSIDE} to read it")
    return uri, None


def number(value):
    """A JSON number as a float, or None for anything else (true, "1", null, a list)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an integer beyond any float
        return None
    return value if math.isfinite(value) else None
