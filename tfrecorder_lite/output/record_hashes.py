"""The hashes a shard's receipt keeps of its records' images, as columns.

A receipt lives in the driver until the run ends; kept as a tuple of Python objects a record
(two hex strings, five numbers), a million records' hashes would cost hundreds of megabytes,
kept as arrays about a hundred bytes a record.
"""

import numpy as np

from ..memory import give_back_freed_memory


class RecordHashes:
    """Per record of a shard, in writing order: its table position, the content hash of its
    source file (``ImageOptions.content_hash``), its perceptual hashes (whole image, then
    crops; or none when it did not decode), and its image's format, height, width and
    channels.

    Iterating gives one ``(position, content hash hex, perceptual hashes hex or None, format,
    height, width, channels)`` tuple a record, as receipts read and write them.

    Args:
        entries: such tuples, in writing order.
    """

    def __init__(self, entries=()):
        entries = list(entries)
        count = len(entries)
        self.positions = np.fromiter((e[0] for e in entries), dtype=np.int64, count=count)
        digest_width = len(entries[0][1]) // 2 if count else 0  # bytes of the content hash
        self.digest_bytes = np.frombuffer(b"".join(bytes.fromhex(e[1]) for e in entries),
                                          dtype=np.uint8).reshape(count, digest_width)
        texts = [e[2] for e in entries]
        width = max((len(t) for t in texts if t is not None), default=0) // 16
        self.hashed = np.fromiter((t is not None for t in texts), dtype=bool, count=count)
        self.perceptual = np.frombuffer(
            bytes.fromhex("".join(t if t is not None else "0" * 16 * width for t in texts)),
            dtype=">u8").astype(np.uint64).reshape(count, width)
        self._formats = tuple(dict.fromkeys(e[3] for e in entries))
        self._format_codes = np.fromiter((self._formats.index(e[3]) for e in entries),
                                         dtype=np.uint8, count=count)
        self._sizes = np.array([e[4:7] for e in entries], dtype=np.int32).reshape(count, 3)

    @classmethod
    def joined(cls, parts, consume=False):
        """One RecordHashes of the records of several, one after another; with ``consume``,
        each column of the parts is emptied as soon as it is joined (so that the whole is
        never held twice)."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls()
        width = min(p.perceptual.shape[1] for p in parts)  # equal but for an older version's
        joined = cls()
        joined._formats = tuple(dict.fromkeys(f for p in parts for f in p._formats))
        codes = [np.array([joined._formats.index(f) for f in p._formats],
                          dtype=np.uint8) for p in parts]
        for name, column in (
                ("positions", lambda p, _: p.positions),
                ("digest_bytes", lambda p, _: p.digest_bytes),
                ("hashed", lambda p, _: p.hashed),
                ("perceptual", lambda p, _: p.perceptual[:, :width]),
                ("_format_codes", lambda p, i: codes[i][p._format_codes] if p._formats
                 else p._format_codes),
                ("_sizes", lambda p, _: p._sizes)):
            setattr(joined, name, np.concatenate([column(p, i) for i, p in enumerate(parts)]))
            if consume:  # an empty array of its own (a slice would keep the memory)
                for p in parts:
                    held = getattr(p, name)
                    setattr(p, name, np.empty((0, *held.shape[1:]), dtype=held.dtype))
                give_back_freed_memory()
        return joined

    def take(self, order):
        """The records at the positions ``order`` (of this list, not of the table)."""
        taken = RecordHashes()
        taken._formats = self._formats
        for name in ("positions", "digest_bytes", "hashed", "perceptual", "_format_codes",
                     "_sizes"):
            setattr(taken, name, getattr(self, name)[order])
        return taken

    def __len__(self):
        return len(self.positions)

    def __bool__(self):
        return len(self) > 0

    def __iter__(self):
        digests, perceptual = self.digests(), self.perceptual_hex()
        for i, (position, (height, width, channels)) in enumerate(
                zip(self.positions.tolist(), self._sizes.tolist())):
            yield (position, digests[i], perceptual[i], self._formats[self._format_codes[i]],
                   height, width, channels)

    def digests(self):
        """Each record's content hash, as hex."""
        text = self.digest_bytes.tobytes().hex()
        step = 2 * self.digest_bytes.shape[1]
        return [text[i:i + step] for i in range(0, len(text), step)] if step else []

    def perceptual_hex(self):
        """Each record's perceptual hashes as one hex string (16 digits a hash), or None."""
        width = 16 * self.perceptual.shape[1]
        text = self.perceptual.astype(">u8").tobytes().hex()
        return [text[i * width:(i + 1) * width] if hashed else None
                for i, hashed in enumerate(self.hashed.tolist())]

    def __eq__(self, other):
        return isinstance(other, RecordHashes) and list(self) == list(other)

    def __repr__(self):
        return f"RecordHashes({len(self)} records)"
