"""Remote shards read by blocks: ranged reads of whole blocks, many in flight at once, fetched
ahead of the reader when it says what comes next, kept in a bounded memory cache and, with a
:class:`~tfrecorder_lite.read.shard_cache.ShardCache`, written into whole local copies that
later reads (and other processes) use instead of the store.

A store answers each request after a latency of tens of milliseconds and serves each
connection at a limited rate: throughput comes from requests in flight, so every block is a
request of its own, and :meth:`RemoteBlocks.prefetch` keeps up to ``readahead`` bytes of
blocks on their way while the reader works on the blocks it has. The first records a reader
will want (:meth:`RemoteBlocks.fetch_first`) are fetched as their own bytes, in pieces of at
most :data:`FIRST_PIECE` bytes, each a request: a whole block takes several times a record's
transfer time on a connection of limited rate, and the first batch waits for all of them.
"""

import collections
import os
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor

from .. import redaction
from ..errors import VerifyError
from .shard_cache import copy_name

logger = redaction.logger(__name__)  # every record redacted

_PREFETCH_THREADS = 2  # for stores without an event loop (and local copies' writes)
_RECHECK_SECONDS = 1.0  # how often a copy another process is filling is looked for
FIRST_PIECE = 256 << 10  # bytes of each request for the first records (fetch_first)


