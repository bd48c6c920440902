"""Every file the library reads or writes, on the local disk or behind any fsspec URL.

Local paths (and ``file://`` URLs) use the operating system directly. Any other URL goes
through fsspec: ``gs://`` (gcsfs), ``s3://`` (s3fs), ``http(s)://``, ``memory://`` and the
rest of fsspec's protocols. Remote files are read many at a time, concurrently.

Writes never show a half-written file under its final name. Locally a file is written under a
temporary name and renamed into place. Object stores have no rename, so a remote file is
spooled to a local temporary file and uploaded in one ``put_file``, which gcsfs and s3fs finalize
only once every byte has arrived (a failed or killed upload leaves no object), and the object's
size is checked after the upload.

A :class:`Store` (one folder) is picklable: a worker rebuilds the filesystem from its URL and
storage options, so the same Store can be handed to another process or machine.
"""

import asyncio
import ctypes
import functools
import json
import logging
import os
import posixpath
import shutil
import stat as stat_module
import tempfile
from urllib.parse import unquote, urlparse

from . import http_reads, store_errors
from .errors import MissingDependencyError, SchemaError, UnsupportedURLError

logger = logging.getLogger(__name__)

TEMP_SUFFIX = ".tmp"
HEAD_BYTES = 64 << 10  # what a large file is judged by before it is read whole
_ONE_READ_LIMIT = 1 << 30
_EXTRAS = {"gs": "gcs", "gcs": "gcs", "s3": "s3", "s3a": "s3", "http": "http", "https": "http"}
_READ_ONLY = {"http", "https"}
_CONCURRENT_REQUESTS = 64  # requests in flight at once per call, for latency-bound stores
# A folder holding at least this many of a call's files is listed (one request per 1,000
# objects) rather than asked for each file; below it, the listing of a large folder could cost
# more requests than it saves.
_LIST_FOLDERS_FROM = 256
# A local file being written has its new bytes handed to the disk every this many bytes
# (write-behind), so that the fsync of its commit has little left to wait for.
WRITE_BEHIND_BYTES = 8 << 20


# ----------------------------------------------------------------------------- URLs and options

def protocol_of(uri):
    """The URL scheme of ``uri`` in lower case; ``"file"`` for plain paths."""
    uri = str(uri)
    scheme, sep, _ = uri.partition("://")
    return scheme.lower() if sep and scheme.isidentifier() else "file"


def is_remote(uri):
    """True when ``uri`` names something other than the local disk."""
    return protocol_of(uri) != "file"


@functools.lru_cache(maxsize=None)
def _filesystem_class(protocol):
    import fsspec

    try:
        return fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise UnsupportedURLError(
            f"unsupported URL scheme '{protocol}://' (not a protocol fsspec knows)") from None
    except ImportError as exc:
        extra = _EXTRAS.get(protocol)
        hint = f"pip install 'tfrecorder_lite[{extra}]'" if extra else str(exc)
        raise MissingDependencyError(
            f"{protocol}:// URLs need a package that is not installed: {hint}") from None


def check_url(uri):
    """Raise a clear error now, before anything is read or written, for an unusable URL.

    Raises:
        UnsupportedURLError: a scheme no installed fsspec filesystem knows.
        MissingDependencyError: the filesystem package is missing (names the extra to install).
    """
    protocol = protocol_of(uri)
    if protocol != "file":
        _filesystem_class(protocol)


