"""Segmentation masks with Pillow and numpy: check one mask against its image and the labels,
and give the single-channel PNG of class ids to store, with its pixel counts.

A semantic mask is a single-channel image of class ids (greyscale of 1, 2, 4, 8 or 16 bits:
each sample is an id, never rescaled), a palette image ("P", the index is the class), or a
colour image ("RGB", "RGBA" opaque) mapped to classes through a colour table. Masks stay class
ids, pixel for pixel: a lossy mask (JPEG, WebP) is refused unless allowed, and nothing here
resizes or interpolates; a mask is taken as it is displayed (its EXIF orientation applied).
A box's instance mask is ``instance_masks``'s.
"""

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from .containers import EXIF_ORIENTATION
from .normalize import DEFAULT_MAX_PIXELS

DEFAULT_IGNORE = 255  # the TF Model Garden's ignore_label
LOSSY_FORMATS = ("JPEG", "MPO", "WEBP")
_ID_MODES = ("L", "1", "P", "I", "I;16")
_COLOUR_MODES = ("RGB", "RGBA", "P", "L")
_SHOWN = 3  # unknown values a reason names
_TURNS = range(2, 9)  # the EXIF orientations that turn or flip the pixels to display them
_SIDEWAYS = range(5, 9)  # those that swap the height and width
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_GREY = 0  # the colour type of a greyscale PNG
# bit depth -> the factor its samples are scaled by to 0-255 when decoded to 8 bits
_SCALED_GREY = {2: 255 // 3, 4: 255 // 15}


class MaskRejected(Exception):
    """The mask cannot be stored; ``str(exc)`` is the reason (naming the value and pixels)."""


@dataclass(frozen=True)
class MaskOptions:
    """How a table's masks are read.

    Attributes:
        num_labels: class ids 0 to ``num_labels - 1`` are labels (None: any id but the ignore
            value is a label).
        colors: ``((r, g, b), id)`` pairs of a colour table (id None: the ignore value), or
            None when masks hold class ids.
        ignore_value: the id of pixels to ignore (kept as it is), or None.
        allow_lossy: take JPEG and WebP masks (their ids may be off near edges).
    """

    num_labels: int = None
    colors: tuple = None
    ignore_value: int = DEFAULT_IGNORE
    allow_lossy: bool = False


@dataclass(frozen=True)
class PreparedMask:
    """The mask to store: a single-channel PNG of class ids, and what it holds.

    Attributes:
        encoded: the PNG's bytes.
        ids: the class ids present, ascending (the ignore value left out).
        pixels: the pixels of each of ``ids``.
        ignored: pixels of the ignore value.
    """

    encoded: bytes
    ids: tuple
    pixels: tuple
    ignored: int = 0


def prepare_mask(data, size, options=MaskOptions(), orientation=1):
    """Check ``data`` (a mask file's bytes) against its image and give the mask to store.

    Both are taken as they are displayed: the image upright (its EXIF orientation applied, as
    it is stored), and the mask too when its own file has an EXIF orientation.

    Args:
        data: the mask file's bytes.
        size: ``(height, width)`` of the row's image, as it was read (upright, before any
            resize).
        options: MaskOptions.
        orientation: the EXIF orientation the image was turned upright by (1: none), named
            when the mask is of another size.

    Returns:
        A PreparedMask; a single-channel 8-bit PNG of known ids (and no EXIF turn) is kept
        byte for byte.

    Raises:
        MaskRejected: with the reason (another size, a lossy format, an unknown id or colour
            named with its pixel count, an unreadable file).
    """
    try:
        mask = Image.open(io.BytesIO(data))
        mask_format = mask.format
        if mask.width * mask.height > DEFAULT_MAX_PIXELS:
            raise MaskRejected(f"mask of {mask.width}x{mask.height} pixels is larger than "
                               f"{DEFAULT_MAX_PIXELS} pixels")
        if mask_format in LOSSY_FORMATS and not options.allow_lossy:
            raise MaskRejected(f"mask is a {mask_format} file, which is lossy (its class ids "
                               "change near edges): use PNG masks, or allow_lossy_masks=True")
        if getattr(mask, "n_frames", 1) > 1:
            raise MaskRejected(f"mask has {mask.n_frames} frames; a mask is one image")
        mask.load()
        try:
            turn = mask.getexif().get(EXIF_ORIENTATION, 1)
        except (OSError, SyntaxError, ValueError, EOFError) as exc:
            raise MaskRejected(f"mask's EXIF data cannot be read ({type(exc).__name__}: {exc}), "
                               "so which way up it is shown is unknown") from None
        if turn in _TURNS:
            mask = ImageOps.exif_transpose(mask)
        if (mask.height, mask.width) != tuple(size):
            raise MaskRejected(_size_reason(mask, turn, size, orientation))
    except MaskRejected:
        raise
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError,
            Image.DecompressionBombError) as exc:
        raise MaskRejected(f"mask cannot be read: {type(exc).__name__}: {exc}") from None
    bits = _png_grey_bits(data) if mask_format == "PNG" else None
    kept = options.colors is None and mask.mode == "L" and bits == 8 and turn not in _TURNS
    if kept:  # already a single-channel 8-bit PNG of ids
        ids = mask
    elif options.colors is not None:
        ids = Image.fromarray(_colour_ids(mask, options.colors, options.ignore_value), "L")
    else:
        ids = _class_ids(mask, bits)
    counts = id_counts(ids, options.num_labels, options.ignore_value)
    problem = _unknown_ids(counts, options)
    if problem:
        raise MaskRejected(problem)
    encoded = data if kept else _encode(ids)
    present = [i for i in np.flatnonzero(counts).tolist() if i != options.ignore_value]
    ignored = int(counts[options.ignore_value]) if options.ignore_value is not None else 0
    return PreparedMask(encoded, tuple(present), tuple(int(counts[i]) for i in present),
                        ignored)


