"""Semantic segmentation: tables of ``split, image_uri, mask_uri`` written with the TF Model
Garden's keys, read back by ``load()``, ``df.tfrecord.dataset()``, ``verify``, ``info``,
``inspect`` and the Model Garden's own Decoder and Parser."""

import io
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import tfrecorder_lite
from conftest import photo, save
from imagegen import exif_bytes, grey_png, read_examples, sideways
from tfrecorder_lite.errors import InvalidRowError, SchemaError
from tfrecorder_lite.images.mask_pixels import decode_ids
from tfrecorder_lite.read.verification import verify

LABELS = ["background", "road", "car"]
COLOURS = {(0, 0, 0): "background", (128, 64, 128): "road", (0, 0, 142): "car",
           (255, 255, 255): None}  # white: the ignore value
MASK = "image/segmentation/class/encoded"


def _ids(height, width, seed):
    """Class ids 0-2 in blocks (so that a nearest-neighbour resize keeps them), a few 255."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 3, (height // 4 + 1, width // 4 + 1), dtype=np.uint8)
    ids = np.kron(blocks, np.ones((4, 4), np.uint8))[:height, :width].copy()
    ids[0, : 2 + seed % 3] = 255
    return ids


def _mask_file(ids, kind):
    """A mask image of ``ids``: "ids" (L), "palette" (P) or "rgb" (through COLOURS)."""
    if kind == "ids":
        return Image.fromarray(ids, "L")
    if kind == "palette":
        image = Image.fromarray(ids, "P")
        image.putpalette([c for i in range(256) for c in ((i * 53) % 256, (i * 101) % 256, i)])
        return image
    by_id = {None if label is None else LABELS.index(label): rgb
             for rgb, label in COLOURS.items()}
    rgb = np.zeros((*ids.shape, 3), np.uint8)
    for i, colour in by_id.items():
        rgb[ids == (255 if i is None else i)] = colour
    return Image.fromarray(rgb, "RGB")


def _table(root, kind="ids", n=12):
    """``(table, {file name: source ids})``: images of several sizes with their masks."""
    rows, truth = [], {}
    for i in range(n):
        height, width = 20 + 2 * (i % 3), 28 + 4 * (i % 2)
        split = "TRAIN" if i < n * 2 // 3 else "VALIDATION" if i < n * 5 // 6 else "TEST"
        fmt, ext = ("JPEG", "jpg") if i % 2 else ("PNG", "png")
        image = save(photo(height, width, seed=i), root / "images" / f"img{i}.{ext}", fmt)
        ids = _ids(height, width, i)
        mask = save(_mask_file(ids, kind), root / "masks" / f"img{i}.png", "PNG")
        rows.append((split, image, mask))
        truth[f"img{i}.{ext}"] = ids
    return pd.DataFrame(rows, columns=["split", "image_uri", "mask_uri"]), truth


def _counts(arrays):
    total = {}
    for ids in arrays:
        for i, n in zip(*np.unique(ids, return_counts=True)):
            if i != 255:
                total[LABELS[i]] = total.get(LABELS[i], 0) + int(n)
    return total


@pytest.mark.parametrize("kind", ["ids", "palette", "rgb"])
def test_masks_are_written_pixel_for_pixel_with_the_model_garden_keys(tmp_path, kind):
    df, truth = _table(tmp_path, kind)
    options = {"mask_colors": COLOURS} if kind == "rgb" else {"mask_labels": LABELS}
    result = df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, **options)
    assert result.labels == LABELS
    records = read_examples(tmp_path / "out")
    assert len(records) == len(df)
    for record in records:
        ids = truth[record["image/filename"].decode()]
        stored = Image.open(io.BytesIO(record[MASK]))
        assert (stored.format, stored.mode) == ("PNG", "L")
        assert np.array_equal(np.asarray(stored), ids)
        assert record["image/segmentation/class/format"] == b"png"
        assert (record["image/height"], record["image/width"]) == ids.shape
    metadata = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert metadata["task"] == "segmentation"
    assert metadata["segmentation"]["ignore_value"] == 255
    for split, entry in metadata["splits"].items():
        names = df.loc[df["split"] == split, "image_uri"].map(os.path.basename)
        assert entry["label_counts"] == _counts(truth[name] for name in names)
    assert (tmp_path / "out" / "labels.txt").read_text().splitlines() == LABELS
    assert "verified" in str(verify(tmp_path / "out", decode=True))


def test_a_single_channel_mask_is_kept_as_it_is(tmp_path):
    df, _ = _table(tmp_path, "ids", n=3)
    df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, mask_labels=LABELS)
    sources = {os.path.basename(image): open(mask, "rb").read()
               for image, mask in zip(df["image_uri"], df["mask_uri"])}
    for record in read_examples(tmp_path / "out"):
        assert record[MASK] == sources[record["image/filename"].decode()]


def test_bad_rows_are_rejected_whole_with_their_reason(tmp_path):
    df, _ = _table(tmp_path, "ids", n=6)
    bad = tmp_path / "bad"
    bad.mkdir()
    wrong_size = save(Image.fromarray(np.zeros((5, 7), np.uint8), "L"), bad / "small.png")
    jpeg = save(Image.fromarray(np.zeros((20, 28), np.uint8), "L"), bad / "mask.jpg", "JPEG")
    unknown = _ids(20, 28, 0)
    unknown[3:5, 3:6] = 7  # six pixels of class 7
    unknown = save(Image.fromarray(unknown, "L"), bad / "seven.png")
    image = df["image_uri"][0]  # 20x28
    rows = pd.DataFrame([("TRAIN", image, wrong_size), ("TRAIN", image, jpeg),
                         ("TRAIN", image, unknown), ("TRAIN", image, str(bad / "gone.png")),
                         ("TRAIN", image, "")], columns=df.columns, index=list("abcde"))
    table = pd.concat([df, rows])
    result = table.tfrecord.to_tfrecord(tmp_path / "out", progress=False, on_error="skip",
                                        mask_labels=LABELS)
    reasons = dict(zip(result.rejected.index, result.rejected["reason"]))
    assert set(reasons) == set("abcde")
    assert "mask is 5x7 pixels (height x width), its image 20x28" in reasons["a"]
    assert "JPEG file, which is lossy" in reasons["b"]
    assert "class id 7 (6 pixels) is not a label (ids 0 to 2 or the ignore value 255)" \
        in reasons["c"]
    assert reasons["d"].startswith("mask_uri: ") and "not found" in reasons["d"]
    assert reasons["e"] == "no mask (mask_uri is empty)"
    assert sum(result.counts.values()) == len(df)
    assert "verified" in str(verify(tmp_path / "out", decode=True))
    with pytest.raises(InvalidRowError, match="class id 7"):
        rows.iloc[[2]].tfrecord.to_tfrecord(tmp_path / "raise", progress=False,
                                            mask_labels=LABELS)
    allowed = rows.iloc[[1]].tfrecord.to_tfrecord(tmp_path / "lossy", progress=False,
                                                  mask_labels=LABELS, allow_lossy_masks=True)
    assert allowed.counts == {"TRAIN": 1}


@pytest.mark.parametrize("bits", [2, 4])
def test_low_bit_greyscale_masks_are_written_as_their_class_ids(tmp_path, bits):
    # Pillow and decode_png scale 2- and 4-bit samples to 0-255: 2-bit 3 read as 255 (the
    # ignore value) and 4-bit 1, 2 as 17, 34 (labels of their own)
    df, truth = _table(tmp_path, "ids", n=6)
    for mask, ids in zip(df["mask_uri"], truth.values()):
        ids[ids == 255] = 0
        with open(mask, "wb") as f:
            f.write(grey_png(ids, bits))
    three = truth["img0.png"].copy()
    three[1:3, 2:5] = 3  # six pixels of class 3, no label
    bad = tmp_path / "masks" / "three.png"
    bad.write_bytes(grey_png(three, bits))
    table = pd.concat([df, pd.DataFrame([("TRAIN", df["image_uri"][0], str(bad))],
                                        columns=df.columns, index=["three"])])
    result = table.tfrecord.to_tfrecord(tmp_path / "out", progress=False, on_error="skip",
                                        mask_labels=LABELS)
    assert result.labels == LABELS
    assert list(result.rejected.index) == ["three"]
    assert "mask class id 3 (6 pixels) is not a label" in result.rejected["reason"].iloc[0]
    records = read_examples(tmp_path / "out")
    assert len(records) == len(df)
    for record in records:
        assert np.array_equal(decode_ids(record[MASK]), truth[record["image/filename"].decode()])
    assert "verified" in str(verify(tmp_path / "out", decode=True))


def test_a_mask_covers_its_image_as_displayed_whatever_their_exif_orientations(tmp_path):
    # a photo whose file holds 48x64 pixels (height x width) with EXIF orientation 6 is
    # displayed, and written, 64x48: its mask is 64x48, or a file its own orientation turns so
    ids = _ids(64, 48, 1)
    image = save(sideways(photo(64, 48, seed=3), 6), tmp_path / "images" / "turned.jpg", "JPEG",
                 exif=exif_bytes(6))
    upright = save(Image.fromarray(ids, "L"), tmp_path / "masks" / "upright.png")
    unturned = save(sideways(ids, 6), tmp_path / "masks" / "unturned.png")
    own = save(sideways(ids, 6), tmp_path / "masks" / "own.png", "PNG", exif=exif_bytes(6))
    df = pd.DataFrame([("TRAIN", image, upright), ("TRAIN", image, unturned),
                       ("TRAIN", image, own)], columns=["split", "image_uri", "mask_uri"],
                      index=["upright", "unturned", "own"])
    result = df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, on_error="skip",
                                     mask_labels=LABELS)
    assert list(result.rejected.index) == ["unturned"]
    assert result.rejected.reason.iloc[0] == (
        "mask is 48x64 pixels (height x width), its image 64x48 as displayed (its file holds "
        "48x64 pixels, which its EXIF orientation 6 turns upright): a mask covers the image as "
        "displayed")
    records = read_examples(tmp_path / "out")
    assert len(records) == 2
    for record in records:
        assert (record["image/height"], record["image/width"]) == (64, 48)
        assert np.array_equal(decode_ids(record[MASK]), ids)
    problems = df.tfrecord.validate(mask_labels=LABELS)
    masks = problems[problems["column"] == "mask_uri"]
    assert list(masks["row"]) == ["unturned"] and \
        list(masks["problem"]) == list(result.rejected.reason)


def test_validate_lists_every_bad_mask_with_its_reason(tmp_path):
    df, _ = _table(tmp_path, "ids", n=4)
    bad = tmp_path / "bad"
    bad.mkdir()
    small = save(Image.fromarray(np.zeros((5, 7), np.uint8), "L"), bad / "small.png")
    seven = _ids(20, 28, 0)
    seven[0:2, 5:8] = 7
    seven = save(Image.fromarray(seven, "L"), bad / "seven.png")
    image = df["image_uri"][0]  # 20x28
    rows = pd.DataFrame([("TRAIN", image, small), ("TRAIN", image, seven),
                         ("TRAIN", image, str(bad / "gone.png")), ("TRAIN", image, " ")],
                        columns=df.columns, index=list("abcd"))
    problems = pd.concat([df, rows]).tfrecord.validate(mask_labels=LABELS)
    problems = problems[~problems["problem"].str.startswith(("duplicate", "train/test"))]
    assert list(problems["row"]) == list("abcd")
    assert set(problems["column"]) == {"mask_uri"}
    reasons = list(problems["problem"])
    assert "mask is 5x7 pixels (height x width), its image 20x28" in reasons[0]
    assert "class id 7 (6 pixels) is not a label" in reasons[1]
    assert reasons[2].startswith("mask_uri: ") and "not found" in reasons[2]
    assert reasons[3] == "no mask (mask_uri is empty)"
    assert df.tfrecord.validate(mask_labels=LABELS).empty


def test_an_unknown_colour_is_named_with_its_pixel_count(tmp_path):
    df, _ = _table(tmp_path, "rgb", n=2)
    rgb = np.asarray(Image.open(df["mask_uri"][0]).convert("RGB")).copy()
    rgb[2:4, 2:4] = (1, 2, 3)
    save(Image.fromarray(rgb, "RGB"), df["mask_uri"][0])
    result = df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, on_error="skip",
                                     mask_colors=COLOURS)
    assert list(result.rejected["reason"]) == [
        "mask colour (1, 2, 3) (4 pixels) not in mask_colors"]


def test_without_label_names_the_ids_are_the_labels(tmp_path):
    df, truth = _table(tmp_path, "ids", n=4)
    result = df.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    assert result.labels == ["0", "1", "2"]  # up to the largest id the masks hold
    assert "verified" in str(verify(tmp_path / "out", decode=True))


def test_load_resizes_masks_by_nearest_neighbour_only(tmp_path):
    tf = pytest.importorskip("tensorflow")
    df, truth = _table(tmp_path, "ids")
    df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, mask_labels=LABELS)
    batches = tfrecorder_lite.load(tmp_path / "out", "TRAIN", batch_size=4, image_size=(15, 23))
    seen = 0
    for images, masks in batches:
        assert images.shape[1:] == (15, 23, 3) and masks.shape[1:] == (15, 23, 1)
        assert masks.dtype == tf.uint8
        assert set(np.unique(masks.numpy())) <= {0, 1, 2, 255}
        seen += len(masks)
    assert seen == 8
    # unresized, one record at a time: the source ids exactly
    for example in tfrecorder_lite.load(tmp_path / "out", "TRAIN", as_supervised=False):
        ids = truth[example["image/filename"].numpy().decode()]
        assert np.array_equal(example["mask"].numpy()[..., 0], ids)
        resized = tf.image.resize(ids[..., None], (15, 23), method="nearest").numpy()
        assert set(np.unique(resized)) <= set(np.unique(ids))


def test_images_resized_as_they_are_written_take_their_masks_along(tmp_path):
    df, truth = _table(tmp_path, "ids", n=4)
    df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, mask_labels=LABELS,
                            image_size=(10, 14))
    for record in read_examples(tmp_path / "out"):
        ids = truth[record["image/filename"].decode()]
        stored = decode_ids(record[MASK])
        expected = np.asarray(Image.fromarray(ids, "L").resize((14, 10), Image.NEAREST))
        assert np.array_equal(stored, expected)
    assert "verified" in str(verify(tmp_path / "out", decode=True))


def test_the_table_dataset_gives_what_load_gives(tmp_path):
    pytest.importorskip("tensorflow")
    df, _ = _table(tmp_path, "palette")
    df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, mask_labels=LABELS)  # seed 0
    loaded = tfrecorder_lite.load(tmp_path / "out", "TRAIN", image_size=(16, 16))
    direct = df.tfrecord.dataset("TRAIN", image_size=(16, 16), shuffle=False, seed=0,
                                 mask_labels=LABELS)
    pairs = list(zip(loaded, direct))
    assert len(pairs) == 8
    for (image_a, mask_a), (image_b, mask_b) in pairs:
        assert np.array_equal(image_a.numpy(), image_b.numpy())
        assert np.array_equal(mask_a.numpy(), mask_b.numpy())


def test_data_source_gives_the_same_records(tmp_path):
    df, truth = _table(tmp_path, "rgb")
    df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, mask_colors=COLOURS)
    source = tfrecorder_lite.data_source(tmp_path / "out", "TRAIN")
    assert len(source) == 8
    for i in range(len(source)):
        record = source[i]
        mask = Image.open(io.BytesIO(record[MASK]))
        assert np.array_equal(np.asarray(mask), truth[record["image/filename"].decode()])


def test_a_keras_model_trains_a_step_on_load(tmp_path):
    keras = pytest.importorskip("keras")
    df, _ = _table(tmp_path, "ids")
    df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, mask_labels=LABELS)
    train = tfrecorder_lite.load(tmp_path / "out", "TRAIN", batch_size=4, image_size=(16, 16))
    model = keras.Sequential([keras.Input((16, 16, 3)), keras.layers.Rescaling(1 / 255),
                              keras.layers.Conv2D(len(LABELS), 3, padding="same")])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                      ignore_class=255))
    history = model.fit(train, epochs=1, steps_per_epoch=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


@pytest.mark.slow  # loads the Model Garden from its wheel (downloaded once)
def test_the_model_garden_decoder_and_parser_read_every_record(tmp_path):
    tf = pytest.importorskip("tensorflow")
    from model_garden import segmentation_classes

    decoder_class, parser_class = segmentation_classes()
    df, truth = _table(tmp_path, "rgb")
    df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, mask_colors=COLOURS)
    decoder = decoder_class()
    parser = parser_class(output_size=[16, 16], preserve_aspect_ratio=False)
    records = read_examples(tmp_path / "out")
    shards = sorted({r["_shard"] for r in records})
    read = 0
    for shard in shards:
        for serialized in tf.data.TFRecordDataset(str(tmp_path / "out" / shard)):
            data = decoder.decode(serialized)
            image, label = parser._prepare_image_and_label(data)
            assert image.shape == (16, 16, 3) and label.shape == (1, 16, 16)
            assert set(np.unique(label.numpy())) <= {0.0, 1.0, 2.0, 255.0}
            read += 1
    assert read == len(df)
    # at the image's own size the Parser's mask is the source's, pixel for pixel
    parser = parser_class(output_size=[16, 16])
    by_name = {r["image/filename"].decode(): r for r in records}
    for name, ids in truth.items():
        data = decoder.decode(tf.constant(_serialized(by_name[name])))
        _, label = parser._prepare_image_and_label(data)
        assert np.array_equal(label.numpy()[0].astype(np.uint8), ids)


def _serialized(record):
    """A read_examples record serialized again as a tf.train.Example."""
    import tensorflow as tf

    features = {}
    for key, value in record.items():
        if key.startswith("_"):
            continue
        values = value if isinstance(value, list) else [value]
        if all(isinstance(v, bytes) for v in values):
            features[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
        else:
            features[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


@pytest.mark.slow  # starts TensorFlow Datasets
def test_tensorflow_datasets_reads_the_masks(tmp_path):
    import tensorflow_datasets as tfds
    df, truth = _table(tmp_path, "palette", n=6)
    df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, mask_labels=LABELS)
    builder = tfds.builder_from_directory(str(tmp_path / "out"))
    label = builder.info.features["image/segmentation/class/label"].feature
    assert label.names == LABELS
    seen = 0
    for split in ("train", "validation", "test"):
        for example in builder.as_dataset(split=split):
            ids = truth[example["image/filename"].numpy().decode()]
            assert np.array_equal(example[MASK].numpy()[..., 0], ids)
            seen += 1
    assert seen == len(df)


def test_verify_catches_a_mask_that_disagrees_with_its_record():
    from tfrecorder_lite.images.mask_pixels import encode_ids
    from tfrecorder_lite.record.segmentation_kind import SegmentationMask

    feature = SegmentationMask(vocabulary=tuple(LABELS))
    ids = _ids(8, 8, 1)
    present = [i for i in np.unique(ids).tolist() if i != 255]
    pixels = [int((ids == i).sum()) for i in present]
    good = {MASK: [encode_ids(ids)], "image/height": [8], "image/width": [8],
            "image/segmentation/class/label": present,
            "image/segmentation/class/pixels": pixels}
    assert feature.check_values(good) is None
    assert "is 8x8 pixels, its image 8x9" in feature.check_values({**good, "image/width": [9]})
    seven = ids.copy()
    seven[0, 5] = 7
    assert "class id 7 (1 pixels), not a label" in feature.check_values(
        {**good, MASK: [encode_ids(seven)]})
    assert "its record lists" in feature.check_values(
        {**good, "image/segmentation/class/pixels": [p + 1 for p in pixels]})
    rgb = io.BytesIO()
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(rgb, "PNG")
    assert "not a single-channel 8-bit PNG" in feature.check_values({**good, MASK: [rgb.getvalue()]})
    low = {**good, MASK: [grey_png(np.where(ids == 255, 0, ids), 4)]}
    assert "a 4-bit greyscale PNG" in feature.check_values(low)  # decode_png reads 1 as 17


def test_inspect_draws_the_mask_over_its_thumbnail(tmp_path):
    from tfrecorder_lite.record.segmentation_kind import (SegmentationMask,
                                                          overlay_colour)

    feature = SegmentationMask(vocabulary=tuple(LABELS))
    ids = np.full((40, 40), 255, np.uint8)
    ids[:, 20:] = 2
    thumbnail = Image.new("RGB", (40, 40), (128, 128, 128))
    from tfrecorder_lite.images.mask_pixels import encode_ids

    feature.draw(thumbnail, {MASK: ("bytes", [encode_ids(ids)]),
                             "image/segmentation/class/label": ("int64", [2])}, None)
    pixels = np.asarray(thumbnail).astype(int)
    assert (pixels[5, 5] == 128).all()  # the ignore value is left clear
    car = pixels[5, 35]
    assert not (car == 128).all()  # tinted towards the class's colour
    assert np.sign(car - 128).tolist() == np.sign(np.array(overlay_colour(2)) - 128).tolist()
    assert (pixels[30:38, 3:13] != 128).any()  # the legend's swatch, bottom left


def test_info_and_inspect_from_the_command_line(tmp_path):
    df, _ = _table(tmp_path, "ids", n=6)
    df.to_csv(tmp_path / "seg.csv", index=False)
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(tfrecorder_lite.__file__))}
    cli = [sys.executable, "-m", "tfrecorder_lite.cli"]
    done = subprocess.run([*cli, "convert", str(tmp_path / "seg.csv"), str(tmp_path / "out"),
                           "--mask-labels", ",".join(LABELS), "--no-progress"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    info = subprocess.run([*cli, "info", str(tmp_path / "out")], capture_output=True, text=True,
                          env=env)
    pixels = tfrecorder_lite.read_metadata(tmp_path / "out")["segmentation"]["labelled_pixels"]
    assert f"3 labels (segmentation: {sum(pixels.values())} pixels)" in info.stdout
    assert " pixels" in info.stdout.splitlines()[3]
    report = subprocess.run([*cli, "inspect", str(tmp_path / "out"), "--out",
                             str(tmp_path / "report.html")], capture_output=True, text=True,
                            env=env)
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "report.html").stat().st_size > 1000


@pytest.mark.parametrize("options, message", [
    ({"mask_labels": ["a", "a"]}, "mask_labels lists \\['a'\\] twice"),
    ({"mask_labels": "road"}, "mask_labels must be a list"),
    ({"mask_colors": {(0, 0, 300): "a"}}, "is no colour"),
    ({"mask_colors": {"#00ff00": "a"}, "mask_labels": ["b"]}, "which mask_labels lacks"),
    ({"ignore_value": 256}, "ignore_value must be a class id of 0 to 255"),
    ({"mask_labels": LABELS, "ignore_value": 1}, "ignore_value 1 is the class id of label"),
    ({"allow_lossy_masks": "yes"}, "allow_lossy_masks must be True or False"),
])
def test_bad_mask_options_are_refused_before_any_file_is_read(options, message):
    df = pd.DataFrame({"split": ["TRAIN"], "image_uri": ["http://127.0.0.1:9/a.jpg"],
                       "mask_uri": ["http://127.0.0.1:9/a.png"]})
    with pytest.raises(SchemaError, match=message):
        df.tfrecord.to_tfrecord("unused-out", **options)
    with pytest.raises(SchemaError, match=message):
        df.tfrecord.validate(**options)


def test_keras_layout_batches_go_through_keras_augmentation_layers(tmp_path):
    keras = pytest.importorskip("keras")
    df, _ = _table(tmp_path, "ids")
    df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, mask_labels=LABELS)
    data = tfrecorder_lite.load(tmp_path / "out", "TRAIN", batch_size=8, image_size=(16, 16),
                                as_supervised="keras")
    batch = next(iter(data))
    assert set(batch) == {"images", "segmentation_masks"}
    assert batch["images"].shape == (8, 16, 16, 3)
    assert batch["segmentation_masks"].shape == (8, 16, 16, 1)
    images, masks = batch["images"].numpy(), batch["segmentation_masks"].numpy()
    flip = keras.layers.RandomFlip("horizontal", seed=3)
    out = next(iter(data.map(flip)))
    flipped = []
    for i in range(8):
        flipped.append(np.allclose(out["images"][i].numpy(), images[i][:, ::-1]))
        assert flipped[-1] or np.allclose(out["images"][i].numpy(), images[i])
        expected = masks[i][:, ::-1] if flipped[-1] else masks[i]
        assert np.array_equal(out["segmentation_masks"][i].numpy(), expected)
    assert any(flipped) and not all(flipped)  # seed 3: both cases seen


def test_keras_layout_gives_class_labels_and_refuses_what_the_layers_cannot_take(
        outputs_of_every_kind):
    plain, _ = outputs_of_every_kind["plain"]
    batch = next(iter(tfrecorder_lite.load(plain, "TRAIN", batch_size=2, image_size=8,
                                           as_supervised="keras")))
    assert set(batch) == {"images", "labels"} and batch["labels"].shape == (2,)
    levels, _ = outputs_of_every_kind["levels"]
    with pytest.raises(SchemaError, match="label levels \\['coarse', 'label'\\].*label='LEVEL'"):
        tfrecorder_lite.load(levels, "TRAIN", as_supervised="keras")
    assert set(next(iter(tfrecorder_lite.load(levels, "TRAIN", as_supervised="keras",
                                              label="coarse")))) == {"images", "labels"}
    columns, _ = outputs_of_every_kind["columns"]
    with pytest.raises(SchemaError, match="holds no images"):
        tfrecorder_lite.load(columns, "TRAIN", as_supervised="keras")
    with pytest.raises(SchemaError, match="as_supervised must be one of \\(True, False, "
                                          "'keras'\\), not 'dict'"):
        tfrecorder_lite.load(plain, "TRAIN", as_supervised="dict")
