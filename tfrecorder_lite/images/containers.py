"""Container checks for image bytes that are stored as they are.

Pillow is more lenient than the decoders TensorFlow uses (libjpeg, libpng, giflib, its own BMP
reader): it decodes a PNG without its IEND chunk or with a bad IDAT checksum, and a GIF without
its trailer. TensorFlow refuses those, so a kept image must pass these walks too. They read no
pixels and cost microseconds.
"""

import re
import struct
try:  # Intel ISA-L's CRC32: about 4x zlib's (44 vs 190 us per 320 KB PNG here)
    from isal.isal_zlib import crc32
except ImportError:
    from zlib import crc32

_PNG_SIGNATURE_SIZE = 8
# A marker: FF then a code; FF 00 is a stuffed byte, FF FF a fill byte, FF D0-D7 a restart marker.
_JPEG_MARKER = re.compile(rb"\xff([^\x00\xd0-\xd7\xff])")
_JPEG_EOI = 0xD9
_JPEG_STANDALONE = {0x01, 0xD8}  # TEM, SOI: no length field
_GIF_TRAILER, _GIF_EXTENSION, _GIF_IMAGE = 0x3B, 0x21, 0x2C
_JPEG_SOS, _JPEG_DQT, _JPEG_APP1, _JPEG_APP2 = 0xDA, 0xDB, 0xE1, 0xE2
_JPEG_PLAIN_SOF = {0xC0, 0xC1, 0xC2}  # baseline, extended sequential, progressive (Huffman)
# other segments a plain JPEG holds before its first scan: DHT, DRI, COM, APP0-APP15
_JPEG_PLAIN_SEGMENTS = {0xC4, 0xDD, 0xFE, *range(0xE0, 0xF0)}
EXIF_ORIENTATION = 0x0112  # the EXIF tag of the orientation


def png_chunks(data):
    """Walk a PNG's chunks as libpng does.

    Returns:
        ``(problem, kinds)``: why libpng would refuse the file (a chunk cut short, a bad CRC,
        no IEND) or None, and the chunk types read, in order.
    """
    view = memoryview(data)
    pos, size, kinds = _PNG_SIGNATURE_SIZE, len(data), []
    while True:
        if pos + 12 > size:
            return "truncated PNG", kinds
        length = int.from_bytes(view[pos:pos + 4], "big")
        kind = bytes(view[pos + 4:pos + 8])
        end = pos + 8 + length
        if length > 0x7FFFFFFF:
            return f"damaged PNG data (chunk length {length})", kinds
        if end + 4 > size:
            return "truncated PNG", kinds
        if crc32(view[pos + 4:end]) != int.from_bytes(view[end:end + 4], "big"):
            return f"damaged PNG data (bad CRC in {kind.decode('latin-1')!r} chunk)", kinds
        kinds.append(kind)
        if kind == b"IEND":
            return None, kinds
        pos = end + 4


def _skip_color_table(flags, pos):
    return pos + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)


def _skip_sub_blocks(data, pos):
    """Position after a chain of GIF data sub-blocks, or None when the data ends first."""
    size = len(data)
    while pos < size:
        length = data[pos]
        pos += 1 + length
        if length == 0:
            return pos
    return None


def gif_problem(data):
    """Why giflib would refuse this GIF (a block cut short, an unknown block, no trailer), or None."""
    if len(data) < 13:
        return "truncated GIF"
    pos = _skip_color_table(data[10], 13)
    while pos is not None and pos < len(data):
        block = data[pos]
        if block == _GIF_TRAILER:
            return None
        if block == _GIF_EXTENSION:
            pos = _skip_sub_blocks(data, pos + 2)
        elif block == _GIF_IMAGE:
            if pos + 11 > len(data):
                return "truncated GIF"
            pos = _skip_sub_blocks(data, _skip_color_table(data[pos + 9], pos + 10) + 1)
        else:
            return f"damaged GIF data (unknown block 0x{block:02x})"
    return "truncated GIF"


def bmp_problem(data, width, height):
    """Why TensorFlow's BMP reader would refuse this 24-bit BMP (pixels past the end), or None."""
    offset = int.from_bytes(data[10:14], "little")
    row_size = (24 * width + 31) // 32 * 4  # rows of 3-byte pixels, padded to 4 bytes
    if offset + (height - 1) * row_size + width * 3 > len(data):
        return "truncated BMP"
    return None


