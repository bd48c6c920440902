"""Files behind fsspec URLs: read and asked about many at a time, and uploaded whole.

Reads and stats of many files run concurrently on the filesystem's event loop (gcsfs, s3fs,
http), each file's failure reported for that file alone, in the words of
:mod:`~tfrecorder_lite.storage.errors`; http(s) URLs are read by
:mod:`~tfrecorder_lite.storage.http` (streamed and cut at the limit, an idle timeout, bounded
tries). Object stores have no rename: a file is spooled to a local temporary file and uploaded
in one ``put_file``, which gcsfs and s3fs finalize only once every byte has arrived (a failed
or killed upload leaves no object), and the object's size is checked after the upload.
"""

import asyncio
import os
import tempfile
import weakref

from .http import info as http_info, read as http_read, settings as http_settings
from .errors import explain, range_refused, too_large
from .pending import TEMP_SUFFIX, PendingFile
from .urls import READ_ONLY, options_for

_CONCURRENT_REQUESTS = 64  # requests in flight at once per call, for latency-bound stores
# A folder holding at least this many of a call's files is listed (one request per 1,000
# objects) rather than asked for each file; below it, the listing of a large folder could cost
# more requests than it saves.
_LIST_FOLDERS_FROM = 256


def _protocols(fs):
    return {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)


def _http_settings(fs, storage_options):
    """The HttpSettings of an http(s) filesystem, or None for any other."""
    if not _protocols(fs) & READ_ONLY:
        return None
    return http_settings(options_for("http", storage_options))


# ----------------------------------------------------------------------------- many files at once

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


def _call(function, *args, **kwargs):
    """``function(*args, **kwargs)``, or the exception it raised."""
    try:
        return function(*args, **kwargs)
    except Exception as exc:  # reported per file, never for the whole batch
        return exc


def _each(fs, method, paths):
    """``fs.<method>(path)`` for every path, or the exception it raised; concurrently on an
    async filesystem (gcsfs, s3fs, http), one after the other on the others."""
    if fs.async_impl:
        return _gather(fs, getattr(fs, "_" + method), paths)
    return [_call(getattr(fs, method), path) for path in paths]


def _explained(fs, paths, values):
    """``values`` with each exception replaced by the one that says what the store answered
    (see :func:`~tfrecorder_lite.storage.errors.explain`)."""
    return [explain(v, p, fs) if isinstance(v, Exception) else v for p, v in zip(paths, values)]


def read_files(fs, paths, storage_options=None, max_bytes=None):
    """The bytes of many files of ``fs``, fetched concurrently.

    Args:
        fs: the fsspec filesystem.
        paths: its URLs.
        storage_options: the call's fsspec options (the http(s) timeout and tries).
        max_bytes: files larger than this are a FileTooLarge, fetched only up to the limit.

    Returns:
        One item per path: its bytes, or the exception reading it raised.
    """
    settings = _http_settings(fs, storage_options)
    if settings is not None:  # streamed, cut at the limit, timed out, tried again
        return _gather(fs, lambda p: http_read(fs, p, max_bytes, settings), paths)
    if max_bytes is None:
        return _explained(fs, paths, _each(fs, "cat_file", paths))
    found = _gather(fs, lambda p: fs._cat_file(p, start=0, end=max_bytes + 1), paths) \
        if fs.async_impl else [_call(fs.cat_file, p, start=0, end=max_bytes + 1)
                               for p in paths]
    # a range of an empty object is "not satisfiable" on S3: ask those again, whole
    # (only those: a store that failed has already tried as often as it is set to)
    again = [i for i, v in enumerate(found) if range_refused(v)]
    for i, value in zip(again, _each(fs, "cat_file", [paths[i] for i in again])):
        found[i] = value
    return _explained(fs, paths, [
        too_large(p, None, max_bytes) if isinstance(v, bytes) and len(v) > max_bytes
        else v for p, v in zip(paths, found)])


# Ranged reads in flight at once per event loop, shared by every read_ranges call on it and
# handed out first come, first served: calls made one after another (the groups of records a
# pipeline reads ahead) are served in that order, not all at a fraction of the speed.
_RANGE_SLOTS = weakref.WeakKeyDictionary()


def read_ranges(fs, requests):
    """Byte ranges of files of ``fs``, fetched concurrently (ranged reads).

    Args:
        fs: the fsspec filesystem.
        requests: ``(url, start, end)`` triples (``end`` excluded).

    Returns:
        One item per request: its bytes, or the exception reading it raised.
    """
    if fs.async_impl:
        from fsspec.asyn import sync

        async def one(url, start, end):
            loop = asyncio.get_running_loop()
            slots = _RANGE_SLOTS.setdefault(loop, asyncio.Semaphore(_CONCURRENT_REQUESTS))
            async with slots:
                try:
                    return await fs._cat_file(url, start=start, end=end)
                except Exception as exc:  # reported per range, never for the whole batch
                    return exc

        async def run_all():
            return await asyncio.gather(*(one(*r) for r in requests))

        found = sync(fs.loop, run_all)
    else:
        found = [_call(fs.cat_file, url, start=start, end=end) for url, start, end in requests]
    return _explained(fs, [r[0] for r in requests], found)


