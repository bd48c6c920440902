"""Decode an encoded image to the pixels ``load()`` gives for it, with Pillow: JPEGs decoded at
a reduced scale where that still covers the target size, then resized as TensorFlow resizes.

``load(image_size=...)`` decodes a JPEG at 1/2, 1/4 or 1/8 scale when that still covers the
target (libjpeg's scaled decode, picked as Pillow's ``draft()`` picks it), then resizes with
``tf.image.resize``: bilinear, half-pixel centres, no antialiasing, rounded to uint8. Pillow's
``resize()`` antialiases (a shrunken image differs by tens of levels), and its 8-bit affine
``transform()`` truncates where ``load()`` rounds, so the resize here is TensorFlow's own
arithmetic in numpy: the same sample points and weights in float32, the same four pixels summed
in the same order (across a row, then down), rounded as ``load()`` rounds. The pixels left and
right of each sample point are gathered by Pillow's nearest-neighbour scaling
(:func:`resize_image`) where it is seen to pick TensorFlow's columns, else in numpy.
One channel is what TensorFlow's decoders give: a JPEG's luma (libjpeg's), and for other
formats libpng's integer grey of RGB (Pillow's ``convert("L")`` rounds where it truncates).
"""

import functools
import io
import threading

import numpy as np


def decode(encoded, channels=3, image_size=None):
    """The uint8 ``[height, width, channels]`` array of an encoded image.

    Args:
        encoded: the image file's bytes.
        channels: 3 (RGB) or 1 (grayscale; when resized, as TensorFlow's decoders give it).
        image_size: ``(height, width)`` to resize to as ``load()`` does, or None.
    """
    from PIL import Image

    mode = "RGB" if channels == 3 else "L"
    with Image.open(io.BytesIO(encoded)) as image:
        jpeg = image.format == "JPEG"
        if image_size is not None and jpeg:
            image.draft(mode, (image_size[1], image_size[0]))  # 1/2, 1/4, 1/8 if it covers
        if image_size is not None and mode == "L" and not jpeg and \
                image.mode not in ("L", "LA"):
            pixels = _grey(np.asarray(image.convert("RGB")))
        else:
            image = image if image.mode == mode else image.convert(mode)
            if image_size is not None and image.size != (image_size[1], image_size[0]):
                resized = resize_image(image, image_size)
                if resized is not None:
                    return resized
            pixels = np.asarray(image)
        pixels = pixels.reshape(pixels.shape[0], pixels.shape[1], channels)
    if image_size is None or pixels.shape[:2] == tuple(image_size):
        return pixels
    return resize_bilinear(pixels, image_size)


def _grey(rgb):
    """libpng's grey of uint8 RGB (``png_set_rgb_to_gray`` with 0.299 and 0.587, as
    TensorFlow's ``decode_png(channels=1)`` asks for): 15-bit weights, truncated."""
    weights = np.array([9797, 19234, 3737], dtype=np.uint32)
    return ((rgb.astype(np.uint32) @ weights) >> 15).astype(np.uint8)


def resize_bilinear(pixels, size):
    """``pixels`` (uint8 ``[h, w, c]``) resized to ``size`` (height, width) as
    ``tf.image.resize`` does (bilinear, half-pixel centres, no antialiasing), rounded to
    uint8 as ``load()`` rounds."""
    height, width, channels = pixels.shape
    needed, above_at, below_at, down = _row_taps(height, size[0])
    left, right, across = _taps(width, size[1], channels)
    rows = pixels.reshape(height, width * channels)  # a pixel's channels side by side
    values, used = size[1] * channels, len(needed)
    # the source rows needed, gathered into this thread's scratch arrays: fresh arrays of
    # this size would be new pages of memory for every image. The taps are in range by
    # construction; mode="clip" spares the copy numpy makes of ``out`` under mode="raise"
    both = np.take(rows, needed, axis=0, out=_scratch("rows", np.uint8, (used, rows.shape[1])),
                   mode="clip")
    gathered = _scratch("gathered", np.uint8, (used, values))
    near = _scratch("near", np.float32, (used, values))
    far = _scratch("far", np.float32, (used, values))
    np.copyto(near, np.take(both, left, axis=1, out=gathered, mode="clip"))
    np.copyto(far, np.take(both, right, axis=1, out=gathered, mode="clip"))
    return _interpolated(near, far, across, above_at, below_at, down, size, channels)


