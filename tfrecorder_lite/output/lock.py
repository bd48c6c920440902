"""One writer per output folder: a lock held for the whole of a conversion.

On a local disk the lock is ``flock`` on ``.tfrecorder_lite.lock`` in the output folder: exact,
and released by the kernel when its holder dies, however it dies, so a killed run never blocks
the next one. Object stores have no locks; there the lock file is a lease: its holder writes it,
waits a moment and reads it back (the last of two simultaneous writers wins, and the other
sees it), then rewrites it every ``HEARTBEAT_SECONDS``. A lease not renewed for
``STALE_SECONDS``, or held by a process of this machine that no longer exists, is stale and is
taken over (with a warning).

A lease is fenced: every write of the conversion, the driver's and each task's wherever it
runs, first reads the lease and goes ahead only while it is still this conversion's and was
renewed lately (:class:`FencedStore`). A renewal that finds another holder stops the
conversion with OutputLockedError; so does the driver between shard receipts. Without
conditional writes a check and its write are not one step: a process paused between the two
for longer than the lease can still write once.
"""

import json
import math
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass

from .. import redaction
from ..errors import OutputLockedError
from ..storage import FileRefused, Store, read_many
from ..storage.local import CAN_LOCK, FileLocked, lock_file, unlock_file
from .layout import LOCK

logger = redaction.logger(__name__)  # every record redacted

HEARTBEAT_SECONDS = 20.0
STALE_SECONDS = 120.0
SETTLE_SECONDS = 0.5  # longer than one write takes to land: a simultaneous writer shows by then


LEASE_BYTES = 4096  # a lease is about 150 bytes: a larger lock file is none of ours


def _holder(token):
    return {"pid": os.getpid(), "host": socket.gethostname(), "token": token,
            "started": time.time(), "heartbeat": time.time()}


def _is_time(value):
    """A POSIX time a lease can hold (a finite number, before the year 5000)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value) and 0 <= value < 1e11


_FIELDS = (("token", lambda v: isinstance(v, str) and v, "a token"),
           ("pid", lambda v: type(v) is int, "a process id"),  # noqa: E721 (not a bool)
           ("host", lambda v: isinstance(v, str), "a host name"),
           ("started", _is_time, "a time"),
           ("heartbeat", _is_time, "a time"))


def _malformed(holder):
    """What makes the parsed lock file ``holder`` no lease, or None."""
    if not isinstance(holder, dict):
        return "not a JSON object"
    for key, test, what in _FIELDS:
        if not test(holder.get(key)):
            shown = repr(holder.get(key))
            return f"{key} {shown if len(shown) <= 40 else shown[:37] + '...'} is not {what}"
    ahead = holder["heartbeat"] - time.time()
    if ahead > STALE_SECONDS:  # it would never go stale
        return f"its heartbeat is dated {ahead:.0f} s in the future"
    return None


def _describe(holder):
    if _malformed(holder) is not None:
        return "another process"
    seen = time.time() - holder["heartbeat"]
    return (f"pid {holder['pid']} on {holder['host']}, started "
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(holder['started']))}"
            + (f", last seen {seen:.0f} s ago" if seen >= HEARTBEAT_SECONDS else ""))


class _NoLease(ValueError):
    """The lock file is not a lease this library wrote; ``str()`` says why."""


def _read_lease(store):
    """The holder of the lease in the folder ``store`` (a dict), or None when there is none.

    Raises:
        _NoLease: the lock file is no lease (not JSON, fields of the wrong kind, a heartbeat
            dated far in the future, too large).
        OSError: it could not be read.
    """
    found = read_many([store.path(LOCK)], store.storage_options, max_bytes=LEASE_BYTES)[0]
    if isinstance(found, FileNotFoundError):
        return None
    if isinstance(found, FileRefused):
        raise _NoLease(f"larger than {LEASE_BYTES} bytes")
    if isinstance(found, Exception):
        raise found
    try:
        holder = json.loads(found)
    except ValueError:
        raise _NoLease("not JSON") from None
    problem = _malformed(holder)
    if problem is not None:
        raise _NoLease(problem)
    return holder


def _no_lease_error(store, problem):
    return OutputLockedError(store.url, problem, (
        f"{store.url}: its lock file {store.path(LOCK)} is not a tfrecorder_lite lease "
        f"({problem}); nothing was changed. If no conversion is writing this folder, delete "
        "that file and run again."))


@dataclass(frozen=True)
class Fence:
    """What a write needs to check that its conversion still holds the lease of its folder:
    the folder (a Store) and the lease's token. Picklable: tasks check it where they run."""

    store: Store
    token: str

    def check(self):
        """Return when the lease is still this conversion's and renewed lately.

        A lease not renewed for ``STALE_SECONDS - HEARTBEAT_SECONDS`` (its holder paused,
        or the store refusing its renewals) may soon be taken over: then this waits up to one
        beat for the holder's heartbeat (a process that just resumed renews it at once).

        Raises:
            OutputLockedError: another conversion holds the folder now, the lease was removed
                or is malformed, or it was not renewed in time.
        """
        deadline = None
        while True:
            try:
                holder = _read_lease(self.store)
            except _NoLease as exc:
                raise _no_lease_error(self.store, str(exc)) from None
            if holder is None or holder["token"] != self.token:
                raise lost_error(self.store, holder)
            age = time.time() - holder["heartbeat"]
            if age <= STALE_SECONDS - HEARTBEAT_SECONDS:
                return
            if deadline is None:
                deadline = time.monotonic() + HEARTBEAT_SECONDS
            elif time.monotonic() > deadline:
                raise OutputLockedError(self.store.url, _describe(holder), (
                    f"{self.store.url}: this conversion's lease was last renewed {age:.0f} s "
                    f"ago (it was paused, or the store refused its renewals); after "
                    f"{STALE_SECONDS:g} s another conversion may take the folder over, so this "
                    "one stopped and wrote nothing more. Run it again."))
            time.sleep(min(1.0, HEARTBEAT_SECONDS / 4))