def read_range_soon(fs, url, start, end):
    """Start a ranged read of ``url`` on ``fs``'s event loop (an async filesystem: gcsfs,
    s3fs, http) and return at once. The caller bounds how many it starts: these reads wait
    for no slot of :func:`read_ranges`', whose callers wait for their answers.

    Returns:
        A ``concurrent.futures.Future`` of the bytes; its exception, if any, says what the
        store answered.
    """
    async def one():
        try:
            return await fs._cat_file(url, start=start, end=end)
        except Exception as exc:
            raise explain(exc, url, fs) from None

    if not fs.async_impl:
        raise TypeError(f"{type(fs).__name__} has no event loop to read on")
    return asyncio.run_coroutine_threadsafe(one(), fs.loop)


def _identity(info):
    """A token that changes whenever the object's content does (generation, ETag or mtime)."""
    for key in ("generation", "ETag", "etag", "mtime", "LastModified", "last_modified"):
        if info.get(key) is not None:
            return str(info[key])
    return ""


def stat_files(fs, paths, storage_options=None):
    """``(size, identity)`` of many files of ``fs`` (size 0 when a server does not say), or
    the exception; a folder holding many of them is listed once instead."""
    def file_info(info):
        if isinstance(info, Exception):
            return info
        if info.get("type") == "directory":
            return IsADirectoryError(21, "is a folder, not a file")
        # a server that does not say (a chunked answer): known once the file is read
        return int(info.get("size") or 0), _identity(info)

    return [file_info(v) for v in _infos(fs, paths, storage_options)]


def _infos(fs, paths, storage_options=None):
    """fsspec ``info`` of each path (or the exception), listing folders that hold many."""
    infos = [None] * len(paths)
    by_folder = {}
    for i, path in enumerate(paths):
        by_folder.setdefault(fs._parent(path), []).append(i)
    for folder, indexes in by_folder.items():
        if _protocols(fs) & READ_ONLY or len(indexes) < _LIST_FOLDERS_FROM:
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
    settings = _http_settings(fs, storage_options)
    answers = _gather(fs, lambda p: http_info(fs, p, settings), asked) if settings is not None \
        else _explained(fs, asked, _each(fs, "info", asked))
    for i, answer in zip([i for i, info in enumerate(infos) if info is None], answers):
        infos[i] = answer
    return infos


def walk(fs, root):
    """Yield ``(relative_parts, url)`` of every non-hidden file below the URL ``root``,
    sorted."""
    scheme = root.partition("://")[0].lower()
    top = fs._strip_protocol(root).rstrip("/")
    for path in sorted(fs.find(root)):
        parts = tuple(path[len(top) + 1:].split("/"))
        if not any(p.startswith(".") for p in parts):
            yield parts, f"{scheme}://{path}" if scheme not in READ_ONLY else path


# ----------------------------------------------------------------------------- one folder

class RemotePendingFile(PendingFile):
    """An object being written: spooled to a local temporary file, uploaded on commit in one
    ``put_file``."""

    def __init__(self, fs, url, name):
        spool = tempfile.NamedTemporaryFile(prefix="tfrecorder_lite-", suffix=TEMP_SUFFIX,
                                            delete=False)
        super().__init__(name, spool, spool.name)
        self._fs, self._url = fs, url

    def commit(self):
        """Upload the file whole, then check the size the store holds."""
        self._file.close()
        try:
            self._fs.put_file(self._temp_path, self._url)
        finally:
            os.remove(self._temp_path)
        found = RemoteFiles(self._fs).size(self._url)  # write, then verify
        if found != self.bytes_written:
            raise OSError(f"{self._url}: uploaded {self.bytes_written} bytes, the store holds "
                          f"{found if found is not None else 'nothing'}")


class RemoteFiles:
    """The operations a Store needs, on one fsspec filesystem (URLs in, URLs out).

    Listings and sizes are asked afresh each time: another process may have written meanwhile.
    """

    def __init__(self, fs):
        self.fs = fs

    @staticmethod
    def join(folder, name):
        return f"{folder}/{name}"

    def list(self, folder):
        self.fs.invalidate_cache(folder)
        try:
            entries = self.fs.ls(folder, detail=False)
        except FileNotFoundError:
            return []
        top = self.fs._strip_protocol(folder).rstrip("/")
        return sorted({e.rstrip("/").rsplit("/", 1)[-1] for e in entries
                       if e.rstrip("/") != top})

    def size(self, path):
        self.fs.invalidate_cache(path)
        try:
            info = self.fs.info(path)
        except FileNotFoundError:
            return None
        return int(info["size"]) if info.get("type") == "file" else None

    def open_read(self, path):
        return self.fs.open(path, "rb", block_size=8 << 20)

    def make_dirs(self, folder):
        """Nothing: object stores have no folders to make."""

    def open_for_commit(self, path, name, unique_temp=False):
        """A RemotePendingFile (its spool always has a name of its own)."""
        return RemotePendingFile(self.fs, path, name)

    def remove(self, path):
        try:
            self.fs.rm(path, recursive=True)
        except FileNotFoundError:
            pass
        self.fs.invalidate_cache(path)
