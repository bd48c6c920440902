"""Local copies of remote shards: a folder of whole shards, bounded, shared by processes.

Readers stream remote shards by ranged reads (:mod:`~tfrecorder_lite.read.remote_blocks`);
with a cache folder, the blocks they fetch are also written into a copy of their shard, which
is checked against ``metadata.json`` (size and CRC32C, or sha256 in outputs that list no
CRC32C) once every block is there, and only then takes its final name. A copy is named by the
shard's checksum (with its URL and size), so a rewritten output never reuses a stale copy.

``cache_limit`` bounds the bytes of the folder's copies, finished or being filled: space for a
copy is reserved (under a lock shared by every process using the folder, which a finished copy
also takes its final name under) before its first byte is written, by deleting the copies used
least recently; a shard that does not fit is streamed without a copy. Only this cache's own
files are ever deleted, and each of them can be fetched again. A copy being read by another
process may be deleted: the reader keeps its open file (POSIX), and the next reader fetches
the shard again.

TensorFlow reads local files and, natively, ``gs://`` on Google Cloud; compressed shards, which
cannot be read by offset, are copied whole before they are read (:func:`local_copies`).
"""

import contextlib
import fcntl
import hashlib
import os
import re
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor

from .. import redaction
from . import verification
from ..errors import SchemaError, VerifyError
from ..formats import DEFAULT
from ..record.framing import FileDigest
from ..storage import Store

logger = redaction.logger(__name__)  # every record redacted

