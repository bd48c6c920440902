"""output/manifest.py: metadata.json and shard receipts, built, read and checked in one place."""

import copy
import hashlib
import json
import os
import re

import numpy as np
import pytest

from tfrecorder_lite.errors import ManifestError
from tfrecorder_lite.output.manifest import (
    FORMAT_VERSION, ImageSummary, IndexEntry, Manifest, Receipt, ShardEntry, SplitEntry,
    as_of, read_manifest, split_entry, split_shards,
)
from tfrecorder_lite.output.record_hashes import RecordHashes
from tfrecorder_lite.record.keys import BYTES, IMAGE_KEYS, INT64, label_keys

CRC = "0a1b2c3d"
SHA = "ab" * 32


def content_of(out):
    with open(os.path.join(out, "metadata.json"), encoding="utf-8") as f:
        return f.read()


def test_every_kind_of_metadata_json_reads_and_writes_back_byte_for_byte(outputs_of_every_kind):
    for out, _ in outputs_of_every_kind.values():
        text = content_of(out)
        manifest = Manifest.from_json(json.loads(text), out)
        assert json.dumps(manifest.to_json(), indent=2) + "\n" == text
        assert Manifest.from_json(manifest.to_json(), out) == manifest


def _manifest(**changes):
    """A Manifest of two splits, multi-label, with images of one size."""
    id_key, text_key = label_keys()
    features = {**{k: {"dtype": v, "shape": []} for k, v in IMAGE_KEYS.items()},
                id_key: {"dtype": INT64, "shape": [None]},
                text_key: {"dtype": BYTES, "shape": [None]},
                "weight": {"dtype": "float32", "shape": [], "column_dtype": "float64"}}
    train = ShardEntry("train-00000-of-00001.tfrecord", 3, 999, CRC, SHA,
                       IndexEntry("train-00000-of-00001.tfindex", 24, CRC))
    test = ShardEntry("test-00000-of-00001.tfrecord", 1, 333, CRC)
    fields = dict(
        labels=["cat", "dog"], features=features, compression=None,
        image=ImageSummary("resized", (8, 8), (8, 8), 3, {"jpeg": 4}),
        splits={"TRAIN": SplitEntry(3, {"cat": 2, "dog": 2}, (train,)),
                "TEST": SplitEntry(1, {"dog": 1}, (test,))},
        rejected=1, rejected_rows=(4,), fingerprint="f" * 64, created_by="tfrecorder_lite 9",
        task="multi-label", split_assignment={"seed": 0})
    fields.update(changes)
    return Manifest(**fields)


def test_a_built_manifest_round_trips_through_json():
    manifest = _manifest()
    content = json.loads(json.dumps(manifest.to_json()))  # as written and read back
    assert content["format_version"] == FORMAT_VERSION
    assert content["splits"]["TRAIN"]["shards"][0] == {
        "name": "train-00000-of-00001.tfrecord", "num_examples": 3, "bytes": 999,
        "crc32c": CRC, "sha256": SHA,
        "index": {"name": "train-00000-of-00001.tfindex", "bytes": 24, "crc32c": CRC}}
    assert Manifest.from_json(content, "m") == manifest
    assert list(content) == ["format_version", "created_by", "fingerprint", "task", "labels",
                             "features", "compression", "image", "split_assignment",
                             "rejected", "rejected_rows", "splits"]


def _without(content, *path):
    *parents, last = path
    target = content
    for key in parents:
        target = target[key]
    del target[last]


def _set(content, value, *path):
    *parents, last = path
    target = content
    for key in parents:
        target = target[key]
    target[last] = value


SHARD0 = ("splits", "TRAIN", "shards", 0)