def _size_reason(mask, turn, size, orientation):
    """Why a mask (upright) does not fit its image of ``size`` (upright), naming the EXIF
    orientations that turned either."""
    turned = f" (upright: its EXIF orientation {turn} applied)" if turn in _TURNS else ""
    reason = (f"mask is {mask.height}x{mask.width} pixels (height x width){turned}, its image "
              f"{size[0]}x{size[1]}")
    if orientation not in _TURNS:
        return reason
    stored = size[::-1] if orientation in _SIDEWAYS else size
    return (f"{reason} as displayed (its file holds {stored[0]}x{stored[1]} pixels, which its "
            f"EXIF orientation {orientation} turns upright): a mask covers the image as "
            "displayed")


_FEW_LABELS = 32  # up to this many labels, each is counted apart (faster than a histogram)


def id_counts(ids, num_labels=None, ignore_value=DEFAULT_IGNORE):
    """The pixels of each of the 256 ids of an "L" image of class ids (a numpy array of 256).

    With few labels, each label and the ignore value is counted apart, and the whole histogram
    is taken only when they do not add up to every pixel (an unknown id)."""
    if num_labels is not None and num_labels <= _FEW_LABELS:
        pixels = np.asarray(ids).ravel()
        counts = np.zeros(256, dtype=np.int64)
        for i in {*range(num_labels), *(() if ignore_value is None else (ignore_value,))}:
            counts[i] = np.count_nonzero(pixels == i)
        if int(counts.sum()) == pixels.size:
            return counts
    return np.array(ids.histogram())


def _png_grey_bits(data):
    """The bit depth of a greyscale PNG's samples (1, 2, 4, 8 or 16, from its header), or None
    for any other file."""
    if data[:8] == _PNG_SIGNATURE and data[12:16] == b"IHDR" and len(data) > 25 and \
            data[25] == _PNG_GREY:
        return data[24]
    return None


