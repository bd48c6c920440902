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


def _read_varint(data, pos):
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def _fields(data):
    """Yield (field number, wire type, value) of a protobuf message; bytes for wire type 2."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
        elif wire == 2:
            size, pos = _read_varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
            if len(value) != size:
                raise ValueError("truncated field")
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, pos = data[pos:pos + width], pos + width
            if len(value) != width:
                raise ValueError("truncated field")
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def _values(kind, payload):
    values = []
    for number, wire, value in _fields(payload):
        if number != 1:
            continue
        if kind == BYTES:
            values.append(value)
        elif kind == INT64 and wire == 2:
            pos = 0
            while pos < len(value):
                v, pos = _read_varint(value, pos)
                values.append(v - (1 << 64) if v >= 1 << 63 else v)
        elif kind == INT64:
            values.append(value - (1 << 64) if value >= 1 << 63 else value)
        elif wire == 2:
            values += list(struct.unpack(f"<{len(value) // 4}f", value))
        else:
            values.append(struct.unpack("<f", value)[0])
    return values


def decode_example(data):
    """Parse a serialized ``tf.train.Example`` into {key: (kind, [values])}.

    Raises:
        ValueError: when the bytes are not a well-formed Example.
    """
    kinds = {1: BYTES, 2: FLOAT, 3: INT64}
    features = {}
    for number, _, message in _fields(data):
        if number != 1:
            continue
        for entry_number, _, entry in _fields(message):
            if entry_number != 1:
                continue
            parts = {n: v for n, w, v in _fields(entry) if w == 2}
            key = parts.get(1, b"").decode("utf-8")
            feature = list(_fields(parts.get(2, b"")))
            if len(feature) != 1 or feature[0][0] not in kinds:
                raise ValueError(f"feature {key!r} is not a bytes, float or int64 list")
            kind = kinds[feature[0][0]]
            features[key] = (kind, _values(kind, feature[0][2]))
    return features
