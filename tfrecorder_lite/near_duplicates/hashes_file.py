"""The hashes files beside the shards (``hashes-g0000.csv``, one per generation): what they
hold, writing one (:func:`write_hashes`), and reading one back checked against what
``metadata.json`` records of it (as text, or, for an append, every image they list as
columns: WrittenImages).

A hashes file lists each image a generation wrote: its table row, split, URI, the content
hash of its file (the column is named by the hash, see ``images.content_hash``), its label and
its perceptual hashes. An append knows the images already written from these files alone, so
one that is missing, edited or damaged is refused with the reason, never read as if it were
whole.
"""

import collections
import csv
import io

import numpy as np
import pandas as pd

from ..errors import ManifestError
from ..images import content_hash
from ..memory import JoinedTexts, give_back_freed_memory
from ..output.csv_files import safe_cells
from ..output.layout import hashes_generation
from ..record.framing import FileDigest, file_digest
from .perceptual_hash import rows_from_hex


def hash_columns(hashed_by):
    """The columns of a hashes file whose images' files are hashed by ``hashed_by`` (a name
    of ``content_hash.NAMES``, which names the column)."""
    return ["row", "split", "image_uri", hashed_by, "label", "phash", "crops"]

_RESTORE = ("restore it from a copy of the output, or convert the whole table again "
            "(overwrite=True)")


def checksums(size, crc32c):
    """What ``metadata.json`` records of a hashes file: its size and CRC32C (hex)."""
    return {"bytes": size, "crc32c": crc32c}


def _missing(store, name):
    return ManifestError(
        f"{store.path(name)}: missing. metadata.json lists it: the images generation "
        f"{hashes_generation(name)} wrote, which an append compares its rows with; {_RESTORE}")


def _differs(found, recorded):
    return (f"not the file this output wrote ({found}; metadata.json records "
            f"{recorded}): edited or damaged; {_RESTORE}")


def check_present(store, near):
    """Refuse an output whose hashes files are missing or not the size metadata.json records,
    without reading them (an append's check before it writes anything; reading one checks
    its bytes).

    Args:
        store: the output's Store.
        near: metadata.json's ``near_duplicates`` entry.

    Raises:
        ManifestError: naming the file, what is wrong and what to do.
    """
    recorded = near.get("checksums", {})
    for name in near.get("hashes", ()):
        size = store.size(name)
        if size is None:
            raise _missing(store, name)
        expected = recorded.get(name, {}).get("bytes")
        if expected is not None and size != expected:
            raise ManifestError(f"{store.path(name)}: " + _differs(f"{size} bytes",
                                                                   f"{expected} bytes"))


def _reading(store, name, read):
    """``read(name)`` (the Store's ``read_bytes`` or ``open_read``), its errors said as an
    output's."""
    try:
        return read(name)
    except FileNotFoundError:
        raise _missing(store, name) from None
    except OSError as exc:
        raise ManifestError(f"{store.path(name)}: could not be read ({exc})") from exc


def _checked_bytes(store, name, recorded):
    """The bytes of the hashes file ``name``, checked against ``recorded`` (see
    :func:`read_hashes_file`)."""
    data = _reading(store, name, store.read_bytes)
    _check(store, name, checksums(len(data), file_digest(data)["crc32c"]), recorded)
    return data


def _check(store, name, found, recorded):
    """Refuse the file ``name`` whose checksums ``found`` are not those ``recorded`` (None:
    nothing recorded, nothing to compare)."""
    if recorded is not None and found != checksums(recorded.get("bytes"),
                                                   recorded.get("crc32c")):
        raise ManifestError(f"{store.path(name)}: " + _differs(
            f"{found['bytes']} bytes, CRC32C {found['crc32c']}",
            f"{recorded.get('bytes')} bytes, CRC32C {recorded.get('crc32c')}"))


def _not_a_hashes_file(store, name, why):
    return ManifestError(f"{store.path(name)}: not a hashes file ({why}); {_RESTORE}")


def _wrong_columns(store, name, columns, hashed_by):
    return _not_a_hashes_file(store, name, f"its columns are {', '.join(map(str, columns))}, "
                                           f"not {', '.join(hash_columns(hashed_by))}")


def _text_frame(store, name, data, columns, hashed_by):
    """The file's ``columns`` as text."""
    try:
        header = list(pd.read_csv(io.BytesIO(data), nrows=0).columns)
        if header == hash_columns(hashed_by):
            return pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False,
                               usecols=list(columns))[list(columns)]
    except (ValueError, UnicodeDecodeError) as exc:  # pandas' ParserError is a ValueError
        raise _not_a_hashes_file(store, name, exc) from None
    raise _wrong_columns(store, name, header, hashed_by)


