"""Random access to a split's records by index: ``len(src)``, ``src[i]``, in manifest order.

Record ``i`` of a split is found through the ``.tfindex`` file beside each shard (the offset
and length of every record): shard 0's records come first, then shard 1's, and so on, as
metadata.json lists the shards. Local shards are read with positioned reads; remote ones
(``gs://``, ``s3://``, ``http(s)://``, any fsspec URL) with ranged reads of whole blocks, all the
blocks a batch of records needs fetched at once, and kept in a bounded cache. Each record's
framing (its length and both CRCs) is checked when it is read, so a wrong offset is an error,
never a wrong record.

A :class:`DataSource` is what Grain calls a random-access data source and PyTorch a map-style
dataset: it pickles (to worker processes), its ``__repr__`` is stable and free of secrets, and
it is safe to share between threads. It needs no TensorFlow: the Example is parsed in Python
and the image decoded (on request) by Pillow.
"""

import functools
import operator
import os
import struct
import threading
from concurrent.futures import Future

import numpy as np

from ..errors import SchemaError, TFRecorderError, VerifyError
from ..output.layout import index_name
from ..output.manifest import as_of, read_manifest, split_shards
from ..record.encoding import decode_example
from ..record.kinds import features_of
from ..formats.tfrecord import TFRECORD
from ..record.framing import RecordError, file_digest, masked_crc
from ..record.keys import BYTES, ENCODED, FLOAT, INT64
from .. import redaction
from ..images import resize
from ..redaction import redact
from ..output.splits import pick
from ..storage import Store, read_many
from .remote_blocks import RemoteBlocks
from .shard_cache import ShardCache, byte_count

logger = redaction.logger(__name__)  # every record redacted

_FRAME = 16  # length (8), its CRC (4), the data's CRC (4)
_CHECK_STARTING = threading.RLock()  # one check of metadata.json begun at a time
_DTYPES = {INT64: np.int64, FLOAT: np.float32}
DEFAULT_BLOCK_SIZE = 1 << 20
DEFAULT_CACHE_BYTES = 256 << 20
DEFAULT_READAHEAD = 64 << 20


def data_source(output_dir, split, *, storage_options=None, decode_image=False, channels=3,
                image_size=None, block_size=DEFAULT_BLOCK_SIZE, cache_bytes=DEFAULT_CACHE_BYTES,
                generation=None, cache_dir=None, cache_limit=None):
    """Random access to the records of one split of an output, in manifest order.

    Args:
        output_dir: a folder written by ``to_tfrecord`` / ``convert``: a local path or any
            fsspec URL.
        split: "TRAIN", "VALIDATION" or "TEST" (case-insensitive).
        storage_options: fsspec options for a remote ``output_dir``.
        decode_image: add ``"image"``, the decoded uint8 ``[height, width, channels]`` array.
        channels: channels of the decoded image (3: RGB, 1: grayscale).
        image_size: ``(height, width)`` (or an int, a square) to resize the decoded image to,
            as ``load(image_size=...)`` does: a JPEG decoded at 1/2, 1/4 or 1/8 scale where
            that still covers the size, then bilinear without antialiasing, uint8 (the pixels
            ``load()`` gives). Needs ``decode_image=True``.
        block_size: bytes of each ranged read of a remote shard (records are read in whole
            blocks, and a record larger than a block in several); an int, or text such as
            ``"4MiB"``, as ``cache_bytes``.
        cache_bytes: at most this many bytes of remote blocks are kept in memory, per
            process.
        generation: the split's records as the output held them after this generation (0:
            the first conversion; None: all of them, every generation's shards in order).
        cache_dir: a local folder where the remote shards read are also kept, whole, for
            later reads and other processes (None: none, unless ``cache_limit`` is given:
            then ``~/.cache/tfrecorder_lite``).
        cache_limit: at most this many bytes in ``cache_dir`` (an int, or text such as
            ``"20GB"``); None: every shard read is kept.

    Returns:
        A :class:`DataSource`: ``src[i]`` is a dict record key -> value (numpy arrays and
        scalars, ``bytes`` for byte strings).

    Raises:
        ManifestError: no finished output in ``output_dir``, or no such generation.
        SchemaError: an unknown split, a compressed output (offsets into a GZIP or ZLIB
            stream cannot be read at random), or an ``image_size`` that cannot apply.
    """
    from ..options import image_size as parse_size  # not at import: it imports pandas

    if channels not in (1, 3):
        raise SchemaError(f"channels must be one of (1, 3), not {channels!r}")
    image_size = parse_size(image_size)
    if image_size is not None and not decode_image:
        raise SchemaError("image_size resizes the decoded image: pass decode_image=True too")
    block_size = byte_count(block_size, "block_size")  # ints, numpy ints, or "1MiB"
    cache_bytes = byte_count(cache_bytes, "cache_bytes")
    store = Store(output_dir, storage_options)
    cache = shard_cache_of(store, cache_dir, cache_limit)
    manifest = as_of(read_manifest(store)[0], generation, strict=False)
    split = pick(split, manifest.splits)
    if image_size is not None and manifest.image is None:
        raise SchemaError(f"{redact(store.url)} holds no images, so image_size does not apply")
    check_uncompressed(store, manifest)
    return DataSource(store, split, split_shards(manifest, split, generation),
                      value_specs(manifest),
                      decode_image and manifest.image is not None, channels, block_size,
                      cache_bytes, image_size, cache=cache, generation=generation)


