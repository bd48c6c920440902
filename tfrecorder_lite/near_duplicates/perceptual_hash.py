"""Perceptual hashes of images: what finds near-identical ones across splits.

A hash is 64 bits: the signs, against their median, of the 63 lowest-frequency DCT
coefficients of the image's luminance (the DC term left out), resized to a 32x32 grid by Pillow
(``images.luminance_grid``); the hashes of the image's crops are taken from the same grid. The
same photo resized, re-encoded (JPEG at another quality, PNG), brightened or darkened a little
keeps nearly the same bits; two different photos differ in about half of them. The distance is
the number of differing bits (Hamming). The finer hashes here confirm a pair the search
(``near_duplicates.search``) finds.
"""

import itertools
import math

import numpy as np

from ..images.luminance_grid import GRID, encoded_luminance_grid, luminance_grid

BITS = 64
MAX_DISTANCE = 6  # at most this many differing bits is a near-duplicate (a distance is even)
KIND = "near-duplicate across splits"  # the problem's name, as validate() reports it
_SIDE = 32  # each crop of the luminance grid is shrunk to _SIDE x _SIDE before the DCT
_LOW = 8  # coefficients kept: the _LOW x _LOW lowest frequencies, DC left out
_FINE_LOW = 16  # and for the finer hash that confirms a pair
FINE_BITS = _FINE_LOW * _FINE_LOW - 1
FINE_MAX_DISTANCE = 40  # a pair whose fine hashes differ in more is two pictures
MAX_CHROMA_DIFFERENCE = 8  # and so is one whose mean Cb or Cr (of 255) differs by more
# The hash's name, as metadata.json keeps it: hashes of other versions are a few bits apart.
METHOD = (f"{BITS}-bit DCT perceptual hash of the luminance, crops of a {GRID}x{GRID} grid, "
          f"shrunk as a JPEG draft of at least {GRID}x{GRID} first")
# The crops hashed beside the whole image, as fractions cut off (left, top, right, bottom):
# 5% off two sides at each corner, 2.5% off every side, and 5% off every side (the last came
# after the others: hashes files of earlier versions keep the first five, which compare as
# they did).
CROPS = ((0.05, 0.05, 0, 0), (0, 0, 0.05, 0.05), (0.05, 0, 0, 0.05), (0, 0.05, 0.05, 0),
         (0.025, 0.025, 0.025, 0.025), (0.05, 0.05, 0.05, 0.05))
_FRACTIONS = ((0, 0, 0, 0), *CROPS)  # the whole image, then the crops


def _dct_rows(n, rows):
    """The first ``rows`` rows of the orthonormal DCT-II matrix of size ``n``."""
    k = np.arange(rows)[:, None]
    i = np.arange(n)[None, :]
    matrix = np.cos(np.pi * (2 * i + 1) * k / (2 * n)) * math.sqrt(2 / n)
    matrix[0] /= math.sqrt(2)
    return matrix


_DCT = _dct_rows(_SIDE, _LOW)


def hash_grids(grids):
    """The perceptual hashes of many luminance grids (:func:`luminance_grid`) at once.

    Each crop of ``_FRACTIONS`` is shrunk to _SIDE x _SIDE by area and its lowest DCT terms
    taken, as two small matrix products a grid; the bits of every grid are then taken
    together.

    Args:
        grids: a sequence of ``GRID * GRID``-byte grids.

    Returns:
        A uint64 array, a row per grid: the whole image's hash, then its crops' (in
        ``[0, 2**63)``).
    """
    count = len(grids)
    pixels = np.frombuffer(b"".join(grids), dtype=np.uint8).reshape(count, GRID, GRID)
    # products of a stack of grids: numpy multiplies each grid on its own, small enough for
    # BLAS to keep to the calling thread (OpenBLAS spreads larger products over threads that
    # then spin, taking the cores from the threads preparing images), and a stack releases
    # the GIL once (a loop of grids, once a grid: each costs threads a wait for it)
    columns = (pixels.astype(np.float64) @ _COLUMNS).reshape(
        count, GRID, len(_FRACTIONS), _LOW).transpose(0, 2, 1, 3)
    low = np.matmul(_ROWS, columns)
    low = low.reshape(count, len(_FRACTIONS), _LOW * _LOW)[:, :, 1:]  # the DC term left out
    median = np.partition(low, 31, axis=2)[:, :, 31:32]  # the 32nd of 63 AC terms
    bits = np.zeros((count, len(_FRACTIONS), BITS), dtype=bool)
    bits[:, :, 1:] = low > median  # the top bit stays 0
    return np.packbits(bits, axis=2).view(">u8")[:, :, 0].astype(np.uint64)


