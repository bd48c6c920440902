"""Detection end to end: AutoML detection CSVs, COCO and Pascal VOC in; records with the Object
Detection API's keys out, decoded by the TF Model Garden's own decoder; load() gives boxes and
labels per image in Keras 3's formats; bad boxes reject their whole image."""

import json
import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfrecorder_lite
from tfrecorder_lite import InvalidRowError
from conftest import photo, save
from model_garden import decoder_class

pytestmark = pytest.mark.slow  # TensorFlow, the Model Garden's decoder, Keras


def _records(out, split):
    shards = json.load(open(os.path.join(out, "metadata.json")))["splits"][split]["shards"]
    return [r.numpy() for s in shards for r in tf.data.TFRecordDataset(os.path.join(out, s["name"]))]


def _decoded(out, split):
    """Every record of a split through the Model Garden's decoder, by source id."""
    decoder = decoder_class()()
    found = {}
    for record in _records(out, split):
        d = decoder.decode(tf.constant(record))
        found[d["source_id"].numpy().decode()] = (
            d["groundtruth_boxes"].numpy().astype(np.float64).round(6).tolist(),
            d["groundtruth_classes"].numpy().tolist(), d["height"].numpy(), d["width"].numpy(),
            d["groundtruth_is_crowd"].numpy().tolist())
    return found


@pytest.fixture
def automl_csv(tmp_path):
    """An AutoML detection CSV without a header: four vertices and two vertices, an image with
    two boxes of one label, an image without objects."""
    images = tmp_path / "images"
    for name, seed in (("a.jpg", 1), ("b.jpg", 2), ("c.png", 3)):
        save(photo(40, 60, seed=seed), images / name)
    lines = [
        "TRAIN,images/a.jpg,car,0.1,0.2,0.5,0.2,0.5,0.6,0.1,0.6",
        "TRAIN,images/a.jpg,car,.3,.1,,,.9,.8,,",
        "TRAIN,images/a.jpg,person,0.05,0.05,,,0.2,0.25,,",
        "TRAIN,images/b.jpg,person,0.2,0.3,,,0.7,0.9,,",
        "TEST,images/c.png,,,,,,,,,",
    ]
    path = tmp_path / "boxes.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_an_automl_detection_csv_becomes_one_record_per_image(automl_csv, tmp_path):
    out = tmp_path / "out"
    result = tfrecorder_lite.convert(automl_csv, out, progress=False)

    assert result.counts == {"TRAIN": 2, "TEST": 1}
    assert result.labels == ["", "car", "person"]  # id 0: the background
    assert result.metadata["task"] == "detection"
    assert result.metadata["splits"]["TRAIN"]["label_counts"] == {"car": 2, "person": 2}
    assert result.metadata["boxes"]["num_boxes"] == {"TRAIN": 4, "TEST": 0}
    assert (out / "label_map.pbtxt").read_text() == \
        "item {\n  id: 1\n  name: 'car'\n}\nitem {\n  id: 2\n  name: 'person'\n}\n"
    train = sorted(_decoded(out, "TRAIN").values(), key=lambda v: len(v[0]))
    assert train[0][:2] == ([[0.3, 0.2, 0.9, 0.7]], [2])  # yxyx; b.jpg's person
    assert train[1][0] == [[0.2, 0.1, 0.6, 0.5], [0.1, 0.3, 0.8, 0.9], [0.05, 0.05, 0.25, 0.2]]
    assert train[1][1] == [1, 1, 2]  # in table order, never sorted or de-duplicated
    assert (train[1][2], train[1][3]) == (40, 60)
    (empty,) = _decoded(out, "TEST").values()
    assert empty[0] == [] and empty[1] == []
    texts = [tf.train.Example.FromString(r).features.feature["image/object/class/text"]
             .bytes_list.value for r in _records(out, "TRAIN")]
    assert sorted(map(list, texts)) == [[b"car", b"car", b"person"], [b"person"]]
    assert tfrecorder_lite.verify(out, decode=True).startswith("OK")