def jpeg_problem(data):
    """"truncated JPEG" when the data ends before the end-of-image marker, else None.

    Walks the marker segments by their lengths and each scan's entropy-coded data to the next
    marker, as libjpeg does; whatever follows the end-of-image marker (a motion photo's video,
    padding) is ignored, as libjpeg ignores it.
    """
    if data.endswith(b"\xff\xd9"):  # the common case (entropy-coded data never holds FF D9)
        return None
    pos, size = 2, len(data)
    while True:
        marker = _JPEG_MARKER.search(data, pos)  # skips fill bytes and stray bytes before markers
        if marker is None:
            return "truncated JPEG"
        code, pos = marker.group(1)[0], marker.end()
        if code == _JPEG_EOI:
            return None
        if code in _JPEG_STANDALONE:
            continue
        if pos + 2 > size:
            return "truncated JPEG"
        pos += int.from_bytes(data[pos:pos + 2], "big")
        if pos > size:
            return "truncated JPEG"


def jpeg_header(data):
    """Read a plain JPEG's header from its marker segments, without Pillow.

    "Plain" is what most photos are: 8-bit, 1 or 3 components, Huffman-coded baseline or
    progressive, well-formed segments, and at most an EXIF block (no XMP, no MPO index).

    Returns:
        ``(height, width, components, orientation)``, or None for anything else: the caller then
        lets Pillow read the header, so unusual files get Pillow's answer and error messages.
    """
    pos, size, sof, orientation = 2, len(data), None, None
    while pos + 4 <= size:
        if data[pos] != 0xFF:
            return None
        code = data[pos + 1]
        end = pos + 2 + int.from_bytes(data[pos + 2:pos + 4], "big")
        if end > size or end < pos + 4:
            return None
        if code == _JPEG_SOS:
            return None if sof is None else (*sof, orientation or 1)
        if code in _JPEG_PLAIN_SOF:
            if sof is not None or end - pos < 10:
                return None
            bits, height, width, components = struct.unpack_from(">BHHB", data, pos + 4)
            if bits != 8 or components not in (1, 3) or end - pos != 10 + 3 * components:
                return None
            sof = (height, width, components)
        elif code == _JPEG_DQT:
            if not _quantization_tables_fit(data, pos + 4, end):
                return None
        elif code == _JPEG_APP1:
            if orientation is not None or data[pos + 4:pos + 10] != b"Exif\0\0":
                return None  # XMP, or a second EXIF block: Pillow reads orientation from both
            orientation = _exif_orientation(data[pos + 10:end])
            if orientation is None:
                return None
        elif code not in _JPEG_PLAIN_SEGMENTS or \
                (code == _JPEG_APP2 and data[pos + 4:pos + 8] == b"MPF\0"):
            return None
        pos = end
    return None


def _quantization_tables_fit(data, pos, end):
    """Whether a DQT segment holds whole tables (64 entries of 1 or 2 bytes each)."""
    while pos < end:
        pos += 1 + (64 if data[pos] < 16 else 128)
    return pos == end


def _exif_orientation(tiff):
    """The orientation tag of an EXIF block's first directory (1 when absent), or None when
    the block is not simple to read (Pillow then reads it)."""
    order = {b"II": "<", b"MM": ">"}.get(tiff[:2])
    if order is None or len(tiff) < 8:
        return None
    magic, offset = struct.unpack_from(order + "HI", tiff, 2)
    if magic != 42 or offset + 2 > len(tiff):
        return None
    (count,) = struct.unpack_from(order + "H", tiff, offset)
    first = offset + 2
    if first + 12 * count > len(tiff):
        return None
    found = []
    for entry in range(first, first + 12 * count, 12):
        tag, kind, n = struct.unpack_from(order + "HHI", tiff, entry)
        if tag == EXIF_ORIENTATION:
            if kind != 3 or n != 1:  # one SHORT, as the EXIF standard has it
                return None
            found.append(struct.unpack_from(order + "H", tiff, entry + 8)[0])
    if len(found) > 1 or (found and not 1 <= found[0] <= 8):
        return None
    return found[0] if found else 1
