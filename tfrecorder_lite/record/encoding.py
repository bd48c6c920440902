"""``tf.train.Example`` encoding and decoding, in plain Python.

The protobuf wire format of ``tf.train.Example`` is small and stable, so writing records never
imports TensorFlow.
"""

import functools
import struct

from .keys import BYTES, FLOAT, INT64

UNCOPIED_BYTES = 4096
_ONE_BYTE = [bytes((i,)) for i in range(128)]

# Field tags (number << 3 | wire type 2) of the length-delimited fields used below.
_FIELD_1, _FIELD_2, _FIELD_3 = b"\x0a", b"\x12", b"\x1a"


def _varint(value):
    if 0 <= value < 128:
        return _ONE_BYTE[value]
    if value < 0:
        value += 1 << 64  # int64 is encoded as its two's complement
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(tag, payload):
    return tag + _varint(len(payload)) + payload


@functools.lru_cache(maxsize=None)
def _key_field(key):
    """The map entry's key field (Features.feature is a map<string, Feature>)."""
    return _length_delimited(_FIELD_1, key.encode("utf-8"))


def _feature(kind, value):
    """Return ``(head, value_bytes)``: one serialized ``tf.train.Feature`` is head + value_bytes.

    ``value`` is one value, or a list (tuple) of values for a list feature. A single bytes
    value is returned as it is, so that it is copied only once, into the record.
    """
    if isinstance(value, (list, tuple)):
        return _list_feature(kind, value), b""
    if kind == BYTES:
        if isinstance(value, str):
            value = value.encode("utf-8")
        inner = _FIELD_1 + _varint(len(value))  # BytesList.value
        return _FIELD_1 + _varint(len(inner) + len(value)) + inner, value  # Feature.bytes_list
    if kind == INT64:
        packed = _length_delimited(_FIELD_1, _varint(int(value)))  # Int64List.value (packed)
        return _length_delimited(_FIELD_3, packed), b""  # Feature.int64_list
    if kind == FLOAT:
        packed = _length_delimited(_FIELD_1, struct.pack("<f", value))  # FloatList.value
        return _length_delimited(_FIELD_2, packed), b""  # Feature.float_list
    raise ValueError(f"unknown feature kind {kind!r}")


def _list_feature(kind, values):
    """A serialized ``tf.train.Feature`` holding a list of values (packed numbers)."""
    if kind == BYTES:
        items = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
        inner = b"".join(_length_delimited(_FIELD_1, v) for v in items)
        return _length_delimited(_FIELD_1, inner)
    if kind == INT64:
        packed = b"".join(_varint(int(v)) for v in values)
        tag = _FIELD_3
    elif kind == FLOAT:
        packed = struct.pack(f"<{len(values)}f", *values)
        tag = _FIELD_2
    else:
        raise ValueError(f"unknown feature kind {kind!r}")
    inner = _length_delimited(_FIELD_1, packed) if values else b""
    return _length_delimited(tag, inner)


def encode_example(features, kinds):
    """Serialize a ``tf.train.Example``.

    Args:
        features: mapping feature key -> one value (bytes/str, int or float).
        kinds: mapping feature key -> BYTES, INT64 or FLOAT.

    Returns:
        The serialized Example (keys in sorted order, so equal input gives equal bytes).
    """
    return b"".join(encode_example_chunks(features, kinds))


def encode_example_chunks(features, kinds):
    """Serialize a ``tf.train.Example`` as byte strings whose concatenation is the record.

    Values of ``UNCOPIED_BYTES`` or more (the encoded image) are chunks of their own, not
    copied, so that the record writer can hash and write them in place.
    """
    chunks, parts, total = [], [], 0
    for key in _sorted_keys(tuple(features)):
        value, kind = features[key], kinds[key]
        if type(value) is bytes and len(value) >= UNCOPIED_BYTES and kind == BYTES:
            head, _ = _feature(kind, value)  # the Feature up to the value
            parts.append(_entry_head(key, len(head) + len(value)) + head)
            chunks += (b"".join(parts), value)
            total += len(parts[-1]) + len(value)
            parts = []
            continue
        # sizes, channels, label ids and texts, formats repeat from record to record: their
        # entries are kept
        entry = _repeated_entry(key, kind, value) if type(value) in (int, str) else \
            _entry(key, kind, value)
        parts.append(entry)
        total += len(entry)
    chunks.append(b"".join(parts))
    chunks[0] = _FIELD_1 + _varint(total) + chunks[0]  # Example.features
    return chunks


