"""COCO's run-length masks, in numpy: polygons rasterized by the rule ``pycocotools.mask``
follows, compressed RLE strings read, and counts decoded to a 0/1 array.

An RLE lists alternating runs of 0s and 1s (starting with 0s) down the columns of the image
(column-major). A polygon is rasterized as pycocotools does it: its corners are scaled by 5 and
rounded, its edges walked a step at a time, and a pixel is inside where a column's boundary
crossing says so; the same rule gives the same pixels.
"""

import math

import numpy as np

_SCALE = 5  # the polygon rasterizer's upsampling
_MAX_SHIFT = 64  # a count (or difference) of 13 characters holds 65 bits: more than any image


def from_polygon(xy, height, width):
    """The RLE counts of one polygon (``[x1, y1, x2, y2, ...]``, pixel coordinates)."""
    xs = [int(_SCALE * x + 0.5) for x in xy[0::2]]
    ys = [int(_SCALE * y + 0.5) for y in xy[1::2]]
    us, vs = _edge_points(xs + xs[:1], ys + ys[:1])
    starts = []
    for j in range(1, len(us)):
        if us[j] == us[j - 1]:
            continue  # not a step to the next column
        column = us[j] if us[j] < us[j - 1] else us[j] - 1
        x = (column + 0.5) / _SCALE - 0.5
        if math.floor(x) != x or x < 0 or x > width - 1:
            continue  # between pixel columns, or outside the image
        y = (min(vs[j], vs[j - 1]) + 0.5) / _SCALE - 0.5
        y = math.ceil(min(max(y, 0), height))
        starts.append(int(x) * height + y)
    return _runs(sorted(starts + [height * width]))


def _edge_points(xs, ys):
    """The upsampled points along each edge, one per step of its longer side."""
    us, vs = [], []
    for j in range(len(xs) - 1):
        x0, x1, y0, y1 = xs[j], xs[j + 1], ys[j], ys[j + 1]
        dx, dy = abs(x1 - x0), abs(y1 - y0)
        flip = (dx >= dy and x0 > x1) or (dx < dy and y0 > y1)
        if flip:
            x0, x1, y0, y1 = x1, x0, y1, y0
        steps = np.arange(max(dx, dy) + 1)
        if flip:
            steps = steps[::-1]
        if dx >= dy:
            slope = (y1 - y0) / dx if dx else 0.0
            us += (steps + x0).tolist()
            vs += (y0 + slope * steps + 0.5).astype(np.int64).tolist()
        else:
            slope = (x1 - x0) / dy
            vs += (steps + y0).tolist()
            us += (x0 + slope * steps + 0.5).astype(np.int64).tolist()
    return us, vs


def _runs(starts):
    """Counts from the sorted pixel positions where runs flip (the last: the pixel count);
    positions that repeat cancel out."""
    gaps, previous = [], 0
    for position in starts:
        gaps.append(position - previous)
        previous = position
    counts, j = [gaps[0]], 1
    while j < len(gaps):
        if gaps[j] > 0:
            counts.append(gaps[j])
            j += 1
        else:  # two flips at one pixel: no run between, the next run joins the last
            j += 1
            if j < len(gaps):
                counts[-1] += gaps[j]
                j += 1
    return counts


def uncompress(text):
    """The counts of a compressed RLE string (``"counts"`` of an ``iscrowd`` annotation as
    ``pycocotools.mask.encode`` writes it: 5 bits a character from ``"0"``, the next character
    continuing a number, each count after the second a difference from the one two before).

    Raises:
        ValueError: a character outside the encoding, or a number of more than 13 characters.
    """
    counts, value, shift = [], 0, 0
    for position, char in enumerate(text):
        code = char - 48
        if not 0 <= code < 64:
            raise ValueError(f"counts hold {chr(char)!r} at {position}, which no compressed "
                             "RLE holds")
        value |= (code & 0x1F) << shift
        shift += 5
        if code & 0x20:
            if shift > _MAX_SHIFT:
                raise ValueError(f"counts hold a number longer than any image's at {position}")
            continue
        if code & 0x10:
            value -= 1 << shift  # a negative difference
        if len(counts) > 2:
            value += counts[-2]
        counts.append(value)
        value, shift = 0, 0
    if shift:
        raise ValueError("counts end in the middle of a number")
    return counts


def decode(counts, height, width):
    """The uint8 ``[height, width]`` 0/1 mask of RLE ``counts``.

    Raises:
        ValueError: a negative count, or counts that do not cover the image.
    """
    counts = np.asarray(counts, dtype=np.int64)
    if (counts < 0).any():
        raise ValueError(f"counts hold a negative count ({int(counts.min())})")
    if int(counts.sum()) != height * width:
        raise ValueError(f"counts cover {int(counts.sum())} pixels, the image {height}x{width} "
                         f"= {height * width}")
    values = (np.arange(len(counts)) % 2).astype(np.uint8)
    return np.repeat(values, counts).reshape(width, height).T.copy()