def read_hashes_file(store, name, recorded=None, columns=None, hashed_by=content_hash.DEFAULT):
    """The hashes file ``name`` of the output in ``store``, as text columns.

    Args:
        store: the output's Store.
        name: the file name, as metadata.json lists it.
        recorded: its ``{"bytes", "crc32c"}`` in metadata.json, or None (outputs written
            before they were recorded): the file's bytes must match them.
        columns: the columns to read (of :func:`hash_columns`, default all; the file must
            have them all).
        hashed_by: the output's content hash (``content_hash.of_output``), which names a
            column.

    Raises:
        ManifestError: the file is missing, cannot be read, differs from what metadata.json
            records, or is not a hashes file; the message says which, and what to do.
    """
    return _text_frame(store, name, _checked_bytes(store, name, recorded),
                       hash_columns(hashed_by) if columns is None else columns, hashed_by)


_TEXTS_AT_ONCE = 1 << 16  # texts made into Python objects at a time


def sorted_holds(values, wanted):
    """Whether each of ``wanted`` is in ``values``, a sorted array (a binary search each:
    ``np.isin`` would sort ``values`` again at every call)."""
    if not len(values):
        return np.zeros(len(wanted), dtype=bool)
    at = np.minimum(np.searchsorted(values, wanted), len(values) - 1)
    return values[at] == wanted


def text_hashes(texts):
    """A 64-bit hash of each of ``texts`` (None hashes as a text of its own): equal texts
    have equal hashes, in every process."""
    return pd.util.hash_array(np.array(texts, dtype=object))


WrittenImage = collections.namedtuple("WrittenImage",
                                      "generation row split image_uri digest label")


class WrittenImages:
    """The images an output's hashes files list, oldest first, kept as columns (about 130
    bytes an image where a frame of their texts takes several hundred).

    Attributes:
        hashed_by: the content hash of the images' files (a name of ``content_hash.NAMES``).
        digests: that hash of each image's file, ``(images, its bytes)`` uint8.
        perceptual: each image's perceptual hashes (whole image, then crops), uint64 rows;
            zeros where it has none.
        hashed: whether it has them (an image that did not decode has none).
        labels: the output's label texts as metadata.json lists them (the table's, which
            the files keep spreadsheet-safe: ``'+ve`` for ``+ve``), a frozenset; empty
            unless the reader sets them.
    """

    def __init__(self, hashed_by=content_hash.DEFAULT):
        self.hashed_by = hashed_by
        self.labels = frozenset()
        self.generations = np.zeros(0, dtype=np.int32)
        self.digests = np.zeros((0, content_hash.digest_bytes(hashed_by)), dtype=np.uint8)
        self.perceptual = np.zeros((0, 0), dtype=np.uint64)
        self.hashed = np.zeros(0, dtype=bool)
        self._split_codes = np.zeros(0, dtype=np.uint8)
        self._split_names = ()
        self._rows = self._uris = self._labels = JoinedTexts()
        self._by_head = None  # (sorted heads of the digests, their images), made when asked

    def __len__(self):
        return len(self.hashed)

    def split_groups(self, indexes, others):
        """The splits of the images at ``indexes``, then the split names ``others``, as
        codes (one split, one code; a byte each below 256 splits): no object array of a
        million names."""
        codes = {name: i for i, name in enumerate(self._split_names)}
        found, names = pd.factorize(np.asarray(others, dtype=object))
        mapped = np.array([codes.setdefault(name, len(codes)) for name in names.tolist()],
                          dtype=np.int64)
        dtype = np.uint8 if len(codes) < 256 else np.int64
        return np.concatenate([self._split_codes[indexes].astype(dtype),
                               mapped[found].astype(dtype)])

    def image(self, index):
        """One image's WrittenImage (its generation, table row, split, URI, content hash as
        hex and label)."""
        return WrittenImage(int(self.generations[index]), self._rows[index],
                            self.split_of(index), self._uris[index], self.digest_of(index),
                            self.label_of(index))

    def split_of(self, index):
        """One image's split."""
        return self._split_names[self._split_codes[index]]

    def label_of(self, index):
        """One image's label text, as its hashes file keeps it (spreadsheet-safe)."""
        return self._labels[index]

    def digest_of(self, index):
        """The content hash of one image's file, as hex."""
        return self.digests[index].tobytes().hex()

    def uri_hashes(self):
        """The distinct :func:`text_hashes` of the images' URIs, sorted (look a hash up with
        :func:`sorted_holds`)."""
        return np.unique(np.concatenate([np.zeros(0, dtype=np.uint64)] + [
            text_hashes(self._uris[start:start + _TEXTS_AT_ONCE])
            for start in range(0, len(self), _TEXTS_AT_ONCE)]))

    def holding(self, digests):
        """The indexes of the images whose file has one of the content hashes ``digests``
        (hex, by ``hashed_by``), in order."""
        wanted = np.frombuffer(bytes.fromhex("".join(digests)), dtype=np.uint8).reshape(
            -1, self.digests.shape[1])
        if not len(wanted) or not len(self):
            return np.zeros(0, dtype=np.int64)
        if self._by_head is None:  # the images by the first 8 bytes of their digest, once
            heads = self.digests[:, :8].copy().view(np.uint64)[:, 0]
            order = np.argsort(heads, kind="stable")
            self._by_head = (heads[order], order)
        heads, order = self._by_head
        asked = wanted[:, :8].copy().view(np.uint64)[:, 0]
        starts = np.searchsorted(heads, asked, side="left")
        stops = np.searchsorted(heads, asked, side="right")
        whole = {bytes(row) for row in wanted}  # then the whole digest of those only
        maybe = np.unique(np.concatenate([np.zeros(0, dtype=np.int64)] + [
            order[a:b] for a, b in zip(starts.tolist(), stops.tolist()) if b > a]))
        return np.array([i for i in maybe.tolist() if self.digests[i].tobytes() in whole],
                        dtype=np.int64)

    @classmethod
    def joined(cls, parts, hashed_by=content_hash.DEFAULT):
        """The images of several, one after another (perceptual hashes cut to the fewest
        any part has: an earlier version's may have had fewer crops), their files hashed by
        ``hashed_by``. Each column of the parts is emptied as soon as it is joined, so that
        the whole is never held twice."""
        out = cls(hashed_by)
        parts = [part for part in parts if len(part)]
        if not parts:
            return out
        width = min((part.perceptual.shape[1] for part in parts if part.hashed.any()),
                    default=0)  # (a part without hashes has none to take the width from)
        out._split_names = tuple(dict.fromkeys(n for part in parts for n in part._split_names))
        out._split_codes = np.concatenate([
            np.array([out._split_names.index(n) for n in part._split_names],
                     dtype=np.uint8)[part._split_codes] for part in parts])
        empty = cls(hashed_by)
        for name in ("generations", "digests", "hashed", "perceptual", "_rows", "_uris",
                     "_labels"):
            columns = [getattr(part, name) for part in parts]
            setattr(out, name, JoinedTexts.joined(columns) if name.startswith("_") else
                    np.concatenate([c[:, :width] if c.shape[1] >= width else
                                    np.zeros((len(c), width), dtype=np.uint64)
                                    for c in columns]) if name == "perceptual"
                    else np.concatenate(columns))
            del columns
            for part in parts:
                setattr(part, name, getattr(empty, name))
            give_back_freed_memory()
        return out


