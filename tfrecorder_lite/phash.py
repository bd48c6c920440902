"""Perceptual hashes of images, and the pairs of near-identical ones across splits.

A hash is 64 bits: the signs, against their median, of the 63 lowest-frequency DCT
coefficients of the image's luminance shrunk to 32x32 (the DC term left out). The same photo
resized, re-encoded (JPEG at another quality, PNG), brightened or darkened a little keeps
nearly the same bits; two different photos differ in about half of them. The distance is the
number of differing bits (Hamming).

:func:`near_pairs` finds every pair of hashes within a distance without comparing all pairs:
the 64 bits are cut into bands, each band indexed by its value, and a pair within distance
``d`` of ``m`` bands has some band within ``ceil((d + 1) / m) - 1`` bits (pigeonhole), so
each hash looks up only the values that close to its own bands (multi-index hashing).
"""

import io
import itertools
import math
import warnings

import numpy as np
from PIL import Image, ImageOps

BITS = 64
MAX_DISTANCE = 8  # the default: at most this many differing bits is a near-duplicate
KIND = "near-duplicate across splits"  # the problem's name, as validate() reports it
_SIDE = 32  # the image is shrunk to _SIDE x _SIDE before the DCT
_LOW = 8  # coefficients kept: the _LOW x _LOW lowest frequencies, DC left out
DRAFT_SIZE = (_SIDE, _SIDE)  # a JPEG is decoded at the smallest scale at least this large


def _dct_rows(n, rows):
    """The first ``rows`` rows of the orthonormal DCT-II matrix of size ``n``."""
    k = np.arange(rows)[:, None]
    i = np.arange(n)[None, :]
    matrix = np.cos(np.pi * (2 * i + 1) * k / (2 * n)) * math.sqrt(2 / n)
    matrix[0] /= math.sqrt(2)
    return matrix


_DCT = _dct_rows(_SIDE, _LOW)
_WEIGHTS = np.left_shift(np.uint64(1), np.arange(BITS - 1, -1, -1, dtype=np.uint64))


def perceptual_hash(image):
    """The 64-bit perceptual hash of a Pillow image (as displayed: rotate it upright first).

    Args:
        image: a loaded Pillow image of any mode and size.

    Returns:
        An int in ``[0, 2**64)``; its top bit is always 0.
    """
    if image.mode not in ("L", "RGB"):
        image = image.convert("RGBA" if "A" in image.mode or "transparency" in image.info
                              else "RGB")
        if image.mode == "RGBA":  # transparent pixels as white, as a viewer shows them
            background = Image.new("RGB", image.size, (255, 255, 255))
            background.paste(image, mask=image.getchannel("A"))
            image = background
    gray = image.convert("L").resize((_SIDE, _SIDE), Image.BILINEAR, reducing_gap=2.0)
    low = (_DCT @ np.asarray(gray, dtype=np.float64) @ _DCT.T).ravel()[1:]  # 63 AC terms
    bits = np.zeros(BITS, dtype=np.uint64)
    bits[1:] = low > np.median(low)
    return int(bits @ _WEIGHTS)


def hash_encoded(data):
    """The perceptual hash of encoded image bytes, decoding as little as the format allows.

    A JPEG is decoded at a reduced scale (libjpeg's 1/2 to 1/8, still at least 32 pixels a
    side); other formats are decoded whole. The EXIF orientation is applied.

    Returns:
        The hash, or None when the bytes do not decode.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            image = Image.open(io.BytesIO(data))
            if image.format in ("JPEG", "MPO"):
                image.draft(image.mode, DRAFT_SIZE)
            image.load()
            image = ImageOps.exif_transpose(image)
            return perceptual_hash(image)
    except Exception:  # an image that does not decode has no hash; its check says why
        return None


def to_hex(value):
    """A hash as 16 hex digits."""
    return f"{value:016x}"


def from_hex(text):
    """A hash from its 16 hex digits (ValueError when it is not that)."""
    if not isinstance(text, str) or len(text) != 16:
        raise ValueError(f"a perceptual hash is 16 hex digits, not {text!r}")
    return int(text, 16)


def distance(a, b):
    """The number of bits two hashes differ in."""
    return (a ^ b).bit_count()


def _popcount(values):
    """Set bits of each uint64."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(values)
    count = np.zeros(values.shape, dtype=np.uint8)
    for shift in range(0, BITS, 16):
        count += _POPCOUNT16[((values >> np.uint64(shift)) & np.uint64(0xFFFF)).astype(np.int64)]
    return count


_POPCOUNT16 = np.array([bin(i).count("1") for i in range(1 << 16)], dtype=np.uint8)


