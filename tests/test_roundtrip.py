"""Write, read back, compare: every image mode and format, resizing, compression, extra columns."""

import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from PIL import Image, ImageOps

import tfrecorder_lite
from tfrecorder_lite.output.manifest import ImageSummary
from tfrecorder_lite.record.features import ImageFeature
from conftest import photo, save


def _reference(path):
    """The pixels a viewer shows: upright, RGB (alpha dropped), 8-bit."""
    image = Image.open(path)
    if image.mode.startswith("I;16"):
        gray = (np.asarray(image).astype(np.uint32) >> 8).astype(np.uint8)
        return np.repeat(gray[..., None], 3, axis=-1)
    return np.asarray(ImageOps.exif_transpose(image).convert("RGB"))


def _one_record(output_dir):
    (dataset,) = tfrecorder_lite.load(output_dir, as_supervised=False).values()
    (features,) = list(dataset.as_numpy_iterator())
    return features


def _cmyk_jpeg(path):
    return save(photo(24, 36, seed=3).convert("CMYK"), path, "JPEG", quality=95)


def _rotated_jpeg(path):
    exif = Image.Exif()
    exif[0x0112] = 6  # stored sideways: viewers rotate 90 degrees clockwise
    return save(photo(24, 36, seed=4), path, "JPEG", quality=95, exif=exif.tobytes())


def _png16(path, color):
    if color:
        data = (np.arange(24 * 36 * 3, dtype=np.uint16).reshape(24, 36, 3) * 23)
        # Pillow cannot write 16-bit RGB; TensorFlow can, so use it to make the source file.
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(tf.io.encode_png(tf.constant(data)).numpy())
        return str(path)
    data = (np.arange(24 * 36, dtype=np.uint16).reshape(24, 36) * 71)
    return save(Image.fromarray(data), path, "PNG")


def _animated_gif(path):
    frames = [photo(24, 36, seed=s).convert("P") for s in range(3)]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    frames[0].save(path, "GIF", save_all=True, append_images=frames[1:], duration=50)
    return str(path)


def _tiff_pages(path):
    pages = [photo(24, 36, seed=s) for s in range(2)]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pages[0].save(path, "TIFF", save_all=True, append_images=pages[1:])
    return str(path)


def _palette_transparent(path):
    image = photo(24, 36, seed=5).convert("P")
    return save(image, path, "PNG", transparency=0)