_CHUNK = 8 << 20
_PARALLEL_DOWNLOADS = 8
_LOCK = ".lock"
# a copy being filled: <final name>.<pid>-<random>.partial
_PARTIAL = re.compile(r"^(?P<name>[0-9a-f]{64}\.[a-z.]+)\.(?P<pid>\d+)-[0-9a-f]+\.partial$")
_FINAL = re.compile(r"^[0-9a-f]{64}\.[a-z.]+$")
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def default_cache_dir():
    """``$TFRECORDER_LITE_CACHE``, else ``$XDG_CACHE_HOME/tfrecorder_lite`` (``~/.cache/...``)."""
    if os.environ.get("TFRECORDER_LITE_CACHE"):
        return os.environ["TFRECORDER_LITE_CACHE"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tfrecorder_lite")


def byte_count(value, name="cache_limit"):
    """A number of bytes: an int, or text such as ``"20GB"``, ``"512MiB"``, ``"16M"`` (powers
    of 1024); None stays None.

    Raises:
        SchemaError: naming the option and the spellings it takes.
    """
    if value is None:
        return None
    if isinstance(value, str):
        number = value.strip().upper().replace(" ", "")
        number = number[:-1] if number.endswith("B") else number
        number = number[:-1] if number.endswith("I") else number
        unit = number[-1] if number and number[-1] in _UNITS else ""
        try:
            count = int(float(number[:len(number) - len(unit)]) * _UNITS[unit])
        except ValueError:
            count = 0
    elif isinstance(value, bool) or not hasattr(value, "__index__"):
        count = 0
    else:
        count = int(value)
    if count <= 0:
        raise SchemaError(f"{name} must be a positive number of bytes or text such as '20GB' "
                          f"or '512MiB', not {value!r}")
    return count


def copy_name(store, shard):
    """The cache file name of a manifest entry of ``store``: its sha256 when it has one, else a
    digest of its URL, size and CRC32C (a 32-bit CRC alone would collide across many shards)."""
    key = shard.sha256 or hashlib.sha256(
        f"{store.path(shard.name)}\0{shard.bytes}\0{shard.crc32c}".encode()).hexdigest()
    return key + DEFAULT.suffixes[None]  # a copy of any format (none but TFRecord yet)


class ShardCache:
    """A cache folder of whole shard copies, at most ``limit`` bytes (None: unbounded).

    Picklable: worker processes share the folder, each with a lock of its own.
    """

    def __init__(self, folder=None, limit=None):
        cache = Store(folder or default_cache_dir())
        if not cache.is_local:
            raise SchemaError(f"cache_dir={cache.url}: the cache must be a local folder")
        self.folder = cache.path()
        self.limit = byte_count(limit)
        self._checked = {}  # copy name -> the path of a verified copy, in this process

    def __getstate__(self):
        return {"folder": self.folder, "limit": self.limit}

    def __setstate__(self, state):
        self.__init__(state["folder"], state["limit"])

    def __repr__(self):
        return f"ShardCache({self.folder!r}, limit={self.limit})"

    def copy_of(self, name, shard):
        """The path of the finished copy named ``name`` of ``shard`` (marked used), or None.
        A copy is checked against the manifest the first time this process uses it."""
        path = os.path.join(self.folder, name)
        try:
            size = os.stat(path).st_size
            os.utime(path)  # used now: the last to be evicted
        except OSError:
            self._checked.pop(name, None)
            return None
        if name in self._checked:
            return path
        if size == shard.bytes and not _digest(path, shard).mismatches(_cheapest(shard)):
            self._checked[name] = path
            return path
        logger.warning("%s: the cached copy differs from metadata.json (%s); fetching it again",
                       path, "size" if size != shard.bytes else "CRC32C")
        with contextlib.suppress(OSError):
            os.remove(path)
        return None

    def begin(self, name, shard, where):
        """A :class:`PartialCopy` of ``shard`` (``where``: its URL, for messages) to fill, with
        its space reserved, or None when it cannot be had: larger than the limit, or another
        live process is filling it."""
        if self.limit is not None and shard.bytes > self.limit:
            return None
        os.makedirs(self.folder, exist_ok=True)
        with self._locked():
            entries = self._entries()
            if any(e.name == name for e in entries if e.partial and e.alive):
                return None  # another process is filling it: read its copy once it is done
            if not self._make_room(entries, shard.bytes):
                return None
            path = os.path.join(self.folder,
                                f"{name}.{os.getpid()}-{secrets.token_hex(4)}.partial")
            with open(path, "wb") as f:
                f.truncate(shard.bytes)  # its whole size is reserved from the start
        return PartialCopy(self, name, shard, path, where)

    def reserve_whole(self, name, shard, where):
        """A temporary path with room for a whole copy of ``shard`` (for :func:`local_copies`).

        Raises:
            SchemaError: the shard is larger than the limit.
        """
        copy = self.begin(name, shard, where)
        if copy is None and self.limit is not None and shard.bytes > self.limit:
            raise SchemaError(f"cache_limit={self.limit} bytes cannot hold {shard.name} "
                              f"({shard.bytes} bytes), which must be copied whole to be read")
        return copy

    def _make_room(self, entries, size):
        """Delete the least recently used finished copies until ``size`` more bytes fit;
        False when they cannot (copies being filled hold the rest)."""
        if self.limit is None:
            return True
        used = sum(e.size for e in entries)
        for entry in sorted((e for e in entries if not e.partial), key=lambda e: e.used):
            if used + size <= self.limit:
                break
            with contextlib.suppress(OSError):
                os.remove(entry.path)
                used -= entry.size
                self._checked.pop(entry.name, None)
        return used + size <= self.limit

    def _entries(self):
        """This cache's files (copies and copies being filled; the partial copies of dead
        processes are deleted on the way)."""
        found = []
        with os.scandir(self.folder) as listing:
            for item in listing:
                partial = _PARTIAL.match(item.name)
                if not partial and not _FINAL.match(item.name):
                    continue  # not ours: never touched
                try:
                    info = item.stat()
                except OSError:
                    continue
                alive = partial is None or _alive(int(partial["pid"]))
                if not alive:
                    with contextlib.suppress(OSError):
                        os.remove(item.path)
                    continue
                found.append(_Entry(partial["name"] if partial else item.name, item.path,
                                    info.st_size, info.st_mtime, partial is not None, alive))
        return found

    @contextlib.contextmanager
    def _locked(self):
        with open(os.path.join(self.folder, _LOCK), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


class _Entry:
    __slots__ = ("name", "path", "size", "used", "partial", "alive")

    def __init__(self, name, path, size, used, partial, alive):
        self.name, self.path, self.size, self.used = name, path, size, used
        self.partial, self.alive = partial, alive


def _alive(pid):
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cheapest(shard):
    return {"crc32c": shard.crc32c} if shard.crc32c else shard.checksums


def _digest(path, shard):
    digest = FileDigest.like(_cheapest(shard))
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest


class PartialCopy:
    """A copy of one shard being filled block by block (``write``), from any thread; once
    every byte is there it is checked against the manifest and takes its final name."""

    def __init__(self, cache, name, shard, path, where):
        self._cache, self.name, self.shard, self.path = cache, name, shard, path
        self._where = where
        self._lock = threading.Lock()
        self._missing = shard.bytes  # bytes not yet written
        self._written = set()  # offsets written
        self._file = open(path, "r+b")
        self.done = False

    def write(self, offset, data):
        """Write the shard's bytes at ``offset``; returns the final copy's path once the copy
        is complete and checked (else None)."""
        with self._lock:
            if self.done or offset in self._written:
                return None
            os.pwrite(self._file.fileno(), data, offset)
            self._written.add(offset)
            self._missing -= len(data)
            if self._missing > 0:
                return None
            self.done = True
            self._file.close()
        return self._finish()

    def _finish(self):
        mismatches = _digest(self.path, self.shard).mismatches(_cheapest(self.shard))
        final = os.path.join(self._cache.folder, self.name)
        if mismatches:
            self.abandon()
            raise VerifyError(f"{self._where}: {' and '.join(mismatches)} differs from "
                              "metadata.json (changed or damaged since it was written; run "
                              "verify)")
        with self._cache._locked():  # a listing that makes room sees it under one name
            os.replace(self.path, final)
        self._cache._checked[self.name] = final
        return final

    def abandon(self):
        """Delete the copy (its reserved space is free again)."""
        with self._lock:
            self.done = True
            with contextlib.suppress(OSError):
                self._file.close()
            with contextlib.suppress(OSError):
                os.remove(self.path)


def local_copies(store, shards, cache_dir=None, cache_limit=None):
    """Local paths holding the bytes of ``shards`` (whole copies, for TensorFlow to read),
    downloading the missing ones concurrently.

    Args:
        store: the output folder (a Store).
        shards: ShardEntry of each shard.
        cache_dir: the cache folder, a local path or ``file://`` URL (default:
            :func:`default_cache_dir`).
        cache_limit: bytes the folder may hold (None: unbounded).

    Raises:
        SchemaError: ``cache_dir`` is not on the local disk, or the shards do not fit in
            ``cache_limit`` together.
        ManifestError: a shard file is missing.
        VerifyError: a downloaded shard's checksum differs from the manifest's.
    """
    cache = ShardCache(cache_dir, cache_limit)
    if cache.limit is not None and sum(s.bytes for s in shards) > cache.limit:
        raise SchemaError(f"cache_limit={cache.limit} bytes cannot hold the "
                          f"{sum(s.bytes for s in shards)} bytes of these compressed shards, "
                          "which are copied whole to be read: raise it, or write the output "
                          "without compression to stream it")
    os.makedirs(cache.folder, exist_ok=True)
    names = [copy_name(store, shard) for shard in shards]
    missing = {name: shard for name, shard in zip(names, shards)
               if cache.copy_of(name, shard) is None}
    if missing:
        with ThreadPoolExecutor(min(_PARALLEL_DOWNLOADS, len(missing))) as pool:
            for done in [pool.submit(_download, store, s, cache, n) for n, s in missing.items()]:
                done.result()
    return [os.path.join(cache.folder, name) for name in names]


def _download(store, shard, cache, name):
    """Stream one shard into the cache as ``name``, checking its checksums."""
    try:
        source = store.open_read(shard.name)
    except FileNotFoundError:
        raise verification.shard_error(store, shard,
                                       verification.size_problem(shard, None)) from None
    with source:
        where = store.path(shard.name)
        copy = cache.reserve_whole(name, shard, where)
        if copy is None:  # another process is fetching it: wait for its copy, else fetch it
            copy = _wait_for_other(cache, name, shard, where)
            if copy is None:
                return
        offset = 0
        try:
            for chunk in iter(lambda: source.read(_CHUNK), b""):
                copy.write(offset, chunk)
                offset += len(chunk)
            if offset != shard.bytes:
                raise VerifyError(f"{where}: {offset} bytes, metadata.json says "
                                  f"{shard.bytes} (changed or damaged since it was written; "
                                  "run verify)")
        except BaseException:
            copy.abandon()
            raise


def _wait_for_other(cache, name, shard, where, attempts=600):
    """Wait while another process fills the copy; None once it is there, or a copy of this
    process's own when the other gave up."""
    import time

    for _ in range(attempts):
        if cache.copy_of(name, shard) is not None:
            return None
        copy = cache.begin(name, shard, where)
        if copy is not None:
            return copy
        time.sleep(0.1)
    raise VerifyError(f"{name}: another process has been filling this cache copy for a "
                      "minute; delete the cache folder's .partial files if none is running")