@functools.lru_cache(maxsize=64)
def _sorted_keys(keys):
    return tuple(sorted(keys))


def _entry_head(key, feature_size):
    """A ``Features.feature`` map entry up to its Feature of ``feature_size`` bytes."""
    key_field = _key_field(key)
    value_field = _FIELD_2 + _varint(feature_size)  # map entry value: the Feature
    return _FIELD_1 + _varint(len(key_field) + len(value_field) + feature_size) + \
        key_field + value_field


def _entry(key, kind, value):
    """A whole ``Features.feature`` map entry."""
    head, value_bytes = _feature(kind, value)
    return _entry_head(key, len(head) + len(value_bytes)) + head + value_bytes


_repeated_entry = functools.lru_cache(maxsize=4096)(_entry)


def value_count_fits(shape, count):
    """Whether a record feature holding ``count`` values fits ``shape`` (a manifest shape)."""
    inner = 1
    for dim in shape[1:] if shape and shape[0] is None else shape:
        inner *= dim
    if shape and shape[0] is None:
        return count % inner == 0 if inner else count == 0
    return count == inner


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
    try:
        found = _decode_usual(data)
    except (ValueError, IndexError):
        found = None
    return _decode_any(data) if found is None else found


_LIST_KINDS = {0x0A: BYTES, 0x12: FLOAT, 0x1A: INT64}  # Feature's field tags


def _decode_usual(data):
    """The Example in the layout ``encode_example`` and TensorFlow write (one Features, each
    entry its key then its Feature, packed numbers), or None for any other bytes."""
    end = len(data)
    if not end or data[0] != 0x0A:
        return None
    size, pos = _read_varint(data, 1)
    if pos + size != end:
        return None
    features = {}
    while pos < end:
        if data[pos] != 0x0A:
            return None
        size, pos = _read_varint(data, pos + 1)
        entry_end = pos + size
        if entry_end > end or data[pos] != 0x0A:
            return None
        size, pos = _read_varint(data, pos + 1)
        key = data[pos:pos + size].decode("utf-8")
        pos += size
        if pos >= entry_end or data[pos] != 0x12:
            return None
        size, pos = _read_varint(data, pos + 1)
        kind = _LIST_KINDS.get(data[pos]) if pos + size == entry_end else None
        if kind is None:
            return None
        size, pos = _read_varint(data, pos + 1)
        if pos + size != entry_end:
            return None
        values = _usual_values(kind, data[pos:entry_end])
        if values is None:
            return None
        features[key] = (kind, values)
        pos = entry_end
    return features


def _usual_values(kind, payload):
    """The values of a list of ``kind`` whose only fields are its values (numbers packed in
    one field), or None."""
    if not payload:
        return []
    if payload[0] != 0x0A:
        return None
    size, pos = _read_varint(payload, 1)
    if kind == BYTES:
        values = []
        while True:
            if pos + size > len(payload):
                return None
            values.append(payload[pos:pos + size])
            pos += size
            if pos == len(payload):
                return values
            if payload[pos] != 0x0A:
                return None
            size, pos = _read_varint(payload, pos + 1)
    if pos + size != len(payload):
        return None
    if kind == FLOAT:
        return list(struct.unpack(f"<{size // 4}f", payload[pos:])) if size % 4 == 0 else None
    values = []
    while pos < len(payload):
        value, pos = _read_varint(payload, pos)
        values.append(value - (1 << 64) if value >= 1 << 63 else value)
    return values


def _decode_any(data):
    """``decode_example`` for any layout of the fields, with its errors."""
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
