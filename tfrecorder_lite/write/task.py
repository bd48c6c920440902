"""One shard = one task: read its images, write its file through the store, return a receipt.

:func:`write_shard` is a top-level, picklable joblib task with everything it needs in its
arguments (a ShardTask and a Store), so any joblib backend can run it: threads or processes on
this machine, or the workers of a dask cluster. Inside, chunks of rows are read (remote ones
concurrently) and prepared by the task's own threads, in order; a writing thread frames, hashes
and writes them. No TensorFlow, and no image bytes go back to the caller: only the receipt.
"""

import json
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .. import storage
from ..errors import row_repr
from ..images import content_hash
from ..images.normalize import (ImageOptions, ImageRejected, prepare_content, read_images,
                                unreadable_reason)
from ..output.layout import STATE_DIR, index_name, receipt_name
from ..output.manifest import IndexEntry, Receipt, ShardEntry
from ..output.record_hashes import RecordHashes
from ..record import encoding as example
from ..record.features import FeatureSet, RecordRejected
from ..formats import format_named
from ..memory import JoinedTexts
from ..near_duplicates import perceptual_hash
from ..near_duplicates.looks_file import LooksWriter
from ..record.framing import file_digest

_MAX_CHUNK = 64  # rows read and prepared together (bounds memory; one batch of requests)


class TaskRows:
    """A shard task's rows, kept as columns: ``len()``, and a slice gives the rows' tuples
    ``(table position, row label, path, values, files)``.

    A task waits in the driver with all its rows until a worker takes it (a few are made ahead
    and queued): kept as columns, its rows cost a fraction of what a tuple of Python objects
    a row costs.

    Args:
        positions: the rows' table positions.
        labels: their row labels, or None when each row's label is its position.
        paths: their image paths or URLs (None without images).
        values: their values (see ShardTask).
        files: their other files' paths (see ShardTask).
    """

    def __init__(self, positions, labels, paths, values, files):
        self._positions = np.asarray(positions, dtype=np.int64)
        self._labels = None if labels is None else list(labels)
        paths = list(paths)
        self._paths = paths if any(path is None for path in paths) else JoinedTexts(paths)
        self._values = list(values)
        self._files = list(files)

    def __len__(self):
        return len(self._positions)

    def __getitem__(self, rows):
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise TypeError("TaskRows are taken a slice at a time")
        start, stop, _ = rows.indices(len(self))
        stop = max(start, stop)
        positions = self._positions[start:stop].tolist()
        paths = self._paths[start:stop]
        labels = positions if self._labels is None else self._labels[start:stop]
        return list(zip(positions, labels, paths, self._values[start:stop],
                        self._files[start:stop]))

    def __iter__(self):
        return iter(self[:])

    def __eq__(self, other):
        return isinstance(other, TaskRows) and self[:] == other[:]

    def __repr__(self):
        return f"TaskRows({len(self)} rows)"


@dataclass(frozen=True)
class ShardTask:
    """Everything one worker needs to write one shard, and nothing more.

    Attributes:
        name: the shard's file name.
        rows: TaskRows (or a sequence of tuples): one per record, in writing order: (table
            position, row label, image path or URL (None without images), values (one per row
            feature of ``features``: each label field's (id, text), with tuples for
            multi-label; each extra column's value), files (the paths or URLs of the row's
            other files, one per ``file_columns``)).
        image: ImageOptions, or None for a table without images.
        compression: None, "GZIP" or "ZLIB".
        features: the FeatureSet of the records.
        sha256: also take the shard's sha256 (CRC32C is always taken).
        threads: threads that prepare this shard's images inside the task.
        file_columns: the columns of each row's other files (``rows``' last item).
        file_format: the name of the shard file's format (``formats.FORMATS``).
    """

    name: str
    rows: tuple
    image: ImageOptions
    compression: str
    features: FeatureSet
    sha256: bool = False
    threads: int = 1
    file_columns: tuple = ()
    file_format: str = "tfrecord"