def test_coco_keeps_category_ids_crowd_boxes_and_images_without_annotations(tmp_path):
    images = tmp_path / "train2017"
    for i, size in enumerate([(40, 50), (30, 30)]):
        save(photo(*size, seed=i), images / f"{i}.jpg")
    coco = {"images": [{"id": 7, "file_name": "0.jpg", "height": 40, "width": 50},
                       {"id": 9, "file_name": "1.jpg", "height": 30, "width": 30}],
            "categories": [{"id": 3, "name": "cat"}, {"id": 18, "name": "dog"}],
            "annotations": [
                {"id": 1, "image_id": 7, "category_id": 18, "bbox": [5, 4, 20, 16],
                 "area": 320.0, "iscrowd": 0},
                {"id": 2, "image_id": 7, "category_id": 3, "bbox": [25, 10, 25, 30],
                 "area": 750.0, "iscrowd": 1}]}
    (tmp_path / "annotations").mkdir()
    path = tmp_path / "annotations" / "instances_train2017.json"
    path.write_text(json.dumps(coco))

    table = tfrecorder_lite.read_coco(path, image_dir=images)
    result = table.tfrecord.to_tfrecord(tmp_path / "out", progress=False)

    assert result.counts == {"TRAIN": 2}
    assert result.labels[3] == "cat" and result.labels[18] == "dog"
    decoded = _decoded(tmp_path / "out", "TRAIN")
    assert decoded["7"][:2] == ([[0.1, 0.1, 0.5, 0.5], [0.25, 0.5, 1.0, 1.0]], [18, 3])
    assert decoded["7"][4] == [False, True]
    assert decoded["9"][:2] == ([], [])
    assert "item {\n  id: 18\n  name: 'dog'\n}" in (tmp_path / "out/label_map.pbtxt").read_text()


def test_pascal_voc_splits_come_from_image_sets(tmp_path):
    root = tmp_path / "VOC2012"
    for name, seed in (("x", 1), ("y", 2)):
        save(photo(40, 80, seed=seed), root / "JPEGImages" / f"{name}.jpg")
        (root / "Annotations").mkdir(exist_ok=True)
        (root / "Annotations" / f"{name}.xml").write_text(
            f"<annotation><filename>{name}.jpg</filename><size><width>80</width>"
            "<height>40</height><depth>3</depth></size><object><name>bird</name>"
            "<difficult>1</difficult><truncated>0</truncated><bndbox><xmin>8</xmin>"
            "<ymin>4</ymin><xmax>40</xmax><ymax>20</ymax></bndbox></object></annotation>")
    (root / "ImageSets" / "Main").mkdir(parents=True)
    (root / "ImageSets" / "Main" / "train.txt").write_text("x\n")
    (root / "ImageSets" / "Main" / "val.txt").write_text("y\n")

    result = tfrecorder_lite.convert(root, tmp_path / "out", progress=False)

    assert result.counts == {"TRAIN": 1, "VALIDATION": 1}
    (x,) = _decoded(tmp_path / "out", "TRAIN").values()
    assert x[:2] == ([[0.1, 0.1, 0.5, 0.5]], [1])
    record = tf.train.Example.FromString(_records(tmp_path / "out", "VALIDATION")[0])
    assert record.features.feature["image/object/difficult"].int64_list.value == [1]


@pytest.fixture
def box_table(tmp_path):
    rows = []
    for i in range(4):
        path = save(photo(30, 40, seed=i), tmp_path / "images" / f"{i}.jpg")
        rows += [("TRAIN", path, "cat", 0.1, 0.2, 0.6, 0.7), ("TRAIN", path, "dog", 0.5, 0.5, 1.0, 0.9)]
    return pd.DataFrame(rows, columns=["split", "image_uri", "label", "xmin", "ymin", "xmax",
                                       "ymax"])


def test_a_bad_box_rejects_its_whole_image_naming_the_box(box_table, tmp_path):
    bad = box_table.copy()
    bad.loc[3, ["xmin", "xmax"]] = [0.6, 0.2]  # the second box of image 1
    with pytest.raises(InvalidRowError, match=r"box 2 of 2: xmin 0\.6 > xmax 0\.2") as caught:
        bad.tfrecord.to_tfrecord(tmp_path / "raise", progress=False)
    assert caught.value.row == 2  # the image's first row

    result = bad.tfrecord.to_tfrecord(tmp_path / "skip", on_error="skip", progress=False)
    assert result.counts == {"TRAIN": 3}
    assert list(result.rejected.index) == [2, 3]  # every row of the image, with the reason
    assert set(result.rejected.reason) == {"box 2 of 2: xmin 0.6 > xmax 0.2"}
    problems = bad.tfrecord.validate(check=None)
    assert "box 2 of 2: xmin 0.6 > xmax 0.2" in set(problems.problem)