def lost_error(store, holder):
    """The OutputLockedError of a conversion that finds the lease of ``store`` held by
    ``holder`` (None: removed) while it writes."""
    if holder is None:
        return OutputLockedError(store.url, "nobody: the lease was removed", (
            f"{store.url}: the lease of this conversion ({store.path(LOCK)}) was removed while "
            "it was writing (by hand, or by another conversion that took the folder over and "
            "finished); it stopped and wrote nothing more. Run it again."))
    who = _describe(holder)
    return OutputLockedError(store.url, who, (
        f"{store.url} was taken over by another conversion ({who}) while this one was "
        f"writing it (this one was paused, or could not renew its lease, for over "
        f"{STALE_SECONDS:g} s); this one stopped and wrote nothing more. The folder is the "
        "other conversion's now: run this one again when that one has finished."))


class FencedStore(Store):
    """A Store whose every write (a commit, a removal), and every write to its subfolders,
    first checks a Fence. Picklable like any Store."""

    @classmethod
    def around(cls, store, fence):
        """``store`` (a Store) fenced by ``fence``."""
        fenced = cls.__new__(cls)
        fenced.__dict__.update(store.__getstate__(), fence=fence)
        return fenced

    def child(self, name):
        return FencedStore.around(super().child(name), self.fence)

    def open_for_commit(self, name, *args, **kwargs):
        return _FencedFile(super().open_for_commit(name, *args, **kwargs), self.fence)

    def remove(self, name):
        self.fence.check()
        super().remove(name)


class _FencedFile:
    """A PendingFile whose commit first checks a Fence (and discards the file when it fails)."""

    def __init__(self, pending, fence):
        self._pending = pending
        self._fence = fence

    def __getattr__(self, name):
        return getattr(self._pending, name)

    def commit(self):
        try:
            self._fence.check()
        except BaseException:
            self._pending.discard()
            raise
        return self._pending.commit()


