"""Per-box tables grouped into images (tfrecorder_lite.table.detection): pandas only, no files."""

import math

import pandas as pd
import pytest

from tfrecorder_lite import SchemaError
from tfrecorder_lite.table.detection import image_table, is_detection_table


def _table(rows):
    return pd.DataFrame(rows, columns=["split", "image_uri", "label", "xmin", "ymin", "xmax",
                                       "ymax", "is_crowd", "source"])


def test_rows_are_grouped_by_split_and_image_in_table_order():
    nan = math.nan
    table = _table([
        ("TRAIN", "a.jpg", "car", 0.1, 0.1, 0.5, 0.5, 0, "cam1"),
        ("TRAIN", "b.jpg", None, nan, nan, nan, nan, None, "cam2"),  # no objects
        ("TRAIN", "a.jpg", "car", 0.2, 0.2, 0.4, 0.6, 1, "cam1"),
        ("TEST", "a.jpg", "bus", "0.3", "0.3", "0.9", " 0.8", 0, "cam1"),  # text coordinates
    ])
    assert is_detection_table(table) and not is_detection_table(table.drop(columns="ymax"))
    images = image_table(table, "split", "image_uri", "label")

    assert images.members == ((0, 2), (1,), (3,))
    assert images.box_columns == ("is_crowd",)
    assert list(images.images.index) == [0, 1, 3]  # each image's first row
    assert images.images.boxes.tolist() == [((0.1, 0.1, 0.5, 0.5), (0.2, 0.2, 0.4, 0.6)), (),
                                            ((0.3, 0.3, 0.9, 0.8),)]
    assert images.images.label.tolist() == [("car", "car"), (), ("bus",)]
    assert images.images.is_crowd.tolist() == [(0, 1), (), (0,)]
    assert images.images.source.tolist() == ["cam1", "cam2", "cam1"]  # a per-image column
    assert images.refused == {}


def test_bad_boxes_refuse_their_image_and_name_every_row():
    table = _table([
        ("TRAIN", "a.jpg", "car", 0.1, 0.1, 0.5, 0.5, 0, "x"),
        ("TRAIN", "a.jpg", "car", 0.6, 0.1, 0.2, 0.5, 0, "x"),
        ("TRAIN", "b.jpg", "", 0.1, 0.1, 0.5, 0.5, 0, "x"),
        ("TRAIN", "c.jpg", "car", 0.1, None, 0.5, 0.5, 0, "x"),
    ])
    images = image_table(table, "split", "image_uri", "label")
    assert images.refused == {0: "box 2 of 2: xmin 0.6 > xmax 0.2",
                              1: "box 1 of 1: empty label", 2: "box 1 of 1: ymin is missing"}
    assert images.rows_of(images.refused.items()) == [
        (0, "box 2 of 2: xmin 0.6 > xmax 0.2"), (1, "box 2 of 2: xmin 0.6 > xmax 0.2"),
        (2, "box 1 of 1: empty label"), (3, "box 1 of 1: ymin is missing")]
    in_pixels = image_table(table, "split", "image_uri", "label", box_units="pixels")
    assert 0 not in in_pixels.refused  # pixel boxes are checked against the image's size later

    with pytest.raises(SchemaError, match="box_units"):
        image_table(table, "split", "image_uri", "label", box_units="inches")