# name -> (maker(path), file name, stored format, mean abs difference allowed: 0 = exact
# (JPEGs too: load() decodes them with the accurate IDCT, as Pillow does); 5 = a second JPEG
# generation at quality 95)
CASES = {
    "jpeg_rgb": (lambda p: save(photo(24, 36), p, "JPEG", quality=90), "a.jpg", "jpeg", 0),
    "jpeg_gray": (lambda p: save(photo(24, 36, mode="L"), p, "JPEG"), "a.jpg", "jpeg", 0),
    "jpeg_progressive": (lambda p: save(photo(24, 36), p, "JPEG", progressive=True), "a.jpg",
                         "jpeg", 0),
    "jpeg_444_large": (lambda p: save(photo(480, 640, seed=2), p, "JPEG", quality=95,
                                      subsampling=0), "a.jpg", "jpeg", 0),
    "jpeg_cmyk": (_cmyk_jpeg, "a.jpg", "jpeg", 5),
    "jpeg_exif_rotated": (_rotated_jpeg, "a.jpg", "jpeg", 5),
    "png_rgb": (lambda p: save(photo(24, 36), p, "PNG"), "a.png", "png", 0),
    "png_rgba": (lambda p: save(photo(24, 36, mode="RGBA"), p, "PNG"), "a.png", "png", 0),
    "png_gray": (lambda p: save(photo(24, 36, mode="L"), p, "PNG"), "a.png", "png", 0),
    "png_gray_alpha": (lambda p: save(photo(24, 36, mode="LA"), p, "PNG"), "a.png", "png", 0),
    "png_palette": (lambda p: save(photo(24, 36, mode="P"), p, "PNG"), "a.png", "png", 0),
    "png_palette_transparent": (_palette_transparent, "a.png", "png", 0),
    "png_1bit": (lambda p: save(photo(24, 36, mode="1"), p, "PNG"), "a.png", "png", 0),
    "png_16bit_gray": (lambda p: _png16(p, color=False), "a.png", "png", 0),
    "png_16bit_rgb": (lambda p: _png16(p, color=True), "a.png", "png", 0),
    "png_named_jpg": (lambda p: save(photo(24, 36), p, "PNG"), "a.jpg", "png", 0),
    "gif": (lambda p: save(photo(24, 36, mode="P"), p, "GIF"), "a.gif", "gif", 0),
    "gif_animated": (_animated_gif, "a.gif", "png", 0),
    "bmp_24bit": (lambda p: save(photo(24, 36), p, "BMP"), "a.bmp", "bmp", 0),
    "bmp_8bit": (lambda p: save(photo(24, 36, mode="L"), p, "BMP"), "a.bmp", "png", 0),
    "tiff": (lambda p: save(photo(24, 36), p, "TIFF"), "a.tif", "png", 0),
    "tiff_multipage": (_tiff_pages, "a.tif", "png", 0),
    "webp_lossless": (lambda p: save(photo(24, 36), p, "WEBP", lossless=True), "a.webp", "png",
                      0),
    "ppm": (lambda p: save(photo(24, 36), p, "PPM"), "a.ppm", "png", 0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_mode_and_format_round_trips_to_the_pixels_a_viewer_shows(tmp_path, case):
    make, name, stored_format, tolerance = CASES[case]
    path = make(tmp_path / "src" / name)
    df = pd.DataFrame({"split": ["train"], "image_uri": [path], "label": ["x"]})
    df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, n_jobs=1)

    features = _one_record(tmp_path / "out")
    expected = _reference(path)
    assert features["image"].dtype == np.uint8
    assert features["image"].shape == expected.shape
    assert features["image/format"].decode() == stored_format
    assert (features["image/height"], features["image/width"]) == expected.shape[:2]
    native = tf.io.decode_image(features["image/encoded"], expand_animations=False)
    assert features["image/channels"] == native.shape[-1]
    if tolerance == 0:
        np.testing.assert_array_equal(features["image"], expected)
    else:
        difference = np.abs(features["image"].astype(int) - expected.astype(int))
        assert difference.mean() < tolerance, difference.mean()


def test_images_tensorflow_decodes_keep_their_original_bytes(tmp_path, image_table):
    image_table.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    by_name = {os.path.basename(p): open(p, "rb").read() for p in image_table["image_uri"]}
    for dataset in tfrecorder_lite.load(tmp_path / "out", as_supervised=False).values():
        for features in dataset.as_numpy_iterator():
            assert features["image/encoded"] == by_name[features["image/filename"].decode()]


def test_output_bytes_stay_close_to_source_bytes_when_kept_as_encoded(tmp_path, image_table):
    result = image_table.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    source = sum(os.path.getsize(p) for p in image_table["image_uri"])
    written = sum(s["bytes"] for info in result.metadata["splits"].values()
                  for s in info["shards"])
    per_record_overhead = (written - source) / len(image_table)
    assert 0 < per_record_overhead < 300  # framing, label, file name and the feature keys


@pytest.mark.parametrize("image_format", ["jpeg", "png"])
def test_image_size_resizes_at_write_time(tmp_path, image_table, image_format):
    result = image_table.tfrecord.to_tfrecord(tmp_path / "out", image_size=(16, 12),
                                              image_format=image_format, progress=False)
    assert result.metadata["image"] == {"stored": "resized", "size": [16, 12], "max_size": [16, 12],
                                        "channels": 3, "formats": {image_format: 24}}
    dataset = tfrecorder_lite.load(tmp_path / "out", "train", batch_size=16)
    images, labels = next(iter(dataset))
    assert images.shape == (16, 16, 12, 3) and images.dtype == tf.uint8
    first = next(tfrecorder_lite.load(tmp_path / "out", "train", as_supervised=False)
                 .as_numpy_iterator())
    source = Image.open(image_table.set_index(
        image_table["image_uri"].map(os.path.basename)).loc[
        first["image/filename"].decode(), "image_uri"]).convert("RGB")
    expected = np.asarray(source.resize((12, 16), Image.BILINEAR))
    tolerance = 4 if image_format == "jpeg" else 0.5
    assert np.abs(first["image"].astype(int) - expected.astype(int)).mean() < tolerance


def test_loader_resize_matches_a_plain_resize_of_the_decoded_image(tmp_path):
    big = save(photo(400, 300, seed=9), tmp_path / "big.jpg", "JPEG", quality=95)
    df = pd.DataFrame({"split": ["TRAIN"], "image_uri": [big], "label": ["a"]})
    df.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    image, _ = next(iter(tfrecorder_lite.load(tmp_path / "out", "TRAIN", image_size=(50, 40))))
    plain = tf.image.resize(tf.io.decode_jpeg(open(big, "rb").read(), channels=3), (50, 40))
    assert image.shape == (50, 40, 3) and image.dtype == tf.uint8
    assert np.abs(image.numpy().astype(float) - plain.numpy()).mean() < 4


def test_loader_decodes_every_format_and_size_in_one_dataset(tmp_path):
    """One pipeline routes a large JPEG (decoded at 1/4 scale), a small JPEG (full size) and a
    PNG (any-format decoder) to the right decoder; each matches a plain decode + resize."""
    paths = [save(photo(400, 300, seed=10), tmp_path / "big.jpg", "JPEG", quality=95),
             save(photo(60, 50, seed=11), tmp_path / "small.jpg", "JPEG", quality=95),
             save(photo(90, 70, seed=12), tmp_path / "lossless.png", "PNG")]
    df = pd.DataFrame({"split": ["TRAIN"] * 3, "image_uri": paths, "label": ["a", "b", "c"]})
    result = df.tfrecord.to_tfrecord(tmp_path / "out", shuffle=False, progress=False)
    assert result.metadata["image"]["max_size"] == [400, 300]
    image_summary = tfrecorder_lite.read_metadata(tmp_path / "out").manifest.image
    assert ImageFeature.useful_jpeg_ratios(image_summary, (50, 40)) == (4, 2)
    loaded = tfrecorder_lite.load(tmp_path / "out", "TRAIN", image_size=(50, 40))
    for (image, _), path in zip(loaded, paths):
        plain = tf.image.resize(tf.io.decode_image(open(path, "rb").read(), channels=3), (50, 40))
        tolerance = 4 if path.endswith(".jpg") else 0.5
        assert np.abs(image.numpy().astype(float) - plain.numpy()).mean() < tolerance, path


def test_jpeg_scales_are_only_tried_where_some_image_is_big_enough():
    info = ImageSummary("encoded", max_size=(500, 1000), formats={"jpeg": 5, "png": 1})
    assert ImageFeature.useful_jpeg_ratios(info, (224, 224)) == (2,)
    assert ImageFeature.useful_jpeg_ratios(info, (60, 100)) == (8, 4, 2)
    assert ImageFeature.useful_jpeg_ratios(info, (300, 300)) == ()
    png_only = ImageSummary("encoded", max_size=(900, 900), formats={"png": 6})
    assert ImageFeature.useful_jpeg_ratios(png_only, (9, 9)) == ()
    assert ImageFeature.useful_jpeg_ratios(info, None) == ()


@pytest.mark.parametrize("compression,suffix", [("GZIP", ".gz"), ("zlib", ".zz")])
def test_compressed_shards_read_with_plain_tf_data(tmp_path, image_table, compression, suffix):
    result = image_table.tfrecord.to_tfrecord(tmp_path / "out", compression=compression,
                                              progress=False)
    shards = sorted(p for p in os.listdir(tmp_path / "out") if ".tfrecord" in p)
    assert shards and all(p.endswith(".tfrecord" + suffix) for p in shards)
    plain = tf.data.TFRecordDataset([str(tmp_path / "out" / p) for p in shards],
                                    compression_type=compression.upper())
    assert sum(1 for _ in plain) == len(image_table)
    loaded = tfrecorder_lite.load(tmp_path / "out", "TRAIN")
    assert sum(1 for _ in loaded) == result.counts["TRAIN"] == 16


def test_records_read_with_plain_tf_data_and_only_the_documented_keys(tmp_path, image_table):
    image_table.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    spec = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/format": tf.io.FixedLenFeature([], tf.string),
        "image/height": tf.io.FixedLenFeature([], tf.int64),
        "image/width": tf.io.FixedLenFeature([], tf.int64),
        "image/channels": tf.io.FixedLenFeature([], tf.int64),
        "image/filename": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
        "image/class/text": tf.io.FixedLenFeature([], tf.string),
    }
    labels = open(tmp_path / "out" / "labels.txt").read().splitlines()
    assert labels == ["cat", "dog"]
    truth = dict(zip(image_table["image_uri"].map(os.path.basename), image_table["label"]))
    files = tf.io.gfile.glob(str(tmp_path / "out" / "*.tfrecord"))
    seen = 0
    for raw in tf.data.TFRecordDataset(files):
        features = tf.io.parse_single_example(raw, spec)
        image = tf.io.decode_image(features["image/encoded"], channels=3)
        assert image.shape[:2] == (features["image/height"], features["image/width"])
        name = features["image/filename"].numpy().decode()
        assert labels[features["image/class/label"].numpy()] == truth[name]
        assert features["image/class/text"].numpy().decode() == truth[name]
        seen += 1
    assert seen == len(image_table)


def test_extra_columns_become_features(tmp_path, image_table):
    table = image_table.assign(weight=np.linspace(0, 1, len(image_table)),
                               source_id=np.arange(len(image_table)) - 5,
                               note=[f"n{i}" if i % 4 else None for i in range(len(image_table))])
    result = table.tfrecord.to_tfrecord(tmp_path / "out", progress=False, shuffle=False)
    assert {k: v["dtype"] for k, v in result.metadata["features"].items()
            if not k.startswith("image/")} == {
        "weight": "float32", "source_id": "int64", "note": "string"}
    rows = list(tfrecorder_lite.load(tmp_path / "out", "TRAIN", as_supervised=False)
                .as_numpy_iterator())
    expected = table[table["split"] == "TRAIN"]
    assert [r["source_id"] for r in rows] == expected["source_id"].tolist()
    np.testing.assert_allclose([r["weight"] for r in rows], expected["weight"], rtol=1e-6)
    assert [r["note"].decode() for r in rows] == expected["note"].fillna("").tolist()


def test_a_column_named_like_a_record_key_is_refused(tmp_path, image_table):
    table = image_table.assign(**{"image/format": "x"})
    with pytest.raises(tfrecorder_lite.SchemaError, match="image/format"):
        table.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