def shard_cache_of(store, cache_dir=None, cache_limit=None):
    """The ShardCache of ``cache_dir`` and ``cache_limit`` for a remote ``store``, or None
    (a local output, or neither given)."""
    if cache_dir is None and cache_limit is None:
        return None
    cache = ShardCache(cache_dir, cache_limit)  # SchemaError: not local, a bad limit
    return None if store.is_local else cache


def check_uncompressed(store, manifest, what="data_source()"):
    """Raise SchemaError when the output's shards cannot be read by offset: compressed, or of
    a format other than TFRecord (whose framing this module checks)."""
    if manifest.format is not TFRECORD:
        raise SchemaError(f"{store.url} is written in format {manifest.format.name!r}: {what} "
                          f"reads {TFRECORD.name} shards by offset only")
    if manifest.compression:
        raise SchemaError(
            f"{store.url} is written with compression={manifest.compression!r}: records of a "
            f"{manifest.compression} stream cannot be read by offset, so {what} cannot read "
            "it. Convert the table again without compression (the default), or load it with "
            "load(shuffle=True)")


def value_specs(manifest):
    """Record key -> ``(kind, shape)`` of every feature of the output."""
    features = features_of(manifest).describe()
    return {key: (spec["dtype"], tuple(spec["shape"])) for key, spec in features.items()}


