"""A box's instance mask: the table cell checked without its image (polygons relative to the
image, or COCO's polygons in pixels or RLE), rasterized to a 0/1 array for its image, and
stored as one single-channel PNG of 0/1.
"""

import json
import math
import numbers

import numpy as np

from ..redaction import shown
from .mask_pixels import MaskRejected, encode_ids

# an instance mask given as polygons relative to its image: {RELATIVE_POLYGONS: [[x1, y1, ...]]}
RELATIVE_POLYGONS = "relative_polygons"


def instance_mask(mask):
    """One box's instance mask as a table cell holds it, checked without its image:
    ``(RELATIVE_POLYGONS, polygons)`` (relative to the image), ``("polygons", polygons)``
    (COCO's, in pixels), each polygon a list of three x, y points or more as floats, or
    ``("rle", (height, width, counts))`` (COCO's RLE, compressed or not, as whole counts that
    cover ``height x width``).

    Args:
        mask: the cell: ``{"relative_polygons": [[x1, y1, ...]]}``, COCO's mask (a
            list of polygons or an RLE ``{"size": [h, w], "counts": ...}``), or its JSON text.

    Raises:
        MaskRejected: naming the part that is wrong (``RLE size``, ``RLE counts``, ``polygon
            2``) and what it may be.
    """
    if isinstance(mask, str):
        try:
            mask = json.loads(mask)
        except (ValueError, RecursionError):
            raise MaskRejected("mask is neither polygons nor an RLE (not JSON)") from None
    if isinstance(mask, dict) and RELATIVE_POLYGONS in mask:
        polygons = mask[RELATIVE_POLYGONS]
        if not isinstance(polygons, (list, tuple)) or not polygons:
            raise MaskRejected(f"{RELATIVE_POLYGONS} {shown(polygons, 40)}: expected a list "
                               "of polygons [x1, y1, x2, y2, ...]")
        return RELATIVE_POLYGONS, _polygons(polygons)
    if isinstance(mask, dict):
        return "rle", _rle(mask)
    if isinstance(mask, (list, tuple)) and mask and \
            all(isinstance(p, (list, tuple)) for p in mask):
        return "polygons", _polygons(mask)
    raise MaskRejected(f"no mask ({shown(mask, 40)}): a mask is a list of polygons or an RLE")


def _polygons(polygons):
    """``polygons`` as lists of floats; MaskRejected for one that is no list of three x, y
    numbers or more (finite, not text)."""
    checked = []
    for number, polygon in enumerate(polygons, 1):
        if not isinstance(polygon, (list, tuple)):
            raise MaskRejected(f"polygon {number} is {shown(polygon, 40)}, not x, y numbers")
        wrong = next((v for v in polygon if isinstance(v, bool) or
                      not isinstance(v, numbers.Real)), None)
        if wrong is not None:
            raise MaskRejected(f"polygon {number} holds {shown(wrong, 40)}, not a number: a "
                               "polygon is x, y numbers")
        if len(polygon) < 6 or len(polygon) % 2:
            raise MaskRejected(f"polygon {number} has {len(polygon)} coordinates: a polygon is "
                               "at least three x, y points")
        try:
            xy = [float(v) for v in polygon]
        except OverflowError:  # an integer beyond any float
            xy = [math.inf]
        if not all(math.isfinite(v) for v in xy):
            raise MaskRejected(f"polygon {number} has a coordinate that is not a number")
        checked.append(xy)
    return checked


def _rle(rle):
    """``(height, width, counts)`` of a COCO RLE; MaskRejected for a size that is no
    ``[height, width]`` of whole numbers > 0, or counts that are neither whole numbers >= 0
    nor a compressed RLE string, or that do not cover the size."""
    from . import coco_rle

    size = rle.get("size")
    if not (isinstance(size, (list, tuple)) and len(size) == 2 and
            all(_whole(v) and v > 0 for v in size)):
        raise MaskRejected(f"RLE size {shown(size, 40)}: expected [height, width], two whole "
                           "numbers > 0")
    height, width = (int(v) for v in size)
    counts = rle.get("counts")
    if isinstance(counts, (str, bytes)):
        try:
            counts = coco_rle.uncompress(counts.encode() if isinstance(counts, str) else counts)
        except (ValueError, UnicodeEncodeError) as exc:
            raise MaskRejected(f"RLE counts {shown(rle.get('counts'), 40)}: {exc}") from None
    elif not isinstance(counts, (list, tuple)) or not all(_whole(v) for v in counts):
        raise MaskRejected(f"RLE counts {shown(counts, 40)}: expected whole numbers >= 0 "
                           "(runs of 0s and 1s down the columns) or a compressed RLE string")
    counts = [int(v) for v in counts]
    if any(v < 0 for v in counts):
        raise MaskRejected(f"RLE counts hold a negative count ({min(counts)})")
    if sum(counts) != height * width:
        raise MaskRejected(f"RLE counts cover {sum(counts)} pixels, the image {height}x{width} "
                           f"= {height * width}")
    return height, width, counts


