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

import collections
import functools
import operator
import struct
import threading

import numpy as np

from ..errors import SchemaError, VerifyError
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
from ..table.splits import pick
from ..storage import Store, read_many

logger = redaction.logger(__name__)  # every record redacted

_FRAME = 16  # length (8), its CRC (4), the data's CRC (4)
_DTYPES = {INT64: np.int64, FLOAT: np.float32}
DEFAULT_BLOCK_SIZE = 1 << 20
DEFAULT_CACHE_BYTES = 256 << 20


def data_source(output_dir, split, *, storage_options=None, decode_image=False, channels=3,
                image_size=None, block_size=DEFAULT_BLOCK_SIZE, cache_bytes=DEFAULT_CACHE_BYTES,
                generation=None):
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
            ``load()`` gives, to within one level). Needs ``decode_image=True``.
        block_size: bytes of each ranged read of a remote shard (records are read in whole
            blocks, and a record larger than a block in several).
        cache_bytes: at most this many bytes of remote blocks are kept, per process.
        generation: the split's records as the output held them after this generation (0:
            the first conversion; None: all of them, every generation's shards in order).

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
    for name, value in (("block_size", block_size), ("cache_bytes", cache_bytes)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise SchemaError(f"{name} must be a positive number of bytes, not {value!r}")
    store = Store(output_dir, storage_options)
    manifest = as_of(read_manifest(store)[0], generation, strict=False)
    split = pick(split, manifest.splits)
    if image_size is not None and manifest.image is None:
        raise SchemaError(f"{redact(store.url)} holds no images, so image_size does not apply")
    check_uncompressed(store, manifest)
    return DataSource(store, split, split_shards(manifest, split, generation),
                      value_specs(manifest),
                      decode_image and manifest.image is not None, channels, block_size,
                      cache_bytes, image_size)


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
                 image_size=None):
        self._store, self.split, self._shards = store, split, tuple(shards)
        self._specs, self._decode_image, self._channels = specs, decode_image, channels
        self._image_size = image_size
        self._block_size, self._cache_bytes = block_size, cache_bytes
        self._first = np.cumsum([0] + [s.num_examples for s in self._shards])
        self.num_records = int(self._first[-1])
        self._setup()

    def _setup(self):
        self._lock = threading.Lock()
        self._blocks = collections.OrderedDict()  # (shard, block) -> bytes, oldest first
        self._cached = 0
        self._fetching = {}  # (shard, block) -> Event set once its fetch has ended

    def __getstate__(self):  # the cache and lock stay behind; the index goes along
        return {k: v for k, v in self.__dict__.items()
                if k not in ("_lock", "_blocks", "_cached", "_fetching")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._setup()

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
        offsets, lengths = self._index
        shards = np.searchsorted(self._first, indices, side="right") - 1
        starts, sizes = offsets[indices], lengths[indices]
        if self._store.is_local:
            found = self._store.read_ranges([(self._shards[s].name, int(start), int(start + n))
                                             for s, start, n in zip(shards, starts, sizes)])
        else:
            found = self._remote_ranges(shards, starts, sizes)
        return [self._unframe(data, int(shard), int(i - self._first[shard]))
                for data, shard, i in zip(found, shards, indices)]

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
        if isinstance(data, Exception):
            raise VerifyError(f"{self._store.path(name)}: record {record} could not be read "
                              f"({data})") from data
        problem = None
        length = data[:8]
        if struct.unpack("<I", data[8:12])[0] != masked_crc(length):
            problem = "length CRC mismatch: the index points at no record start"
        elif struct.unpack("<Q", length)[0] != len(data) - _FRAME:
            problem = (f"the record holds {struct.unpack('<Q', length)[0]} bytes, the index "
                       f"says {len(data) - _FRAME}")
        elif struct.unpack("<I", data[-4:])[0] != masked_crc(data[12:-4]):
            problem = "data CRC mismatch (corrupted record)"
        if problem:
            raise VerifyError(f"{self._store.path(name)}: record {record} (read through "
                              f"{index_name(name)}): {problem}; run tfrecorder-lite verify "
                              f"{self._store.url}")
        return data[12:-4]

    def _remote_ranges(self, shards, starts, sizes):
        """Records of remote shards, from cached blocks. The missing blocks are fetched at
        once, one ranged read per run of consecutive blocks of a shard; a block another
        thread is fetching already is awaited, not fetched again."""
        size = self._block_size
        spans = [(int(s), int(start), int(start + n)) for s, start, n in zip(shards, starts, sizes)]
        wanted = sorted({(s, b) for s, start, end in spans
                         for b in range(start // size, (end - 1) // size + 1)})
        with self._lock:
            have = {key: self._blocks[key] for key in wanted if key in self._blocks}
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
        for key, done in awaited.items():
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
            data = b"".join(have[(shard, b)] for b in blocks)
            out.append(data[start - blocks[0] * size:end - blocks[0] * size])
        return out

    def _fetch(self, keys, have, errors):
        """Fetch the blocks ``keys`` (sorted ``(shard, block)``) into ``have`` and the cache,
        one ranged read per run of consecutive blocks; failures go to ``errors``."""
        size, runs = self._block_size, []  # (shard, first block, last block)
        for shard, block in keys:
            if runs and runs[-1][0] == shard and runs[-1][2] == block - 1:
                runs[-1][2] = block
            else:
                runs.append([shard, block, block])
        found = self._store.read_ranges([
            (self._shards[shard].name, first * size,
             min((last + 1) * size, self._shards[shard].bytes))
            for shard, first, last in runs])
        fetched = {}
        for (shard, first, last), data in zip(runs, found):
            for block in range(first, last + 1):
                if isinstance(data, Exception):
                    errors[(shard, block)] = data
                else:
                    fetched[(shard, block)] = \
                        data[(block - first) * size:(block - first + 1) * size]
        have.update(fetched)
        self._remember(fetched)

    def _remember(self, blocks):
        with self._lock:
            for key, data in blocks.items():
                if key not in self._blocks:
                    self._blocks[key] = data
                    self._cached += len(data)
            while self._cached > self._cache_bytes and self._blocks:
                self._cached -= len(self._blocks.popitem(last=False)[1])

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
