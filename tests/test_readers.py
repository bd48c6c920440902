"""Other readers open a tfrecorder_lite folder with the calls they already know:
TensorFlow Datasets (``tfds.builder_from_directory``)."""

import time

import numpy as np
import pandas as pd
import pytest

import tfrecorder_lite
from conftest import photo, save

tfds = pytest.importorskip("tensorflow_datasets")


@pytest.fixture(scope="module")
def output(tmp_path_factory):
    """A finished output: JPEGs and PNGs of several sizes, a grayscale one, extra columns."""
    root = tmp_path_factory.mktemp("readers")
    rows = []
    for i in range(30):
        split = "TRAIN" if i < 20 else "VALIDATION" if i < 25 else "TEST"
        fmt, ext = ("JPEG", "jpg") if i % 2 else ("PNG", "png")
        mode = "L" if i == 4 else "RGB"
        path = save(photo(16 + i, 20 + i, seed=i, mode=mode), root / "images" / f"{i}.{ext}",
                    fmt)
        rows.append((split, path, ["cat", "dog", "bird"][i % 3], i, i / 4, f"note {i}"))
    df = pd.DataFrame(rows, columns=["split", "image_uri", "label", "index", "score", "note"])
    result = df.tfrecord.to_tfrecord(root / "out", progress=False, num_shards={"TRAIN": 3})
    return root / "out", result


def _by_filename(examples):
    return {bytes(e["image/filename"]): e for e in tfds.as_numpy(examples)}


def test_tfds_reads_the_same_examples_images_and_label_names_as_load(output):
    out, result = output
    builder = tfds.builder_from_directory(str(out))
    assert builder.info.features["image/class/label"].names == result.labels == \
        ["bird", "cat", "dog"]
    assert {name: info.num_examples for name, info in builder.info.splits.items()} == \
        {"train": 20, "validation": 5, "test": 5}
    for split in ("train", "validation", "test"):
        theirs = _by_filename(builder.as_dataset(split=split))
        ours = {bytes(e["image/filename"]): e for e in tfds.as_numpy(
            tfrecorder_lite.load(out, split, as_supervised=False, dct_method=""))}
        assert theirs.keys() == ours.keys() and len(theirs) == result.counts[split.upper()]
        for name, example in theirs.items():
            mine = ours[name]
            np.testing.assert_array_equal(example["image/encoded"], mine["image"])
            for key in ("image/class/label", "image/class/text", "index", "score", "note"):
                assert example[key] == mine[key], (name, key)


def test_tfds_split_slicing_and_supervised_pairs(output):
    out, _ = output
    builder = tfds.builder_from_directory(str(out))
    half = builder.as_dataset(split="train[:50%]")
    rest = builder.as_dataset(split="train[50%:]")
    names = [set(_by_filename(ds)) for ds in (half, rest)]
    assert len(names[0]) == 10 and not names[0] & names[1]
    assert sum(len(list(ds)) for ds in builder.as_dataset(split=tfds.even_splits("train", 2))) \
        == 20
    image, label = next(iter(builder.as_dataset(split="test", as_supervised=True)))
    assert image.shape[-1] == 3 and image.dtype.name == "uint8" and label.dtype.name == "int64"


def test_compressed_outputs_get_no_tfds_files(tmp_path):
    table = pd.DataFrame([("TRAIN", save(photo(8, 8), tmp_path / "a.png", "PNG"), "a")],
                         columns=["split", "image_uri", "label"])
    table.tfrecord.to_tfrecord(tmp_path / "gz", compression="GZIP", progress=False)
    assert (tmp_path / "gz" / "metadata.json").exists()
    assert not (tmp_path / "gz" / "dataset_info.json").exists()
    assert not (tmp_path / "gz" / "features.json").exists()


# ============================================================ index files (PyTorch, DALI readers)

def _index(path):
    return [tuple(map(int, line.split())) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_each_shard_has_an_index_of_its_records_listed_in_metadata(output, tmp_path,
                                                                  compression):
    import gzip
    import struct

    out, result = output
    if compression:
        table = pd.DataFrame([("TRAIN", save(photo(8 + i, 8, seed=i), tmp_path / f"{i}.png",
                                             "PNG"), "a") for i in range(5)],
                             columns=["split", "image_uri", "label"])
        result = table.tfrecord.to_tfrecord(tmp_path / "gz", compression=compression,
                                            progress=False)
        out = tmp_path / "gz"
    for info in result.metadata["splits"].values():
        for shard in info["shards"]:
            entry = shard["index"]
            assert entry["name"] == shard["name"].split(".tfrecord")[0] + ".tfindex"
            data = (out / shard["name"]).read_bytes()
            if compression:
                data = gzip.decompress(data)
            index = _index(out / entry["name"])
            assert len(index) == shard["num_examples"]
            assert (out / entry["name"]).stat().st_size == entry["bytes"]
            position = 0
            for offset, length in index:  # contiguous, and each one frames one record
                assert offset == position
                (size,) = struct.unpack_from("<Q", data, offset)
                assert length == size + 16
                position += length
            assert position == len(data)
    tfrecorder_lite.verify(out)


def test_resume_keeps_an_index_and_rewrites_a_shard_whose_index_is_gone(tmp_path, monkeypatch):
    from test_reliability import interrupt_before_the_manifest

    table = pd.DataFrame([("TRAIN", save(photo(8 + i, 8, seed=i), tmp_path / f"{i}.png", "PNG"),
                           "a") for i in range(6)], columns=["split", "image_uri", "label"])
    reference = tmp_path / "reference"
    table.tfrecord.to_tfrecord(reference, num_shards=2, progress=False)
    out = tmp_path / "out"
    interrupt_before_the_manifest(monkeypatch, table, out, num_shards=2)
    kept, lost = "train-00000-of-00002", "train-00001-of-00002"
    before = {n: (out / n).stat().st_mtime_ns for n in (f"{kept}.tfrecord", f"{kept}.tfindex",
                                                       f"{lost}.tfrecord")}
    (out / f"{lost}.tfindex").unlink()
    time.sleep(0.01)
    table.tfrecord.to_tfrecord(out, num_shards=2, progress=False, n_jobs=1, on_error="skip")
    assert (out / f"{kept}.tfrecord").stat().st_mtime_ns == before[f"{kept}.tfrecord"]
    assert (out / f"{kept}.tfindex").stat().st_mtime_ns == before[f"{kept}.tfindex"]
    assert (out / f"{lost}.tfrecord").stat().st_mtime_ns != before[f"{lost}.tfrecord"]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == \
        {p.name: p.read_bytes() for p in reference.iterdir()}


def test_verify_names_a_missing_or_wrong_index(output, tmp_path):
    import shutil

    out, result = output
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    shard = result.metadata["splits"]["TRAIN"]["shards"][1]
    index = copy / shard["index"]["name"]
    lines = index.read_text().splitlines()
    index.write_text("\n".join(lines[:-1]) + "\n")  # the last record left out
    with pytest.raises(tfrecorder_lite.VerifyError, match=f"index file {index.name} does not match"):
        tfrecorder_lite.verify(copy)
    index.unlink()
    with pytest.raises(tfrecorder_lite.VerifyError, match=f"index file {index.name} is missing"):
        tfrecorder_lite.verify(copy)