def resize_image(image, size):
    """A Pillow image (mode RGB or L) resized to ``size`` as :func:`resize_bilinear` resizes
    its pixels, with the pixels on either side of each sample point gathered by Pillow's
    nearest-neighbour scaling (in C, one table of columns for every row). None for the few
    sizes where Pillow does not pick TensorFlow's columns (:func:`_pillow_columns`), and for
    an image more than twice as tall as the target (numpy gathers only the rows it needs)."""
    from PIL import Image

    columns = _pillow_columns(image.width, size[1])
    if columns is None or image.height > 2 * size[0]:
        return None
    origin, scale, before, beyond = columns
    height, channels = image.height, 3 if image.mode == "RGB" else 1
    values = size[1] * channels
    near = _scratch("near", np.float32, (height, values))
    far = _scratch("far", np.float32, (height, values))
    for shift, gathered in ((0, near), (1, far)):  # every row's left, then right, columns
        picked = image.transform((size[1], height), Image.Transform.AFFINE,
                                 (scale, 0, origin + shift, 0, 1, 0), Image.Resampling.NEAREST)
        np.copyto(gathered, np.asarray(picked).reshape(height, values))
    if before:  # sample points left of the first column: TensorFlow takes it on both sides
        near[:, :before * channels] = far[:, :before * channels]
    if beyond:  # right of the last column: the same
        far[:, values - beyond * channels:] = near[:, values - beyond * channels:]
    above, below, down = _taps(height, size[0], 1)
    _, _, across = _taps(image.width, size[1], channels)
    return _interpolated(near, far, across, above, below, down, size, channels)


def _interpolated(near, far, across, above_at, below_at, down, size, channels):
    """The resized uint8 image from the rows of pixels left (``near``) and right (``far``) of
    the sample points: each row interpolated across, then the rows above and below each
    sample point (``above_at``, ``below_at``, rows of ``far``; None: the first ``size[0]``
    rows are those above, the rest those below) interpolated down. ``far`` is overwritten."""
    count, values = size[0], size[1] * channels
    far -= near
    far *= across
    far += near  # each row interpolated across
    if above_at is None:  # the rows above the sample points, then those below
        above, below = far[:count], far[count:]
    else:
        above = np.take(far, above_at, axis=0,
                        out=_scratch("above", np.float32, (count, values)), mode="clip")
        below = np.take(far, below_at, axis=0)
    below -= above
    below *= down[:, None]
    below += above
    below += np.float32(0.5)  # within [0, 255]: adding 0.5 and truncating rounds it
    return below.astype(np.uint8).reshape(size[0], size[1], channels)


_local = threading.local()


def _scratch(name, dtype, shape):
    """This thread's scratch array ``name`` viewed as ``shape`` (kept, grown as needed)."""
    count = shape[0] * shape[1]
    arrays = _local.__dict__.setdefault("arrays", {})
    array = arrays.get(name)
    if array is None or array.size < count:
        array = arrays[name] = np.empty(count, dtype)
    return array[:count].reshape(shape)


