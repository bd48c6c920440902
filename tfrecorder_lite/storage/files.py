"""Files named by path or URL, wherever they are: each call sends the local ones to
:mod:`~tfrecorder_lite.storage.local` and the others, grouped by protocol, to
:mod:`~tfrecorder_lite.storage.remote`.
"""

import os

from .local import read_file, stat_file, stat_paths, walk as walk_disk
from .remote import read_files, stat_files, walk as walk_fs
from .urls import filesystem, is_remote, protocol_of


def _many(uris, storage_options, on_disk, on_fs):
    """Apply ``on_disk(path)`` to local URIs and ``on_fs(fs, paths)`` to the others, by
    protocol.

    Returns:
        A list with each result, or the exception raised for that URI.
    """
    out = [None] * len(uris)
    by_protocol = {}
    for i, uri in enumerate(uris):
        protocol = protocol_of(uri)
        if protocol == "file":
            try:
                out[i] = on_disk(uri)
            except (OSError, ValueError) as exc:
                out[i] = exc
        else:
            by_protocol.setdefault(protocol, []).append(i)
    for protocol, indexes in by_protocol.items():
        fs = filesystem(protocol, storage_options)
        for i, value in zip(indexes, on_fs(fs, [uris[i] for i in indexes])):
            out[i] = value
    return out


def _as_os_error(exc):
    if isinstance(exc, OSError):
        return exc
    return OSError(f"{type(exc).__name__}: {exc}".rstrip(": "))


def read_many(uris, storage_options=None, max_bytes=None, check_head=None):
    """The bytes of many files (paths or URLs); remote ones are fetched concurrently.

    Args:
        uris: paths or URLs.
        storage_options: fsspec options (see :func:`~tfrecorder_lite.storage.urls.options_for`).
        max_bytes: files larger than this are refused (FileTooLarge) without being read whole
            (a remote one is fetched only up to the limit).
        check_head: for local files larger than ``HEAD_BYTES``: called with their first
            bytes before the rest is read; returns a reason to refuse the file, or None.

    Returns:
        One item per URI: its bytes, or the OSError that reading it raised.
    """
    contents = _many(uris, storage_options,
                     lambda path: read_file(path, max_bytes, check_head),
                     lambda fs, paths: read_files(fs, paths, storage_options, max_bytes))
    return [value if isinstance(value, bytes) else _as_os_error(value) for value in contents]


def stat_many(uris, storage_options=None):
    """``(size, identity)`` of many files (remote ones asked concurrently).

    The identity changes whenever the content does: the modification time locally, the
    generation or ETag of an object. On object stores, a folder holding many of the files is
    listed once (up to 1,000 objects per request) instead of asking for each file.

    Returns:
        One item per URI: the pair (size 0 when a server does not say), or the OSError
        (FileNotFoundError, IsADirectoryError, ...).
    """
    if all(type(uri) is str and "://" not in uri for uri in uris):  # every one on the disk
        found = stat_paths(uris)
    else:
        found = _many(uris, storage_options, stat_file,
                      lambda fs, paths: stat_files(fs, paths, storage_options))
    return [value if isinstance(value, tuple) else _as_os_error(value) for value in found]


def read_bytes(uri, storage_options=None):
    """The whole content of one file (path or URL)."""
    value = read_many([uri], storage_options)[0]
    if isinstance(value, Exception):
        raise value
    return value


def is_dir(uri, storage_options=None):
    """True when ``uri`` is an existing folder (a prefix with objects below it, remotely)."""
    if not is_remote(uri):
        return os.path.isdir(uri)
    return filesystem(protocol_of(uri), storage_options).isdir(uri)


def walk_files(root, storage_options=None):
    """Yield ``(relative_parts, path_or_url)`` of every non-hidden file below ``root``, sorted."""
    if is_remote(root):
        yield from walk_fs(filesystem(protocol_of(root), storage_options), root)
    else:
        yield from walk_disk(root)
