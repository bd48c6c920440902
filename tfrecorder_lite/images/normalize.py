"""Open, check and normalize one image with Pillow, returning the bytes to store.

Images that TensorFlow decodes natively (baseline/progressive JPEG, 8-bit PNG, single-frame GIF,
24-bit BMP) keep their original bytes. Anything else is converted once, here: losslessly to PNG,
or to JPEG (quality 95) when the source was a JPEG (CMYK, or an EXIF rotation to apply).
With a target size, every image is decoded, resized and re-encoded.
"""

import io
import re
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from .. import storage
from . import containers as structure
from . import content_hash
from . import luminance_grid
from .quiet import silenced
from ..redaction import redact

DEFAULT_MAX_PIXELS = 89_478_485  # Pillow's own default decompression-bomb limit
# Larger files are refused unread. An 89 Mpx (Pillow's limit) uncompressed RGB TIFF is 268 MB.
DEFAULT_MAX_BYTES = 256 * 2**20
_NATIVE_MODES = {"1": 1, "L": 1, "LA": 2, "RGB": 3, "RGBA": 4}
_ROTATING_ORIENTATIONS = {2, 3, 4, 5, 6, 7, 8}
_PILLOW_FORMATS = {"jpeg": ["JPEG"], "png": ["PNG"], "gif": ["GIF"], "bmp": ["BMP"],
                   "webp": ["WEBP"], "tiff": ["TIFF"]}
_PNG_METADATA_CHUNKS = {b"eXIf", b"tEXt", b"zTXt", b"iTXt"}  # where Pillow finds EXIF and XMP


@dataclass(frozen=True)
class ImageOptions:
    """How images are checked and stored.

    Attributes:
        check: "decode" (decode every image; kept JPEGs at 1/8 scale, which still reads and
            checks all their compressed data) or "header" (headers and file structure only).
        size: (height, width) to resize to, or None to keep the original size.
        format: encoding of resized images, "jpeg" or "png".
        quality: JPEG quality of resized images.
        max_pixels: images with more pixels are rejected as decompression bombs.
        max_bytes: image files larger than this are rejected without being read.
        phash: also take what each image's perceptual hashes are made from and what
            confirms a pair (its luminance grid and mean colour,
            ``luminance_grid.grid_and_chroma``; ``near_duplicates.perceptual_hash.hash_grids``
            hashes many grids at once), from the pixels decoded anyway; with
            ``check="header"``, from a reduced-scale decode.
        content_hash: the hash of each file's bytes taken beside the perceptual hashes
            (a name of ``content_hash.NAMES``).
    """

    check: str = "decode"
    size: tuple = None
    format: str = "jpeg"
    quality: int = 90
    max_pixels: int = DEFAULT_MAX_PIXELS
    max_bytes: int = DEFAULT_MAX_BYTES
    phash: bool = False
    content_hash: str = content_hash.DEFAULT


@dataclass(frozen=True)
class StoredImage:
    """The encoded bytes to store and what ``tf.io.decode_image`` will see in them."""

    encoded: bytes
    format: str
    height: int
    width: int
    channels: int
    source_size: tuple = None  # (height, width) before a resize (upright), when resized
    luminance: bytes = None  # its luminance_grid.luminance_grid as displayed, when asked
    chroma: tuple = None  # and its mean (Cb, Cr) (luminance_grid.grid_and_chroma)
    orientation: int = 1  # the EXIF orientation turned upright (1: the file's pixels as they are)


class ImageRejected(Exception):
    """The image cannot be stored; ``str(exc)`` is the human reason."""


def sniff_format(data):
    """The real format from the leading bytes (not the file name), or None."""
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if data[:2] == b"BM":
        return "bmp"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data[:4] in (b"II*\x00", b"MM\x00*"):
        return "tiff"
    return None


def _open(data, sniffed, options):
    """Open the header with Pillow, turning every failure into ImageRejected."""
    if not data:
        raise ImageRejected("empty file")
    try:
        with silenced(Image.DecompressionBombWarning):
            # naming the sniffed format spares Pillow from trying its other plugins first
            image = Image.open(io.BytesIO(data), formats=_PILLOW_FORMATS.get(sniffed))
    except Image.DecompressionBombError as exc:
        match = re.search(r"\((\d+) pixels\)", str(exc))
        pixels = int(match.group(1)) if match else options.max_pixels + 1
        raise ImageRejected(_bomb_reason(pixels, options)) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as exc:
        if sniffed is None:
            raise ImageRejected("not an image") from None
        if isinstance(exc, UnidentifiedImageError):  # its message names a memory address
            raise ImageRejected(f"damaged {sniffed.upper()} header") from None
        raise ImageRejected(f"damaged {sniffed.upper()} header ({exc})") from None
    width, height = image.size
    if width * height > options.max_pixels:
        raise ImageRejected(_bomb_reason(width * height, options))
    if width * height == 0:
        raise ImageRejected("image has no pixels")
    return image