def resolve(uri, base=None):
    """An absolute local path, or a URL, for ``uri``.

    Args:
        uri: a local path (relative or absolute), a ``file://`` URL or any fsspec URL.
        base: the folder (path or URL) that relative paths resolve against; default: the
            working folder.

    Raises:
        UnsupportedURLError: for a scheme that no fsspec filesystem knows.
    """
    uri = os.fspath(uri) if isinstance(uri, os.PathLike) else str(uri)
    protocol = protocol_of(uri)
    if protocol == "file":
        if "://" in uri:
            uri = file_url_path(uri)
        path = os.path.expanduser(uri)
        if os.path.isabs(path):
            return os.path.normpath(path)
        if base is not None and is_remote(base):
            scheme, _, rest = str(base).partition("://")
            return f"{scheme}://{posixpath.normpath(posixpath.join(rest, uri.replace(os.sep, '/')))}"
        return os.path.normpath(os.path.join(base or os.getcwd(), path))
    check_url(uri)
    return uri


def file_url_path(url):
    """The local path a ``file://`` URL names, percent-decoded (``%23`` is ``#``, ``%3F`` is
    ``?``, ``%25`` is ``%``).

    Raises:
        UnsupportedURLError: for a URL with a query or a fragment (a ``#`` or ``?`` not
            percent-encoded, which would cut the path there), or naming another host.
    """
    parts = urlparse(url)
    if parts.query or parts.fragment or "#" in url or "?" in url:
        raise UnsupportedURLError(
            f"{url}: a file:// URL ends its path at '?' or '#'; write a '?' or '#' of a file "
            "name as %3F or %23 (or give the plain path)")
    if parts.netloc not in ("", "localhost"):
        raise UnsupportedURLError(f"{url}: a file:// URL names a file of this machine "
                                  f"(file:///path), not of the host '{parts.netloc}'")
    return unquote(parts.path)


def is_relative(uri):
    """True for a relative local path (one that :func:`resolve` joins to a base folder)."""
    uri = str(uri)
    return protocol_of(uri) == "file" and "://" not in uri and \
        not os.path.isabs(os.path.expanduser(uri))


def relative_path_hint(uri, path, base=None):
    """For a relative ``uri`` resolved to ``path``: the words that say where it was looked
    for, to add to a "file not found"; "" for any other URI."""
    if not is_relative(uri):
        return ""
    against = f"base_dir {base}" if base is not None else f"the working folder {os.getcwd()}"
    return f" (looked for {path}: the relative path {uri} was resolved against {against})"


def parent(uri):
    """The folder holding ``uri`` (a path or URL)."""
    if is_remote(uri):
        return uri.rstrip("/").rsplit("/", 1)[0]
    return os.path.dirname(uri)


def basename(uri):
    """The last component of a path or URL (an http(s) URL's query string left out; in object
    names, ``?`` and ``#`` are ordinary characters)."""
    if not is_remote(uri):
        return os.path.basename(uri)
    if protocol_of(uri) in _READ_ONLY:
        uri = urlparse(uri).path
    return uri.rstrip("/").rsplit("/", 1)[-1]


def options_for(protocol, storage_options):
    """The fsspec options of one protocol.

    ``storage_options`` is either one dict for every remote URL of a call (pandas' convention),
    or, when a call touches two protocols, a dict keyed by protocol (fsspec's convention for
    chained URLs): ``{"s3": {"anon": True}, "gs": {"token": "cred.json"}}``.
    """
    if not storage_options:
        return {}
    names = set(_filesystem_class(protocol).protocol) if protocol != "file" else {"file"}
    names.add(protocol)
    if _keyed_by_protocol(storage_options):
        for key, options in storage_options.items():
            if key in names:
                return dict(options)
        return {}
    return dict(storage_options)


def _keyed_by_protocol(storage_options):
    import fsspec

    known = set(fsspec.available_protocols()) | {"file"}
    return all(isinstance(v, dict) and k in known for k, v in storage_options.items())


def filesystem(protocol, storage_options=None):
    """The (cached) fsspec filesystem of ``protocol`` with the options meant for it (for
    http(s), those of :mod:`~tfrecorder_lite.http_reads` taken out)."""
    import fsspec

    check_url(f"{protocol}://")
    options = options_for(protocol, storage_options)
    if protocol in _READ_ONLY:
        options = http_reads.fsspec_options(options)
    return fsspec.filesystem(protocol, **options)