def _whole(value):
    """True for a whole number (an int, or a float without a fraction), not a bool."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return isinstance(value, numbers.Integral) or (math.isfinite(value) and
                                                   float(value).is_integer())


def instance_mask_problem(masks):
    """None, or the reason (``"box 2 of 3: RLE size ..."``) the first of an image's box masks
    that :func:`instance_mask` refuses is refused for."""
    for number, mask in enumerate(masks, 1):
        try:
            instance_mask(mask)
        except MaskRejected as exc:
            return f"box {number} of {len(masks)}: {exc}"
    return None


def rasterize_instance(mask, height, width):
    """A uint8 ``[H, W]`` 0/1 mask of one box's instance mask cell (see
    :func:`instance_mask`) for its image of ``height x width`` pixels.

    Raises:
        MaskRejected: as :func:`instance_mask`, or a polygon outside the image, an RLE of
            another size.
    """
    kind, value = instance_mask(mask)
    if kind == RELATIVE_POLYGONS:
        return _fill([(np.asarray(xy) * np.resize([float(width), float(height)], len(xy)))
                      .tolist() for xy in value], height, width)
    if kind == "polygons":
        return _fill(value, height, width)
    return _decode_rle(*value, height, width)


def rasterize_polygons(polygons, height, width):
    """A uint8 ``[H, W]`` 0/1 mask of COCO polygons (``[[x1, y1, x2, y2, ...], ...]``, pixel
    coordinates), filled as ``pycocotools.mask.frPyObjects`` does.

    Raises:
        MaskRejected: a polygon of fewer than three points, or with a point outside the image.
    """
    return _fill(_polygons(polygons), height, width)


def _fill(polygons, height, width):
    """:func:`rasterize_polygons` of polygons already checked by :func:`_polygons`."""
    from . import coco_rle

    for number, polygon in enumerate(polygons, 1):
        xs, ys = np.asarray(polygon[0::2], float), np.asarray(polygon[1::2], float)
        outside = (xs < 0) | (xs > width) | (ys < 0) | (ys > height)
        if outside.any():
            i = int(np.flatnonzero(outside)[0])
            raise MaskRejected(f"polygon {number}: point ({xs[i]:g}, {ys[i]:g}) is outside the "
                               f"image ({width}x{height}, width x height)")
    mask = np.zeros((height, width), dtype=np.uint8)
    for polygon in polygons:
        mask |= coco_rle.decode(coco_rle.from_polygon(polygon, height, width), height, width)
    return mask


def rasterize_relative(polygons, height, width):
    """A uint8 ``[H, W]`` 0/1 mask of polygons whose coordinates are relative to the image
    (``[[x1, y1, x2, y2, ...], ...]``, x a fraction of the width, y of the height, as some
    source formats give them): scaled to pixels, then filled as :func:`rasterize_polygons` does.

    Raises:
        MaskRejected: a polygon that is no list of numbers, or as :func:`rasterize_polygons`.
    """
    return rasterize_instance({RELATIVE_POLYGONS: polygons}, height, width)


def rle_mask(rle, height, width):
    """A uint8 ``[H, W]`` 0/1 mask of a COCO RLE (``{"size": [h, w], "counts": [...] or
    "..."}``, uncompressed or compressed).

    Raises:
        MaskRejected: its size is not the image's, or its counts do not cover it.
    """
    if not isinstance(rle, dict):
        raise MaskRejected(f"RLE without a size [height, width]: {shown(rle, 80)}")
    return _decode_rle(*_rle(rle), height, width)


def _decode_rle(size_height, size_width, counts, height, width):
    """The 0/1 mask of checked RLE counts, whose size must be the image's."""
    from . import coco_rle

    if (size_height, size_width) != (height, width):
        raise MaskRejected(f"RLE size {size_height}x{size_width} is not its image's "
                           f"{height}x{width} (height x width)")
    return coco_rle.decode(counts, height, width)


def instance_png(mask):
    """One instance mask as records keep it: a single-channel PNG of 0/1."""
    return encode_ids(mask)

