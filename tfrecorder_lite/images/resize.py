"""Decode an encoded image to the pixels ``load()`` gives for it, with Pillow: JPEGs decoded at
a reduced scale where that still covers the target size, then resized as TensorFlow resizes.

``load(image_size=...)`` decodes a JPEG at 1/2, 1/4 or 1/8 scale when that still covers the
target (libjpeg's scaled decode, picked as Pillow's ``draft()`` picks it), then resizes with
``tf.image.resize``: bilinear, half-pixel centres, no antialiasing, rounded to uint8. Pillow's
``resize()`` antialiases (a shrunken image differs by tens of levels), but its affine
``transform()`` samples bilinearly at the same points without antialiasing; done on float
channels and rounded as ``load()`` rounds, it gives ``load()``'s pixels to within one level.
One channel is what TensorFlow's decoders give: a JPEG's luma (libjpeg's), and for other
formats libpng's integer grey of RGB (Pillow's ``convert("L")`` rounds where it truncates).
"""

import io

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
            pixels = np.asarray(image.convert(mode))
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
    from PIL import Image

    height, width = pixels.shape[:2]
    out_height, out_width = size
    # output pixel centre (x + 0.5) maps to input x' = (x + 0.5) * scale, sampled at x' - 0.5
    scale = (width / out_width, 0, 0, 0, height / out_height, 0)
    planes = [np.asarray(Image.fromarray(pixels[:, :, c].astype(np.float32), "F").transform(
        (out_width, out_height), Image.Transform.AFFINE, scale,
        resample=Image.Resampling.BILINEAR)) for c in range(pixels.shape[2])]
    return (np.stack(planes, axis=-1) + 0.5).astype(np.uint8)  # within [0, 255]