class RemoteBlocks:
    """Byte ranges of a split's remote shards, read through blocks of ``block_size`` bytes.

    Picklable: a worker process keeps its own memory cache and shares the cache folder.

    Args:
        store: the output's Store.
        shards: the split's ShardEntry list.
        block_size: bytes of each ranged read.
        memory_bytes: at most this many bytes of blocks are kept in memory.
        readahead: at most this many bytes of blocks are fetched ahead of the reader.
        cache: a ShardCache for local copies, or None.
    """

    def __init__(self, store, shards, block_size, memory_bytes, readahead, cache=None):
        self._store, self._shards, self._size = store, tuple(shards), block_size
        self._memory, self._readahead, self._cache = memory_bytes, readahead, cache
        self._setup()

    def _setup(self):
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._blocks = collections.OrderedDict()  # (shard, block) -> bytes, oldest first
        self._cached = 0
        self._fetching = {}  # (shard, block) -> Event set once its fetch has ended
        self._ahead = 0  # blocks being prefetched
        self._pool = None
        self._names = [copy_name(self._store, s) for s in self._shards] if self._cache else []
        self._local = {}  # shard -> open file of its finished local copy
        self._partials = {}  # shard -> PartialCopy being filled, or the time to look again
        self._first = {}  # (shard, start, end) -> futures of its pieces (fetch_first)
        self._finalizer = weakref.finalize(self, _close, self._local, self._partials)

    def __getstate__(self):
        return {k: getattr(self, k) for k in ("_store", "_shards", "_size", "_memory",
                                               "_readahead", "_cache")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._setup()

    def _this_process(self):
        if os.getpid() != self._pid:  # forked: threads, locks and files stay behind
            self._setup()

    @property
    def keeps_copies(self):
        """Whether fetched blocks are also written into local copies of their shards."""
        return self._cache is not None

    # reading

    def read(self, spans):
        """The bytes of ``spans`` (``(shard, start, end)`` triples, ``end`` excluded): a
        ``bytes`` each, or the exception its read raised (a VerifyError for a shard shorter
        than metadata.json says)."""
        self._this_process()
        out = [None] * len(spans)
        remote = []
        for i, (shard, start, end) in enumerate(spans):
            local = self._local_copy(shard)
            if local is None:
                remote.append(i)
                continue
            data = os.pread(local.fileno(), end - start, start)
            out[i] = data if len(data) == end - start else self._short(shard, start + len(data))
        if self._first and remote:
            remote = [i for i in remote if not self._take_first(spans[i], out, i)]
        if remote:
            found = self._read_blocks([spans[i] for i in remote])
            for i, data in zip(remote, found):
                out[i] = data
        return out

    def fetch_first(self, spans, max_bytes):
        """Start fetching the bytes of ``spans`` (the first records a reader will read), each
        in pieces of its own requests, up to ``max_bytes`` in all; returns at once. A span is
        handed to the first :meth:`read` that asks for it, then forgotten. Nothing is done
        for a store without an event loop, or spans of local copies."""
        self._this_process()
        if not self._store.reads_soon:
            return
        budget = max_bytes
        for span in spans:
            shard, start, end = span
            if budget < end - start:
                break
            if self._local_copy(shard) is not None:  # read from the disk
                continue
            with self._lock:
                if span in self._first:
                    continue
                self._first[span] = [
                    self._store.read_range_soon(self._shards[shard].name, a,
                                                min(a + FIRST_PIECE, end))
                    for a in range(start, end, FIRST_PIECE)]
            budget -= end - start

    def _take_first(self, span, out, i):
        """Put the bytes of ``span`` fetched by :meth:`fetch_first` in ``out[i]``; False when
        it was not fetched so, or its fetch failed (then it is read as any other)."""
        with self._lock:
            pieces = self._first.pop(span, None)
        if pieces is None:
            return False
        try:
            data = b"".join(piece.result() for piece in pieces)
        except Exception as exc:  # read again the usual way, which says what failed
            logger.debug("a first record's read failed: %s", exc)
            return False
        if len(data) != span[2] - span[1]:
            return False
        out[i] = data
        return True

    def prefetch(self, spans):
        """Start fetching the blocks of ``spans`` that are neither kept nor on their way, in
        the background, up to the readahead budget; returns at once."""
        self._this_process()
        size, budget = self._size, max(1, self._readahead // self._size)
        local = {shard for shard in {s for s, _, _ in spans}
                 if self._local_copy(shard) is not None}
        with self._lock:
            keys = []
            for shard, start, end in spans:
                if shard in local:
                    continue
                for block in range(start // size, (end - 1) // size + 1):
                    key = (shard, block)
                    if key in self._blocks or key in self._fetching or key in keys:
                        continue
                    if self._ahead + len(keys) >= budget:
                        break
                    keys.append(key)
            for key in keys:
                self._fetching[key] = threading.Event()
            self._ahead += len(keys)
            if not keys:
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(_PREFETCH_THREADS,
                                                thread_name_prefix="tfrecorder_lite-prefetch")
        if not self._store.reads_soon:  # no event loop to read on: threads wait for them
            self._pool.submit(self._prefetch, keys)
            return
        for key in keys:  # each its own request, answered as it comes
            shard, block = key
            start, end = block * size, min((block + 1) * size, self._shards[shard].bytes)
            future = self._store.read_range_soon(self._shards[shard].name, start, end)
            future.add_done_callback(lambda done, key=key, n=end - start:
                                     self._arrived(key, n, done))

    def _prefetch(self, keys):
        try:
            self._fetch(keys, {}, {})
        finally:
            with self._lock:
                self._ahead -= len(keys)
                for key in keys:
                    self._fetching.pop(key).set()

    def _arrived(self, key, size, done):
        """A prefetched block's read has ended (on the filesystem's event loop): keep the
        block, hand its local copy's write to a thread, and wake who awaits it."""
        data = None if done.cancelled() or done.exception() else done.result()
        try:
            if data is not None and len(data) == size:
                self._remember({key: data})
                if self._cache is not None:
                    self._pool.submit(self._keep, key[0], key[1] * self._size, data)
        finally:
            with self._lock:
                self._ahead -= 1
                self._fetching.pop(key).set()

    def _read_blocks(self, spans):
        """Spans of shards without a local copy, from kept blocks. A span whose blocks are
        neither kept nor on their way is read by a ranged read of its own bytes (a record
        is much smaller than a block: the reader need not wait for whole blocks), while its
        blocks are fetched in the background for the records around it; a block another
        thread is fetching already is awaited, not fetched again."""
        size = self._size
        blocks_of = [range(start // size, (end - 1) // size + 1) for _, start, end in spans]
        with self._lock:
            missing = [i for i, (span, blocks) in enumerate(zip(spans, blocks_of))
                       if any((span[0], b) not in self._blocks and
                              (span[0], b) not in self._fetching for b in blocks)]
        exact = self._read_exact([spans[i] for i in missing]) if missing else []
        if missing:
            self.prefetch([spans[i] for i in missing])
        out = [None] * len(spans)
        for i, data in zip(missing, exact):
            out[i] = data
        rest = [i for i in range(len(spans)) if out[i] is None]
        for i, data in zip(rest, self._from_blocks([spans[i] for i in rest])):
            out[i] = data
        return out

    def _read_exact(self, spans):
        """The bytes of ``spans`` by ranged reads of their own (adjacent spans of a shard in
        one read of at most a block, so that none waits on one long transfer)."""
        runs = []  # [shard, start, end, [span indexes]]
        for i in sorted(range(len(spans)), key=lambda i: spans[i]):
            shard, start, end = spans[i]
            if runs and runs[-1][0] == shard and runs[-1][2] == start and \
                    end - runs[-1][1] <= self._size:
                runs[-1][2] = end
                runs[-1][3].append(i)
            else:
                runs.append([shard, start, end, [i]])
        found = self._store.read_ranges([(self._shards[shard].name, start, end)
                                         for shard, start, end, _ in runs])
        out = [None] * len(spans)
        for (shard, start, end, members), data in zip(runs, found):
            if not isinstance(data, Exception) and len(data) != end - start:
                data = self._short(shard, start + len(data))
            for i in members:
                out[i] = data if isinstance(data, Exception) else \
                    data[spans[i][1] - start:spans[i][2] - start]
        return out

    def _from_blocks(self, spans):
        """Spans whose blocks are kept or on their way (fetched here if evicted since)."""
        if not spans:
            return []
        size = self._size
        wanted = sorted({(s, b) for s, start, end in spans
                         for b in range(start // size, (end - 1) // size + 1)})
        with self._lock:
            have = {key: self._blocks[key] for key in wanted if key in self._blocks}
            for key in have:
                self._blocks.move_to_end(key)
            awaited = {key: self._fetching[key] for key in wanted
                       if key not in have and key in self._fetching}
            mine = [key for key in wanted if key not in have and key not in awaited]
            for key in mine:
                self._fetching[key] = threading.Event()
        errors = {}
        try:
            self._fetch(mine, have, errors)
        finally:
            with self._lock:
                for key in mine:
                    self._fetching.pop(key).set()
        for done in awaited.values():
            done.wait()
        with self._lock:  # what the other threads fetched (unless already evicted)
            have.update({key: self._blocks[key] for key in awaited if key in self._blocks})
        again = [key for key in awaited if key not in have]
        if again:  # failed or evicted: fetch them here
            self._fetch(again, have, errors)
        out = []
        for shard, start, end in spans:
            blocks = range(start // size, (end - 1) // size + 1)
            error = next((errors[(shard, b)] for b in blocks if (shard, b) in errors), None)
            if error is not None:
                out.append(error)
                continue
            # only the span's own bytes are copied, never whole blocks
            out.append(b"".join(
                memoryview(have[(shard, b)])[max(start - b * size, 0):end - b * size]
                for b in blocks))
        return out

    def _fetch(self, keys, have, errors):
        """Fetch the blocks ``keys`` into ``have``, the memory cache and the local copies;
        failures go to ``errors``."""
        if not keys:
            return
        size, shards = self._size, self._shards
        ranges = [(shards[s].name, b * size, min((b + 1) * size, shards[s].bytes))
                  for s, b in keys]
        found = self._store.read_ranges(ranges)
        fetched = {}
        for key, (_, start, end), data in zip(keys, ranges, found):
            if not isinstance(data, Exception) and len(data) != end - start:
                data = self._short(key[0], start + len(data))
            if isinstance(data, Exception):
                errors[key] = data
            else:
                fetched[key] = data
        have.update(fetched)
        self._remember(fetched)
        if self._cache is not None:
            for (shard, block), data in fetched.items():
                self._keep(shard, block * size, data)

    def _remember(self, blocks):
        with self._lock:
            for key, data in blocks.items():
                if key not in self._blocks:
                    self._blocks[key] = data
                    self._cached += len(data)
            while self._cached > self._memory and self._blocks:
                self._cached -= len(self._blocks.popitem(last=False)[1])

    def _short(self, shard, end):
        entry = self._shards[shard]
        return VerifyError(f"{self._store.path(entry.name)}: ends at byte {end}, metadata.json "
                           f"says it holds {entry.bytes} bytes (truncated or replaced since "
                           f"it was written); run tfrecorder-lite verify {self._store.url}")

    # local copies

    def _local_copy(self, shard):
        """The open file of the shard's finished local copy, or None."""
        if self._cache is None:
            return None
        local = self._local.get(shard)
        if local is not None:
            return local
        waiting = self._partials.get(shard)
        if isinstance(waiting, float) and time.monotonic() < waiting:
            return None
        if waiting is None or isinstance(waiting, float):
            path = self._cache.copy_of(self._names[shard], self._shards[shard])
            if path is not None:
                return self._open_local(shard, path)
        return None

    def _open_local(self, shard, path):
        with self._lock:
            if shard not in self._local:
                self._local[shard] = open(path, "rb")
            return self._local[shard]

    def _keep(self, shard, offset, data):
        """Write a fetched block into the shard's local copy, begun on its first block."""
        with self._lock:
            copy = self._partials.get(shard)
            if copy is None or (isinstance(copy, float) and time.monotonic() >= copy):
                copy = self._cache.begin(self._names[shard], self._shards[shard],
                                         self._store.path(self._shards[shard].name))
                self._partials[shard] = copy or time.monotonic() + _RECHECK_SECONDS
        if copy is None or isinstance(copy, float) or copy.done:
            return
        try:
            path = copy.write(offset, data)
        except VerifyError as exc:  # the copy is dropped; each record's CRC is still checked
            logger.warning("%s", exc)
            return
        if path is not None:
            self._open_local(shard, path)


def _close(local, partials):
    """Close the local copies and delete the copies left unfinished."""
    for f in local.values():
        f.close()
    for copy in partials.values():
        if not isinstance(copy, float) and copy is not None and not copy.done:
            copy.abandon()