def _bands(count, queries, max_distance):
    """``(band widths, radius)``: the cheapest band layout for ``queries`` lookups among
    ``count`` hashes (each band looked up within ``radius`` bits; at most 24 bits a band)."""
    best = None
    for bands in range(2, 10):
        width = -(-BITS // bands)
        if width > 24:
            continue
        radius = -(-(max_distance + 1) // bands) - 1
        probes = sum(math.comb(width, i) for i in range(radius + 1))
        cost = bands * (queries * probes * (1 + count / 2 ** width) + 2 ** width)
        if best is None or cost < best[0]:
            widths = [BITS // bands + (1 if i < BITS % bands else 0) for i in range(bands)]
            best = (cost, widths, radius)
    return best[1], best[2]


def _flips(width, radius):
    """Every value of ``width`` bits with at most ``radius`` bits set."""
    masks = [0]
    for r in range(1, radius + 1):
        masks += [sum(1 << b for b in bits) for bits in itertools.combinations(range(width), r)]
    return np.array(masks, dtype=np.int64)


def near_pairs(hashes, groups, max_distance=MAX_DISTANCE, chunk=1 << 20):
    """Every pair of hashes within ``max_distance`` bits whose groups differ.

    Only the hashes outside the largest group look others up (every pair across groups has
    one), so a table that is mostly TRAIN costs little more than its other splits.

    Args:
        hashes: uint64 array-like of hashes.
        groups: int array-like, one group per hash (e.g. the split): pairs within one group
            are left out.
        max_distance: the largest distance of a pair, 0 to 63.
        chunk: lookups made at once (bounds memory).

    Returns:
        ``(first, second, distance)``: int64 arrays of the pairs' indexes (first < second) and
        their distances, sorted by ``(second, first)``.
    """
    hashes = np.asarray(hashes, dtype=np.uint64)
    groups = np.asarray(groups, dtype=np.int64)
    if not 0 <= max_distance < BITS:
        raise ValueError(f"max_distance must be 0 to {BITS - 1}, not {max_distance!r}")
    found = []
    names, sizes = np.unique(groups, return_counts=True)
    if len(names) > 1:
        largest = names[np.argmax(sizes)]
        queries = np.flatnonzero(groups != largest)
        widths, radius = _bands(len(hashes), len(queries), max_distance)
        shift = BITS
        for width in widths:
            shift -= width
            found.append(_band_pairs(hashes, groups, queries, largest, shift, width, radius,
                                     max_distance, chunk))
    if not found:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    pairs = np.unique(np.concatenate(found))  # one pair may be found in several bands
    second, first = pairs // len(hashes), pairs % len(hashes)
    return first, second, _popcount(hashes[first] ^ hashes[second]).astype(np.int64)


def _band_pairs(hashes, groups, queries, largest, shift, width, radius, max_distance, chunk):
    """Pairs found through one band, as ``second * n + first`` codes (first < second)."""
    n = len(hashes)
    keys = ((hashes >> np.uint64(shift)) & np.uint64((1 << width) - 1)).astype(np.int64)
    order = np.argsort(keys, kind="stable")
    in_order = hashes[order]  # a bucket's hashes side by side
    counts = np.bincount(keys, minlength=1 << width).astype(np.int32)  # half the memory
    starts = (np.cumsum(counts, dtype=np.int64) - counts).astype(np.int32)
    flips = _flips(width, radius)
    step = max(1, chunk // len(flips))
    out = []
    for begin in range(0, len(queries), step):
        asking = queries[begin:begin + step]
        probes = (keys[asking][:, None] ^ flips[None, :]).ravel()
        found = counts[probes]
        total = int(found.sum(dtype=np.int64))
        if not total:
            continue
        # position in ``order`` of every hash found: its bucket's start plus its rank there
        skip = starts[probes] - (np.cumsum(found, dtype=np.int64) - found)
        positions = np.arange(total) + np.repeat(skip, found)
        mine = np.repeat(hashes[asking], found.reshape(len(asking), len(flips)).sum(axis=1))
        close = np.flatnonzero(_popcount(in_order[positions] ^ mine) <= max_distance)
        other = order[positions[close]]
        asking = np.repeat(asking, found.reshape(len(asking), len(flips)).sum(axis=1))[close]
        # across groups only; a pair of two asking hashes is kept once, from its later one
        keep = (groups[other] != groups[asking]) & ((groups[other] == largest) |
                                                   (other < asking))
        asking, other = asking[keep], other[keep]
        out.append(np.maximum(asking, other) * n + np.minimum(asking, other))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def near_duplicates(entries, max_distance=MAX_DISTANCE):
    """The pairs of near-identical images in different splits.

    Args:
        entries: ``(key, split, perceptual hash as int or None)`` per image, in table order
            (the order that decides which row of a pair is the later one).
        max_distance: the largest distance (differing bits) of a pair.

    Returns:
        ``(later key, earlier key, distance)`` per pair, in order of the later key's entry.
    """
    entries = [e for e in entries if e[2] is not None]
    if not entries:
        return []
    splits = {split: i for i, split in enumerate(dict.fromkeys(e[1] for e in entries))}
    first, second, distance = near_pairs([e[2] for e in entries],
                                         [splits[e[1]] for e in entries], max_distance)
    return [(entries[b][0], entries[a][0], int(d))
            for a, b, d in zip(first.tolist(), second.tolist(), distance.tolist())]


def describe(other, distance):
    """The problem text of a row that looks like ``other`` (its description)."""
    return f"{KIND}: looks like {other} (distance {distance} of {BITS} bits)"
