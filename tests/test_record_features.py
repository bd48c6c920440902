"""record/features.py: each feature knows its keys, its encoding of a row, its metadata.json
entry and its tfds features.json entry; a FeatureSet is rebuilt from any output's manifest."""

import dataclasses
import json
import os

import pytest

from tfrecorder_lite.images.normalize import ImageOptions, StoredImage
from tfrecorder_lite.output.manifest import read_manifest
from tfrecorder_lite.write.plan import plan_table
from tfrecorder_lite.record.encoding import decode_example, encode_example
from tfrecorder_lite.record.features import (ClassLabel, Column, FeatureSet, ImageFeature,
                                             parse_spec)
from tfrecorder_lite.record.framing import iter_records
from tfrecorder_lite.record.kinds import features_of
from tfrecorder_lite.record.keys import BYTES, FLOAT, IMAGE_KEYS, INT64

TFDS = "tensorflow_datasets.core.features."


def test_the_image_feature():
    image = ImageFeature()
    assert image.describe() == {k: {"dtype": v, "shape": []} for k, v in IMAGE_KEYS.items()}
    assert image.kinds() == IMAGE_KEYS
    stored = StoredImage(b"\xff\xd8jpeg", "jpeg", 20, 30, 3)
    assert image.encode((stored, "a.jpg")) == {
        "image/encoded": b"\xff\xd8jpeg", "image/format": "jpeg", "image/height": 20,
        "image/width": 30, "image/channels": 3, "image/filename": "a.jpg"}
    assert image.tfds((224, 160))["image/encoded"] == {
        "pythonClassName": TFDS + "image_feature.Image",
        "image": {"dtype": "uint8", "shape": {"dimensions": ["224", "160", "3"]}}}
    assert image.tfds()["image/encoded"]["image"]["shape"]["dimensions"] == ["-1", "-1", "3"]
    assert image.tfds()["image/height"] == {
        "pythonClassName": TFDS + "tensor_feature.Tensor",
        "tensor": {"dtype": "int64", "encoding": "none", "shape": {}}}


@pytest.mark.parametrize("level, multi, keys", [
    (None, False, ("image/class/label", "image/class/text")),
    ("fine", False, ("image/label/fine", "image/label/fine/text")),
    (None, True, ("image/class/label", "image/class/text")),
])
def test_a_class_label(level, multi, keys):
    label = ClassLabel(level, multi, ("cat", "dog", "owl"))
    shape = [None] if multi else []
    assert label.keys == keys and label.name == level
    assert label.describe() == {keys[0]: {"dtype": INT64, "shape": shape},
                                keys[1]: {"dtype": BYTES, "shape": shape}}
    value = ((0, 2), ("cat", "owl")) if multi else (1, "dog")
    assert label.encode(value) == {keys[0]: value[0], keys[1]: value[1]}
    entry = label.tfds()[keys[0]]
    class_label = {"pythonClassName": TFDS + "class_label_feature.ClassLabel",
                   "classLabel": {"numClasses": "3"}}
    assert entry == ({"pythonClassName": TFDS + "sequence_feature.Sequence",
                      "sequence": {"feature": class_label, "length": "-1"}}
                     if multi else class_label)
    dims = {"dimensions": ["-1"]} if multi else {}
    assert label.tfds()[keys[1]]["tensor"] == {"dtype": BYTES, "encoding": "none",
                                               "shape": dims}


def test_a_column_says_its_type_shape_and_how_missing_values_are_stored():
    boxes = Column("boxes", FLOAT, "object", "empty list", (None, 4))
    assert boxes.describe() == {"boxes": {"dtype": FLOAT, "shape": [None, 4],
                                          "column_dtype": "object", "missing": "empty list"}}
    assert boxes.kinds() == {"boxes": FLOAT}
    assert boxes.encode([0.1, 0.2, 0.3, 0.4]) == {"boxes": [0.1, 0.2, 0.3, 0.4]}
    assert boxes.tfds()["boxes"]["tensor"]["shape"] == {"dimensions": ["-1", "4"]}
    assert Column("n", INT64).describe() == {"n": {"dtype": INT64, "shape": []}}