def write_shard(task, store, on_error="raise"):
    """Write the shard of ``task`` into the ``store`` folder and leave its receipt there.

    Args:
        task: a ShardTask.
        store: the output folder (a Store; its storage options also serve the image URLs).
        on_error: "raise" at the first row that cannot be written, or "skip" it.

    Returns:
        The shard's Receipt: its ShardEntry, the rejected ``(position, reason)`` pairs, and the
        sizes, channels, formats and labels written. With ``on_error="raise"``, a row that
        cannot be written stops the task: nothing is left under the shard's name, and the
        receipt's ``failed`` holds the row's ``(position, reason)`` for the driver to raise
        (a plain value crosses every engine whole, where exceptions may not).

    Raises:
        MemoryError: naming the shard and the rows being prepared.
    """
    state = store.child(STATE_DIR)
    sink = ShardSink(store, task.name, task.compression, task.sha256, len(task.features.labels),
                     format_named(task.file_format),
                     looks=LooksWriter(state, task.name) if task.image and task.image.phash
                     else None)
    chunk = task.rows[:1]
    try:
        for chunk, prepared in prepared_chunks(task, store.storage_options):
            for (position, *_), (record, info) in zip(chunk, prepared):
                if record is None and on_error == "raise":
                    sink.abandon()
                    return Receipt(ShardEntry(task.name, 0, 0), failed=(position, info))
                sink.add(position, record, info)
            sink.flush()
        return sink.finish(state)
    except MemoryError:
        sink.abandon()
        rows = f"rows {row_repr(chunk[0][1])} to {row_repr(chunk[-1][1])}" if chunk else \
            "no row yet"
        raise MemoryError(f"{task.name}: out of memory while writing this shard ({rows} were "
                          "being prepared); write smaller shards (num_shards), or give the "
                          "workers more memory") from None
    except BaseException:
        sink.abandon()
        raise


