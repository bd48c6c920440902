"""Errors name their file: a damaged shard read through load() (also inside model.fit), a
malformed metadata.json, shard names that point outside the folder, and folders that are not
(finished) outputs each fail with a message naming the file, field or folder."""

import json
import os
import re
import shutil

import fsspec
import pandas as pd
import pytest
import tensorflow as tf

import imagegen as ig
import tfrecorder_lite
from conftest import photo, save
from tfrecorder_lite import ManifestError
from tfrecorder_lite.cli import main

SHARD = "train-00000-of-00002.tfrecord"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished output: TRAIN in two shards of 6 JPEGs, TEST in one of 2."""
    root = tmp_path_factory.mktemp("errors")
    rows = [("TRAIN" if i < 12 else "TEST",
             save(photo(24 + i, 32, seed=i), root / "images" / f"img{i}.jpg", "JPEG"),
             "cat" if i % 2 else "dog") for i in range(14)]
    table = pd.DataFrame(rows, columns=["split", "image_uri", "label"])
    out = root / "out"
    table.tfrecord.to_tfrecord(out, num_shards={"TRAIN": 2, "TEST": 1}, shuffle=False,
                               progress=False)
    return out


@pytest.fixture
def out(finished, tmp_path):
    """A private copy of the finished output."""
    return shutil.copytree(finished, tmp_path / "out")


def edit_metadata(out, change):
    """Rewrite ``out``'s metadata.json with ``change(metadata)`` applied."""
    path = os.path.join(out, "metadata.json")
    with open(path, encoding="utf-8") as f:
        metadata = json.load(f)
    change(metadata)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(metadata, f)


def flip_a_byte_mid_shard(out):
    """Flip one bit in the middle of SHARD; returns the index of the record that holds it."""
    path = os.path.join(out, SHARD)
    data = bytearray(open(path, "rb").read())
    middle = len(data) // 2
    data[middle] ^= 0x01
    with open(path, "wb") as f:
        f.write(data)
    return next(i for i, (a, b) in enumerate(ig.record_offsets(data)) if a <= middle < b)


def upload(out, url):
    """Copy the files of the local folder ``out`` to the memory:// folder ``url``."""
    fs = fsspec.filesystem("memory")
    for name in os.listdir(out):
        fs.put_file(str(out / name), f"{url}/{name}")
    return url


def read_error(dataset):
    """The TensorFlow error that iterating over ``dataset`` raises."""
    with pytest.raises(tf.errors.OpError) as info:
        for _ in dataset:
            pass
    return info.value.message


# ---------------------------------------------------------------- 1. damaged shards in load()

def test_a_flipped_byte_names_the_shard_and_record(out):
    record = flip_a_byte_mid_shard(out)
    message = read_error(tfrecorder_lite.load(out, "TRAIN"))
    assert f"{out / SHARD}: record {record} is damaged or missing (read {record} of the 6 " \
           "records metadata.json lists)" in message, message
    assert f"run tfrecorder-lite verify {out}" in message


def test_a_flipped_byte_names_the_shard_inside_model_fit(out):
    flip_a_byte_mid_shard(out)
    dataset = tfrecorder_lite.load(out, "TRAIN", batch_size=4, image_size=(8, 8))
    model = tf.keras.Sequential([tf.keras.Input((8, 8, 3)), tf.keras.layers.Rescaling(1 / 255),
                                 tf.keras.layers.GlobalAveragePooling2D(),
                                 tf.keras.layers.Dense(2)])
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(tf.errors.OpError) as info:
        model.fit(dataset, epochs=1, verbose=0)
    assert f"{out / SHARD}: record " in info.value.message, info.value.message


def test_a_shard_truncated_after_load_names_the_shard_and_record(out):
    dataset = tfrecorder_lite.load(out, "TRAIN")
    path = out / SHARD
    data = path.read_bytes()
    path.write_bytes(data[: ig.record_offsets(data)[4][0] + 20])  # cut inside record 4
    message = read_error(dataset)
    assert f"{path}: record 4 is damaged or missing" in message, message


def test_a_shard_with_more_records_than_listed_yields_the_listed_ones(out):
    def one_less(metadata):
        metadata["splits"]["TRAIN"]["num_examples"] -= 1
        metadata["splits"]["TRAIN"]["shards"][0]["num_examples"] -= 1

    edit_metadata(out, one_less)  # before: FailedPreconditionError "expected 11 elements"
    dataset = tfrecorder_lite.load(out, "TRAIN")
    assert len(dataset) == 11 and sum(1 for _ in dataset) == 11


def test_a_count_above_the_shard_names_the_shard_and_record(out):
    def one_more(metadata):
        metadata["splits"]["TRAIN"]["num_examples"] += 1
        metadata["splits"]["TRAIN"]["shards"][0]["num_examples"] += 1

    edit_metadata(out, one_more)
    message = read_error(tfrecorder_lite.load(out, "TRAIN"))
    assert f"{out / SHARD}: record 6 is damaged or missing (read 6 of the 7 records " \
           "metadata.json lists)" in message, message


def test_a_damaged_compressed_shard_is_named(tmp_path):
    compressed = tmp_path / "gz"
    rows = [("TRAIN", save(photo(24, 32 + i, seed=i), tmp_path / "im" / f"{i}.jpg", "JPEG"), "a")
            for i in range(4)]
    pd.DataFrame(rows, columns=["split", "image_uri", "label"]).tfrecord.to_tfrecord(
        compressed, compression="GZIP", progress=False)
    path = compressed / "train-00000-of-00001.tfrecord.gz"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    message = read_error(tfrecorder_lite.load(compressed, "TRAIN"))
    assert f"{path}: record " in message and "is damaged or missing" in message, message


