"""Every file the library reads or writes, on the local disk or behind any fsspec URL.

Local paths (and ``file://`` URLs) use the operating system directly. Any other URL goes
through fsspec: ``gs://`` (gcsfs), ``s3://`` (s3fs), ``http(s)://``, ``memory://`` and the
rest of fsspec's protocols. Writes never show a half-written file under its final name.

One job per module, imported one way (each only from those above it):

- ``errors``: why a file could not be read, in the same words whatever the store; refusals.
- ``http``: http(s) reads that no server can hold: size limit, idle timeout, bounded tries.
- ``urls``: what a path or URL names, how relative ones resolve, each scheme's filesystem.
- ``pending``: the contract of a file being written (commit or discard).
- ``local``: the local disk: reads that trust no file, durable writes.
- ``remote``: fsspec filesystems: many reads and stats at once, uploads.
- ``files``: files named by path or URL, sent to ``local`` or ``remote``.
- ``store``: the picklable :class:`Store` (one folder) and :func:`write_file`.

The names below are what the rest of the package uses.
"""

from .errors import (AccessDenied, FileRefused, FileTooLarge, ReadFailure, TimedOut,
                     human_size, too_large)
from .files import is_dir, read_bytes, read_many, stat_many, walk_files
from .pending import TEMP_SUFFIX, PendingFile
from .store import Store, write_file
from .urls import (basename, check_url, filesystem, is_remote, is_within, normalized,
                   options_for, parent, protocol_of, relative_path_hint, resolve)

__all__ = [
    "AccessDenied", "FileRefused", "FileTooLarge", "PendingFile", "ReadFailure", "Store",
    "TEMP_SUFFIX", "TimedOut", "basename", "check_url", "filesystem", "human_size", "is_dir",
    "is_remote", "is_within", "normalized", "options_for", "parent", "protocol_of", "read_bytes", "read_many",
    "relative_path_hint", "resolve", "stat_many", "too_large", "walk_files", "write_file",
]
