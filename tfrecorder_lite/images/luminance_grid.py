"""The luminance grid an image's perceptual hashes are taken from (``near_duplicates.
perceptual_hash``), made as the image is decoded: its luminance shrunk to ``GRID`` x
``GRID`` pixels, from a Pillow image or from encoded bytes decoded as little as the format
allows.
"""

import io

from PIL import Image, ImageOps

from .quiet import silenced

GRID = 32  # an image's luminance is first shrunk (or grown) to GRID x GRID pixels
_GRID_FILTER = Image.BILINEAR  # how the luminance is resized to the grid
DRAFT_SIZE = (GRID, GRID)  # a JPEG is decoded at the smallest scale at least this large (a
# smaller draft would leave a small picture, and its copies, fewer pixels than the grid)


def _upright_rgb_or_gray(image):
    """``image`` as L or RGB, or YCbCr as it is (transparent pixels as white, as a viewer
    shows them)."""
    if image.mode in ("L", "RGB", "YCbCr"):
        return image
    if "A" in image.mode or "transparency" in image.info:
        image = image.convert("RGBA")
        background = Image.new("RGB", image.size, (255, 255, 255))
        background.paste(image, mask=image.getchannel("A"))
        return background
    return image.convert("RGB")


def _draft_scale(width, height):
    """The scale a JPEG of ``width`` x ``height`` pixels is decoded at for the hash (Pillow's
    draft for ``DRAFT_SIZE``: the largest of 8, 4, 2 and 1 that leaves it that large)."""
    ratio = min(width // DRAFT_SIZE[0], height // DRAFT_SIZE[1])
    return next((s for s in (8, 4, 2) if ratio >= s), 1)


def luminance_grid(image, source_size=None):
    """What the hashes of a Pillow image are taken from: its luminance resized to ``GRID`` x
    ``GRID`` pixels (Pillow's bilinear filter, which averages as it shrinks), as
    ``GRID * GRID`` bytes.

    An image decoded whole is first shrunk by the whole factor (up to 8) that a JPEG of its
    size is decoded at for the hash (``DRAFT_SIZE``), so that one picture gives nearly the same
    grid however it was decoded: a PNG copy of a JPEG, a JPEG rotated upright, the source of
    a resized write.

    Each step is one call of Pillow's image core (``Image.core``, what ``Image.reduce``,
    ``convert``, ``resize`` and ``tobytes`` call, without their per-call checks and copies
    of ``image.info``; a test compares the bytes with theirs): threads preparing images side
    by side spend little time holding the GIL here, and the C work in between releases it.
    :func:`hash_grids` then hashes many grids at once.

    Args:
        image: a Pillow image of any mode and size, as displayed (rotate it upright first),
            loaded here if it is not yet. A YCbCr image (a JPEG decoded without its colour
            conversion) gives the grid of its Y, which is what a grayscale decode gives.
        source_size: ``(width, height)`` of the picture in its file, when ``image`` was
            decoded smaller (a JPEG draft); None: ``image`` is the whole picture.
    """
    return _luminance_grid(_shrunk(image, source_size))


def grid_and_chroma(image, source_size=None):
    """The luminance grid (:func:`luminance_grid`) and the mean blue- and red-difference
    chroma (Cb, Cr, 0 to 255 rounded to whole values; a gray image's are 128) of a Pillow
    image, both from the image shrunk for the grid (means of whole blocks of pixels, whose
    mean is the picture's).

    Copies of one photo keep their mean colour; pictures of one layout with the same light
    and shade (a red and a navy shirt on one floor) need not.

    Args:
        image: as :func:`luminance_grid` takes it.
        source_size: as :func:`luminance_grid` takes it.
    """
    core = _shrunk(image, source_size)
    if core.mode == "L":
        chroma = (128.0, 128.0)
    else:
        colour = core if core.mode == "YCbCr" else core.convert("YCbCr")
        mean = colour.reduce(colour.size, (0, 0, *colour.size)).getpixel((0, 0))  # (rounded)
        chroma = (float(mean[1]), float(mean[2]))
    return _luminance_grid(core), chroma


def _shrunk(image, source_size):
    """The image core of ``image`` (as L, RGB or YCbCr) shrunk for the grid: by the JPEG
    draft's scale when it was decoded whole, then by the whole factor that leaves it at least
    ``GRID`` pixels a side (both means of whole blocks)."""
    colour = _upright_rgb_or_gray(image)
    colour.load()  # a check, when it is loaded already
    core = colour.im
    source = colour.size if source_size is None else source_size
    decoded_at = max(1, round(min(source) / max(1, min(colour.size))))  # 1, or a draft's scale
    further = _draft_scale(*source) // decoded_at
    if further > 1:  # as a JPEG's draft for the hash shrinks it: the mean of each block
        core = core.reduce((further, further), (0, 0, *core.size))
    factor = min(core.size) // GRID
    if factor > 1:  # a large decode: then a box filter by a whole factor (one cheap pass)
        core = core.reduce((factor, factor), (0, 0, *core.size))
    return core


def _luminance_grid(core):
    """The ``GRID * GRID`` bytes of a shrunk image core's luminance (see :func:`_shrunk`)."""
    if core.mode == "YCbCr":
        core = core.getband(0)
    elif core.mode != "L":
        core = core.convert("L")
    core = core.resize((GRID, GRID), _GRID_FILTER, (0, 0, *core.size))
    encoder = Image.core.raw_encoder("L", "L", 0, 1)  # the bytes, as Image.tobytes takes them
    chunks, status = [], 0
    try:
        encoder.setimage(core, (0, 0, GRID, GRID))
        while not status:
            _, status, chunk = encoder.encode(1 << 16)
            chunks.append(chunk)
    finally:
        encoder.cleanup()
    data = b"".join(chunks)
    if status < 0 or len(data) != GRID * GRID:
        raise RuntimeError(f"encoder status {status} taking the luminance grid's bytes")
    return data


def _decoded_upright(data, mode):
    """``(image, its upright size in its file)`` of encoded image bytes, decoded as little as
    the format allows: a JPEG at a reduced scale (libjpeg's 1/2 to 1/8, still at least
    ``DRAFT_SIZE``) in ``mode``, other formats whole; the EXIF orientation applied."""
    with silenced():  # Pillow's warnings about the header
        image = Image.open(io.BytesIO(data))
    source = image.size
    if image.format in ("JPEG", "MPO"):
        image.draft(mode, DRAFT_SIZE)
    image.load()  # outside the block, which threads take one at a time
    with silenced():  # and about the EXIF block (read from the loaded image)
        upright = ImageOps.exif_transpose(image)
    return upright, source[::-1] if upright.size != image.size else source  # turned a quarter


def encoded_luminance_grid(data):
    """The luminance grid (:func:`luminance_grid`) of encoded image bytes, decoding as little
    as the format allows (a JPEG at a reduced scale, as grayscale: the hash needs only the
    luminance).

    Returns:
        The grid, or None when the bytes do not decode.
    """
    try:
        return luminance_grid(*_decoded_upright(data, "L"))
    except Exception:  # an image that does not decode has no hash; its check says why
        return None


def encoded_grid_and_chroma(data):
    """The luminance grid and mean chroma (:func:`grid_and_chroma`) of encoded image bytes,
    from one decode (a JPEG's at a reduced scale, as YCbCr: its Y is what a grayscale decode
    gives), or None when they do not decode."""
    try:
        return grid_and_chroma(*_decoded_upright(data, "YCbCr"))
    except Exception:  # its check says why
        return None
