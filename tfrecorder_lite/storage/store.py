"""One folder, local or remote, with the operations the library needs on it (:class:`Store`),
and :func:`write_file` for one file named by path or URL.

A Store is picklable: a worker rebuilds the filesystem from its URL and storage options, so the
same Store can be handed to another process or machine.
"""

import functools
import json

from ..errors import SchemaError
from .files import read_bytes
from .local import LocalFiles, read_ranges as read_local_ranges
from .remote import RemoteFiles, read_range_soon, read_ranges as read_remote_ranges
from .urls import READ_ONLY, basename, filesystem, is_remote, parent, protocol_of, resolve


class Store:
    """One folder, local or remote, with the operations the library needs on it.

    Args:
        url: a local path, a ``file://`` URL or any fsspec URL (``gs://bucket/records``).
        storage_options: fsspec options (see :func:`~tfrecorder_lite.storage.urls.options_for`).

    Raises:
        UnsupportedURLError, MissingDependencyError: at once, for an unusable URL.
    """

    def __init__(self, url, storage_options=None):
        url = resolve(url)
        self.url = url.rstrip("/") if is_remote(url) else url
        self.storage_options = storage_options
        self.protocol = protocol_of(self.url)

    def __repr__(self):
        return f"Store({self.url!r})"

    def __getstate__(self):  # the filesystem is rebuilt where the Store is unpickled
        return {k: v for k, v in self.__dict__.items() if k not in ("fs", "_files")}

    @property
    def is_local(self):
        """True for a folder on the local disk."""
        return self.protocol == "file"

    @functools.cached_property
    def fs(self):
        """The fsspec filesystem of a remote folder."""
        return filesystem(self.protocol, self.storage_options)

    @functools.cached_property
    def _files(self):
        """The local disk's operations, or those of the remote filesystem."""
        return LocalFiles() if self.is_local else RemoteFiles(self.fs)

    def path(self, name=""):
        """The full path or URL of ``name`` inside this folder."""
        return self._files.join(self.url, name) if name else self.url

    def child(self, name):
        """The Store of the subfolder ``name``."""
        store = Store.__new__(Store)
        store.__dict__.update(self.__getstate__(), url=self.path(name))
        return store

    def check_writable(self):
        """Raise SchemaError when this kind of folder cannot be written (http(s) URLs)."""
        if self.protocol in READ_ONLY:
            raise SchemaError(f"{self.url}: {self.protocol}:// URLs are read-only; write the "
                              "records to a local folder or an object store")

    # reading

    def list(self):
        """Names of the files and folders directly inside (sorted; [] when there is none)."""
        return self._files.list(self.url)

    def size(self, name):
        """The size in bytes of the file ``name``, or None when there is no such file."""
        return self._files.size(self.path(name))

    def read_bytes(self, name):
        """The whole content of the file ``name``."""
        return read_bytes(self.path(name), self.storage_options)

    def read_text(self, name):
        """The content of the file ``name`` as text (UTF-8)."""
        return self.read_bytes(name).decode("utf-8")

    def read_json(self, name):
        """The parsed JSON content of the file ``name``, or None when it is missing, unreadable
        or not JSON."""
        try:
            return json.loads(self.read_bytes(name))
        except (OSError, ValueError):
            return None

    def open_read(self, name):
        """A binary file object to read ``name`` from (streamed, for large files)."""
        return self._files.open_read(self.path(name))

    def read_ranges(self, requests):
        """Byte ranges of files of this folder: ``requests`` are ``(name, start, end)``
        (``end`` excluded). Local files are read with positioned reads, remote ones with
        ranged reads, all of one call at once.

        Returns:
            One item per request: its bytes, or the OSError reading it raised.
        """
        if not self.is_local:
            return read_remote_ranges(self.fs, [(self.path(name), start, end)
                                                for name, start, end in requests])
        out, by_name = [None] * len(requests), {}
        for i, (name, start, end) in enumerate(requests):
            by_name.setdefault(name, []).append(i)
        for name, indexes in by_name.items():
            try:
                found = read_local_ranges(self.path(name), [requests[i][1:] for i in indexes])
            except OSError as exc:
                found = [exc] * len(indexes)
            for i, data in zip(indexes, found):
                out[i] = data
        return out

    @property
    def reads_soon(self):
        """Whether :meth:`read_range_soon` can start reads without a thread: a remote folder
        on an async filesystem (gcsfs, s3fs, http)."""
        return not self.is_local and bool(self.fs.async_impl)

    def read_range_soon(self, name, start, end):
        """Start a ranged read of the file ``name`` (``end`` excluded) and return at once: a
        ``concurrent.futures.Future`` of its bytes (see :attr:`reads_soon`)."""
        return read_range_soon(self.fs, self.path(name), start, end)

    def digest(self, name, digest, chunk_size=8 << 20):
        """Feed the bytes of the file ``name`` to ``digest`` (e.g. a FileDigest); returns it."""
        with self.open_read(name) as f:
            for chunk in iter(lambda: f.read(chunk_size), b""):
                digest.update(chunk)
        return digest

    # writing

    def make_dirs(self):
        """Create this folder and its parents (object stores need none)."""
        self._files.make_dirs(self.url)

    def open_for_commit(self, name, unique_temp=False):
        """A :class:`~tfrecorder_lite.storage.pending.PendingFile` for ``name``: write to it,
        then ``commit()`` or ``discard()``.

        Args:
            name: the file's name in this folder.
            unique_temp: on the local disk, a temporary name of this process and thread, for
                a folder that several writers fill with the same files (remote files are
                always spooled under a name of their own).
        """
        self.check_writable()
        return self._files.open_for_commit(self.path(name), name, unique_temp)

    def write_atomic(self, name, data):
        """Write ``data`` (bytes or str) to ``name`` so that readers never see it half written."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        pending = self.open_for_commit(name)
        try:
            pending.write(data)
        except BaseException:
            pending.discard()
            raise
        pending.commit()

    def remove(self, name):
        """Remove a file or a whole subfolder; no error when it is already gone."""
        self._files.remove(self.path(name))


def write_file(uri, data, storage_options=None):
    """Write ``data`` (bytes or str) to the file ``uri`` (a path or URL) whole, never half
    written; its folder must exist (object stores need none). Returns the resolved path or URL.

    Raises:
        SchemaError: ``uri`` is read-only (http(s)).
        OSError: the file could not be written.
    """
    uri = resolve(uri)
    Store(parent(uri), storage_options).write_atomic(basename(uri), data)
    return uri