@functools.lru_cache(maxsize=512)
def _row_taps(in_size, out_size):
    """``(needed, above_at, below_at, down)``: the source rows to interpolate across, where
    the rows above and below each sample point are among them, and the lower one's weight.
    Rows shared by sample points are interpolated once where that saves a quarter or more
    of the rows; otherwise ``needed`` is the rows above, then those below (``above_at`` and
    ``below_at`` None)."""
    top, bottom, down = _taps(in_size, out_size, 1)
    needed, at = np.unique(np.concatenate((top, bottom)), return_inverse=True)
    if len(needed) > 0.75 * 2 * out_size:
        needed, above_at, below_at = np.concatenate((top, bottom)), None, None
    else:
        above_at, below_at = at[:out_size].astype(np.int32), at[out_size:].astype(np.int32)
    taps = (needed.astype(np.int32), above_at, below_at, down)
    for array in taps:
        if array is not None:
            array.flags.writeable = False  # shared by every image of these sizes
    return taps


def _sample_points(in_size, out_size):
    """TensorFlow's sample points along one axis (``compute_interpolation_weights``, half-pixel
    centres, in float32) and the whole number at or below each."""
    scale = np.float32(in_size) / np.float32(out_size)
    centres = (np.arange(out_size, dtype=np.float32) + np.float32(0.5)) * scale - np.float32(0.5)
    return centres, np.floor(centres)


@functools.lru_cache(maxsize=512)
def _taps(in_size, out_size, channels):
    """TensorFlow's bilinear taps along one axis (``compute_interpolation_weights``, half-pixel
    centres, all in float32): the indices of the lower and upper source values of each output
    value (``channels`` values a pixel, side by side) and the upper one's weight."""
    centres, floor = _sample_points(in_size, out_size)
    lower = np.maximum(floor, 0).astype(np.int32)  # numpy gathers by int32 faster than intp
    upper = np.minimum(np.ceil(centres), in_size - 1).astype(np.int32)
    weight = centres - floor
    offsets = np.arange(channels, dtype=np.int32)
    taps = ((lower[:, None] * channels + offsets).ravel(),
            (upper[:, None] * channels + offsets).ravel(), np.repeat(weight, channels))
    for array in taps:
        array.flags.writeable = False  # shared by every image of these sizes
    return taps


# Pillow's scaling puts sample points in double precision, TensorFlow's in float32: where a
# point falls on a whole column they may round apart, which moving Pillow's origin by a hair
# settles (each tried in turn until every column agrees)
_ORIGIN_NUDGES = (0.0, 1e-9, -1e-9, 1e-7, -1e-7, 1e-6, -1e-6, 1e-5, -1e-5)


@functools.lru_cache(maxsize=512)
def _pillow_columns(in_size, out_size):
    """``(origin, scale, before, beyond)`` such that Pillow's nearest-neighbour scaling of
    ``in_size`` columns to ``out_size`` (an affine ``transform``: column ``j`` from
    ``origin + scale * (j + 0.5)``) picks the column left of each of TensorFlow's sample
    points (:func:`_taps`), and from ``origin + 1`` the one right of it wherever that one
    has weight; ``before`` and ``beyond`` sample points lie left of the first column and
    right of the last (where TensorFlow takes the edge column twice). None when no origin
    agrees. Found on a probe image whose pixels are their column numbers."""
    from PIL import Image

    centres, floor = _sample_points(in_size, out_size)
    left, weight, scale = floor.astype(np.int64), centres - floor, in_size / out_size
    before, beyond = left < 0, left + 1 > in_size - 1
    counted = ~beyond & (weight != 0)  # right columns whose pixels count
    numbers = Image.frombytes("I", (in_size, 1), np.arange(in_size, dtype=np.int32).tobytes())

    def picked(origin):
        found = numbers.transform((out_size, 1), Image.Transform.AFFINE,
                                  (scale, 0, origin, 0, 1, 0),
                                  Image.Resampling.NEAREST, fillcolor=-1)
        return np.frombuffer(found.tobytes(), dtype=np.int32)

    for nudge in _ORIGIN_NUDGES:
        origin = -0.5 + nudge
        if np.array_equal(picked(origin)[~before], left[~before]) and \
                np.array_equal(picked(origin + 1)[counted], left[counted] + 1):
            return origin, scale, int(before.sum()), int(beyond.sum())
    return None
