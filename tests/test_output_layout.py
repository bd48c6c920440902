"""output/layout.py: every file name and pattern of an output folder, in one place."""

import os

import pytest

from tfrecorder_lite.output import layout


def test_shard_names_say_split_index_count_and_compression():
    assert layout.shard_name("TRAIN", 0, 4) == "train-00000-of-00004.tfrecord"
    assert layout.shard_name("VALIDATION", 12, 100, "GZIP") == \
        "validation-00012-of-00100.tfrecord.gz"
    assert layout.shard_name("TEST", 1, 2, "ZLIB") == "test-00001-of-00002.tfrecord.zz"
    assert layout.index_name("train-00000-of-00002.tfrecord.gz") == \
        "train-00000-of-00002.tfindex"
    assert layout.receipt_name("test-00000-of-00001.tfrecord") == \
        "test-00000-of-00001.tfrecord.json"


@pytest.mark.parametrize("name, split, expected", [
    ("train-00000-of-00004.tfrecord", None, True),
    ("train-00000-of-00004.tfrecord", "TRAIN", True),
    ("train-00000-of-00004.tfrecord", "TEST", False),
    ("test-00001-of-00002.tfrecord.zz", "TEST", True),
    ("train-00000-of-00004.tfrecord.bz2", None, False),
    ("../train-00000-of-00004.tfrecord", None, False),  # never a path ...
    ("/data/train-00000-of-00004.tfrecord", None, False),
    ("gs://b/train-00000-of-00004.tfrecord", None, False),  # ... nor a URL
    ("train-00000-of-00004.tfrecord\n", None, False),  # matched whole
    ("train-0-of-4.tfrecord", None, False),
    (7, None, False),
])
def test_a_shard_name_is_matched_whole(name, split, expected):
    assert layout.is_shard_of(name, split) is expected


def test_label_files_one_per_level():
    assert layout.label_files(["cat", "dog"]) == {"labels.txt": ["cat", "dog"]}
    assert layout.label_files({"coarse": ["a"], "fine": ["b", "c"]}) == {
        "labels-coarse.txt": ["a"], "labels-fine.txt": ["b", "c"]}
    assert layout.level_files(["coarse"]) == ["labels-coarse.txt",
                                              "image.label.coarse.labels.txt"]
    assert layout.TFDS_LABEL_NAMES == "image.class.label.labels.txt"


@pytest.mark.parametrize("name", [
    "train-00000-of-00002.tfrecord", "train-00000-of-00002.tfrecord.gz",
    "train-00000-of-00002.tfindex", "test-00001-of-00002.tfrecord.tmp", "labels.txt",
    "labels-fine.txt", "labels-fine.txt.tmp", "image.label.fine.labels.txt", "rejected.csv",
    "metadata.json", "metadata.json.tmp", "dataset_info.json", "features.json",
    "image.class.label.labels.txt"])
def test_the_library_names_its_own_files(name):
    assert layout.OUR_FILE.match(name)


@pytest.mark.parametrize("name", [
    "notes.txt", "train-00000-of-00002.tfrecord.bak", "labels-.txt", "labels.txt.old",
    "metadata.json.tmp.tmp", "sub/metadata.json", "Metadata.json", ".tfrecorder_lite",
    "train-00000-of-00002.tfrecord\n"])
def test_a_file_the_library_does_not_name_is_never_its_own(name):
    assert not layout.OUR_FILE.match(name)


def test_every_file_of_real_outputs_is_named_by_the_layout(outputs_of_every_kind):
    """What the writer leaves is what the layout names: overwrite can find all of it."""
    for out, _ in outputs_of_every_kind.values():
        names = sorted(os.listdir(out))
        assert layout.METADATA in names and layout.STATE_DIR not in names
        assert [n for n in names if not layout.OUR_FILE.match(n)] == []
        shards = [n for n in names if layout.is_shard_of(n)]
        assert shards and all(layout.index_name(n) in names for n in shards)
