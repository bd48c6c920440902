"""Package hygiene: light import, library logging, the record format in plain Python."""

import logging
import os
import subprocess
import sys

import pytest
import tensorflow as tf

import tfrecorder_lite
from tfrecorder_lite import storage
from tfrecorder_lite.record import encoding as example
from tfrecorder_lite.record import framing as tfrecord
from tfrecorder_lite.record import keys


def test_import_registers_accessor_without_tensorflow():
    code = ("import sys, pandas, tfrecorder_lite; "
            "assert hasattr(pandas.DataFrame, 'tfrecord'); "
            "print('tensorflow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_accessor_registered_when_pandas_is_imported_after_the_library():
    code = ("import sys, tfrecorder_lite; assert 'pandas' not in sys.modules; "
            "import pandas as pd; assert hasattr(pd.DataFrame, 'tfrecord'); "
            "print(pd.__spec__.loader.__class__.__name__, type(tfrecorder_lite.load).__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["SourceFileLoader", "function"]


def test_a_shard_worker_imports_neither_pandas_nor_tensorflow():
    """What a process worker unpickles and runs (write_shard, a ShardTask, a Store) loads
    only the worker's modules."""
    code = ("import sys, tfrecorder_lite.write.task, tfrecorder_lite.storage; "
            "print(sorted(m for m in ('pandas', 'tensorflow', 'tfrecorder_lite.write.plan') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_library_logging_only():
    assert any(isinstance(h, logging.NullHandler)
               for h in logging.getLogger("tfrecorder_lite").handlers)
    code = "import logging, tfrecorder_lite; print(len(logging.getLogger().handlers))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "0", "importing the library must not configure the root logger"


@pytest.mark.parametrize("value", [0, 1, 127, 128, 2**40, -1, -(2**63), 2**63 - 1])
def test_encoded_examples_parse_with_tensorflow(value):
    kinds = {"b": example.BYTES, "i": example.INT64, "f": example.FLOAT, "u": example.BYTES}
    data = example.encode_example({"b": b"\x00\xffxyz" * 50, "i": value, "f": 0.25,
                                   "u": "h\u00e9llo"}, kinds)
    parsed = tf.train.Example.FromString(data).features.feature
    assert parsed["b"].bytes_list.value == [b"\x00\xffxyz" * 50]
    assert parsed["i"].int64_list.value == [value]
    assert parsed["f"].float_list.value == [0.25]
    assert parsed["u"].bytes_list.value == ["h\u00e9llo".encode()]
    assert example.decode_example(data)["i"] == (example.INT64, [value])
    assert example.decode_example(tf.train.Example.FromString(data).SerializeToString()) == \
        example.decode_example(data)


def test_repeated_numbers_encode_by_their_kind():
    # entries of repeating numbers are kept between records: the kind must stay part of them
    as_int = example.encode_example({"v": 3, "w": True}, {"v": example.INT64, "w": example.INT64})
    as_float = example.encode_example({"v": 3, "w": 2}, {"v": example.FLOAT, "w": example.INT64})
    again = example.encode_example({"v": 3, "w": True}, {"v": example.INT64, "w": example.INT64})
    assert again == as_int
    parsed = tf.train.Example.FromString(as_int).features.feature
    assert parsed["v"].int64_list.value == [3] and parsed["w"].int64_list.value == [1]
    parsed = tf.train.Example.FromString(as_float).features.feature
    assert parsed["v"].float_list.value == [3.0] and parsed["w"].int64_list.value == [2]


@pytest.mark.parametrize("compression", [None, "GZIP", "ZLIB"])
def test_record_framing_matches_tensorflow_both_ways(tmp_path, compression):
    records = [b"", b"a", os.urandom(70_000), b"last"]
    ours = str(tmp_path / "ours")
    with open(ours, "wb") as f:
        writer = tfrecord.RecordWriter(f, compression)
        writer.write(records[0])
        writer.write(records[1])
        big = records[2]  # a record given as chunks, as the writer gets them from encoding
        writer.write_many([[big[:10], big[10:60_000], big[60_000:]], records[3]])
        writer.close()
    assert writer.num_records == 4
    read = [r.numpy() for r in tf.data.TFRecordDataset(ours, compression_type=compression or "")]
    assert read == records
    theirs = str(tmp_path / "theirs")
    with tf.io.TFRecordWriter(theirs, options=compression or "") as w:
        for r in records:
            w.write(r)
    with open(theirs, "rb") as f:
        assert list(tfrecord.iter_records(f, compression)) == records
    if compression is None:
        assert open(ours, "rb").read() == open(theirs, "rb").read()


def test_encoded_example_chunks_leave_large_values_uncopied():
    image = os.urandom(example.UNCOPIED_BYTES + 1)
    features = {keys.ENCODED: image, keys.LABEL: 3, keys.FILENAME: "a.jpg",
                "note": b"x" * example.UNCOPIED_BYTES}
    kinds = {**keys.IMAGE_FEATURES, "note": example.BYTES}
    chunks = example.encode_example_chunks(features, kinds)
    assert b"".join(chunks) == example.encode_example(features, kinds)
    assert any(chunk is image for chunk in chunks)  # in place, not copied
    assert any(chunk is features["note"] for chunk in chunks)
    assert len(chunks) == 5  # small runs joined: head, image, between, note, tail
    parsed = tf.train.Example.FromString(b"".join(chunks)).features.feature
    assert parsed[keys.ENCODED].bytes_list.value == [image]


def test_record_reader_names_the_damaged_record(tmp_path):
    path = tmp_path / "r"
    with open(path, "wb") as f:
        writer = tfrecord.RecordWriter(f)
        for i in range(3):
            writer.write(bytes([i]) * 100)
        writer.close()
    data = bytearray(path.read_bytes())
    data[116 + 12 + 50] ^= 1  # inside the payload of record 1
    path.write_bytes(bytes(data))
    with open(path, "rb") as f, pytest.raises(tfrecord.RecordError, match="record 1: data CRC"):
        list(tfrecord.iter_records(f))


@pytest.mark.parametrize("size", [0, 1, 4096, 70_001])
def test_read_bytes_reads_whole_files_beyond_one_read(tmp_path, monkeypatch, size):
    data = os.urandom(size)
    path = tmp_path / "f"
    path.write_bytes(data)
    assert storage.read_bytes(str(path)) == data
    monkeypatch.setattr(storage.local, "_ONE_READ_LIMIT", 1000)  # files larger than one read
    assert storage.read_bytes(str(path)) == data


def test_every_exception_pickles_with_its_attributes_in_a_process_without_tensorflow():
    """Workers raise these in other processes (or machines): they must unpickle whole. Checked
    where TensorFlow was never imported, as in a worker (importing it changes how exceptions
    pickle)."""
    script = """
import inspect, pickle, sys
from tfrecorder_lite import errors, storage
from tfrecorder_lite.images import normalize as images
from tfrecorder_lite.record import framing as tfrecord
samples = {
    storage.FileRefused: ("/data/pipe", "a FIFO (named pipe), not a regular file"),
    storage.FileTooLarge: ("/data/huge.jpg", 6 * 10**9, 256 * 2**20),
    storage.ReadFailure: ("https://h/x.jpg", "HTTP 503 Service Unavailable after 3 tries"),
    storage.AccessDenied: ("s3://b/x.jpg", "access denied (HTTP 403 Forbidden)"),
    storage.TimedOut: ("https://h/x.jpg", "timed out after 60 s"),
    errors.InvalidRowError: (("row", 7), "gs://b/x.jpg", "truncated JPEG"),
    errors.VerifyError: ("2 problem(s)", ["a: missing", "b: record 3"]),
    errors.OutputLockedError: ("gs://b/out", "pid 7 on host-a, started 2026-11-22 10:00:00"),
    tfrecord.RecordError: (3, "data CRC mismatch"),
}
classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
           if issubclass(c, BaseException)] + [tfrecord.RecordError, images.ImageRejected,
                                               storage.FileRefused, storage.FileTooLarge,
                                               storage.ReadFailure, storage.AccessDenied,
                                               storage.TimedOut]
for cls in classes:
    error = cls(*samples.get(cls, ("a message",)))
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls and str(copy) == str(error), cls
    assert vars(copy) == vars(error), (cls, vars(copy), vars(error))
assert "tensorflow" not in sys.modules
print(len(classes))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout) >= 10


def _tf_features(data):
    """{key: (kind, [values])} of a serialized Example, as TensorFlow parses it."""
    kinds = {"bytes_list": example.BYTES, "float_list": example.FLOAT,
             "int64_list": example.INT64}
    out = {}
    for key, feature in tf.train.Example.FromString(data).features.feature.items():
        kind = feature.WhichOneof("kind")
        out[key] = (kinds[kind], list(getattr(feature, kind).value))
    return out


def test_decoded_examples_of_every_layout_are_tensorflows():
    # the usual layout (one Features, key then Feature, packed numbers) is parsed by a short
    # path, any other by the general one: both give what TensorFlow parses, and bad bytes fail
    feature = tf.train.Feature
    made = tf.train.Example(features=tf.train.Features(feature={
        "many": feature(bytes_list=tf.train.BytesList(value=[b"", b"x" * 300, b"\x0a\x12"])),
        "none_b": feature(bytes_list=tf.train.BytesList(value=[])),
        "none_f": feature(float_list=tf.train.FloatList(value=[])),
        "none_i": feature(int64_list=tf.train.Int64List(value=[])),
        "ints": feature(int64_list=tf.train.Int64List(value=[0, -1, 2**63 - 1, -(2**63), 300])),
        "floats": feature(float_list=tf.train.FloatList(value=[0.5, -2.25, 1e30])),
        "h\u00e9": feature(bytes_list=tf.train.BytesList(value=[b"v"]))})).SerializeToString()
    entry = example._entry("i", example.INT64, [5, -7])
    unusual = [
        b"\x0a" + example._varint(len(entry) + 8) + entry +
        b"\x0a\x06\x12\x04\x1a\x02\x08\x03",  # an entry without its key
        b"\x10\x07" + made,  # a field Example does not have, then the Features
        # an int64 list of unpacked values, and an entry with its Feature before its key
        example._length_delimited(b"\x0a", example._length_delimited(
            b"\x0a", b"\x0a\x01k\x12\x06\x1a\x04\x08\x05\x08\x7f") + example._length_delimited(
            b"\x0a", b"\x12\x04\x1a\x02\x08\x03\x0a\x01j"))]
    for data in [made, *unusual]:
        assert example.decode_example(data) == _tf_features(data)
    assert example.decode_example(made)["ints"] == (example.INT64,
                                                    [0, -1, 2**63 - 1, -(2**63), 300])
    for bad, problem in [(made[:-1], "truncated"), (made[:1], "truncated varint"),
                         (b"\x0a\x04\x0a\x02\x12\x00", "not a bytes, float or int64 list"),
                         (b"\x0f", "unsupported wire type")]:
        with pytest.raises(ValueError, match=problem):
            example.decode_example(bad)
