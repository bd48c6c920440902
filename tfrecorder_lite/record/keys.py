"""Record feature keys and kinds.

Records use the keys the TensorFlow ecosystem already reads (TF-slim, Inception, the TF Model
Garden); each record kind's own keys are in its module (``record/boxes.py``).
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


# The image's identity, as the TF Model Garden's decoders read it
SOURCE_ID = "image/source_id"
KEY_SHA256 = "image/key/sha256"
