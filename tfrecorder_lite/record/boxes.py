"""Boxes of a detection record: their coordinate names and the checks an image's boxes pass
before it is written. Plain Python (a shard task imports it)."""

import numbers

BOX_COLUMNS = ("xmin", "ymin", "xmax", "ymax")
MAX_BOXES = 500  # AutoML's limit an image

def box_problem(boxes, units="relative", size=None):
    """The reason one image's boxes cannot be written, or None when they can.

    Args:
        boxes: the image's boxes, each ``(xmin, ymin, xmax, ymax)``.
        units: ``"relative"`` (fractions of the image, in [0, 1]) or ``"pixels"``.
        size: ``(height, width)`` of the image, with ``units="pixels"``.

    Returns:
        None, or e.g. ``"box 2 of 3: xmin 0.6 > xmax 0.2"`` (boxes counted from 1).
    """
    if units == "relative":
        limits, within = (1, 1, 1, 1), ("[0, 1]",) * 4
    elif units == "pixels" and size is not None:
        height, width = size
        limits = (width, height, width, height)
        within = (f"[0, {width}] (the image's width)", f"[0, {height}] (the image's height)") * 2
    else:
        raise ValueError(f"units must be 'relative', or 'pixels' with size=(height, width); "
                         f"got units={units!r}, size={size!r}")
    count = len(boxes)
    if count > MAX_BOXES:
        return f"{count} boxes: at most {MAX_BOXES} an image"
    for number, box in enumerate(boxes, 1):
        problem = _coordinate_problem(box, limits, within) or _order_problem(box)
        if problem:
            return f"box {number} of {count}: {problem}"
    return None


def _coordinate_problem(box, limits, within):
    """What is wrong with one of the box's coordinates (missing, no number, out of range)."""
    if len(box) != 4:
        return f"{len(box)} coordinates, expected 4 (xmin, ymin, xmax, ymax)"
    for name, value, limit, where in zip(BOX_COLUMNS, box, limits, within):
        if type(value) is not float and (isinstance(value, bool) or
                                          not isinstance(value, numbers.Real)):
            if value is None or type(value).__name__ == "NAType":
                return f"{name} is missing"
            return f"{name} {value!r} is not a number"
        if value != value:
            return f"{name} is missing or not a number"
        if not 0 <= value <= limit:
            return f"{name} {_shown(value)} is outside {where}"
    return None


def _order_problem(box):
    """``xmin >= xmax`` or ``ymin >= ymax``, in words."""
    for low, high in ((0, 2), (1, 3)):
        if box[low] >= box[high]:
            sign = ">" if box[low] > box[high] else "="
            return (f"{BOX_COLUMNS[low]} {_shown(box[low])} {sign} "
                    f"{BOX_COLUMNS[high]} {_shown(box[high])}")
    return None


def _shown(value):
    """A coordinate as short text that still tells two different values apart."""
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))