def _bomb_reason(pixels, options):
    return (f"decompression bomb: {pixels / 1e6:.0f} Mpx "
            f"(limit {options.max_pixels / 1e6:.0f} Mpx)")


_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError)


def _decode_failure(exc, fmt):
    if "truncated" in str(exc):
        return ImageRejected(f"truncated {fmt.upper()}")
    return ImageRejected(f"damaged {fmt.upper()} data ({exc})")


def _load(image, fmt):
    """Decode the pixels, turning truncation and corruption into ImageRejected."""
    try:
        image.load()
    except _DECODE_ERRORS as exc:
        raise _decode_failure(exc, fmt) from None


def _native_channels(image, fmt, data):
    """Channels TensorFlow decodes from the original bytes, or None when it cannot keep them."""
    if fmt == "jpeg":
        return {"L": 1, "RGB": 3}.get(image.mode) if image.format in ("JPEG", "MPO") else None
    if fmt == "png":
        if image.format != "PNG" or data[24] > 8:  # IHDR bit depth: 16-bit is converted
            return None
        base = 3 if image.mode == "P" else _NATIVE_MODES.get(image.mode)
        if base is None:
            return None
        # TensorFlow turns a tRNS chunk into alpha for palette PNGs only
        return base + 1 if image.mode == "P" and "transparency" in image.info else base
    if fmt == "gif":  # TensorFlow shows transparent pixels as black: those become RGBA PNGs
        animated = getattr(image, "is_animated", False)
        return 3 if not animated and "transparency" not in image.info else None
    if fmt == "bmp":
        header_size = int.from_bytes(data[14:18], "little")  # 12: OS/2 bitmaps, which TF lacks
        bits, compression = data[28], int.from_bytes(data[30:34], "little")
        native = header_size >= 40 and image.mode == "RGB" and bits == 24 and compression == 0
        return 3 if native else None
    return None


def _orientation(image, fmt, png_walk):
    """The EXIF orientation (1-8), read without decoding pixels wherever the file allows."""
    read_exif = image.getexif
    if png_walk is not None:
        problem, kinds = png_walk
        late = kinds[kinds.index(b"IDAT"):] if b"IDAT" in kinds else kinds
        if problem is None and not _PNG_METADATA_CHUNKS.intersection(late):
            # Pillow's PNG getexif() decodes the whole image to look for metadata after the
            # pixels; when the walk shows there is none, the chunks read so far suffice.
            read_exif = partial(Image.Image.getexif, image)
    try:
        return read_exif().get(structure.EXIF_ORIENTATION, 1)
    except _DECODE_ERRORS as exc:
        raise _decode_failure(exc, fmt) from None


def _container_problem(data, fmt, image, png_walk):
    """What TensorFlow's decoder would refuse in bytes that Pillow accepts, or None."""
    if fmt == "png":
        return png_walk[0]
    if fmt == "gif":
        return structure.gif_problem(data)
    if fmt == "bmp":
        return structure.bmp_problem(data, image.width, image.height)  # kept BMPs are 24-bit
    return structure.jpeg_problem(data)


def _to_8bit(image):
    """Normalize any Pillow mode to L, LA, RGB or RGBA (16-bit and float scaled to 8-bit)."""
    mode = image.mode
    if mode in ("L", "LA", "RGB", "RGBA"):
        return image
    if mode == "1":
        return image.convert("L")
    if mode.startswith("I") or mode == "F":
        pixels = np.asarray(image)
        if pixels.dtype.kind == "f":
            scale = 255.0 if pixels.max(initial=0) <= 1.0 else 1.0
            pixels = np.clip(pixels * scale + 0.5, 0, 255)
        elif mode.startswith("I;16") or pixels.max(initial=0) > 255:
            pixels = np.clip(pixels, 0, 65535) >> 8  # 16-bit -> 8-bit, as TensorFlow scales
        return Image.fromarray(pixels.astype(np.uint8), "L")
    if mode in ("P", "PA") and ("transparency" in image.info or mode == "PA"):
        return image.convert("RGBA")
    if mode in ("La",):
        return image.convert("LA")
    if mode in ("RGBa", "RGBX"):
        return image.convert("RGBA" if mode == "RGBa" else "RGB")
    return image.convert("RGB")  # P, CMYK, YCbCr, LAB, HSV