def test_a_corrected_box_is_another_table_not_the_finished_output(box_table, tmp_path):
    # the plan's fingerprint covers every box's cells: converting the corrected table into
    # the folder of the first is refused, never answered with the old records
    out, table = tmp_path / "out", box_table.assign(is_crowd=0)
    table.tfrecord.to_tfrecord(out, progress=False)
    assert table.tfrecord.to_tfrecord(out, progress=False).counts == {"TRAIN": 4}  # done
    for column, value in [("xmax", 0.65), ("is_crowd", 1)]:
        corrected = table.copy()
        corrected.loc[3, column] = value
        with pytest.raises(tfrecorder_lite.OutputExistsError, match="a different table"):
            corrected.tfrecord.to_tfrecord(out, progress=False)
    corrected = table.copy()
    corrected.loc[3, "xmax"] = 0.65
    result = corrected.tfrecord.to_tfrecord(out, progress=False, overwrite=True)
    records = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(
        [str(out / s["name"]) for s in result.metadata["splits"]["TRAIN"]["shards"]])]
    xmax = sorted(v for ex in records
                  for v in ex.features.feature["image/object/bbox/xmax"].float_list.value)
    assert xmax == pytest.approx(sorted([0.6] * 4 + [1.0] * 3 + [0.65]))


def test_pixel_boxes_are_divided_by_the_image_size(box_table, tmp_path):
    pixels = box_table.assign(xmin=box_table.xmin * 40, xmax=box_table.xmax * 40,
                              ymin=box_table.ymin * 30, ymax=box_table.ymax * 30)
    pixels.tfrecord.to_tfrecord(tmp_path / "px", box_units="pixels", progress=False)
    box_table.tfrecord.to_tfrecord(tmp_path / "rel", progress=False)
    assert sorted(_decoded(tmp_path / "px", "TRAIN").values()) == \
        sorted(_decoded(tmp_path / "rel", "TRAIN").values())

    outside = pixels.copy()
    outside.loc[0, "xmax"] = 41.0
    result = outside.tfrecord.to_tfrecord(tmp_path / "out", box_units="pixels",
                                          on_error="skip", progress=False)
    assert set(result.rejected.reason) == {
        "box 1 of 2: xmax 41 is outside [0, 40] (the image's width)"}


def test_pixel_boxes_of_jpegs_resized_as_they_are_written(box_table, tmp_path):
    """A JPEG resized at write time is decoded at a smaller scale first: its pixel boxes are
    still divided by the file's size, not the smaller one."""
    pixels = box_table.assign(xmin=box_table.xmin * 40, xmax=box_table.xmax * 40,
                              ymin=box_table.ymin * 30, ymax=box_table.ymax * 30)
    pixels.tfrecord.to_tfrecord(tmp_path / "px", box_units="pixels", image_size=(12, 16),
                                progress=False)
    box_table.tfrecord.to_tfrecord(tmp_path / "rel", image_size=(12, 16), progress=False)
    assert sorted(_decoded(tmp_path / "px", "TRAIN").values()) == \
        sorted(_decoded(tmp_path / "rel", "TRAIN").values())


@pytest.mark.parametrize("box_format", ["rel_yxyx", "rel_xyxy", "xyxy", "yxyx", "xywh",
                                        "center_xywh", "center_yxhw", "rel_xywh",
                                        "rel_center_xywh"])
def test_load_gives_boxes_in_keras_formats(box_table, tmp_path, box_format):
    import keras

    box_table.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    reference = tfrecorder_lite.load(tmp_path / "out", "TRAIN", image_size=(60, 80))
    loaded = tfrecorder_lite.load(tmp_path / "out", "TRAIN", image_size=(60, 80),
                                  box_format=box_format)
    for (image, base), (_, target) in zip(reference, loaded):
        assert image.shape == (60, 80, 3)
        assert base["labels"].numpy().tolist() == [1, 2]
        # relative boxes are unchanged by the resize
        np.testing.assert_allclose(base["boxes"].numpy(), [[0.2, 0.1, 0.7, 0.6],
                                                           [0.5, 0.5, 0.9, 1.0]], atol=1e-6)
        expected = keras.utils.bounding_boxes.convert_format(
            base["boxes"].numpy(), source="rel_yxyx", target=box_format, height=60, width=80)
        np.testing.assert_allclose(target["boxes"].numpy(), np.asarray(expected), atol=1e-4)