def _http_settings(fs, storage_options):
    """The HttpSettings of an http(s) filesystem, or None for any other."""
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    if not protocols & _READ_ONLY:
        return None
    return http_reads.settings(options_for("http", storage_options))


# ----------------------------------------------------------------------------- the local disk

class FileRefused(OSError):
    """A file refused before it was read whole: too large, or its first bytes say it is not
    what the caller wants. ``reason`` says why, for people."""

    def __init__(self, path, reason):
        super().__init__(0, reason, path)
        self.reason = reason

    def __reduce__(self):
        return type(self), (self.filename, self.reason)


_FILE_KINDS = {stat_module.S_IFIFO: "a FIFO (named pipe)", stat_module.S_IFCHR: "a device",
               stat_module.S_IFBLK: "a device", stat_module.S_IFSOCK: "a socket"}


def _regular(st, path):
    """Raise an OSError that says what ``path`` is, unless it is a regular file."""
    if stat_module.S_ISREG(st.st_mode):
        return
    if stat_module.S_ISDIR(st.st_mode):
        raise IsADirectoryError(21, "is a folder, not a file", path)
    kind = _FILE_KINDS.get(stat_module.S_IFMT(st.st_mode), "something")
    raise FileRefused(path, f"{kind}, not a regular file")


def human_size(n):
    """``n`` bytes as people read it: 812 bytes, 3.6 MB, 6.0 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def too_large(path, size, max_bytes):
    """The FileRefused of a file of ``size`` bytes (None: more than read) over ``max_bytes``."""
    found = human_size(size) if size is not None else f"over {human_size(max_bytes)}"
    return FileRefused(path, f"file too large: {found} (limit {human_size(max_bytes)}, "
                             "max_image_bytes)")


def _local_read(path, max_bytes=None, check_head=None):
    """The whole content of a local regular file, usually in one read call.

    Args:
        max_bytes: refuse a larger file (FileRefused) without reading it.
        check_head: called with the first ``HEAD_BYTES`` of a larger file before the rest is
            read; returns a reason to refuse the file, or None.
    """
    # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        _regular(os.stat(path), path)  # a socket cannot be opened: say what it is
        raise
    try:
        st = os.fstat(fd)
        _regular(st, path)
        size = st.st_size
        limit = _ONE_READ_LIMIT if max_bytes is None else min(max_bytes + 1, _ONE_READ_LIMIT)
        if max_bytes is not None and size > max_bytes:
            raise too_large(path, size, max_bytes)
        if check_head is not None and size > HEAD_BYTES:
            reason = check_head(os.pread(fd, HEAD_BYTES, 0))
            if reason:
                raise FileRefused(path, reason)
        data = os.read(fd, min(size + 1, limit))  # usually all of it, in one call
        if len(data) > size or len(data) == limit:  # grown meanwhile, or very large
            chunks = [data]
            read = len(data)
            while chunk := os.read(fd, limit):
                chunks.append(chunk)
                read += len(chunk)
                if max_bytes is not None and read > max_bytes:
                    raise too_large(path, None, max_bytes)
            data = b"".join(chunks)
        if max_bytes is not None and len(data) > max_bytes:
            raise too_large(path, None, max_bytes)
        return data
    finally:
        os.close(fd)


def _local_stat(path):
    st = os.stat(path)
    _regular(st, path)
    return st.st_size, st.st_mtime_ns


# ----------------------------------------------------------------------------- many files at once

def _remote_identity(info):
    """A token that changes whenever the object's content does (generation, ETag or mtime)."""
    for key in ("generation", "ETag", "etag", "mtime", "LastModified", "last_modified"):
        if info.get(key) is not None:
            return str(info[key])
    return ""


