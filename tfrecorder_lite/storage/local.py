"""The local disk: files read without trusting them, and files written durably.

Reads refuse what is not a regular file (a FIFO, a device, a socket, a folder) before reading
it, refuse a file over a size limit without reading it, and can judge a large file by its first
bytes before reading the rest. Writes never show a half-written file under its final name: the
bytes go to a temporary name beside it, reach the disk (fsync), are renamed into place, and the
rename reaches the disk too (fsync of the folder). A file can also be held under an exclusive
lock (``flock``) that the kernel releases when its holder dies.
"""

import ctypes
import functools
import os
import shutil
import stat as stat_module
import threading

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

from .. import redaction
from .errors import FileRefused, too_large
from .pending import TEMP_SUFFIX, PendingFile

logger = redaction.logger(__name__)  # every record redacted

HEAD_BYTES = 64 << 10  # what a large file is judged by before it is read whole
_ONE_READ_LIMIT = 1 << 30
# A local file being written has its new bytes handed to the disk every this many bytes
# (write-behind), so that the fsync of its commit has little left to wait for.
WRITE_BEHIND_BYTES = 8 << 20


# ----------------------------------------------------------------------------- reading

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


def read_file(path, max_bytes=None, check_head=None):
    """The whole content of a local regular file, usually in one read call.

    Args:
        max_bytes: refuse a larger file (FileTooLarge) without reading it.
        check_head: called with the first ``HEAD_BYTES`` of a larger file before the rest is
            read; returns a reason to refuse the file, or None.

    Raises:
        OSError: the file is missing or unreadable; FileRefused when it is no regular file,
            too large, or refused by ``check_head``.
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


def read_ranges(path, ranges):
    """Byte ranges ``(start, end)`` of a local file, read with positioned reads (``pread``:
    safe in threads, no shared file position).

    Raises:
        OSError: the file is missing or unreadable, or ends before a range does.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        out = []
        for start, end in ranges:
            data = os.pread(fd, end - start, start)
            if len(data) != end - start:
                raise OSError(f"{path}: ends at byte {start + len(data)}, before the range "
                              f"{start}-{end} read")
            out.append(data)
        return out
    finally:
        os.close(fd)


def stat_file(path):
    """``(size, modification time in ns)`` of a regular file (else an OSError that says what
    it is)."""
    st = os.stat(path)
    _regular(st, path)
    return st.st_size, st.st_mtime_ns


def stat_paths(paths):
    """:func:`stat_file` of many local paths, each answer the pair or the OSError or
    ValueError (a NUL in a path) raised: one call for a plan's million files."""
    out = []
    append, stat, is_file = out.append, os.stat, stat_module.S_ISREG
    for path in paths:
        try:
            st = stat(path)
            if not is_file(st.st_mode):
                _regular(st, path)
        except (OSError, ValueError) as exc:
            append(exc)
            continue
        append((st.st_size, st.st_mtime_ns))
    return out


def walk(root):
    """Yield ``(relative_parts, path)`` of every non-hidden file below ``root``, sorted."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel = os.path.relpath(dirpath, root)
        parts = () if rel == "." else tuple(rel.split(os.sep))
        for name in sorted(filenames):
            if not name.startswith("."):
                yield parts + (name,), os.path.join(dirpath, name)


# ----------------------------------------------------------------------------- writing

def fsync_folder(path):
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


class LocalPendingFile(PendingFile):
    """A local file being written under ``<path>.tmp``, renamed to ``path`` on commit.

    Every ``WRITE_BEHIND_BYTES`` the bytes written so far start on their way to the disk
    (write-behind, where the OS offers it), on the calling thread and without waiting for
    them, so that :meth:`commit`'s fsync has little left to do.

    Args:
        path: the final path.
        name: the file's name in its folder.
        unique_temp: a temporary name of this process and thread
            (``<path>.<pid>-<thread>.tmp``), for folders that several writers fill with the
            same files.
    """

    def __init__(self, path, name, unique_temp=False):
        temp = f"{path}.{os.getpid()}-{threading.get_ident()}" if unique_temp else path
        super().__init__(name, open(temp + TEMP_SUFFIX, "wb"), temp + TEMP_SUFFIX)
        self._path = path
        self._behind = 0  # bytes already handed to the disk by write-behind

    def _write_pieces(self, pieces):
        if not hasattr(os, "writev"):
            return super()._write_pieces(pieces)
        self._file.flush()
        return _write_gathered(self._file.fileno(), pieces)

    def _wrote(self):
        if self.bytes_written - self._behind >= WRITE_BEHIND_BYTES > 0:
            self._file.flush()
            _start_writeback(self._file.fileno(), self._behind, self.bytes_written - self._behind)
            self._behind = self.bytes_written

    def commit(self):
        """Close the file and rename it to its final name, whole.

        The file's bytes reach the disk (fsync) before the rename, and the rename does before
        ``commit`` returns (fsync of the folder), so a power loss leaves either the whole file
        or none under its final name.
        """
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        try:
            os.replace(self._temp_path, self._path)
        except OSError:  # the final name is a folder, say: no temporary file left behind
            self.discard()
            raise
        fsync_folder(os.path.dirname(self._path))


class LocalFiles:
    """The operations a Store needs, on the local disk (paths in, paths out)."""

    @staticmethod
    def join(folder, name):
        return os.path.join(folder, name)

    @staticmethod
    def list(folder):
        try:
            return sorted(os.listdir(folder))
        except FileNotFoundError:
            return []

    @staticmethod
    def size(path):
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return st.st_size if stat_module.S_ISREG(st.st_mode) else None

    @staticmethod
    def open_read(path):
        return open(path, "rb")

    @staticmethod
    def make_dirs(folder):
        if not os.path.isdir(folder):
            os.makedirs(folder, exist_ok=True)
            fsync_folder(os.path.dirname(folder))

    @staticmethod
    def open_for_commit(path, name, unique_temp=False):
        return LocalPendingFile(path, name, unique_temp)

    @staticmethod
    def remove(path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            return
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


# ----------------------------------------------------------------------------- locks

CAN_LOCK = fcntl is not None  # flock, where the OS has it


class FileLocked(OSError):
    """Another process holds the lock; ``content`` is what it wrote into the file."""

    def __init__(self, path, content):
        super().__init__(11, "locked by another process", path)
        self.content = content


def lock_file(path, content):
    """Hold the exclusive lock (``flock``) of the local file ``path``, created as needed, and
    write ``content`` (bytes) into it.

    Returns:
        The file descriptor that holds the lock (see :func:`unlock_file`).

    Raises:
        FileLocked: another process holds it.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            found = os.pread(fd, 4096, 0)
            os.close(fd)
            raise FileLocked(path, found) from None
        try:  # a releasing holder unlinks the file: make sure this one is still in place
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    os.ftruncate(fd, 0)
    os.pwrite(fd, content, 0)
    return fd


def unlock_file(path, fd):
    """Give up the lock ``fd`` of :func:`lock_file`: the file is removed first, so that a
    process waiting for it sees that it is gone."""
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    os.close(fd)