def test_a_feature_set_keeps_one_order_for_every_file():
    features = FeatureSet(ImageFeature(), (ClassLabel("coarse", False, ("a",)),
                                           ClassLabel("fine", False, ("b", "c"))),
                          (Column("weight", FLOAT),))
    order = [*IMAGE_KEYS, "image/label/coarse", "image/label/coarse/text", "image/label/fine",
             "image/label/fine/text", "weight"]
    assert list(features.describe()) == list(features.kinds()) == list(features.tfds()) == order
    assert features.label_keys == tuple(order[6:10])
    stored = StoredImage(b"png", "png", 1, 2, 4)
    record = features.encode((stored, "x.png"), [(0, "a"), (1, "c"), 0.5])
    assert list(record) == order and record["image/label/fine/text"] == "c"
    assert FeatureSet(None, features.labels).encode(None, [(0, "a"), (0, "b")]) == {
        "image/label/coarse": 0, "image/label/coarse/text": "a", "image/label/fine": 0,
        "image/label/fine/text": "b"}


def test_parse_specs_follow_the_shapes():
    import tensorflow as tf

    spec = parse_spec({"a": {"dtype": INT64, "shape": []}, "b": {"dtype": FLOAT, "shape": [3]},
                       "c": {"dtype": BYTES, "shape": [None]},
                       "d": {"dtype": FLOAT, "shape": [None, 4]}})
    assert spec["a"] == tf.io.FixedLenFeature([], tf.int64)
    assert spec["b"] == tf.io.FixedLenFeature([3], tf.float32)
    assert spec["c"] == tf.io.FixedLenSequenceFeature([], tf.string, allow_missing=True)
    assert spec["d"] == tf.io.FixedLenSequenceFeature([4], tf.float32, allow_missing=True)


PLAN_ARGUMENTS = {
    "plain": dict(num_shards={"TRAIN": 2, "TEST": 1}),
    "gzip": dict(compression="GZIP", image=ImageOptions(size=(16, 16))),
    "multi": {},
    "levels": dict(label_col=["coarse", "label"]),
    "columns": dict(image_col=None, image=None, features={"boxes": "float32[None,4]"}),
}


def _plan(kind, table):
    arguments = {"split_col": "split", "image_col": "image_uri", "label_col": "label",
                 "image": ImageOptions(), **PLAN_ARGUMENTS[kind]}
    return plan_table(table, **arguments)


@pytest.mark.parametrize("kind", sorted(PLAN_ARGUMENTS))
def test_the_feature_set_of_a_real_output_is_the_one_its_plan_wrote(outputs_of_every_kind, kind):
    out, table = outputs_of_every_kind[kind]
    manifest, _ = read_manifest(out)
    read = features_of(manifest)
    planned = _plan(kind, table).features
    assert read == dataclasses.replace(planned, labels=tuple(
        dataclasses.replace(label, column=None) for label in planned.labels))
    assert read.describe() == manifest.features
    tfds_features = os.path.join(out, "features.json")
    if manifest.compression:
        assert not os.path.exists(tfds_features)  # tfds cannot read compressed shards
    else:
        with open(tfds_features, encoding="utf-8") as f:
            written = json.load(f)["featuresDict"]["features"]
        assert written == read.tfds(manifest.image.size if manifest.image else None)


def _records(out, shard, compression=None):
    with open(os.path.join(out, shard), "rb") as f:
        return list(iter_records(f, compression))


def test_records_without_images_are_what_the_feature_set_encodes(outputs_of_every_kind):
    out, table = outputs_of_every_kind["columns"]
    plan = _plan("columns", table)
    features = plan.features
    for shard in plan.shards:
        task = plan.task(shard, table.index)
        expected = [encode_example(features.encode(None, values), features.kinds())
                    for _, _, _, values, _ in task.rows]
        assert expected and _records(out, shard.name) == expected


@pytest.mark.parametrize("kind", ["levels", "multi"])
def test_label_keys_of_real_records_are_what_the_feature_set_encodes(outputs_of_every_kind,
                                                                     kind):
    out, table = outputs_of_every_kind[kind]
    plan = _plan(kind, table)
    features = plan.features
    for shard in plan.shards:
        task = plan.task(shard, table.index)
        records = _records(out, shard.name)
        assert len(records) == len(task.rows) > 0
        for record, (_, _, path, values, _) in zip(records, task.rows):
            found = decode_example(record)
            assert found["image/filename"][1] == [os.path.basename(path).encode()]
            for label, value in zip(features.labels, values):
                for key, encoded in label.encode(value).items():
                    as_list = list(encoded) if isinstance(encoded, tuple) else [encoded]
                    assert found[key][1] == [v.encode() if isinstance(v, str) else v
                                             for v in as_list]