def _gather(fs, coroutine_of, paths):
    """Run ``coroutine_of(path)`` for every path on ``fs``'s event loop, many at a time."""
    from fsspec.asyn import sync

    async def run_all():
        limit = asyncio.Semaphore(_CONCURRENT_REQUESTS)

        async def one(path):
            async with limit:
                try:
                    return await coroutine_of(path)
                except Exception as exc:  # reported per file, never for the whole batch
                    return exc

        return await asyncio.gather(*(one(p) for p in paths))

    return sync(fs.loop, run_all)


def _many(uris, storage_options, local, remote):
    """Apply ``local(path)`` to local URIs and ``remote(fs, paths)`` to the others, by protocol.

    Returns:
        A list with each result, or the exception raised for that URI.
    """
    out = [None] * len(uris)
    by_protocol = {}
    for i, uri in enumerate(uris):
        protocol = protocol_of(uri)
        if protocol == "file":
            try:
                out[i] = local(uri)
            except (OSError, ValueError) as exc:
                out[i] = exc
        else:
            by_protocol.setdefault(protocol, []).append(i)
    for protocol, indexes in by_protocol.items():
        fs = filesystem(protocol, storage_options)
        for i, value in zip(indexes, remote(fs, [uris[i] for i in indexes])):
            out[i] = value
    return out


def _each(fs, method, paths):
    """``fs.<method>(path)`` for every path, or the exception it raised; concurrently on an
    async filesystem (gcsfs, s3fs, http), one after the other on the others."""
    if fs.async_impl:
        return _gather(fs, getattr(fs, "_" + method), paths)
    return [_call(getattr(fs, method), path) for path in paths]


def _as_os_error(exc):
    if isinstance(exc, OSError):
        return exc
    return OSError(f"{type(exc).__name__}: {exc}".rstrip(": "))


def read_many(uris, storage_options=None, max_bytes=None, check_head=None):
    """The bytes of many files (paths or URLs); remote ones are fetched concurrently.

    http(s) URLs are read by :mod:`~tfrecorder_lite.http_reads` (streamed and cut at the
    limit, an idle timeout, bounded tries); what the other stores raise is explained by
    :func:`~tfrecorder_lite.store_errors.explain`.

    Args:
        uris: paths or URLs.
        storage_options: fsspec options (see :func:`options_for`).
        max_bytes: files larger than this are refused (FileRefused) without being read whole
            (a remote one is fetched only up to the limit).
        check_head: for local files larger than ``HEAD_BYTES``: called with their first bytes
            before the rest is read; returns a reason to refuse the file, or None.

    Returns:
        One item per URI: its bytes, or the OSError that reading it raised.
    """
    def remote(fs, paths):
        http = _http_settings(fs, storage_options)
        if http is not None:  # streamed, cut at the limit, timed out, tried again
            return _gather(fs, lambda p: http_reads.read(fs, p, max_bytes, http, too_large),
                           paths)
        if max_bytes is None:
            return _explained(fs, paths, _each(fs, "cat_file", paths))
        found = _gather(fs, lambda p: fs._cat_file(p, start=0, end=max_bytes + 1), paths) \
            if fs.async_impl else [_call(fs.cat_file, p, start=0, end=max_bytes + 1)
                                   for p in paths]
        # a range of an empty object is "not satisfiable" on S3: ask those again, whole
        # (only those: a store that failed has already tried as often as it is set to)
        again = [i for i, v in enumerate(found) if store_errors.range_refused(v)]
        for i, value in zip(again, _each(fs, "cat_file", [paths[i] for i in again])):
            found[i] = value
        return _explained(fs, paths, [
            too_large(p, None, max_bytes) if isinstance(v, bytes) and len(v) > max_bytes
            else v for p, v in zip(paths, found)])

    contents = _many(uris, storage_options,
                     lambda path: _local_read(path, max_bytes, check_head), remote)
    return [value if isinstance(value, bytes) else _as_os_error(value) for value in contents]