def prepared_chunks(task, storage_options):
    """Yield ``(chunk of rows, prepared records)`` in order, prepared by ``task.threads``."""
    size = max(4, min(_MAX_CHUNK, len(task.rows) // (4 * task.threads) or 1))
    chunks = [task.rows[i:i + size] for i in range(0, len(task.rows), size)]
    arguments = (task.image, task.features, storage_options, task.file_columns)
    if task.threads <= 1:
        for chunk in chunks:
            yield chunk, prepare_records(chunk, *arguments)
        return
    with ThreadPoolExecutor(task.threads, thread_name_prefix="tfrecorder_lite-prep") as pool:
        pending = deque()
        for chunk in chunks:
            pending.append((chunk, pool.submit(prepare_records, chunk, *arguments)))
            if len(pending) > 2 * task.threads:  # bounds the images held in memory
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()


def prepare_records(rows, image_options, features, storage_options=None, file_columns=()):
    """Turn rows into serialized records.

    Every file of the chunk's rows (the image, and each of ``file_columns``) is read by one
    ``read_images`` call, with the same limits; a row whose other file cannot be read is
    rejected naming its column, and the others' bytes reach the features' ``encode``.

    Args:
        rows: ShardTask rows (position, row label, path, values, files).
        image_options: ImageOptions, or None for rows without images.
        features: the FeatureSet of the records.
        storage_options: fsspec options for remote image URLs.
        file_columns: the columns of each row's other files.

    Returns:
        One ``(record, info)`` per row: the record's chunks (see ``encode_example_chunks``)
        and ``(format, height, width, channels, what each label feature counts, hashes)``
        (hashes: the source file's ``image_options.content_hash``, the image's perceptual
        hashes as hex, its luminance grid and its mean chroma, when ``image_options.phash``,
        else None), or ``(None, reason)``.
    """
    kinds = features.kinds()
    labels = features.labels
    out = []
    count = len(file_columns)
    paths = [path for row in rows for path in
             ((row[2],) if image_options is not None else ()) + row[4]]
    read = iter(read_images(paths, image_options or ImageOptions(), storage_options)
                if paths else ())
    for _, _, path, values, files in rows:
        content = next(read) if image_options is not None else None
        files = tuple(next(read) for _ in range(count))
        unreadable = next(((column, c) for column, c in zip(file_columns, files)
                           if isinstance(c, Exception)), None)
        if unreadable is not None:
            out.append((None, f"{unreadable[0]}: {unreadable_reason(unreadable[1])}"))
            continue
        image, info, hashes = None, (None, 0, 0, 0), None
        if image_options is not None:
            try:
                stored = prepare_content(content, image_options)
            except ImageRejected as exc:
                out.append((None, str(exc)))
                continue
            image = (stored, storage.basename(path))
            info = (stored.format, stored.height, stored.width, stored.channels)
            if image_options.phash:
                hashes = (content_hash.hexdigest(image_options.content_hash, content),
                          stored.luminance, stored.chroma)
        try:
            record = features.encode(image, values, files)
        except RecordRejected as exc:
            out.append((None, str(exc)))
            continue
        info += (tuple(label.counted(record) for label in labels), hashes)  # counts: see counted
        out.append((example.encode_example_chunks(record, kinds), info))
    return _hashed(out) if image_options is not None and image_options.phash else out


def _hashed(prepared):
    """``prepared`` with each record's perceptual hashes (as hex, hashed all at once) beside
    its luminance grid and mean chroma."""
    grids = [info[-1][1] for record, info in prepared
             if record is not None and info[-1][1] is not None]
    texts = iter(perceptual_hash.to_hex_rows(perceptual_hash.hash_grids(grids)))
    out = []
    for record, info in prepared:
        if record is not None:
            digest, grid, chroma = info[-1]
            info = info[:-1] + ((digest, None if grid is None else next(texts), grid, chroma),)
        out.append((record, info))
    return out


class ShardSink:
    """Collects one shard: the record file being written and what went into it; on finishing,
    the shard's index file (``<offset> <length>`` per record, for PyTorch and DALI readers) too.

    Framing, CRCs, the file's checksums and the writes run on one background thread per shard,
    a batch at a time, in the order the records were added.
    """

    _MAX_PENDING_BATCHES = 4  # bounds the records held in memory while the thread catches up

    def __init__(self, store, name, compression, sha256=False, label_fields=1,
                 file_format=format_named(None), looks=None):
        self.name = name
        self._looks = looks  # a LooksWriter of the records' grids and chroma, or None
        self._store = store
        self._format = file_format
        self._file = store.open_for_commit(name)
        self.writer = file_format.writer(self._file, compression, sha256)
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tfrecorder_lite-io")
        self._batch, self._pending, self._failed = [], deque(), False
        self.rejected = []
        self.sizes, self.channels, self.formats = set(), set(), Counter()
        self.labels = [Counter() for _ in range(label_fields)]  # label id -> records, per field
        self.max_size = [0, 0]
        self.hashes = []  # (position, content hash, perceptual hash, format, height, width,
        #                  channels)

    def add(self, position, record, info):
        """Add one prepared row: its record and info, or None and the rejection reason."""
        if record is None:
            self.rejected.append((position, info))
            return
        self._batch.append(record)
        fmt, height, width, channels, label_ids, hashes = info
        if hashes is not None:  # (content hash, perceptual hashes[, grid, chroma])
            self.hashes.append((position, *hashes[:2], fmt, height, width, channels))
            if self._looks is not None:
                self._looks.add(*hashes[2:])
        for counts, ids in zip(self.labels, label_ids):  # an id, ids, or id -> amount
            counts.update(ids if isinstance(ids, (tuple, list, dict)) else (ids,))
        if fmt is None:  # a record without an image
            return
        self.formats[fmt] += 1
        if len(self.sizes) < 2:
            self.sizes.add((height, width))
        self.max_size = [max(self.max_size[0], height), max(self.max_size[1], width)]
        self.channels.add(channels)

    def flush(self):
        """Hand the records added so far to the writing thread."""
        if self._batch:
            self._pending.append(self._io.submit(self._write, self._batch))
            self._batch = []
        if self._looks is not None:
            self._looks.flush()
        while self._pending and (self._pending[0].done() or
                                 len(self._pending) > self._MAX_PENDING_BATCHES):
            self._pending.popleft().result()  # re-raises a write error here

    def _write(self, records):
        if self._failed:  # the shard is lost already: write nothing more
            return
        try:
            self.writer.write_many(records)
        except BaseException:
            self._failed = True
            raise

    def finish(self, state):
        """Close, move into place and leave a receipt in the ``state`` Store; returns it."""
        self.flush()
        while self._pending:
            self._pending.popleft().result()
        self._io.shutdown()
        checksums = self.writer.close()
        self._file.commit()
        index = self._format.index_text(self.writer.record_sizes).encode()
        self._store.write_atomic(index_name(self.name), index)
        if self._looks is not None:  # before the receipt, which says the shard is done
            self._looks.commit(checksums["crc32c"])
        shard = ShardEntry(self.name, self.writer.num_records, self.writer.bytes_written,
                           checksums["crc32c"], checksums.get("sha256"),
                           IndexEntry(index_name(self.name), len(index),
                                      file_digest(index)["crc32c"]))
        receipt = Receipt(
            shard, tuple(self.rejected), tuple(sorted(self.sizes)), tuple(self.max_size),
            tuple(sorted(self.channels)), dict(self.formats),
            tuple({str(k): v for k, v in sorted(counts.items())} for counts in self.labels),
            hashes=RecordHashes(self.hashes))
        state.write_atomic(receipt_name(self.name), json.dumps(receipt.to_json()))
        return receipt

    def abandon(self):
        """Stop writing and leave nothing under the shard's name."""
        self._io.shutdown(wait=True, cancel_futures=True)
        self._file.discard()
        if self._looks is not None:
            self._looks.discard()