def _class_ids(mask, bits=None):
    """The "L" image of the class ids of a mask that holds ids (or palette indexes); ``bits``:
    the bit depth of a greyscale PNG's samples."""
    if mask.mode == "L" and bits in _SCALED_GREY:
        # Pillow (like libpng and TensorFlow's decode_png) scales 2- and 4-bit grey samples
        # to 0-255 (sample 1 of 4 bits reads as 17): the ids are the samples
        return mask.point([value // _SCALED_GREY[bits] for value in range(256)])
    if mask.mode == "L":
        return mask
    if mask.mode not in _ID_MODES:
        raise MaskRejected(f"mask is a {mask.mode} image: a mask of class ids is single-channel "
                           "(L), palette (P) or 1-bit; a colour mask needs mask_colors")
    if mask.mode == "P":  # the indexes, not the palette's colours
        return Image.frombytes("L", mask.size, mask.tobytes())
    ids = np.asarray(mask)
    if ids.dtype == bool:
        return Image.fromarray(ids.astype(np.uint8), "L")
    high = int(ids.max(initial=0))
    if high > 255 or int(ids.min(initial=0)) < 0:
        value = high if high > 255 else int(ids.min())
        pixels = int((ids == value).sum())
        raise MaskRejected(f"mask class id {value} ({pixels} pixels) is outside 0 to 255")
    return Image.fromarray(ids.astype(np.uint8), "L")


def _colour_ids(mask, colors, ignore_value):
    """The uint8 ``[H, W]`` class ids of a colour mask, through the colour table ``colors``."""
    if mask.mode not in _COLOUR_MODES:
        raise MaskRejected(f"mask is a {mask.mode} image: with mask_colors a mask is an RGB, "
                           "RGBA (opaque), palette or grey image")
    if mask.mode == "RGBA":
        alpha = np.asarray(mask.getchannel("A"))
        if (alpha != 255).any():
            raise MaskRejected(f"mask has {int((alpha != 255).sum())} transparent pixels: a "
                               "colour mask is opaque")
    rgb = np.asarray(mask.convert("RGB"), dtype=np.uint32)
    packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    found, inverse, pixels = np.unique(packed.ravel(), return_inverse=True, return_counts=True)
    table = {(r << 16) | (g << 8) | b: i for (r, g, b), i in colors}
    unknown = [(int(c), int(n)) for c, n in zip(found, pixels) if int(c) not in table]
    if unknown:
        shown = ", ".join(f"colour {_rgb(c)} ({n} pixels)" for c, n in unknown[:_SHOWN])
        more = f" and {len(unknown) - _SHOWN} more" if len(unknown) > _SHOWN else ""
        raise MaskRejected(f"mask {shown}{more} not in mask_colors")
    lookup = np.array([ignore_value if table[int(c)] is None else table[int(c)] for c in found],
                      dtype=np.uint8)
    return lookup[inverse].reshape(packed.shape)


def _rgb(packed):
    return f"({packed >> 16}, {(packed >> 8) & 255}, {packed & 255})"


def _unknown_ids(counts, options):
    """The reason a mask of these id counts (256 bins) holds ids that are no label, or None."""
    if options.num_labels is None:
        return None
    known = np.zeros(256, dtype=bool)
    known[:options.num_labels] = True
    if options.ignore_value is not None:
        known[options.ignore_value] = True
    unknown = np.flatnonzero((counts > 0) & ~known).tolist()
    if not unknown:
        return None
    shown = ", ".join(f"{i} ({int(counts[i])} pixels)" for i in unknown[:_SHOWN])
    more = f" and {len(unknown) - _SHOWN} more" if len(unknown) > _SHOWN else ""
    ignore = "" if options.ignore_value is None else \
        f" or the ignore value {options.ignore_value}"
    return (f"mask class id {shown}{more} is not a label (ids 0 to {options.num_labels - 1}"
            f"{ignore})")


def resized(mask, size, ignore_value=DEFAULT_IGNORE):
    """The PreparedMask ``mask`` resized by nearest neighbour to ``(height, width)`` (its ids
    are never interpolated; an id may vanish when its pixels do), its pixels counted again."""
    ids = Image.fromarray(decode_ids(mask.encoded), "L").resize((size[1], size[0]),
                                                                Image.Resampling.NEAREST)
    counts = id_counts(ids)
    present = [i for i in np.flatnonzero(counts).tolist() if i != ignore_value]
    ignored = int(counts[ignore_value]) if ignore_value is not None else 0
    return PreparedMask(_encode(ids), tuple(present), tuple(int(counts[i]) for i in present),
                        ignored)


def encode_ids(ids):
    """A single-channel 8-bit PNG of a uint8 ``[H, W]`` array."""
    return _encode(Image.fromarray(np.ascontiguousarray(ids, dtype=np.uint8), "L"))


def _encode(image):
    """The PNG of an "L" image."""
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def decode_ids(encoded):
    """The uint8 ``[H, W]`` class ids of a stored mask PNG (single channel).

    Raises:
        ValueError: not a single-channel 8-bit PNG (a 2- or 4-bit one is named: TensorFlow's
            ``decode_png`` scales its samples, so that its ids read as others).
    """
    try:
        mask = Image.open(io.BytesIO(encoded))
        mask.load()
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise ValueError(f"its mask cannot be read: {exc}") from None
    if mask.format != "PNG" or mask.mode != "L":
        raise ValueError(f"its mask is a {mask.format} {mask.mode} image, not a single-channel "
                         "8-bit PNG")
    bits = _png_grey_bits(encoded)
    if bits != 8:
        raise ValueError(f"its mask is a {bits}-bit greyscale PNG, not a single-channel 8-bit "
                         f"PNG: decode_png scales its samples to 0-255 (class id 1 reads as "
                         f"{_SCALED_GREY.get(bits, 1)})")
    return np.asarray(mask)