def _explained(fs, paths, values):
    """``values`` with each exception replaced by the one that says what the store answered
    (see :func:`~tfrecorder_lite.store_errors.explain`)."""
    return [store_errors.explain(v, p, fs) if isinstance(v, Exception) else v
            for p, v in zip(paths, values)]


def _call(function, *args, **kwargs):
    """``function(*args, **kwargs)``, or the exception it raised."""
    try:
        return function(*args, **kwargs)
    except Exception as exc:  # reported per file, never for the whole batch
        return exc


def stat_many(uris, storage_options=None):
    """``(size, identity)`` of many files (remote ones asked concurrently).

    The identity changes whenever the content does: the modification time locally, the
    generation or ETag of an object. On object stores, a folder holding many of the files is
    listed once (up to 1,000 objects per request) instead of asking for each file.

    Returns:
        One item per URI: the pair (size 0 when a server does not say), or the OSError
        (FileNotFoundError, IsADirectoryError, ...).
    """
    def file_info(info):
        if isinstance(info, Exception):
            return info
        if info.get("type") == "directory":
            return IsADirectoryError(21, "is a folder, not a file")
        # a server that does not say (a chunked answer): known once the file is read
        return int(info.get("size") or 0), _remote_identity(info)

    found = _many(uris, storage_options, _local_stat, lambda fs, paths: [
        file_info(v) for v in _remote_infos(fs, paths, storage_options)])
    return [value if isinstance(value, tuple) else _as_os_error(value) for value in found]


def _remote_infos(fs, paths, storage_options=None):
    """fsspec ``info`` of each path (or the exception), listing folders that hold many."""
    infos = [None] * len(paths)
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    by_folder = {}
    for i, path in enumerate(paths):
        by_folder.setdefault(fs._parent(path), []).append(i)
    for folder, indexes in by_folder.items():
        if protocols & _READ_ONLY or len(indexes) < _LIST_FOLDERS_FROM:
            continue  # http(s) has no listing of sizes to speak of
        try:
            listing = {entry["name"].rstrip("/"): entry for entry in
                       fs.ls(folder, detail=True, refresh=True)}
        except Exception:  # unlistable: ask for each file below
            continue
        for i in indexes:
            infos[i] = listing.get(fs._strip_protocol(paths[i]).rstrip("/")) or \
                FileNotFoundError(2, "No such file", paths[i])
    asked = [paths[i] for i, info in enumerate(infos) if info is None]
    http = _http_settings(fs, storage_options)
    answers = _gather(fs, lambda p: http_reads.info(fs, p, http), asked) if http is not None \
        else _explained(fs, asked, _each(fs, "info", asked))
    for i, answer in zip([i for i, info in enumerate(infos) if info is None], answers):
        infos[i] = answer
    return infos


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
        scheme = protocol_of(root)
        fs = filesystem(scheme, storage_options)
        top = fs._strip_protocol(root).rstrip("/")
        for path in sorted(fs.find(root)):
            parts = tuple(path[len(top) + 1:].split("/"))
            if not any(p.startswith(".") for p in parts):
                yield parts, f"{scheme}://{path}" if scheme not in _READ_ONLY else path
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel = os.path.relpath(dirpath, root)
        parts = () if rel == "." else tuple(rel.split(os.sep))
        for name in sorted(filenames):
            if not name.startswith("."):
                yield parts + (name,), os.path.join(dirpath, name)


# ----------------------------------------------------------------------------- one folder

