"""Record feature keys and kinds.

Records use the keys the TensorFlow ecosystem already reads (TF-slim, Inception, the Object
Detection API).
"""

import re

ENCODED = "image/encoded"
FORMAT = "image/format"
HEIGHT = "image/height"
WIDTH = "image/width"
CHANNELS = "image/channels"
FILENAME = "image/filename"
LABEL = "image/class/label"
LABEL_TEXT = "image/class/text"

BYTES, INT64, FLOAT = "string", "int64", "float32"

IMAGE_KEYS = {
    ENCODED: BYTES,
    FORMAT: BYTES,
    HEIGHT: INT64,
    WIDTH: INT64,
    CHANNELS: INT64,
    FILENAME: BYTES,
}
IMAGE_FEATURES = {**IMAGE_KEYS, LABEL: INT64, LABEL_TEXT: BYTES}  # an image and its one label


LEVEL = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"  # a label level's name: part of its keys and files
LEVEL_NAME = re.compile(rf"^{LEVEL}\Z")


def label_keys(level=None):
    """(id key, text key) of a label: ``image/class/label`` and ``image/class/text``, or per
    level ``image/label/<level>`` and ``image/label/<level>/text``."""
    if level is None:
        return LABEL, LABEL_TEXT
    return f"image/label/{level}", f"image/label/{level}/text"


# Object detection: the TF Object Detection API's keys (research/object_detection/core/
# standard_fields.py), which the TF Model Garden's decoder reads too.
SOURCE_ID = "image/source_id"
KEY_SHA256 = "image/key/sha256"
OBJECT_PREFIX = "image/object/"
BBOX_KEYS = tuple(f"image/object/bbox/{name}" for name in ("xmin", "ymin", "xmax", "ymax"))
OBJECT_LABEL = "image/object/class/label"
OBJECT_TEXT = "image/object/class/text"
DETECTION_KEYS = {**dict.fromkeys(BBOX_KEYS, FLOAT), OBJECT_LABEL: INT64, OBJECT_TEXT: BYTES}
DETECTION_IMAGE_KEYS = {SOURCE_ID: BYTES, KEY_SHA256: BYTES}


def object_key(column):
    """The record key of a per-box column: ``image/object/<column>`` (``iscrowd`` is
    ``is_crowd``, as the Object Detection API names it)."""
    return OBJECT_PREFIX + {"iscrowd": "is_crowd"}.get(column, column)
