"""One writer per output folder: a lock held for the whole of a conversion.

On a local disk the lock is ``flock`` on ``.tfrecorder_lite.lock`` in the output folder: exact,
and released by the kernel when its holder dies, however it dies, so a killed run never blocks
the next one. Object stores have no locks; there the lock file is a lease: its holder writes it,
waits a moment and reads it back (the last of two simultaneous writers wins, and the other
sees it), then rewrites it every ``HEARTBEAT_SECONDS``. A lease not renewed for
``STALE_SECONDS``, or held by a process of this machine that no longer exists, is stale and is
taken over.
"""

import json
import logging
import os
import socket
import threading
import time
import uuid

from ..errors import OutputLockedError
from ..storage.local import CAN_LOCK, FileLocked, lock_file, unlock_file
from .layout import LOCK

logger = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 20.0
STALE_SECONDS = 120.0
SETTLE_SECONDS = 0.5  # longer than one write takes to land: a simultaneous writer shows by then


def _holder(token):
    return {"pid": os.getpid(), "host": socket.gethostname(), "token": token,
            "started": time.time(), "heartbeat": time.time()}


def _describe(holder):
    if not isinstance(holder, dict):
        return "another process"
    seen = time.time() - holder.get("heartbeat", time.time())
    return (f"pid {holder.get('pid')} on {holder.get('host')}, started "
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(holder.get('started', 0)))}"
            + (f", last seen {seen:.0f} s ago" if seen >= HEARTBEAT_SECONDS else ""))


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

    Raises:
        OutputLockedError: on entry, when another conversion holds the folder.
    """

    def __init__(self, store):
        self._store = store
        self._token = uuid.uuid4().hex
        self._fd = None
        self._stop = threading.Event()
        self._heartbeat = None

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
        holder = self._store.read_json(LOCK)
        if holder is not None and self._holds(holder):
            raise self._error(holder)
        if holder is not None:
            logger.warning("taking over the stale lock of %s (%s)", self._store.url,
                           _describe(holder))
        self._store.write_atomic(LOCK, json.dumps(_holder(self._token)))
        time.sleep(SETTLE_SECONDS)
        holder = self._store.read_json(LOCK)
        if not isinstance(holder, dict) or holder.get("token") != self._token:
            raise self._error(holder)
        self._heartbeat = threading.Thread(target=self._renew, daemon=True,
                                           name="tfrecorder_lite-lock")
        self._heartbeat.start()

    @staticmethod
    def _holds(holder):
        """Whether the lease ``holder`` read from the store is still held."""
        if not isinstance(holder, dict):
            return False
        fresh = time.time() - holder.get("heartbeat", 0) < STALE_SECONDS
        return fresh and _is_alive_here(holder)

    def _renew(self):
        holder = _holder(self._token)
        while not self._stop.wait(HEARTBEAT_SECONDS):
            holder["heartbeat"] = time.time()
            try:
                self._store.write_atomic(LOCK, json.dumps(holder))
            except Exception as exc:  # the next beat tries again
                logger.warning("could not renew the lock of %s: %s", self._store.url, exc)

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