def perceptual_hashes(image):
    """The perceptual hashes of a Pillow image (as displayed: rotate it upright first): of
    the whole image, then of its crops in ``CROPS``.

    A copy cropped by a few percent is far from the whole image's hash but near one of its
    crops' (:func:`near_pairs` compares whole images with whole images and crops).

    Args:
        image: a loaded Pillow image of any mode and size.

    Returns:
        A tuple of ``1 + len(CROPS)`` ints in ``[0, 2**63)``.
    """
    return grid_hashes(luminance_grid(image))


def grid_hashes(grid):
    """The perceptual hashes of one luminance grid, as :func:`perceptual_hashes` gives them
    (:func:`hash_grids` hashes many at once)."""
    return tuple(hash_grids([grid])[0].tolist())


def _area_weights(start, stop, size):
    """The ``(_SIDE, size)`` matrix that shrinks pixels ``[start, stop)`` (fractions of the
    line) of a ``size``-pixel line to _SIDE pixels, each the mean of the pixels it covers."""
    edges = np.linspace(start * size, stop * size, _SIDE + 1)
    pixels = np.arange(size)
    covered = np.clip(np.minimum(edges[1:, None], pixels + 1) -
                      np.maximum(edges[:-1, None], pixels), 0, None)
    return covered / covered.sum(axis=1, keepdims=True)


def _matrices(grid, dct):
    """Per crop, its rows' shrink folded into ``dct`` (the DCT's first rows), ``(crops, low,
    grid)``; and its columns' likewise, side by side, ``(grid, crops * low)``."""
    rows = np.stack([dct @ _area_weights(top, 1 - bottom, grid)
                     for _, top, _, bottom in _FRACTIONS])
    columns = np.concatenate([(dct @ _area_weights(left, 1 - right, grid)).T
                              for left, _, right, _ in _FRACTIONS], axis=1)
    return rows, columns


_ROWS, _COLUMNS = _matrices(GRID, _DCT)
# The crops a pair's images are compared by when it is confirmed, as fractions cut off
# (left, top, right, bottom): 0, 2.5 or 5% off each side (the whole image first), so that a
# copy cropped by up to 5% a side is within 1.25% a side of one of them (the fine hash keeps
# detail that moves with a crop: the search's crops, 5% apart, are too far apart for it).
_STEPS = (0, 0.025, 0.05)
ALIGNED = tuple((left, top, right, bottom) for top, bottom in itertools.product(_STEPS, _STEPS)
                for left, right in itertools.product(_STEPS, _STEPS))


def _aligned_matrices(grid, dct):
    """The rows' shrink of every ``(top, bottom)`` of ``_STEPS`` folded into ``dct`` (the
    DCT's first rows), one above the other, ``(9 * low, grid)``; and the columns' of every
    ``(left, right)``, side by side, ``(grid, 9 * low)``."""
    sides = list(itertools.product(_STEPS, _STEPS))
    rows = np.concatenate([dct @ _area_weights(top, 1 - bottom, grid) for top, bottom in sides])
    columns = np.concatenate([(dct @ _area_weights(left, 1 - right, grid)).T
                              for left, right in sides], axis=1)
    return rows, columns