def _is_alive_here(holder):
    """False only when the holder is a process of this machine that no longer exists."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return True
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


class FolderLock:
    """The write lock of one output folder (a Store); use as a context manager.

    Attributes:
        store: what the conversion writes through: the folder's Store, fenced by the lease on
            an object store (see :class:`FencedStore`).

    Raises:
        OutputLockedError: on entry, when another conversion holds the folder (or its lock
            file is no lease); from :meth:`check`, when the lease was taken over.
    """

    def __init__(self, store):
        self._store = store
        self.store = store
        self._token = uuid.uuid4().hex
        self._fd = None
        self._stop = threading.Event()
        self._heartbeat = None
        self._lost = None  # the OutputLockedError of a renewal that found another holder

    def __enter__(self):
        self._store.make_dirs()
        if self._store.is_local and CAN_LOCK:  # else (Windows too) a lease
            self._flock()
        else:
            self._lease()
        return self

    def __exit__(self, *exc_info):
        self.release()

    def _error(self, holder):
        return OutputLockedError(self._store.url, _describe(holder))

    def check(self):
        """Raise OutputLockedError when a renewal found the lease taken over."""
        if self._lost is not None:
            raise self._lost

    # local disk

    def _flock(self):
        try:
            self._fd = lock_file(self._store.path(LOCK), json.dumps(_holder(self._token)).encode())
        except FileLocked as exc:
            try:
                holder = json.loads(exc.content)
            except ValueError:
                holder = None
            raise self._error(holder) from None

    # object stores

    def _lease(self):
        try:
            holder = _read_lease(self._store)
        except _NoLease as exc:
            raise _no_lease_error(self._store, str(exc)) from None
        except OSError as exc:  # credentials, access, no bucket: the write below meets it
            logger.debug("cannot read the lock of %s: %s", self._store.url, exc)
            holder = None  # (and says it in the store's own words); the read-back decides
        if holder is not None and self._holds(holder):
            raise self._error(holder)
        if holder is not None:
            logger.warning("taking over the stale lock of %s (%s); if that conversion is "
                           "still running, it stops when it sees this", self._store.url,
                           _describe(holder))
        try:
            self._store.write_atomic(LOCK, json.dumps(_holder(self._token)))
            failed = None
        except OSError as exc:  # e.g. another writer's lease landed meanwhile: read back
            failed = exc
        time.sleep(SETTLE_SECONDS)
        try:
            holder = _read_lease(self._store)
        except _NoLease as exc:
            raise _no_lease_error(self._store, str(exc)) from None
        except OSError:
            if failed is None:
                raise
            holder = None
        if holder is None and failed is not None:  # no lease of anyone's: the write's error
            raise failed  # (as the store raised it, with its cause: no such bucket, say)
        if holder is None or holder["token"] != self._token:
            raise self._error(holder)
        self.store = FencedStore.around(self._store, Fence(self._store, self._token))
        self._heartbeat = threading.Thread(target=self._renew, daemon=True,
                                           name="tfrecorder_lite-lock")
        self._heartbeat.start()

    @staticmethod
    def _holds(holder):
        """Whether the lease ``holder`` read from the store is still held."""
        fresh = time.time() - holder["heartbeat"] < STALE_SECONDS
        return fresh and _is_alive_here(holder)

    def _renew(self):
        """Rewrite the lease every beat while it is still this conversion's; stop the
        conversion (``check``) when it is not."""
        holder = _holder(self._token)
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                found = _read_lease(self._store)
                if found is None or found["token"] != self._token:
                    self._lost = lost_error(self._store, found)
                else:
                    holder["heartbeat"] = time.time()
                    self._store.write_atomic(LOCK, json.dumps(holder))
            except _NoLease as exc:
                self._lost = _no_lease_error(self._store, str(exc))
            except Exception as exc:  # the next beat tries again
                logger.warning("could not renew the lock of %s: %s", self._store.url, exc)
            if self._lost is not None:
                logger.warning("%s", self._lost)
                return

    def release(self):
        """Give the folder up (remove the lock file); safe to call twice."""
        if self._fd is not None:
            unlock_file(self._store.path(LOCK), self._fd)
            self._fd = None
        if self._heartbeat is not None:
            self._stop.set()
            self._heartbeat.join()
            self._heartbeat = None
            holder = self._store.read_json(LOCK)
            if isinstance(holder, dict) and holder.get("token") == self._token:
                self._store.remove(LOCK)
