"""Record file formats behind one interface (``tfrecorder_lite.formats``): the manifest says
the format, file names take its suffixes, and every reader reads through it."""

import json
import shutil

import pytest

import tfrecorder_lite
from tfrecorder_lite import ManifestError
from tfrecorder_lite.formats import DEFAULT, FORMATS, format_named
from tfrecorder_lite.output import layout


def test_tfrecord_is_the_format_of_every_shard_and_metadata_says_so(outputs_of_every_kind):
    for out, _ in outputs_of_every_kind.values():
        metadata = tfrecorder_lite.read_metadata(out)
        assert metadata["format"] == "tfrecord"
        for entry in metadata["splits"].values():
            for shard in entry["shards"]:
                suffix = DEFAULT.suffixes[metadata["compression"]]
                assert shard["name"].endswith(suffix) and layout.is_shard_of(shard["name"])


def test_an_output_written_before_metadata_named_its_format_reads_as_tfrecord(
        outputs_of_every_kind, tmp_path):
    out = tmp_path / "old"
    shutil.copytree(outputs_of_every_kind["plain"][0], out)
    metadata = json.loads((out / "metadata.json").read_text())
    del metadata["format"]
    (out / "metadata.json").write_text(json.dumps(metadata))
    assert tfrecorder_lite.verify(out).startswith("OK")
    assert len(list(tfrecorder_lite.load(out, "TRAIN"))) == metadata["splits"]["TRAIN"][
        "num_examples"]


def test_a_format_this_version_does_not_read_is_named_and_refused(outputs_of_every_kind,
                                                                   tmp_path):
    out = tmp_path / "new"
    shutil.copytree(outputs_of_every_kind["plain"][0], out)
    metadata = json.loads((out / "metadata.json").read_text())
    metadata["format"] = "array_record"
    (out / "metadata.json").write_text(json.dumps(metadata))
    for read in (tfrecorder_lite.verify, lambda o: tfrecorder_lite.load(o, "TRAIN")):
        with pytest.raises(ManifestError, match="format: 'array_record' is not"):
            read(out)


def test_format_names_and_suffixes():
    assert format_named(None) is DEFAULT and FORMATS["tfrecord"] is DEFAULT
    assert layout.shard_name("VALIDATION", 2, 10, "ZLIB") == \
        "validation-00002-of-00010.tfrecord.zz"
    assert layout.index_name("train-00000-of-00001.tfrecord.gz") == "train-00000-of-00001.tfindex"
    with pytest.raises(ManifestError, match="format 'parquet' is not one this version reads"):
        format_named("parquet")