@pytest.mark.parametrize("change, message", [
    (lambda c: _set(c, 2, "format_version"), "unsupported format_version 2"),
    (lambda c: _without(c, "labels"), "has no 'labels'"),
    (lambda c: _set(c, "cat", "labels"), "labels: 'cat' is not a list of label texts"),
    (lambda c: _set(c, "BZIP2", "compression"), "compression: 'BZIP2' is not null, 'GZIP'"),
    (lambda c: _set(c, "single", "task"), "task: 'single' is not 'multi-label'"),
    (lambda c: _set(c, "stored", "image", "stored"), "image.stored: 'stored' is not"),
    (lambda c: _set(c, [8], "image", "size"), "image.size: [8] is not null or [height, width]"),
    (lambda c: _set(c, {"dtype": "int64", "shape": []}, "features", "image/encoded"),
     "features.image/encoded.dtype: 'int64' is not 'string'"),
    (lambda c: _set(c, [], "features", "image/class/label", "shape"),
     "features.image/class/label.shape: [] is not [null]"),
    (lambda c: _set(c, [None, None], "features", "weight", "shape"),
     "features.weight.shape: [None, None] is not a shape"),
    (lambda c: _set(c, -1, "rejected"), "rejected: -1 is not a count"),
    (lambda c: _set(c, {}, "splits"), "splits: {} is not an object of splits"),
    (lambda c: _set(c, "../x.tfrecord", *SHARD0, "name"),
     "splits.TRAIN.shards[0].name: '../x.tfrecord' is not a shard file name of split TRAIN"),
    (lambda c: _set(c, "test-00000-of-00001.tfrecord", *SHARD0, "name"),
     "is not a shard file name of split TRAIN"),
    (lambda c: _set(c, True, *SHARD0, "num_examples"),
     "splits.TRAIN.shards[0].num_examples: True is not a count"),
    (lambda c: _set(c, "ABCDEF01", *SHARD0, "crc32c"),
     "splits.TRAIN.shards[0].crc32c: 'ABCDEF01' is not 8 hex digits"),
    (lambda c: _set(c, "12", *SHARD0, "sha256"), "shards[0].sha256: '12' is not 64 hex digits"),
    (lambda c: _without(c, *SHARD0, "index", "crc32c"),
     "has no 'splits.TRAIN.shards[0].index.crc32c'"),
    (lambda c: _set(c, 4, "splits", "TRAIN", "num_examples"),
     "splits.TRAIN.num_examples: 4 is not the sum of its shards' num_examples (3)"),
])
def test_a_malformed_field_is_named_with_its_value(change, message):
    content = _manifest().to_json()
    change(content)
    with pytest.raises(ManifestError) as info:
        Manifest.from_json(content, "/out/metadata.json")
    assert str(info.value).startswith("/out/metadata.json")
    assert message in str(info.value)


def test_a_manifest_of_an_earlier_version_reads_and_keeps_what_it_does_not_know():
    """Earlier outputs: a sha256 and no CRC32C or index per shard, no max_size, no task, no
    fingerprint; fields of a later version are kept as they are."""
    content = _manifest(task=None, fingerprint=None, created_by=None,
                        image=ImageSummary("encoded", None, None, None, {"png": 4}),
                        split_assignment=None).to_json()
    content["features"]["image/class/label"]["shape"] = []
    content["features"]["image/class/text"]["shape"] = []
    for split in content["splits"].values():
        for shard in split["shards"]:
            shard.pop("crc32c"), shard.pop("index", None)
            shard["sha256"] = SHA
    content["written_on"] = "a later version"
    manifest = Manifest.from_json(copy.deepcopy(content), "m")
    assert manifest.image.max_size is None and not manifest.multi_label
    assert manifest.splits["TEST"].shards[0].checksums == {"sha256": SHA}
    assert manifest.other == {"written_on": "a later version"}
    assert manifest.to_json() == content


def test_a_generation_is_any_whole_number_of_the_outputs_and_the_message_says_which():
    manifest = _manifest()  # one generation
    assert split_shards(manifest, "TRAIN", np.int64(0)) == manifest.splits["TRAIN"].shards
    assert as_of(manifest, np.uint8(0)) is manifest
    for value in (1, np.int64(1), -1):
        with pytest.raises(ManifestError, match=r"generation must be 0 \(the output has one "
                                                rf"generation\), not {int(value)}$"):
            as_of(manifest, value)
    for value, shown in ((True, "True"), (np.bool_(False), "np.False_"), (0.0, "0.0"),
                         ("0", "'0'")):
        with pytest.raises(ManifestError, match=rf"generation must be 0 .*, not {shown}$"):
            split_shards(manifest, "TRAIN", value)


def test_receipts_round_trip_and_earlier_receipts_still_read():
    shard = ShardEntry("train-00001-of-00002.tfrecord", 2, 100, CRC,
                       index=IndexEntry("train-00001-of-00002.tfindex", 16, CRC))
    receipt = Receipt(shard, rejected=((7, "file not found"),), sizes=((8, 8),),
                      max_size=(8, 8), channels=(3,), formats={"png": 2},
                      labels=({"0": 1, "1": 1},))
    assert Receipt.from_json(json.loads(json.dumps(receipt.to_json()))) == receipt
    assert receipt.name == shard.name

    earlier = receipt.to_json()
    earlier["labels"] = {"0": 1, "1": 1}  # one label field's counts, not a list of them
    assert Receipt.from_json(earlier) == receipt



