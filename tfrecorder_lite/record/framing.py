"""TFRecord file framing: write and read records, with their CRCs, in plain Python.

Each record is ``uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)``,
optionally inside a GZIP or ZLIB stream, exactly as ``tf.io.TFRecordWriter`` writes it.
"""

import hashlib
import os
import struct
import zlib

import google_crc32c

_WBITS = {"GZIP": 16 + zlib.MAX_WBITS, "ZLIB": zlib.MAX_WBITS}
_READ_CHUNK = 1 << 20


class RecordError(ValueError):
    """A record is damaged; ``index`` is its position in the file (0-based)."""

    def __init__(self, index, message):
        self.index = index
        self.message = message
        super().__init__(f"record {index}: {message}")

    def __reduce__(self):
        return type(self), (self.index, self.message)


def normalize_compression(compression):
    """Return None, "GZIP" or "ZLIB" for the user's spelling (case-insensitive, "" means none)."""
    if compression in (None, "", "NONE", "none"):
        return None
    upper = str(compression).upper()
    if upper in ("GZIP", "GZ"):
        return "GZIP"
    if upper in ("ZLIB", "ZZ"):
        return "ZLIB"
    raise ValueError(f"compression must be None, 'GZIP' or 'ZLIB', not {compression!r}")


def masked_crc(data):
    """The masked CRC-32C that TFRecord stores beside lengths and payloads."""
    return _mask(google_crc32c.value(data))


