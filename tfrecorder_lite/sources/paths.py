"""Where a path named inside an annotation file may lead: into the folder the user named.

An annotation file (an import file, a dataset's description or image list) names other
files. Those names may not lead outside the folder the user named (``../``, absolute paths,
other URLs, a symbolic link inside the folder that points out of it) unless the user allows
it: a downloaded annotation file (or folder) must not make the library read local files or
call servers its user never named.
"""

import os

from .. import storage
from ..errors import SchemaError


def is_inside(uri, root):
    """Whether ``uri`` (resolved: an absolute path or a URL) is ``root`` or below it, once
    both are normalized (``..`` climbs, also inside a URL; see ``storage.is_within``) and, on
    a local disk, once their symbolic links are resolved (``realpath``): a link inside the
    folder that leads out of it is outside."""
    return storage.is_within(uri, root) and not leads_out_by_link(uri, root)


def leads_out_by_link(path, root):
    """Whether the local ``path`` (below ``root`` by its name) leads outside ``root`` once
    symbolic links are resolved: it, or a folder on its way, is a link out of ``root``."""
    if storage.is_remote(path) or storage.is_remote(root):
        return False  # object stores have no links
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real != top and not real.startswith(top.rstrip(os.sep) + os.sep)


def link_problem(path, root, where, how="allow_outside_paths=True"):
    """None, or the reason the local file ``path`` found below ``root`` (a folder's file)
    leads outside it through a symbolic link (``where``: how the reason names it)."""
    if not leads_out_by_link(path, root):
        return None
    return (f"{where} is a symbolic link to {os.path.realpath(path)}, outside {root}, the "
            f"folder given; its files may lead inside it only. Copy the file there, or pass "
            f"{how} if you trust this folder")


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
        link = f" (through a symbolic link, to {os.path.realpath(path)})" \
            if storage.is_within(path, root) else ""
        raise SchemaError(f"{where}: {name!r} leads outside {root}{link}, the folder given; "
                          f"annotation files may name files inside it only. Move the files "
                          f"there, or pass {how} if you trust this file")
    return path