def _encode(image, fmt, quality, subsampling=-1):
    buffer = io.BytesIO()
    if fmt == "jpeg":
        if image.mode not in ("L", "RGB"):
            image = image.convert("RGB")
        image.save(buffer, "JPEG", quality=quality, subsampling=subsampling)
    else:
        image.save(buffer, "PNG")
    return StoredImage(buffer.getvalue(), fmt, image.height, image.width,
                       _NATIVE_MODES[image.mode])


def prepare_image(data, options):
    """Check one image and return what to store.

    Args:
        data: the image file's bytes.
        options: an ImageOptions.

    Returns:
        A StoredImage whose ``encoded`` bytes decode with ``tf.io.decode_image`` upright (with
        its luminance grid and mean chroma when ``options.phash``; None when a header-checked
        image does not decode).

    Raises:
        ImageRejected: with a human reason ("not an image", "truncated JPEG", ...).
    """
    stored, image = _prepare(data, options)
    if not options.phash:
        return stored
    if image is None:  # the pixels were not decoded: a reduced-scale decode of the original
        found = luminance_grid.encoded_grid_and_chroma(data)
        if found is None:
            return stored
    else:  # the picture's upright size in its file (a JPEG may have been decoded smaller)
        height, width = stored.source_size or (stored.height, stored.width)
        found = luminance_grid.grid_and_chroma(image, (width, height))
    return replace(stored, luminance=found[0], chroma=found[1])


def _prepare(data, options):
    """``(StoredImage, the upright decoded image or None when no pixels were decoded)``."""
    sniffed = sniff_format(data)
    png_walk = structure.png_chunks(data) if sniffed == "png" else None
    if options.check == "header" and options.size is None and sniffed in ("jpeg", "png"):
        stored = _plain_jpeg(data, options) if sniffed == "jpeg" else \
            _plain_png(data, png_walk, options)
        if stored is not None:
            return stored, None
    image = _open(data, sniffed, options)
    fmt = sniffed or (image.format or "image").lower()
    orientation = _orientation(image, fmt, png_walk)
    rotate = orientation in _ROTATING_ORIENTATIONS
    if options.size is not None:
        return _resize(image, fmt, rotate, orientation, options)
    channels = None if rotate else _native_channels(image, fmt, data)
    if channels is not None:
        problem = _container_problem(data, fmt, image, png_walk)
        if problem:
            raise ImageRejected(problem)
        height, width = image.height, image.width
        stored = StoredImage(data, fmt, height, width, channels)
        if options.check != "decode":
            return stored, None
        if fmt == "jpeg":
            # libjpeg still reads and checks every byte of the compressed data at a reduced
            # scale (1/8 unless the hash needs more pixels); only the full-size
            # reconstruction, not needed here, is skipped (and for the hash, which needs
            # the luminance and mean colour, the colour conversion too)
            if options.phash:
                image.draft("YCbCr", luminance_grid.DRAFT_SIZE)
            else:
                image.draft(image.mode, (1, 1))
        _load(image, fmt)
        return stored, image
    _load(image, fmt)
    if rotate:
        image = ImageOps.exif_transpose(image)
    if fmt == "jpeg":  # a second JPEG generation: high quality, no chroma subsampling
        stored = _encode(_to_8bit(image), "jpeg", 95, subsampling=0)
    else:
        stored = _encode(_to_8bit(image), "png", None)
    return replace(stored, orientation=orientation if rotate else 1), image


def _plain_jpeg(data, options):
    """Check a plain JPEG kept as it is from its header and structure, without Pillow.

    Returns:
        The StoredImage, or None when Pillow must look (an unusual header, a rotation to apply,
        no pixels or too many): that path gives the answer and the reasons.
    """
    header = structure.jpeg_header(data)
    if header is None:
        return None
    height, width, channels, orientation = header
    if orientation in _ROTATING_ORIENTATIONS or not 0 < height * width <= options.max_pixels:
        return None
    problem = structure.jpeg_problem(data)
    if problem:
        raise ImageRejected(problem)
    return StoredImage(data, "jpeg", height, width, channels)


# (color type, bit depth) -> channels of the 8-bit-or-less PNGs TensorFlow decodes as they are
# (1-, 2- and 4-bit gray and palette indexes are widened to 8 bits by both decoders)
_PLAIN_PNG_CHANNELS = {(0, 1): 1, (0, 2): 1, (0, 4): 1, (0, 8): 1, (2, 8): 3, (4, 8): 2,
                       (6, 8): 4, (3, 1): 3, (3, 2): 3, (3, 4): 3, (3, 8): 3}
# Chunks a plain PNG may hold before its pixels, with their length in the PNG specification
# (None: any), per color type for tRNS (a palette's alphas, one gray or one RGB value); any
# other length goes to Pillow, which may refuse it. No text, EXIF or XMP: Pillow looks for an
# orientation there.
_PLAIN_PNG_CHUNKS = {b"PLTE": None, b"gAMA": 4, b"cHRM": 32, b"sRGB": 1, b"pHYs": 9,
                     b"tRNS": {3: None, 0: 2, 2: 6}}