def test_a_receipts_hashes_are_columns_that_read_and_write_back_as_they_were_given():
    entries = [(9, hashlib.sha256(b"a").hexdigest(), "00ff" * 24, "jpeg", 8, 6, 3),
               (3, hashlib.sha256(b"b").hexdigest(), None, "png", 5, 4, 1),  # did not decode
               (5, "00" * 32, "f" * 96, "png", 2, 2, 4)]  # a digest ending in zero bytes
    shard = ShardEntry("train-00000-of-00001.tfrecord", 3, 100, CRC)
    receipt = Receipt(shard, hashes=RecordHashes(entries))
    assert list(receipt.hashes) == entries
    back = Receipt.from_json(json.loads(json.dumps(receipt.to_json())))
    assert back == receipt and list(back.hashes) == entries
    assert receipt.to_json()["hashes"] == [list(e) for e in entries]
    joined = RecordHashes.joined([RecordHashes(entries[:1]), RecordHashes(),
                                  RecordHashes(entries[1:])])
    assert list(joined.take([1, 2, 0])) == [entries[1], entries[2], entries[0]]
    assert joined.perceptual[2].tolist() == [2**64 - 1] * 6 and not joined.hashed[1]
    assert "hashes" not in Receipt(shard).to_json() and not Receipt(shard).hashes
    parts = [RecordHashes(entries[:1]), RecordHashes(), RecordHashes(entries[1:])]
    consumed = RecordHashes.joined(parts, consume=True)  # the parts are let go as it goes
    assert list(consumed) == list(joined) == entries
    assert all(len(p) == 0 and p.digest_bytes.base is None and p.perceptual.base is None
               for p in (parts[0], parts[2]))  # empty arrays of their own, not views


@pytest.mark.parametrize("change, message", [
    (lambda r: r.pop("rejected"), "malformed ('rejected')"),
    (lambda r: r.update(sizes=7), "malformed ("),
    (lambda r: r.update(bytes="100"), "receipt.bytes: '100' is not a count"),
    (lambda r: r.update(name="x.tfrecord"), "receipt.name: 'x.tfrecord' is not a shard file"),
])
def test_a_malformed_receipt_is_a_manifest_error_naming_it(change, message):
    content = Receipt(ShardEntry("test-00000-of-00001.tfrecord", 1, 10, CRC)).to_json()
    change(content)
    where = "/out/.tfrecorder_lite/test-00000-of-00001.tfrecord.json"
    with pytest.raises(ManifestError, match=re.escape(f"{where}: {message}")):
        Receipt.from_json(content, where)


def test_split_entries_sum_the_receipts_per_label_field():
    receipts = [Receipt(ShardEntry(f"train-0000{i}-of-00002.tfrecord", n, 10, CRC),
                        labels=(counts,))
                for i, (n, counts) in enumerate([(3, {"0": 2, "2": 1}), (2, {"2": 2})])]
    entry = split_entry(receipts, [(None, ["cat", "dog", "owl"])])
    assert entry.num_examples == 5 and entry.label_counts == {"cat": 2, "owl": 3}
    assert [s.name for s in entry.shards] == ["train-00000-of-00002.tfrecord",
                                              "train-00001-of-00002.tfrecord"]


def test_reading_a_folder_without_a_finished_output_says_why(tmp_path, outputs_of_every_kind):
    with pytest.raises(ManifestError, match="does not exist"):
        read_manifest(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ManifestError, match="is an empty folder"):
        read_manifest(tmp_path / "empty")
    (tmp_path / "running" / ".tfrecorder_lite").mkdir(parents=True)
    with pytest.raises(ManifestError, match="may still be running, or was interrupted"):
        read_manifest(tmp_path / "running")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ManifestError, match=r"is not a tfrecorder_lite output \(it holds notes"):
        read_manifest(tmp_path / "other")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "metadata.json").write_text("{not json")
    with pytest.raises(ManifestError, match="cannot read .*metadata.json"):
        read_manifest(tmp_path / "bad")

    out, _ = outputs_of_every_kind["plain"]
    manifest, content = read_manifest(out)
    assert content == json.loads(content_of(out)) and manifest.rejected == 1
    assert [s.name for s in manifest.splits["TRAIN"].shards] == [
        "train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"]
