"""Where a path named inside an annotation file may lead: into the folder the user named.

An annotation file (a Vertex AI import file, a YOLO ``data.yaml`` or image list) names other
files. Those names may not lead outside the folder the user named (``../``, absolute paths,
other URLs) unless the user allows it: a downloaded annotation file must not make the library
read local files or call servers its user never named.
"""

from .. import storage
from ..errors import SchemaError


def is_inside(uri, root):
    """Whether ``uri`` (resolved: an absolute path or a URL) is ``root`` or below it, once
    both are normalized (``..`` climbs, also inside a URL; see ``storage.is_within``)."""
    return storage.is_within(uri, root)


def confined(name, root, where, allow_outside_paths=False, how="allow_outside_paths=True",
             base=None):
    """The path or URL ``name`` (as an annotation file writes it) resolved against ``base``
    (default ``root``), which must lead into ``root``.

    Args:
        name: the path as the file writes it (relative to ``base``, or absolute, or a URL).
        root: the folder the user named (path or URL).
        where: what names it, for the error: ``"data.yaml: val"``, ``"line 3: imageGcsUri"``.
        allow_outside_paths: accept a path that leads outside ``root``.
        how: the words that say how to allow it.
        base: the folder relative names start from, inside ``root`` (an image list's folder).

    Raises:
        SchemaError: ``name`` leads outside ``root`` and ``allow_outside_paths`` is False.
    """
    path = storage.resolve(name, base=root if base is None else base)
    if not allow_outside_paths and not is_inside(path, root):
        raise SchemaError(f"{where}: {name!r} leads outside {root}, the folder given; "
                          f"annotation files may name files inside it only. Move the files "
                          f"there, or pass {how} if you trust this file")
    return path
