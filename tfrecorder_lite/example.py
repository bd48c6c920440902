"""The record format: feature keys, ``tf.train.Example`` encoding and the parse spec.

Records use the keys the TensorFlow ecosystem already reads (TF-slim, Inception, the Object
Detection API). Encoding is done here in plain Python (the protobuf wire format of
``tf.train.Example`` is small and stable), so writing records never imports TensorFlow.
"""

import struct

ENCODED = "image/encoded"
FORMAT = "image/format"
HEIGHT = "image/height"
WIDTH = "image/width"
CHANNELS = "image/channels"
FILENAME = "image/filename"
LABEL = "image/class/label"
LABEL_TEXT = "image/class/text"

BYTES, INT64, FLOAT = "string", "int64", "float32"

IMAGE_FEATURES = {
    ENCODED: BYTES,
    FORMAT: BYTES,
    HEIGHT: INT64,
    WIDTH: INT64,
    CHANNELS: INT64,
    FILENAME: BYTES,
    LABEL: INT64,
    LABEL_TEXT: BYTES,
}


def _varint(value):
    if value < 0:
        value += 1 << 64  # int64 is encoded as its two's complement
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _wrap(field_number, parts, size):
    """Prefix ``parts`` (a length-delimited payload of ``size`` bytes) with tag and length."""
    head = _varint(field_number << 3 | 2) + _varint(size)
    return [head, *parts], len(head) + size


def _feature(kind, value):
    """Return ``(parts, size)`` of one ``tf.train.Feature`` holding a single value."""
    if kind == BYTES:
        if isinstance(value, str):
            value = value.encode("utf-8")
        parts, size = _wrap(1, [value], len(value))  # BytesList.value
        return _wrap(1, parts, size)  # Feature.bytes_list
    if kind == INT64:
        packed = _varint(int(value))
        parts, size = _wrap(1, [packed], len(packed))  # Int64List.value (packed)
        return _wrap(3, parts, size)  # Feature.int64_list
    if kind == FLOAT:
        packed = struct.pack("<f", value)
        parts, size = _wrap(1, [packed], 4)  # FloatList.value (packed)
        return _wrap(2, parts, size)  # Feature.float_list
    raise ValueError(f"unknown feature kind {kind!r}")


def encode_example(features, kinds):
    """Serialize a ``tf.train.Example``.

    Args:
        features: mapping feature key -> one value (bytes/str, int or float).
        kinds: mapping feature key -> BYTES, INT64 or FLOAT.

    Returns:
        The serialized Example (keys in sorted order, so equal input gives equal bytes).
    """
    entries, total = [], 0
    for key in sorted(features):
        key_bytes = key.encode("utf-8")
        key_parts, key_size = _wrap(1, [key_bytes], len(key_bytes))
        value_parts, value_size = _wrap(2, *_feature(kinds[key], features[key]))
        parts, size = _wrap(1, key_parts + value_parts, key_size + value_size)  # Features.feature
        entries += parts
        total += size
    parts, _ = _wrap(1, entries, total)  # Example.features
    return b"".join(parts)


def kind_of_dtype(dtype):
    """Feature kind for a pandas/numpy dtype: ints and bools -> int64, floats -> float, else bytes."""
    if dtype.kind in "iub":
        return INT64
    if dtype.kind == "f":
        return FLOAT
    return BYTES


def parse_spec(features):
    """``tf.io.parse_single_example`` spec for the manifest's ``features`` mapping."""
    import tensorflow as tf

    return {
        key: tf.io.FixedLenFeature([], tf.as_dtype(spec["dtype"]))
        for key, spec in features.items()
    }