def _mask(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class FileDigest:
    """Checksums of a whole file, taken as its bytes pass by.

    CRC32C always: hardware-accelerated, and the checksum Cloud Storage keeps for every object
    (hex of the unmasked value here). sha256 on request: a cryptographic digest, at about 7
    times the CPU.
    """

    def __init__(self, sha256=False):
        self._crc = 0
        self._sha = hashlib.sha256() if sha256 else None

    @classmethod
    def like(cls, entry):
        """A FileDigest taking the checksums a manifest or receipt ``entry`` has."""
        return cls(sha256="sha256" in entry)

    def update(self, data):
        """Add the next bytes of the file."""
        self._crc = google_crc32c.extend(self._crc, data)
        if self._sha is not None:
            self._sha.update(data)

    def hexdigests(self):
        """``{"crc32c": ..., "sha256": ...}`` (sha256 only when asked for)."""
        out = {"crc32c": f"{self._crc:08x}"}
        if self._sha is not None:
            out["sha256"] = self._sha.hexdigest()
        return out

    def mismatches(self, entry):
        """Names of the checksums in ``entry`` that differ from these bytes' (empty: same)."""
        found = self.hexdigests()
        return [k for k in ("crc32c", "sha256") if k in entry and entry[k] != found.get(k)]


_FRAME_BYTES = 16  # length (8), its CRC (4), the data's CRC (4)
_PASSED_AS_IS = 4096  # record chunks this large are written from where they are, not copied


def index_text(record_sizes):
    """A shard's index: ``"<offset> <length>\n"`` per record, as ``tfrecord2idx`` writes it
    (offsets into the uncompressed stream), from the records' payload sizes."""
    lines, offset = [], 0
    for size in record_sizes:
        lines.append(f"{offset} {size + _FRAME_BYTES}\n")
        offset += size + _FRAME_BYTES
    return "".join(lines)


def file_digest(data, sha256=False):
    """The checksums (FileDigest.hexdigests) of a whole small file's bytes."""
    digest = FileDigest(sha256)
    digest.update(data)
    return digest.hexdigests()


class RecordWriter:
    """Append records to an open binary file, tracking the bytes written and their checksums.

    Attributes:
        record_sizes: the payload size of every record written, in order (for the index).
    """

    def __init__(self, fileobj, compression=None, sha256=False):
        self._file = fileobj
        self._digest = FileDigest(sha256)
        self.bytes_written = 0
        self.num_records = 0
        self.record_sizes = []
        self._compressor = (
            zlib.compressobj(6, zlib.DEFLATED, _WBITS[compression]) if compression else None
        )

    def _emit(self, data):
        if data:
            self._file.write(data)
            self._digest.update(data)
            self.bytes_written += len(data)

    def write(self, record):
        """Append one serialized record: bytes, or a list of byte strings that make it up."""
        self.write_many([record])

    def write_many(self, records):
        """Append serialized records (each bytes, or a list of byte strings that make it up).

        Their frames and small chunks are gathered into a few buffers between the large
        chunks (the images), which are passed on as they are: the file gets one
        ``writelines`` call (a PendingFile turns it into one gathered write), and the batch is
        never joined into one more copy. Hashing and
        writing such pieces release the GIL, which matters when other threads are busy in
        Python.
        """
        pieces, small = [], bytearray()
        for record in records:
            chunks = [record] if isinstance(record, bytes) else record
            size = sum(map(len, chunks))
            self.record_sizes.append(size)
            length = struct.pack("<Q", size)
            small += length
            small += struct.pack("<I", masked_crc(length))
            crc = 0
            for chunk in chunks:
                crc = google_crc32c.extend(crc, chunk)
                if len(chunk) >= _PASSED_AS_IS:
                    pieces += (bytes(small), chunk)
                    small.clear()
                else:
                    small += chunk
            small += struct.pack("<I", _mask(crc))
        pieces.append(bytes(small))
        if self._compressor:
            self._emit(self._compressor.compress(b"".join(pieces)))
        else:
            for piece in pieces:
                self._digest.update(piece)
            self._file.writelines(pieces)
            self.bytes_written += sum(map(len, pieces))
        self.num_records += len(records)

    def close(self):
        """Flush compression; returns the checksums of everything written (FileDigest)."""
        if self._compressor:
            self._emit(self._compressor.flush())
            self._compressor = None
        return self._digest.hexdigests()


# A record of a compressed shard may hold at most this many bytes. Its length field comes
# before its bytes, and a compressed stream can expand a thousandfold: without a cap, a few
# MB of file could make a reader wait for (and buffer) any length it claims. The writer's
# largest record is one image (at most max_image_bytes, 256 MiB by default, or what a resize
# encodes) plus its small features; protobuf refuses messages over 2 GiB, so TensorFlow could
# not parse a larger record anyway. An uncompressed record is bounded by the file instead.
MAX_COMPRESSED_RECORD_BYTES = 1 << 30


def _chunks(fileobj, compression):
    """The uncompressed bytes of ``fileobj``, in pieces of at most ``_READ_CHUNK`` bytes
    however much a compressed piece expands."""
    decompressor = zlib.decompressobj(_WBITS[compression]) if compression else None
    while True:
        raw = fileobj.read(_READ_CHUNK)
        if not raw:
            break
        if decompressor is None:
            yield raw
            continue
        while raw:
            yield decompressor.decompress(raw, _READ_CHUNK)
            raw = decompressor.unconsumed_tail
    if decompressor:
        yield decompressor.flush()
        if not decompressor.eof:
            raise EOFError("compressed stream ends early")


def _file_size(fileobj):
    """The size of an open file in bytes (fsspec files and OS files), or None."""
    size = getattr(fileobj, "size", None)
    if isinstance(size, int):
        return size
    try:
        return os.fstat(fileobj.fileno()).st_size
    except (AttributeError, OSError, ValueError):
        return None


def _size_text(n):
    return f"{n} bytes" if n < 1 << 20 else f"{n} bytes ({n / (1 << 30):.3g} GiB)"


def iter_records(fileobj, compression=None, file_size=None):
    """Yield each record's payload, checking both CRCs.

    Memory stays bounded whatever the file holds: compressed data is inflated a piece at a
    time, and a record's declared length is checked before its bytes are awaited: against
    the bytes left in an uncompressed file (``file_size``, else the size of ``fileobj`` when
    it has one), and against ``MAX_COMPRESSED_RECORD_BYTES`` in a compressed one.

    Raises:
        RecordError: naming the record index, for a bad CRC, a truncated record or a length
            that cannot be.
    """
    if file_size is None and compression is None:
        file_size = _file_size(fileobj)
    buffer, done, index = bytearray(), 0, 0  # done: stream bytes before the buffer's start
    try:
        for chunk in _chunks(fileobj, compression):
            buffer += chunk
            pos = 0
            while len(buffer) - pos >= 12:
                length_bytes = bytes(buffer[pos:pos + 8])
                if struct.unpack_from("<I", buffer, pos + 8)[0] != masked_crc(length_bytes):
                    raise RecordError(index, "length CRC mismatch (corrupted record)")
                (length,) = struct.unpack("<Q", length_bytes)
                _check_length(index, length, compression, file_size, done + pos)
                end = pos + 12 + length + 4
                if len(buffer) < end:
                    break
                with memoryview(buffer) as view:
                    data = bytes(view[pos + 12:end - 4])
                if struct.unpack_from("<I", buffer, end - 4)[0] != masked_crc(data):
                    raise RecordError(index, "data CRC mismatch (corrupted record)")
                yield data
                pos = end
                index += 1
            del buffer[:pos]
            done += pos
    except (zlib.error, EOFError) as exc:
        raise RecordError(index, f"compressed stream is damaged ({exc})") from None
    if buffer:
        raise RecordError(index, f"truncated record ({len(buffer)} trailing bytes)")


def _check_length(index, length, compression, file_size, offset):
    """Raise RecordError when a record of ``length`` bytes starting at ``offset`` cannot be."""
    if compression:
        if length > MAX_COMPRESSED_RECORD_BYTES:
            raise RecordError(index, f"claims {_size_text(length)}, more than the "
                                     f"{_size_text(MAX_COMPRESSED_RECORD_BYTES)} a record of a "
                                     "compressed shard may hold (a damaged or forged file)")
    elif file_size is not None and offset + _FRAME_BYTES + length > file_size:
        left = max(file_size - offset - _FRAME_BYTES, 0)
        raise RecordError(index, f"truncated record: it claims {_size_text(length)}, and the "
                                 f"file has {_size_text(left)} left for it")