def test_a_missing_or_resized_shard_is_named_when_load_is_called(out):
    path = out / SHARD
    data = path.read_bytes()
    path.write_bytes(data[:-1])
    with pytest.raises(ManifestError, match=re.escape(
            f"{path}: {len(data) - 1} bytes, metadata.json says {len(data)}")):
        tfrecorder_lite.load(out, "TRAIN")
    path.unlink()
    with pytest.raises(ManifestError, match=re.escape(f"{path}: shard file is missing")):
        tfrecorder_lite.load(out)


def test_a_missing_remote_shard_is_named(out, tmp_path):
    os.remove(out / SHARD)
    url = upload(out, "memory://errors-test/missing")
    with pytest.raises(ManifestError, match=re.escape(f"{url}/{SHARD}: shard file is missing")):
        tfrecorder_lite.load(url, "TRAIN", cache_dir=str(tmp_path / "cache"))


# ---------------------------------------------------------------- 2. malformed metadata.json

def _drop(key):
    return lambda metadata: metadata.pop(key)


def _set(value, *keys):
    def change(metadata):
        for key in keys[:-1]:
            metadata = metadata[key]
        metadata[keys[-1]] = value
    return change


@pytest.mark.parametrize("change, problem", [
    (_drop("image"), " has no 'image'"),
    (_set(None, "image", "stored"), ": image.stored: None is not 'encoded' or 'resized'"),
    (_set("cat", "labels"), ": labels: 'cat' is not a list of label texts, or an object level -> "
                               "list of label texts"),
    (_set("LZ4", "compression"), ": compression: 'LZ4' is not null, 'GZIP' or 'ZLIB'"),
    (_set({"shape": []}, "features", "image/encoded"), " has no 'features.image/encoded.dtype'"),
    (_set("int64", "features", "image/encoded", "dtype"),
     ": features.image/encoded.dtype: 'int64' is not 'string'"),
    (_set(-1, "splits", "TEST", "num_examples"), ": splits.TEST.num_examples: -1 is not a count"),
    (_set(3, "splits", "TEST", "num_examples"),
     ": splits.TEST.num_examples: 3 is not the sum of its shards' num_examples (2)"),
    (_set("12", "splits", "TRAIN", "shards", 1, "bytes"),
     ": splits.TRAIN.shards[1].bytes: '12' is not a count"),
    (_set("XYZ", "splits", "TRAIN", "shards", 0, "crc32c"),
     ": splits.TRAIN.shards[0].crc32c: 'XYZ' is not 8 hex digits"),
    (_set("test-00000-of-00001.tfrecord", "splits", "TRAIN", "shards", 0, "name"),
     ": splits.TRAIN.shards[0].name: 'test-00000-of-00001.tfrecord' is not a shard file name "
     "of split TRAIN"),
])
def test_a_malformed_field_is_named(out, change, problem):
    edit_metadata(out, change)
    with pytest.raises(ManifestError) as info:
        tfrecorder_lite.load(out, "TEST")
    assert str(info.value) == f"{out / 'metadata.json'}{problem}"


def test_cli_info_without_image_exits_2_with_one_line(out, capsys):
    edit_metadata(out, _drop("image"))
    assert main(["info", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"tfrecorder-lite: error: {out / 'metadata.json'} has no 'image'\n"
    assert captured.out == ""


# ---------------------------------------------------------------- 3. names outside the folder

@pytest.mark.parametrize("name", ["../outside.tfrecord", "ABSOLUTE", "file://ABSOLUTE"])
def test_shard_names_never_leave_the_folder(out, tmp_path, name):
    outside = tmp_path / "outside.tfrecord"
    shutil.copy(out / SHARD, outside)  # a valid shard: reading it would succeed
    name = name.replace("ABSOLUTE", str(outside))
    edit_metadata(out, _set(name, "splits", "TRAIN", "shards", 0, "name"))
    field = f"splits.TRAIN.shards[0].name: {name!r} is not a shard file name"
    for read in (lambda: tfrecorder_lite.load(out, "TRAIN"), lambda: tfrecorder_lite.verify(out)):
        with pytest.raises(ManifestError, match=re.escape(field)):
            read()


def test_the_shard_cache_never_copies_a_file_outside_the_folder(out, tmp_path):
    fsspec.filesystem("memory").put_file(str(out / SHARD), "memory://errors-test/outside.tfrecord")
    edit_metadata(out, _set("../outside.tfrecord", "splits", "TRAIN", "shards", 0, "name"))
    url = upload(out, "memory://errors-test/out")
    cache = tmp_path / "cache"
    with pytest.raises(ManifestError, match="is not a shard file name"):
        tfrecorder_lite.load(url, "TRAIN", cache_dir=str(cache))
    assert not cache.exists() or os.listdir(cache) == []


# ---------------------------------------------------------------- 4. not an output folder

def test_a_folder_that_does_not_exist_is_named_as_such(tmp_path):
    with pytest.raises(ManifestError, match="does not exist") as info:
        tfrecorder_lite.load(tmp_path / "nowhere")
    assert "running" not in str(info.value)


def test_a_folder_of_other_files_is_not_an_output(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ManifestError, match="is not a tfrecorder_lite output") as info:
        tfrecorder_lite.load(tmp_path)
    assert "notes.txt" in str(info.value) and "running" not in str(info.value)


def test_an_unfinished_conversion_may_still_be_running(out):
    os.remove(out / "metadata.json")
    os.mkdir(out / ".tfrecorder_lite")
    with pytest.raises(ManifestError, match="may still be running, or was interrupted"):
        tfrecorder_lite.load(out)