def _images_of(store, name, frame, hashed_by):
    """The WrittenImages of one chunk (a text frame) of the hashes file ``name``."""
    images = WrittenImages(hashed_by)
    count = len(frame)
    images.generations = np.full(count, hashes_generation(name), dtype=np.int32)
    digests = frame[hashed_by].tolist()
    size = content_hash.digest_bytes(hashed_by)
    if any(len(digest) != 2 * size for digest in digests):
        raise _not_a_hashes_file(store, name, f"a content hash ({hashed_by}) that is not "
                                              f"{2 * size} hex digits")
    phash, crops = frame["phash"].to_numpy(dtype=object), frame["crops"].to_numpy(dtype=object)
    images.hashed = phash != ""
    texts = (phash[images.hashed] + crops[images.hashed]).tolist()
    if len({len(text) for text in texts}) > 1 or any(len(text) % 16 for text in texts):
        raise _not_a_hashes_file(store, name, "perceptual hashes of unequal lengths")
    try:
        images.digests = np.frombuffer(bytes.fromhex("".join(digests)), dtype=np.uint8
                                       ).reshape(count, size)
        hashes = rows_from_hex(texts)
    except ValueError:
        raise _not_a_hashes_file(store, name, "a hash that is not hex digits") from None
    images.perceptual = np.zeros((count, hashes.shape[1]), dtype=np.uint64)
    images.perceptual[images.hashed] = hashes
    codes, names = pd.factorize(frame["split"])
    images._split_codes, images._split_names = codes.astype(np.uint8), tuple(names)
    images._rows = JoinedTexts(frame["row"].tolist())
    images._uris = JoinedTexts(frame["image_uri"].tolist())
    images._labels = JoinedTexts(frame["label"].tolist())
    return images