# (float32: the signs of the terms against their median are all a fine hash keeps)
_FINE_ROWS, _FINE_COLUMNS = (matrix.astype(np.float32) for matrix in
                             _aligned_matrices(GRID, _dct_rows(_SIDE, _FINE_LOW)))


def fine_hashes(grids):
    """The finer hashes that confirm a pair of near-identical images: per luminance grid
    (:func:`luminance_grid`), for each crop of ``ALIGNED`` (the whole image first), the signs
    against their median of the ``FINE_BITS`` lowest DCT terms (``_FINE_LOW`` x
    ``_FINE_LOW``, the DC term left out). One product a grid gives every crop's terms (a
    crop's rows and columns are shrunk apart).

    The 64-bit hash keeps the layout of a picture, which photos of one composition share
    (garments laid out on one floor); these terms keep its detail too, and copies of one
    photo still agree in most of them.

    Args:
        grids: a sequence of ``GRID * GRID``-byte grids.

    Returns:
        A uint8 array ``(grids, len(ALIGNED), 32)``: each hash's bits, packed.
    """
    count, sides, low = len(grids), len(_STEPS) ** 2, _FINE_LOW
    pixels = np.frombuffer(b"".join(grids), dtype=np.uint8).reshape(count, GRID, GRID)
    columns = pixels.astype(np.float32) @ _FINE_COLUMNS  # (grids, GRID, 9 * low)
    # the rows, a product a grid (as in hash_grids: one product of the whole stack would be
    # spread by OpenBLAS over threads that spin, several times the work in CPU time)
    terms = np.matmul(_FINE_ROWS, columns)  # (grids, 9 * low, 9 * low)
    terms = terms.reshape(count, sides, low, sides, low).transpose(0, 1, 3, 2, 4)
    terms = terms.reshape(count, sides * sides, low * low)[:, :, 1:]  # the DC term left out
    median = np.partition(terms, FINE_BITS // 2, axis=2)[:, :, FINE_BITS // 2:FINE_BITS // 2 + 1]
    return np.packbits(terms > median, axis=2)


def fine_distance(first, second):
    """The distance of two images' fine hashes (:func:`fine_hashes`): the smallest of each
    whole image's against every crop of the other (the whole one included)."""
    differ = np.concatenate([first[0] ^ second, first[1:] ^ second[0]])
    return int(_POPCOUNT8[differ].sum(axis=1).min())


def hash_encoded(data):
    """The perceptual hashes of encoded image bytes (see :func:`encoded_luminance_grid`), or
    None when they do not decode."""
    grid = encoded_luminance_grid(data)
    return None if grid is None else grid_hashes(grid)


def to_hex_rows(hashes):
    """Rows of hashes (a uint64 array, as :func:`hash_grids` gives them) as text, one string
    a row: 16 hex digits a hash, side by side."""
    width = 16 * hashes.shape[1] if hashes.ndim == 2 else 0
    text = hashes.astype(">u8").tobytes().hex()
    return [text[i:i + width] for i in range(0, len(text), width)] if width else []


def from_hex(text):
    """Hashes from their text (ValueError when it is not 16 hex digits a hash)."""
    if not isinstance(text, str) or not text or len(text) % 16:
        raise ValueError(f"perceptual hashes are 16 hex digits each, not {text!r}")
    return tuple(int(text[i:i + 16], 16) for i in range(0, len(text), 16))


def rows_from_hex(texts):
    """Many images' hashes from their texts (as many hashes in each) at once: uint64 rows."""
    if not texts:
        return np.zeros((0, 0), dtype=np.uint64)
    return np.frombuffer(bytes.fromhex("".join(texts)), dtype=">u8").astype(
        np.uint64).reshape(len(texts), -1)


def distance(a, b):
    """The number of bits two hashes differ in."""
    return (a ^ b).bit_count()


_POPCOUNT8 = np.array([bin(i).count("1") for i in range(1 << 8)], dtype=np.int32)


def describe(other, distance):
    """The problem text of a row that looks like ``other`` (its description)."""
    return f"{KIND}: looks like {other} (distance {distance} of {BITS} bits)"