class DataSource:
    """The records of one split, by index (see :func:`data_source`).

    Attributes:
        split: the split's name.
        num_records: its records (``len()``).
    """

    def __init__(self, store, split, shards, specs, decode_image=False, channels=3,
                 block_size=DEFAULT_BLOCK_SIZE, cache_bytes=DEFAULT_CACHE_BYTES,
                 image_size=None, cache=None, generation=None):
        self._store, self.split, self._shards = store, split, tuple(shards)
        self._specs, self._decode_image, self._channels = specs, decode_image, channels
        self._image_size, self._generation = image_size, generation
        self._first = np.cumsum([0] + [s.num_examples for s in self._shards])
        self.num_records = int(self._first[-1])
        self._blocks = None if store.is_local else RemoteBlocks(
            store, self._shards, block_size, cache_bytes,
            min(DEFAULT_READAHEAD, cache_bytes // 2), cache)
        self._seen = None  # this process: the shard files' (inode, size, mtime) once checked
        self._checking = None  # this process: the Future of its check of metadata.json

    def __getstate__(self):  # the index goes along; what this process saw of the files not
        return {k: v for k, v in self.__dict__.items() if k not in ("_seen", "_checking")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._seen = self._checking = None

    def __repr__(self):
        return (f"DataSource({redact(self._store.url)!r}, split={self.split!r}, "
                f"records={self.num_records}, decode_image={self._decode_image})")

    def __len__(self):
        return self.num_records

    @property
    def is_local(self):
        """True when the shards are on the local disk."""
        return self._store.is_local

    def __getitem__(self, index):
        return self.read([index])[0]

    def __getitems__(self, indices):
        """Several records at once (PyTorch's batched fetch): one read for all of them."""
        return self.read(indices)

    _getitems = __getitems__  # Grain's name for it

    def read(self, indices):
        """The records at ``indices`` (a sequence of ints), as a list of dicts.

        Raises:
            TypeError: an index that is not an int.
            IndexError: an index outside ``[0, len(self))``.
            VerifyError: a damaged index file or record (the message names the file).
        """
        return [self._parse(data) for data in self.read_serialized(indices)]

    def read_serialized(self, indices):
        """The serialized ``tf.train.Example`` of each record at ``indices`` (framing checked)."""
        indices = np.array([self._checked(i) for i in indices], dtype=np.int64)
        if not len(indices):
            return []
        checking = None
        if self._seen is None:  # once in each process: the output is still the one opened
            checking = self._manifest_checked()
        try:
            spans = self._spans(indices)
            if self._store.is_local:
                if checking is not None:
                    checking.result()
                self._check_files({s for s, _, _ in spans})
                found = self._store.read_ranges([(self._shards[s].name, start, end)
                                                 for s, start, end in spans])
            else:
                found = self._blocks.read(spans)
                if checking is not None:  # the store's answer came while the records did
                    checking.result()
            return [self._unframe(data, shard, int(i - self._first[shard]))
                    for data, (shard, _, _), i in zip(found, spans, indices)]
        except VerifyError:
            self._check_manifest()  # a rewritten output is said to be one
            raise

    def prefetch(self, indices):
        """Start fetching the remote blocks of the records at ``indices`` (the reader's next
        ones), in the background; returns at once. Nothing to do for local shards."""
        if self._blocks is not None and len(indices):
            self._blocks.prefetch(self._spans(np.asarray(indices, dtype=np.int64)))

    def fetch_first(self, indices, max_bytes=DEFAULT_READAHEAD):
        """Start fetching the records at ``indices`` (the first a reader will read, up to
        ``max_bytes`` of them) as their own bytes, and this process's check of
        metadata.json (with a cache folder, also the blocks that hold the records, which
        their shards' copies need), in the background; returns at once. Nothing to do for
        local shards."""
        if self._blocks is not None and len(indices):
            spans = self._spans(np.asarray(indices, dtype=np.int64))
            self._blocks.fetch_first(spans, max_bytes)
            if self._seen is None:  # its answer comes beside theirs
                self._manifest_checked()
            if self._blocks.keeps_copies:  # their blocks too: a shard's copy needs them all
                self._blocks.prefetch(spans)

    def _spans(self, indices):
        """``(shard, start, end)`` of the framed record at each index (ints in range)."""
        offsets, lengths = self._index
        shards = np.searchsorted(self._first, indices, side="right") - 1
        starts = offsets[indices]
        ends = starts + lengths[indices]
        return [(int(s), int(a), int(b)) for s, a, b in zip(shards, starts, ends)]

    # the output changing under the reader

    def _manifest_checked(self):
        """The Future of this process's one check of metadata.json (:meth:`_check_manifest`),
        begun by the first read (or :meth:`fetch_first`) that asks: on a remote store, in a
        thread, so that its request waits on the store beside the first records' reads."""
        with _CHECK_STARTING:
            if self._checking is None:
                self._checking = Future()
                if self._store.is_local:
                    self._run_check()
                else:
                    threading.Thread(target=self._run_check, daemon=True,
                                     name="tfrecorder_lite-manifest-check").start()
            return self._checking

    def _run_check(self):
        checking = self._checking
        try:
            self._check_manifest()
        except BaseException as exc:  # raised by the reads awaiting it; the next read asks again
            with _CHECK_STARTING:
                self._checking = None
            checking.set_exception(exc)
        else:
            self._seen = self._seen if self._seen is not None else {}
            checking.set_result(None)

    def _check_files(self, shards):
        """Refuse to read local shard files rewritten since this process first read them:
        metadata.json is read again whenever one of ``shards`` is no longer the file seen."""
        for shard in shards:
            try:
                info = os.stat(self._store.path(self._shards[shard].name))
                now = (info.st_ino, info.st_size, info.st_mtime_ns)
            except OSError:
                now = None
            before = self._seen.setdefault(shard, now)
            if now != before:
                self._check_manifest()
                self._seen[shard] = now

    def _check_manifest(self):
        """Raise VerifyError when metadata.json no longer lists this source's shards as they
        were when it was opened (the output was rewritten, or the split appended to)."""
        try:
            manifest = read_manifest(self._store)[0]
            now = split_shards(as_of(manifest, self._generation, strict=False), self.split,
                               self._generation)
        except TFRecorderError as exc:
            raise VerifyError(f"{redact(self._store.url)}: the output this data source was "
                              f"opened on has changed ({exc}); open it again") from None
        before = [(s.name, s.bytes, s.crc32c, s.num_examples) for s in self._shards]
        after = [(s.name, s.bytes, s.crc32c, s.num_examples) for s in now]
        if before != after:
            raise VerifyError(
                f"{redact(self._store.url)}: the output was rewritten after this data source "
                f"was opened (metadata.json now lists other {self.split} shards: "
                f"{sum(s.num_examples for s in now)} records, was {self.num_records}); open "
                "it again with data_source() (or load())")

    def _checked(self, index):
        if isinstance(index, (bool, np.bool_)):
            raise TypeError(f"a record index is an int, not {index!r}")
        try:
            index = operator.index(index)
        except TypeError:
            raise TypeError(f"a record index is an int, not {index!r}") from None
        if not 0 <= index < self.num_records:
            raise IndexError(f"record {index} of split {self.split}: the split holds "
                             f"{self.num_records} records (0 to {self.num_records - 1})")
        return index

    # reading

    def _unframe(self, data, shard, record):
        """The payload of one framed record read at its index's offset, checked."""
        name = self._shards[shard].name
        if isinstance(data, VerifyError):
            raise data
        if isinstance(data, Exception):
            raise VerifyError(f"{self._store.path(name)}: record {record} could not be read "
                              f"({data})") from data
        problem, payload = None, data[12:-4]  # sliced once: a record's bytes copied once
        length = data[:8]
        if len(data) < _FRAME:
            problem = (f"the file ends {len(data)} bytes into the record (truncated since it "
                       "was written)")
        elif struct.unpack("<I", data[8:12])[0] != masked_crc(length):
            problem = "length CRC mismatch: the index points at no record start"
        elif struct.unpack("<Q", length)[0] != len(data) - _FRAME:
            problem = (f"the record holds {struct.unpack('<Q', length)[0]} bytes, the index "
                       f"says {len(data) - _FRAME}")
        elif struct.unpack("<I", data[-4:])[0] != masked_crc(payload):
            problem = "data CRC mismatch (corrupted record)"
        if problem:
            raise VerifyError(f"{self._store.path(name)}: record {record} (read through "
                              f"{index_name(name)}): {problem}; run tfrecorder-lite verify "
                              f"{self._store.url}")
        return payload

    # parsing

    def _parse(self, payload):
        try:
            found = decode_example(payload)
        except ValueError as exc:
            raise VerifyError(f"{self._store.url} split {self.split}: a record is not a "
                              f"tf.train.Example ({exc})") from None
        record = {}
        for key, (kind, shape) in self._specs.items():
            values = found.get(key, (kind, []))[1]
            record[key] = _value(kind, shape, values, key)
        if self._decode_image:
            record["image"] = decode(record[ENCODED], self._channels, self._image_size)
        return record

    # the index

    @functools.cached_property
    def _index(self):
        """``(offsets, lengths)``: int64 arrays, one entry per record of the split."""
        indexes = _read_indexes(self._store, self._shards)
        return (np.concatenate([o for o, _ in indexes] or [np.zeros(0, np.int64)]),
                np.concatenate([n for _, n in indexes] or [np.zeros(0, np.int64)]))


def _value(kind, shape, values, key):
    """One feature's values as ``load()`` gives them, in numpy."""
    if kind == BYTES:
        array = np.array(values, dtype=object)
    else:
        array = np.array(values, dtype=_DTYPES[kind])
    if shape == ():
        if len(values) != 1:
            raise VerifyError(f"record feature {key!r} holds {len(values)} values, one "
                              "expected")
        return values[0] if kind == BYTES else array[0]
    if shape and shape[0] is None:
        return array.reshape((-1, *shape[1:]))
    return array.reshape(shape)


def decode(encoded, channels=3, image_size=None):
    """The uint8 ``[height, width, channels]`` array of an encoded image (Pillow), resized to
    ``image_size`` as ``load()`` resizes when given (see :mod:`~tfrecorder_lite.images.resize`)."""
    return resize.decode(encoded, channels, image_size)


# ----------------------------------------------------------------------------- index files

def _read_indexes(store, shards):
    """``(offsets, lengths)`` of every shard's records, from its index file (read at once for
    all shards), or from the shard itself when the manifest lists no index (outputs written
    before index files existed).

    Raises:
        VerifyError: an index file that is missing, does not parse, or does not describe its
            shard (the message names the file).
    """
    listed = [i for i, shard in enumerate(shards) if shard.index is not None]
    texts = read_many([store.path(index_name(shards[i].name)) for i in listed],
                      store.storage_options) if listed else []
    out = [None] * len(shards)
    for i, text in zip(listed, texts):
        out[i] = _parse_index(store, shards[i], text)
    for i, shard in enumerate(shards):
        if out[i] is None:
            logger.info("%s lists no index for %s: reading the shard to find its records",
                        redact(store.url), shard.name)
            out[i] = _scan_shard(store, shard)
    return out


def _parse_index(store, shard, text):
    name = index_name(shard.name)
    where = store.path(name)
    if isinstance(text, FileNotFoundError):
        raise VerifyError(f"{where}: missing (metadata.json lists it as the index of "
                          f"{shard.name}); run tfrecorder-lite verify {store.url}")
    if isinstance(text, Exception):
        raise VerifyError(f"{where}: could not be read ({text})") from text
    checksums = file_digest(text)
    text = text.decode("ascii", "replace")
    try:
        pairs = np.array(text.split(), dtype=np.int64).reshape(-1, 2) if text.strip() else \
            np.zeros((0, 2), np.int64)
    except ValueError:
        raise VerifyError(f"{where}: not an index file (lines of '<offset> <length>')") \
            from None
    offsets, lengths = pairs[:, 0], pairs[:, 1]
    problem = None
    if len(pairs) != shard.num_examples:
        problem = (f"lists {len(pairs)} records, metadata.json says {shard.name} holds "
                   f"{shard.num_examples} (a truncated or stale index)")
    elif len(pairs) and (offsets[0] != 0 or (lengths < _FRAME).any() or
                         (offsets[1:] != offsets[:-1] + lengths[:-1]).any()):
        bad = 0 if offsets[0] != 0 else int(np.argmax(
            np.concatenate([[False], offsets[1:] != offsets[:-1] + lengths[:-1]]) |
            (lengths < _FRAME)))
        problem = (f"record {bad} at offset {offsets[bad]} (length {lengths[bad]}) does not "
                   "follow the record before it (a misaligned index)")
    elif len(pairs) and offsets[-1] + lengths[-1] != shard.bytes:
        problem = (f"its records end at byte {offsets[-1] + lengths[-1]}, and {shard.name} "
                   f"holds {shard.bytes} bytes")
    elif checksums["crc32c"] != shard.index.crc32c:
        problem = "its crc32c differs from the one metadata.json lists"
    if problem:
        raise VerifyError(f"{where}: {problem}; run tfrecorder-lite verify {store.url}")
    return offsets, lengths


def _scan_shard(store, shard):
    """``(offsets, lengths)`` of a shard's records, read from the shard itself."""
    sizes = []
    try:
        with store.open_read(shard.name) as f:
            for data in TFRECORD.records(f, None, shard.bytes):
                sizes.append(len(data))
    except RecordError as exc:
        raise VerifyError(f"{store.path(shard.name)}: {exc}") from None
    lengths = np.array(sizes, dtype=np.int64) + _FRAME
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    if len(sizes) != shard.num_examples:
        raise VerifyError(f"{store.path(shard.name)}: {len(sizes)} records, metadata.json "
                          f"says {shard.num_examples}")
    return offsets, lengths
