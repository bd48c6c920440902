"""Decode an encoded image to the pixels ``load()`` gives for it, with Pillow: JPEGs decoded at
a reduced scale where that still covers the target size, then resized as TensorFlow resizes.

``load(image_size=...)`` decodes a JPEG at 1/2, 1/4 or 1/8 scale when that still covers the
target (libjpeg's scaled decode, picked as Pillow's ``draft()`` picks it), then resizes with
``tf.image.resize``: bilinear, half-pixel centres, no antialiasing, rounded to uint8. Pillow's
``resize()`` antialiases (a shrunken image differs by tens of levels), and its 8-bit affine
``transform()`` truncates where ``load()`` rounds, so the resize here is TensorFlow's own
arithmetic in numpy: the same sample points and weights in float32, the same four pixels summed
in the same order (across a row, then down), rounded as ``load()`` rounds.
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
            pixels = np.asarray(image if image.mode == mode else image.convert(mode))
        pixels = pixels.reshape(image.height, image.width, channels)
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
    count, values, used = size[0], size[1] * channels, len(needed)
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


@functools.lru_cache(maxsize=512)
def _taps(in_size, out_size, channels):
    """TensorFlow's bilinear taps along one axis (``compute_interpolation_weights``, half-pixel
    centres, all in float32): the indices of the lower and upper source values of each output
    value (``channels`` values a pixel, side by side) and the upper one's weight."""
    scale = np.float32(in_size) / np.float32(out_size)
    centres = (np.arange(out_size, dtype=np.float32) + np.float32(0.5)) * scale - np.float32(0.5)
    floor = np.floor(centres)
    lower = np.maximum(floor, 0).astype(np.int32)  # numpy gathers by int32 faster than intp
    upper = np.minimum(np.ceil(centres), in_size - 1).astype(np.int32)
    weight = centres - floor
    offsets = np.arange(channels, dtype=np.int32)
    taps = ((lower[:, None] * channels + offsets).ravel(),
            (upper[:, None] * channels + offsets).ravel(), np.repeat(weight, channels))
    for array in taps:
        array.flags.writeable = False  # shared by every image of these sizes
    return taps