def _plain_png(data, walk, options):
    """Check a plain PNG kept as it is from its header and chunk walk, without Pillow.

    Returns:
        The StoredImage, or None when Pillow must look (a damaged file, metadata that may hold
        an orientation, an unusual header, no pixels or too many): that path gives the answer
        and the reasons.
    """
    problem, kinds = walk
    if problem is not None or kinds[0] != b"IHDR" or data[8:12] != b"\0\0\0\x0d" or \
            b"IDAT" not in kinds:
        return None
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    depth, color, compression, filtering, interlace = data[24:29]
    channels = _PLAIN_PNG_CHANNELS.get((color, depth))
    if channels is None or compression or filtering or interlace > 1 or \
            not 0 < width * height <= options.max_pixels:
        return None
    first_pixels = kinds.index(b"IDAT")
    if any(kind != b"IDAT" for kind in kinds[first_pixels:-1]):
        return None
    pos, seen = 33, set()
    for kind in kinds[1:first_pixels]:  # the chunks between IHDR and the pixels
        length = int.from_bytes(data[pos:pos + 4], "big")
        wanted = _PLAIN_PNG_CHUNKS.get(kind, ())
        if isinstance(wanted, dict):
            wanted = wanted.get(color, ())
        if wanted == () or (wanted is not None and length != wanted) or kind in seen:
            return None
        seen.add(kind)
        pos += 12 + length
    if color == 3:
        if b"PLTE" not in seen:
            return None
        if b"tRNS" in seen:  # TensorFlow turns a palette's tRNS chunk into alpha
            channels = 4
    return StoredImage(data, "png", height, width, channels)


def unreadable_reason(error):
    """The rejection reason of a file that could not be read (an OSError)."""
    if isinstance(error, storage.FileTooLarge):  # the limit is this option's
        return (f"file too large: {error.found} (limit {storage.human_size(error.limit)}, "
                "max_image_bytes)")
    if isinstance(error, (storage.FileRefused, storage.ReadFailure)):
        return error.reason
    if isinstance(error, FileNotFoundError):
        return "file not found"
    if isinstance(error, IsADirectoryError):
        return "is a folder, not a file"
    if isinstance(error, ValueError) or "embedded null" in str(error):
        return "cannot read file (the path contains a NUL character)"
    return redact(f"cannot read file ({getattr(error, 'strerror', None) or error})")


def not_an_image(head):
    """"not an image" when the first bytes of a large file show no image Pillow knows, else
    None (the whole file then gets the full check)."""
    if sniff_format(head) is not None:
        return None
    try:
        with silenced():
            Image.open(io.BytesIO(head)).close()
    except UnidentifiedImageError:
        return "not an image"
    except Exception:  # a header cut short, a bomb: the full check gives the reason
        return None
    return None


def read_images(paths, options, storage_options=None):
    """The bytes of many image files (or the OSError of each unreadable one): files over
    ``options.max_bytes`` and large files whose first bytes are no image are never read whole."""
    return storage.read_many(paths, storage_options, options.max_bytes, not_an_image)


def prepare_content(content, options):
    """Prepare one row's image from what reading its file gave; every failure is ImageRejected.

    Args:
        content: the file's bytes, or the OSError that reading it raised.
        options: an ImageOptions.

    Returns:
        The StoredImage to write.
    """
    if isinstance(content, Exception):
        raise ImageRejected(unreadable_reason(content))
    try:
        return prepare_image(content, options)
    except ImageRejected:
        raise
    except Exception as exc:  # a malformed image must never take a worker down
        raise ImageRejected(f"cannot read image ({type(exc).__name__}: {exc})") from None


def _resize(image, fmt, rotate, orientation, options):
    height, width = options.size
    swapped = orientation in (5, 6, 7, 8)  # stored sideways
    # the upright size of the file's pixels, before a JPEG is drafted at a smaller scale
    source_size = image.size if rotate and swapped else image.size[::-1]
    if fmt == "jpeg":
        image.draft("RGB", (height, width) if swapped else (width, height))  # transposed
    _load(image, fmt)
    if rotate:
        image = ImageOps.exif_transpose(image)
    image = _to_8bit(image)
    if image.mode != "RGB":
        image = image.convert("RGB")  # resized output is uniform: 3 channels, alpha dropped
    resized = image.resize((width, height), Image.BILINEAR)
    return replace(_encode(resized, options.format, options.quality), source_size=source_size,
                   orientation=orientation if rotate else 1), image
