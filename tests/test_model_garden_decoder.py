"""The TF Model Garden's detection decoder, loaded by ``model_garden``, reads a record made by
hand with the Object Detection API's keys: the reader the detection records are checked with."""

import io

import numpy as np
import pytest
from PIL import Image

from conftest import photo
from model_garden import decoder_class

tf = pytest.importorskip("tensorflow")


def _feature(values, kind):
    lists = {"bytes": tf.train.BytesList, "int64": tf.train.Int64List,
             "float": tf.train.FloatList}
    return tf.train.Feature(**{f"{kind}_list": lists[kind](value=values)})


def _jpeg(image):
    encoded = io.BytesIO()
    image.save(encoded, "JPEG", quality=95)
    return encoded.getvalue()


def _record(jpeg, boxes, classes, is_crowd, area, source_id=b"17"):
    """A serialized tf.train.Example with the Object Detection API's keys."""
    image = Image.open(io.BytesIO(jpeg))
    xmin, ymin, xmax, ymax = (list(column) for column in zip(*boxes)) if boxes else ([],) * 4
    features = {
        "image/encoded": _feature([jpeg], "bytes"),
        "image/source_id": _feature([source_id], "bytes"),
        "image/height": _feature([image.height], "int64"),
        "image/width": _feature([image.width], "int64"),
        "image/object/bbox/xmin": _feature(xmin, "float"),
        "image/object/bbox/ymin": _feature(ymin, "float"),
        "image/object/bbox/xmax": _feature(xmax, "float"),
        "image/object/bbox/ymax": _feature(ymax, "float"),
        "image/object/class/label": _feature(classes, "int64"),
        "image/object/is_crowd": _feature(is_crowd, "int64"),
        "image/object/area": _feature(area, "float"),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def test_decoder_gives_boxes_as_yxyx_and_classes_as_written():
    jpeg = _jpeg(photo(48, 64, seed=3))
    boxes = [(0.1, 0.2, 0.5, 0.6), (0.25, 0.0, 1.0, 0.75), (0.5, 0.5, 0.625, 0.875)]
    decoded = decoder_class()().decode(tf.constant(_record(
        jpeg, boxes, classes=[3, 1, 90], is_crowd=[0, 1, 0], area=[120.0, 900.5, 33.0])))
    np.testing.assert_allclose(decoded["groundtruth_boxes"].numpy(),
                               [[ymin, xmin, ymax, xmax] for xmin, ymin, xmax, ymax in boxes],
                               rtol=1e-6)
    assert decoded["groundtruth_classes"].numpy().tolist() == [3, 1, 90]
    assert decoded["groundtruth_is_crowd"].numpy().tolist() == [False, True, False]
    np.testing.assert_allclose(decoded["groundtruth_area"].numpy(), [120.0, 900.5, 33.0])
    assert decoded["source_id"].numpy() == b"17"
    assert (decoded["height"].numpy(), decoded["width"].numpy()) == (48, 64)
    assert decoded["image"].shape == (48, 64, 3)
    np.testing.assert_array_equal(decoded["image"], tf.io.decode_jpeg(jpeg))  # the record's


def test_decoder_reads_an_image_without_objects_as_empty_lists():
    decoded = decoder_class()().decode(tf.constant(_record(_jpeg(photo(16, 16)), [], [], [], [])))
    assert decoded["groundtruth_boxes"].shape == (0, 4)
    assert decoded["groundtruth_classes"].shape == (0,)


def test_decoder_requires_the_source_id():
    """``image/source_id`` has no default in the decoder's parse spec (unless
    ``regenerate_source_id``): a record without it fails to parse."""
    example = tf.train.Example.FromString(_record(_jpeg(photo(16, 16)), [], [], [], []))
    del example.features.feature["image/source_id"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="image/source_id"):
        decoder_class()().decode(tf.constant(example.SerializeToString()))
    regenerated = decoder_class()(regenerate_source_id=True).decode(
        tf.constant(example.SerializeToString()))
    assert regenerated["source_id"].numpy().isdigit()