class Store:
    """One folder, local or remote, with the operations the library needs on it.

    Args:
        url: a local path, a ``file://`` URL or any fsspec URL (``gs://bucket/records``).
        storage_options: fsspec options (see :func:`options_for`).

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
        return {k: v for k, v in self.__dict__.items() if k != "fs"}

    @property
    def is_local(self):
        """True for a folder on the local disk."""
        return self.protocol == "file"

    @functools.cached_property
    def fs(self):
        """The fsspec filesystem of a remote folder."""
        return filesystem(self.protocol, self.storage_options)

    def path(self, name=""):
        """The full path or URL of ``name`` inside this folder."""
        if not name:
            return self.url
        return os.path.join(self.url, name) if self.is_local else f"{self.url}/{name}"

    def child(self, name):
        """The Store of the subfolder ``name``."""
        store = Store.__new__(Store)
        store.__dict__.update(self.__getstate__(), url=self.path(name))
        return store

    def check_writable(self):
        """Raise SchemaError when this kind of folder cannot be written (http(s) URLs)."""
        if self.protocol in _READ_ONLY:
            raise SchemaError(f"{self.url}: {self.protocol}:// URLs are read-only; write the "
                              "records to a local folder or an object store")

    # reading

    def list(self):
        """Names of the files and folders directly inside (sorted; [] when there is none)."""
        if self.is_local:
            try:
                return sorted(os.listdir(self.url))
            except FileNotFoundError:
                return []
        self.fs.invalidate_cache(self.url)  # another process may have written meanwhile
        try:
            entries = self.fs.ls(self.url, detail=False)
        except FileNotFoundError:
            return []
        top = self.fs._strip_protocol(self.url).rstrip("/")
        return sorted({e.rstrip("/").rsplit("/", 1)[-1] for e in entries
                       if e.rstrip("/") != top})

    def size(self, name):
        """The size in bytes of the file ``name``, or None when there is no such file."""
        if self.is_local:
            try:
                st = os.stat(self.path(name))
            except (FileNotFoundError, NotADirectoryError):
                return None
            return st.st_size if stat_module.S_ISREG(st.st_mode) else None
        self.fs.invalidate_cache(self.path(name))
        try:
            info = self.fs.info(self.path(name))
        except FileNotFoundError:
            return None
        return int(info["size"]) if info.get("type") == "file" else None

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
        if self.is_local:
            return open(self.path(name), "rb")
        return self.fs.open(self.path(name), "rb", block_size=8 << 20)

    def digest(self, name, digest, chunk_size=8 << 20):
        """Feed the bytes of the file ``name`` to ``digest`` (e.g. a FileDigest); returns it."""
        with self.open_read(name) as f:
            for chunk in iter(lambda: f.read(chunk_size), b""):
                digest.update(chunk)
        return digest

    # writing

    def make_dirs(self):
        """Create this folder and its parents (object stores need none)."""
        if self.is_local and not os.path.isdir(self.url):
            os.makedirs(self.url, exist_ok=True)
            _fsync_folder(os.path.dirname(self.url))

    def open_for_commit(self, name):
        """A :class:`PendingFile` for ``name``: write to it, then ``commit()`` or ``discard()``."""
        self.check_writable()
        return PendingFile(self, name)

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
        path = self.path(name)
        if self.is_local:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass
            return
        try:
            self.fs.rm(path, recursive=True)
        except FileNotFoundError:
            pass
        self.fs.invalidate_cache(path)


def _fsync_folder(path):
    """Make the latest renames in the local folder ``path`` durable (where the OS allows)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # e.g. Windows, where folders cannot be opened
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_IOV_MAX = 1024  # buffers per writev call (POSIX guarantees at least 16; Linux takes 1024)


def _write_gathered(fd, pieces):
    """Write every byte of ``pieces`` (byte strings) to ``fd`` in order; returns the count.

    Uses ``os.writev``, which releases the GIL while the kernel copies the bytes.
    """
    total, pieces = 0, [memoryview(p) for p in pieces if len(p)]
    while pieces:
        group = pieces[:_IOV_MAX]
        written = os.writev(fd, group)
        total += written
        if written == sum(map(len, group)):
            del pieces[:_IOV_MAX]
            continue
        while written >= len(pieces[0]):  # a short write: go on from where it stopped
            written -= len(pieces.pop(0))
        pieces[0] = pieces[0][written:]
    return total


