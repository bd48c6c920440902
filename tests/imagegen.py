"""Test helpers: build images (ordinary and hostile) in a temporary folder, read shards back.

Everything is generated at test time with numpy and Pillow; hand-crafted byte streams are used
where Pillow cannot (or should not, for speed) write the file: decompression bombs, 16-bit RGB
PNG, OS/2 bitmaps. TensorFlow is imported lazily, only by the readers at the bottom.
"""

import hashlib
import io
import os
import struct
import zlib

import numpy as np
import pandas as pd
from PIL import Image

EXIF_ORIENTATION = 0x0112
# What ImageOps.exif_transpose applies for each orientation, and its inverse (to build a file
# that *displays* a given upright image).
_TRANSPOSE = {
    2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE, 8: Image.Transpose.ROTATE_90,
}
_INVERSE = {**_TRANSPOSE, 6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270}


# --------------------------------------------------------------------------- pixel content

def pattern(height, width, seed=0, noise=12):
    """An RGB uint8 array: smooth gradients, a little noise and an asymmetric corner marker.

    Smooth content keeps JPEG error small; the marker (a red block top-left, a blue stripe on
    the right edge) makes any rotation or flip obvious.
    """
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 200 // max(width - 1, 1), y * 200 // max(height - 1, 1),
                     (x + y + seed * 17) % 160], axis=-1).astype(np.int32)
    base += rng.integers(0, noise + 1, (height, width, 3))
    base[: height // 4, : width // 4] = (250, 10, 10)
    base[:, width - max(1, width // 8):] = (10, 10, 250)
    return np.clip(base, 0, 255).astype(np.uint8)


def rich_photo(height, width, seed=0):
    """A photo-like RGB Pillow image: a smooth colour field, blurred shapes, mid-frequency
    texture and mild sensor-like noise (as ``benchmarks/dataset.py`` draws them)."""
    from PIL import ImageDraw, ImageFilter

    rng = np.random.default_rng([seed, 7])
    grid = rng.uniform(0, 255, (int(rng.integers(2, 6)), int(rng.integers(2, 6)), 3))
    image = Image.fromarray(grid.astype(np.uint8)).resize((width, height), Image.BICUBIC)
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(3, 12))):
        x0, x1 = sorted(int(v) for v in rng.integers(-width // 4, width + width // 4, size=2))
        y0, y1 = sorted(int(v) for v in rng.integers(-height // 4, height + height // 4, size=2))
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        [draw.ellipse, draw.rectangle][int(rng.integers(2))]((x0, y0, x1, y1), fill=colour)
    image = image.filter(ImageFilter.GaussianBlur(float(rng.uniform(1.0, 3.0))))
    pixels = np.asarray(image, dtype=np.float32)
    texture = rng.standard_normal((max(2, height // 12), max(2, width // 12)), dtype=np.float32)
    texture = np.asarray(Image.fromarray(texture, mode="F").resize((width, height),
                                                                   Image.BICUBIC))
    pixels += texture[..., None] * 12.0 + rng.standard_normal((height, width, 3)) * 7.0
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def one_layout_photo(layout, detail, size=256, tint=(0, 0)):
    """A picture whose coarse layout (the lowest 8x8 DCT terms of its 32x32 grid) comes from
    seed ``layout`` and whose detail (every term beyond those) from seed ``detail``: two
    details of one layout are two pictures that the 64-bit perceptual hash cannot tell apart,
    as photos of garments laid out on one floor. Gray, unless ``tint`` shifts its Cb and Cr
    (the same luminance in another colour)."""
    def dct_rows(n):
        k, i = np.arange(n)[:, None], np.arange(n)[None, :]
        matrix = np.cos(np.pi * (2 * i + 1) * k / (2 * n)) * np.sqrt(2 / n)
        matrix[0] /= np.sqrt(2)
        return matrix

    falling = 300 / (1 + np.add.outer(np.arange(32), np.arange(32)))  # as a photo's terms fall
    terms = np.random.default_rng([layout, 11]).normal(0, 1, (32, 32)) * falling
    finer = np.random.default_rng([detail, 13]).normal(0, 1, (32, 32)) * falling
    terms[8:, :] = finer[8:, :]
    terms[:, 8:] = finer[:, 8:]
    terms[0, 0] = 128 * 32
    grid = (dct_rows(32).T @ terms @ dct_rows(32)).astype(np.float32)
    luma = np.asarray(Image.fromarray(grid, mode="F").resize((size, size), Image.BICUBIC))
    ycbcr = np.stack([luma, np.full_like(luma, 128 + tint[0]), np.full_like(luma, 128 + tint[1])],
                     axis=-1)
    return Image.fromarray(np.clip(ycbcr, 0, 255).astype(np.uint8), "YCbCr").convert("RGB")


def noise_rgb(height, width, seed=0):
    """Random RGB pixels (for lossless formats: any decoding mistake shows)."""
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def palette_image(height, width, seed=0, colors=8):
    """A "P" image with a fixed palette of ``colors`` entries and no transparency."""
    rng = np.random.default_rng(seed)
    image = Image.fromarray(rng.integers(0, colors, (height, width), dtype=np.uint8), "P")
    palette = rng.integers(0, 256, colors * 3, dtype=np.uint8).tolist()
    image.putpalette(palette)
    return image


# --------------------------------------------------------------------------- file writers

def save(path, image, fmt=None, **options):
    """Save an array or Pillow image to ``path`` (creating folders); return the path as str."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if isinstance(image, np.ndarray):
        image = Image.fromarray(image)
    image.save(path, fmt, **options)
    return path


def write_bytes(path, data):
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def encode(image, fmt, **options):
    """Bytes of an array or Pillow image saved in ``fmt``."""
    if isinstance(image, np.ndarray):
        image = Image.fromarray(image)
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def png_chunk(kind, data):
    """One PNG chunk: length, type, data, CRC-32."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(
        ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def raw_png(width, height, scanlines, *, bit_depth=8, color_type=2):
    """A PNG from raw (unfiltered) scanline bytes; each scanline gets filter byte 0."""
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    raw = b"".join(b"\x00" + line for line in scanlines)
    return (PNG_SIGNATURE + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(raw, 9))
            + png_chunk(b"IEND", b""))


def grey_png(samples, bit_depth):
    """A greyscale PNG of ``bit_depth`` (1, 2, 4, 8 or 16) bits a sample, its samples the
    values of the ``(H, W)`` array ``samples`` as they are (Pillow writes no 2- or 4-bit PNG)."""
    samples = np.asarray(samples)
    height, width = samples.shape
    if bit_depth == 16:
        rows = [row.astype(">u2").tobytes() for row in samples]
    else:
        rows = [np.packbits(np.unpackbits(row.astype(np.uint8)[:, None], axis=1)
                            [:, 8 - bit_depth:].ravel()).tobytes() for row in samples]
    return raw_png(width, height, rows, bit_depth=bit_depth, color_type=0)


def png16_rgb(pixels):
    """A 16-bit RGB PNG (Pillow cannot write one) from an (H, W, 3) uint16 array."""
    height, width, _ = pixels.shape
    rows = [pixels[r].astype(">u2").tobytes() for r in range(height)]
    return raw_png(width, height, rows, bit_depth=16, color_type=2)


def bomb_png(width=30_000, height=30_000):
    """A decompression bomb: a few hundred bytes declaring ``width`` x ``height`` RGB pixels.

    The IHDR is valid and the IDAT is a well-formed zlib stream of zero bytes (it covers only a
    few rows: no reader should ever get that far). Decoding it fully would need
    ``width * height * 3`` bytes (2.7 GB for the default size).
    """
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(bytes((width * 3 + 1) * 4), 9)
    return (PNG_SIGNATURE + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", idat)
            + png_chunk(b"IEND", b""))


def os2_bmp(rows_bottom_up_bgr):
    """A 24-bit OS/2 1.x bitmap (12-byte BITMAPCOREHEADER), which Pillow reads but TF does not.

    Args:
        rows_bottom_up_bgr: list of rows of BGR byte strings, bottom row first, equal widths.
    """
    width = len(rows_bottom_up_bgr[0]) // 3
    height = len(rows_bottom_up_bgr)
    stride = (width * 3 + 3) // 4 * 4
    pixels = b"".join(row.ljust(stride, b"\0") for row in rows_bottom_up_bgr)
    header = b"BM" + struct.pack("<IHHI", 14 + 12 + len(pixels), 0, 0, 26)
    return header + struct.pack("<IHHHH", 12, width, height, 1, 24) + pixels


def animated_gif(path, frames, **options):
    """Save palette frames as an animated GIF; returns the path."""
    first, rest = frames[0], frames[1:]
    return save(path, first, "GIF", save_all=True, append_images=rest, duration=40, loop=0,
                **options)


def multipage_tiff(path, pages):
    """Save RGB arrays as a multi-page TIFF; returns the path."""
    images = [Image.fromarray(p) for p in pages]
    return save(path, images[0], "TIFF", save_all=True, append_images=images[1:])


def exif_bytes(orientation):
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = orientation
    return exif.tobytes()


def sideways(upright, orientation):
    """The stored pixels of a file with EXIF ``orientation`` that displays ``upright``."""
    image = Image.fromarray(upright) if isinstance(upright, np.ndarray) else upright
    return image.transpose(_INVERSE[orientation]) if orientation in _INVERSE else image


# --------------------------------------------------------------------------- tables

def mixed_table(root, n_good=24, bad=True, seed=0, size=(20, 28)):
    """A table of small good images of several formats over three splits, plus bad rows.

    Returns (df, bad_rows): ``bad_rows`` maps each bad row label to a reason fragment.
    """
    root = os.fspath(root)
    rows, index = [], []
    splits = ["train", "train", "validation", "test"]
    formats = [("jpg", "JPEG", {"quality": 90}), ("png", "PNG", {}), ("gif", "GIF", {}),
               ("bmp", "BMP", {})]
    height, width = size
    for i in range(n_good):
        ext, fmt, options = formats[i % len(formats)]
        pixels = pattern(height, width, seed=seed * 1000 + i)
        image = Image.fromarray(pixels)
        if fmt == "GIF":
            image = image.convert("P", palette=Image.Palette.ADAPTIVE, colors=64)
        path = save(os.path.join(root, f"good_{i:03d}.{ext}"), image, fmt, **options)
        rows.append((splits[i % len(splits)], path, f"class{i % 3}", i))
        index.append(f"good{i:03d}")
    bad_rows = {}
    if bad:
        jpeg = encode(pattern(height, width, seed=seed + 99), "JPEG")
        extra = [
            ("missing", "train", os.path.join(root, "does_not_exist.jpg"), "file not found"),
            ("truncated", "train", write_bytes(os.path.join(root, "trunc.jpg"),
                                               jpeg[: len(jpeg) // 2]), "truncated"),
            ("text", "test", write_bytes(os.path.join(root, "notes.jpg"), b"hello world\n"),
             "not an image"),
            ("empty", "validation", write_bytes(os.path.join(root, "empty.png"), b""),
             "empty file"),
            ("badsplit", "TRIAN", rows[0][1], "unknown split 'TRIAN'"),
        ]
        for number, (name, split, path, reason) in enumerate(extra):
            rows.append((split, path, "class0", 1000 + number))
            index.append(name)
            bad_rows[name] = reason
        # interleave bad rows with good ones, deterministically
        order = np.random.default_rng(seed).permutation(len(rows))
        rows = [rows[i] for i in order]
        index = [index[i] for i in order]
    df = pd.DataFrame(rows, columns=["split", "image_uri", "label", "source_id"],
                      index=pd.Index(index, name="key"))
    return df, bad_rows


# --------------------------------------------------------------------------- reading back

def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tree_digest(folder):
    """{relative path: sha256} of every file below ``folder`` (hidden ones included)."""
    out = {}
    for dirpath, _dirnames, filenames in os.walk(folder):
        for name in filenames:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, folder)] = sha256_file(path)
    return out


def record_offsets(data):
    """[(start, end)] byte ranges of each record frame in an uncompressed TFRecord file."""
    spans, pos = [], 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        end = pos + 12 + length + 4
        spans.append((pos, end))
        pos = end
    return spans


def read_examples(output_dir):
    """Every record of an output folder, read with TensorFlow (independently of the library).

    Returns a list of dicts: feature key -> single python value (bytes or int or float), plus
    ``_shard`` (file name) and ``_index`` (record index within the shard).
    """
    import json

    import tensorflow as tf

    with open(os.path.join(output_dir, "metadata.json"), encoding="utf-8") as f:
        metadata = json.load(f)
    compression = metadata["compression"] or ""
    out = []
    for split in metadata["splits"].values():
        for shard in split["shards"]:
            path = os.path.join(output_dir, shard["name"])
            dataset = tf.data.TFRecordDataset(path, compression_type=compression)
            for index, raw in enumerate(dataset):
                example = tf.train.Example.FromString(raw.numpy())
                record = {"_shard": shard["name"], "_index": index}
                for key, feature in example.features.feature.items():
                    kind = feature.WhichOneof("kind")
                    values = list(getattr(feature, kind).value)
                    record[key] = values[0] if len(values) == 1 else values
                out.append(record)
    return out


def tf_decode(encoded, channels=3):
    """Pixels as a training pipeline sees them: tf.io.decode_image, first frame only."""
    import tensorflow as tf

    return tf.io.decode_image(encoded, channels=channels, expand_animations=False).numpy()


def pillow_rgb(encoded):
    """What Pillow shows of encoded bytes (first frame, no EXIF handling), as RGB."""
    with Image.open(io.BytesIO(encoded)) as image:
        return np.asarray(image.convert("RGB"))
