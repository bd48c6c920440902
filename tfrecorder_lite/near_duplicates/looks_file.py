"""What confirms a pair (``confirmation``), kept as the write takes it: per record of a shard,
its luminance grid and mean chroma (``images.luminance_grid.grid_and_chroma``), in a file of
the state folder beside the shard's receipt. The driver then confirms the pairs the search
finds from these, without reading their images again; a file that is missing or does not
match its shard (an earlier version's, a shard written again) is passed over, and those
images are read again as before.

The file holds fixed-size records in the order of the receipt's records, then a trailer:
``LOOKS_MAGIC``, the number of records and the shard file's CRC32C.
"""

import math
import struct

from ..images.luminance_grid import GRID
from ..output.layout import looks_name

LOOKS_MAGIC = b"TFRLOOK1"
_CHROMA = struct.Struct("<2f")  # mean Cb, Cr (NaN: the record's image has no grid)
RECORD_BYTES = GRID * GRID + _CHROMA.size
_TRAILER = struct.Struct("<8sQI")
_NONE = bytes(GRID * GRID) + _CHROMA.pack(math.nan, math.nan)


class LooksWriter:
    """The looks file of one shard being written: :meth:`add` a record's, then
    :meth:`commit` once the shard is, or :meth:`discard`. Nothing is opened before the first
    record's; the bytes go to the file a flush at a time."""

    def __init__(self, state, shard):
        self._state, self._shard = state, shard
        self._file, self._buffer, self._count = None, bytearray(), 0

    def add(self, grid, chroma):
        """The next record's grid and mean chroma (None, None: its image has none)."""
        self._buffer += _NONE if grid is None else grid + _CHROMA.pack(*chroma)
        self._count += 1

    def flush(self):
        """Write the records added since the last flush."""
        if not self._buffer:
            return
        if self._file is None:
            self._file = self._state.open_for_commit(looks_name(self._shard))
        self._file.write(bytes(self._buffer))
        self._buffer.clear()

    def commit(self, shard_crc32c):
        """Finish the file, naming the shard's CRC32C (hex; a shard of no record has no
        file)."""
        self.flush()
        if self._file is not None:
            self._file.write(_TRAILER.pack(LOOKS_MAGIC, self._count, int(shard_crc32c, 16)))
            self._file.commit()

    def discard(self):
        """Leave no file."""
        if self._file is not None:
            self._file.discard()
            self._file = None


def kept_looks(state, wanted):
    """The grids and mean chroma the write kept for some records.

    Args:
        state: the state folder (a Store).
        wanted: shard name -> ``(its records, its CRC32C as hex or None, record indexes
            wanted)``.

    Returns:
        ``{(shard name, index): (grid, (cb, cr))}`` for each record found; a shard whose
        file is missing or does not match it gives none, an image without a grid neither.
    """
    requests, asked = [], []
    for shard, (count, crc32c, indexes) in wanted.items():
        end = count * RECORD_BYTES
        requests.append((looks_name(shard), end, end + _TRAILER.size))
        asked.append((shard, count, crc32c, indexes))
    trailers = state.read_ranges(requests) if requests else []
    requests, which = [], []
    for (shard, count, crc32c, indexes), trailer in zip(asked, trailers):
        if crc32c is None or isinstance(trailer, Exception) or \
                len(trailer) != _TRAILER.size or \
                _TRAILER.unpack(trailer) != (LOOKS_MAGIC, count, int(crc32c, 16)):
            continue
        for index in indexes:
            requests.append((looks_name(shard), index * RECORD_BYTES,
                             (index + 1) * RECORD_BYTES))
            which.append((shard, index))
    out = {}
    for key, data in zip(which, state.read_ranges(requests) if requests else []):
        if isinstance(data, Exception) or len(data) != RECORD_BYTES:
            continue
        chroma = _CHROMA.unpack_from(data, GRID * GRID)
        if not math.isnan(chroma[0]):
            out[key] = (bytes(data[:GRID * GRID]), chroma)
    return out