_SYNC_FILE_RANGE_WRITE = 2  # Linux: start writing the range's dirty pages, do not wait


@functools.lru_cache(maxsize=None)
def _sync_file_range():
    """Linux's sync_file_range(2) through ctypes (which releases the GIL), or None."""
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (AttributeError, OSError, TypeError):  # no such symbol, or no C library by that name
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    function.restype = ctypes.c_int
    return function


def _start_writeback(fd, offset, length):
    """Start writing ``length`` bytes of ``fd`` from ``offset`` to the disk, without waiting.

    Durability still comes from the fsync of the commit; this only gets the disk busy early.
    Does nothing where the OS has no such call, or refuses it (e.g. on some filesystems).
    """
    function = _sync_file_range()
    if function is not None and function(fd, offset, length, _SYNC_FILE_RANGE_WRITE) != 0:
        logger.debug("sync_file_range: %s", os.strerror(ctypes.get_errno()))


class PendingFile:
    """A file being written: it appears under its final name only on :meth:`commit`.

    Locally the bytes go to ``<name>.tmp`` beside the final name, renamed on commit. Remotely
    they go to a local temporary file, uploaded on commit in one ``put_file``.
    """

    def __init__(self, store, name):
        self._store = store
        self.name = name
        self.bytes_written = 0
        self._behind = 0  # bytes already handed to the disk by write-behind
        if store.is_local:
            self._temp_path = store.path(name) + TEMP_SUFFIX
            self._file = open(self._temp_path, "wb")
        else:
            spool = tempfile.NamedTemporaryFile(prefix="tfrecorder_lite-", suffix=TEMP_SUFFIX,
                                                delete=False)
            self._temp_path, self._file = spool.name, spool

    def write(self, data):
        """Append ``data``: bytes, or a list of byte strings written one after the other.

        A list is handed to the OS as it is (one gathered write locally), never joined into
        one more copy. Locally, every ``WRITE_BEHIND_BYTES`` the bytes written so far start on
        their way to the disk (write-behind, where the OS offers it), on the calling thread and
        without waiting for them, so that :meth:`commit`'s fsync has little left to do.
        """
        if isinstance(data, (bytes, bytearray, memoryview)):
            self._file.write(data)
            self.bytes_written += len(data)
        elif self._store.is_local and hasattr(os, "writev"):
            self._file.flush()
            self.bytes_written += _write_gathered(self._file.fileno(), data)
        else:
            for piece in data:
                self._file.write(piece)
                self.bytes_written += len(piece)
        if self.bytes_written - self._behind >= WRITE_BEHIND_BYTES > 0 and \
                self._store.is_local:
            self._file.flush()
            _start_writeback(self._file.fileno(), self._behind, self.bytes_written - self._behind)
            self._behind = self.bytes_written

    def writelines(self, pieces):
        """Append byte strings one after the other, without joining them (see :meth:`write`)."""
        self.write(list(pieces))

    def commit(self):
        """Close the file and move it under its final name, whole.

        Locally the file's bytes reach the disk (fsync) before the rename, and the rename
        does before ``commit`` returns (fsync of the folder), so a power loss leaves either
        the whole file or none under its final name.
        """
        store, final = self._store, self._store.path(self.name)
        if store.is_local:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            os.replace(self._temp_path, final)
            _fsync_folder(os.path.dirname(final))
            return
        self._file.close()
        try:
            store.fs.put_file(self._temp_path, final)
        finally:
            os.remove(self._temp_path)
        found = store.size(self.name)  # write, then verify
        if found != self.bytes_written:
            raise OSError(f"{final}: uploaded {self.bytes_written} bytes, the store holds "
                          f"{found if found is not None else 'nothing'}")

    def discard(self):
        """Close the file and forget it: nothing appears under the final name."""
        self._file.close()
        try:
            os.remove(self._temp_path)
        except FileNotFoundError:
            pass