def test_batches_fit_a_keras_detection_model(box_table, tmp_path):
    import keras

    box_table.iloc[:2].tfrecord.to_tfrecord(tmp_path / "one", progress=False)  # 1 image, 2 boxes
    extra = box_table.iloc[2:3]  # an image with one box: batches are padded with -1
    pd.concat([box_table.iloc[:2], extra]).tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    data = tfrecorder_lite.load(tmp_path / "out", "TRAIN", image_size=32, batch_size=2)
    images, targets = next(iter(data))
    assert images.shape == (2, 32, 32, 3)
    assert targets["boxes"].shape == (2, 2, 4) and targets["labels"].shape == (2, 2)
    assert -1 in targets["labels"].numpy().tolist()[1] or -1 in targets["labels"].numpy()[0]

    inputs = keras.Input((32, 32, 3))
    features = keras.layers.GlobalAveragePooling2D()(keras.layers.Rescaling(1 / 255)(inputs))
    boxes = keras.layers.Reshape((2, 4))(keras.layers.Dense(8)(features))
    labels = keras.layers.Reshape((2, 3))(keras.layers.Dense(6)(features))
    model = keras.Model(inputs, {"boxes": boxes, "labels": labels})
    model.compile("sgd", loss={"boxes": "mse",
                               "labels": keras.losses.SparseCategoricalCrossentropy(
                                   from_logits=True, ignore_class=-1)})
    history = model.fit(data.map(lambda x, y: (x, {"boxes": y["boxes"], "labels": y["labels"]})),
                        epochs=1, steps_per_epoch=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_verify_finds_boxes_that_are_misaligned_or_not_relative(box_table, tmp_path):
    from tfrecorder_lite.record import encoding
    from tfrecorder_lite.record.framing import FileDigest, RecordWriter, index_text

    out = tmp_path / "out"
    box_table.tfrecord.to_tfrecord(out, num_shards=1, shuffle=False, progress=False)
    metadata = json.loads((out / "metadata.json").read_text())
    shard = metadata["splits"]["TRAIN"]["shards"][0]
    records = [encoding.decode_example(r) for r in _records(out, "TRAIN")]

    def rewrite(change):
        """Write the shard again with ``change`` applied to its first record, its manifest
        entry and index made to match (so only the record's content is wrong)."""
        values = [{k: list(v) for k, (_, v) in r.items()} for r in records]
        change(values[0])
        kinds = {k: kind for k, (kind, _) in records[0].items()}
        scalar = {k for k, spec in metadata["features"].items() if spec["shape"] == []}
        data = [encoding.encode_example({k: v[0] if k in scalar else v for k, v in r.items()},
                                        kinds) for r in values]
        with open(out / shard["name"], "wb") as f:
            writer = RecordWriter(f)
            writer.write_many(data)
            sums = writer.close()
        index = index_text(len(d) for d in data).encode()
        (out / shard["index"]["name"]).write_bytes(index)
        digest = FileDigest()
        digest.update(index)
        shard.update(bytes=writer.bytes_written, **sums,
                     index=dict(shard["index"], bytes=len(index), **digest.hexdigests()))
        (out / "metadata.json").write_text(json.dumps(metadata))

    assert tfrecorder_lite.verify(out).startswith("OK")
    rewrite(lambda r: r["image/object/bbox/xmax"].append(0.5))
    with pytest.raises(tfrecorder_lite.VerifyError, match="object lists of different lengths"):
        tfrecorder_lite.verify(out)
    rewrite(lambda r: r.__setitem__("image/object/bbox/xmax", [1.5, 1.0]))
    with pytest.raises(tfrecorder_lite.VerifyError, match=r"box 1 of 2: xmax 1\.5 is outside"):
        tfrecorder_lite.verify(out)


def test_the_table_pipeline_gives_what_load_gives(box_table, tmp_path):
    box_table.tfrecord.to_tfrecord(tmp_path / "out", progress=False)  # the same seeded order
    direct = box_table.tfrecord.dataset("TRAIN", batch_size=2, box_format="xyxy")
    loaded = tfrecorder_lite.load(tmp_path / "out", "TRAIN", batch_size=2, box_format="xyxy")
    assert len(list(direct)) == len(list(loaded)) == 2  # 4 images, batches of 2
    for (a, x), (b, y) in zip(direct, loaded):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        np.testing.assert_allclose(x["boxes"].numpy(), y["boxes"].numpy())
        np.testing.assert_array_equal(x["labels"].numpy(), y["labels"].numpy())
    assert direct.labels == ["", "cat", "dog"]


def test_inspect_draws_each_box_with_its_label(box_table, tmp_path):
    from tfrecorder_lite.output.manifest import read_manifest
    from tfrecorder_lite.read import report
    from tfrecorder_lite.record import boxes
    from tfrecorder_lite.record.encoding import decode_example
    from tfrecorder_lite.record.kinds import features_of

    box_table.tfrecord.to_tfrecord(tmp_path / "out", num_shards=1, progress=False)
    features = decode_example(_records(tmp_path / "out", "TRAIN")[0])
    label_features = features_of(read_manifest(tmp_path / "out")[0]).labels
    drawn = report._sample(features, label_features)
    assert drawn.label == "cat, dog"
    width, height = drawn.thumbnail.size
    # the first box (cat, id 1) runs from x 0.1 to 0.6 of the width along its top edge y 0.2
    edge = drawn.thumbnail.getpixel((int(0.35 * width), int(0.2 * height)))
    assert edge == boxes._BOX_COLOURS[1]
    summary = tfrecorder_lite.inspect(tmp_path / "out")
    assert summary.num_images == 4 and "cat: 4" in summary.summary


def test_the_documented_keras_example_fits_any_number_of_boxes(tmp_path, monkeypatch):
    """docs/detection.md's Keras block, pasted against an output whose images hold 1 to 7 boxes
    (the sample images hold at most 2)."""
    from test_docs import REPO, page_blocks

    block, = [b["code"] for b in page_blocks(REPO / "docs" / "detection.md")
              if b["code"].startswith("import keras\n")]
    rows = []
    for i in range(12):
        path = save(photo(40, 60, seed=i), tmp_path / "images" / f"{i}.jpg")
        rows += [("TRAIN", path, ["car", "dog", "cat"][j % 3], 0.05 * j, 0.05 * j, 0.5 + 0.05 * j,
                  0.6) for j in range(1 + i % 7)]
    table = pd.DataFrame(rows, columns=["split", "image_uri", "label", "xmin", "ymin", "xmax",
                                        "ymax"])
    table.tfrecord.to_tfrecord(tmp_path / "detection_records", progress=False)
    monkeypatch.chdir(tmp_path)
    namespace = {"tfrecorder_lite": tfrecorder_lite}
    exec(compile(block, "docs/detection.md", "exec"), namespace)
    assert namespace["max_boxes"] == 7 and namespace["num_classes"] == 4
    assert [tuple(shape) for shape in namespace["model"].output_shape] == [(None, 7, 4)] * 2


def test_keras_layout_batches_go_through_keras_augmentation_layers(box_table, tmp_path):
    import keras

    rows = pd.concat([box_table, box_table.iloc[[0]].assign(image_uri=save(
        photo(30, 40, seed=9), tmp_path / "images" / "9.jpg"))])  # an image with one box
    rows.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    data = tfrecorder_lite.load(tmp_path / "out", "TRAIN", image_size=(32, 40), batch_size=5,
                                box_format="rel_xyxy", as_supervised="keras")
    batch = next(iter(data))
    assert set(batch) == {"images", "bounding_boxes"}
    assert set(batch["bounding_boxes"]) == {"boxes", "labels"}
    assert batch["images"].shape == (5, 32, 40, 3)
    assert batch["bounding_boxes"]["boxes"].shape == (5, 2, 4)
    assert (batch["bounding_boxes"]["labels"].numpy() == -1).sum() == 1  # padding

    images, boxes, labels = (batch["images"].numpy(), batch["bounding_boxes"]["boxes"].numpy(),
                             batch["bounding_boxes"]["labels"].numpy())
    flip = keras.layers.RandomFlip("horizontal", bounding_box_format="rel_xyxy", seed=3)
    # eager (the layer writes into the dict it is given), and in tf.data
    for out in (flip(tf.nest.map_structure(tf.identity, batch)), next(iter(data.map(flip)))):
        flipped = []
        for i in range(5):
            image = out["images"][i].numpy()
            flipped.append(np.allclose(image, images[i][:, ::-1]))
            assert flipped[-1] or np.allclose(image, images[i])
            real = labels[i] != -1
            expected = boxes[i][real]
            if flipped[-1]:  # x mirrored: [1 - xmax, ymin, 1 - xmin, ymax]
                expected = np.stack([1 - expected[:, 2], expected[:, 1], 1 - expected[:, 0],
                                     expected[:, 3]], axis=-1)
            np.testing.assert_allclose(out["bounding_boxes"]["boxes"][i].numpy()[real],
                                       expected, atol=1e-5)
            assert out["bounding_boxes"]["labels"][i].numpy().tolist() == labels[i].tolist()
        assert any(flipped) and not all(flipped)  # seed 3: both cases seen