class _Digesting(io.RawIOBase):
    """A binary file read through, its size and checksums taken as the bytes pass."""

    def __init__(self, file):
        super().__init__()
        self._file, self.size, self.digest = file, 0, FileDigest()

    def readable(self):
        return True

    def readinto(self, buffer):
        data = self._file.read(len(buffer))
        buffer[:len(data)] = data
        self.size += len(data)
        self.digest.update(data)
        return len(data)


def _streamed_images(store, name, recorded, chunk, hashed_by):
    """The WrittenImages of the hashes file ``name``, a chunk of rows at a time as its bytes
    stream in; checked against ``recorded`` once they all have (a file that differs is
    reported as such, whatever else is wrong with it)."""
    with _reading(store, name, store.open_read) as file:
        stream = _Digesting(file)
        parts, problem = [], None
        try:
            for frame in pd.read_csv(io.BufferedReader(stream, 1 << 20), dtype=str,
                                     keep_default_na=False, chunksize=chunk):
                if list(frame.columns) != hash_columns(hashed_by):
                    raise _wrong_columns(store, name, frame.columns, hashed_by)
                parts.append(_images_of(store, name, frame, hashed_by))
        except (ValueError, UnicodeDecodeError, ManifestError) as exc:
            problem = exc if isinstance(exc, ManifestError) else \
                _not_a_hashes_file(store, name, exc)
            while stream.read(1 << 20):  # the rest, for its checksum
                pass
    _check(store, name, checksums(stream.size, stream.digest.hexdigests()["crc32c"]), recorded)
    if problem is not None:
        raise problem
    return WrittenImages.joined(parts, hashed_by)


def read_written_images(store, near, chunk=1 << 16):
    """Every image the hashes files of an output list, oldest first.

    Each file is streamed, a chunk of rows at a time, its checksums taken as it passes (the
    whole file is never held).

    Args:
        store: the output's Store.
        near: metadata.json's ``near_duplicates`` entry (the files, and their checksums).
        chunk: rows turned into columns at once (bounds the texts held at a time).

    Returns:
        A WrittenImages.

    Raises:
        ManifestError: a file is missing, differs from what metadata.json records of it, or
            is not a hashes file (see :func:`read_hashes_file`).
    """
    recorded, hashed_by = near.get("checksums", {}), content_hash.of_output(near)
    return WrittenImages.joined([_streamed_images(store, name, recorded.get(name), chunk,
                                                  hashed_by)
                                 for name in near.get("hashes", ())], hashed_by)


def label_values(plan, positions):
    """Each planned row's ``(id, text)`` per label field, for many rows at once."""
    if hasattr(plan.label_values, "take"):
        return plan.label_values.take(positions)
    return [plan.label_values[p] for p in positions]


def label_texts(plan, positions):
    """The label text of planned rows (several joined by "|"), as the hashes file keeps it."""
    values = label_values(plan, positions)
    return ["|".join(v[0][1]) if isinstance(v[0][1], tuple) else v[0][1] for v in values]


_HASHES_CHUNK = 10_000  # rows of the hashes file made into text at once


def write_hashes(store, name, plan, labels, hashes, splits, order):
    """Write the hashes file ``name``: a row per record of ``hashes`` (a RecordHashes,
    ``splits`` the split of each; its files hashed by ``plan.image.content_hash``), in table
    order (``order``), made into text a chunk at a time (the table's text redacted and
    spreadsheet-safe, as in ``rejected.csv``).

    Returns:
        Its size and CRC32C, as metadata.json records them (:func:`checksums`).
    """
    pending = store.open_for_commit(name)
    digest, size = FileDigest(), 0
    header = hash_columns(plan.image.content_hash)
    try:
        for start in range(0, len(order), _HASHES_CHUNK):
            rows = order[start:start + _HASHES_CHUNK]
            part = hashes.take(rows)
            positions = part.positions.tolist()
            perceptual = [value or "" for value in part.perceptual_hex()]
            columns = {
                "row": safe_cells(labels.take(positions)),
                "split": splits[rows].tolist(),
                "image_uri": safe_cells(plan.paths.take(positions)),
                plan.image.content_hash: part.digests(),
                "label": safe_cells(label_texts(plan, positions)),
                "phash": [value[:16] for value in perceptual],
                "crops": [value[16:] for value in perceptual]}
            text = io.StringIO()
            writer = csv.writer(text, lineterminator="\n")  # as pandas' to_csv writes
            if start == 0:
                writer.writerow(header)
            writer.writerows(zip(*(columns[column] for column in header)))
            chunk = text.getvalue().encode()
            digest.update(chunk)
            size += len(chunk)
            pending.write(chunk)
    except BaseException:
        pending.discard()
        raise
    pending.commit()
    return checksums(size, digest.hexdigests()["crc32c"])
