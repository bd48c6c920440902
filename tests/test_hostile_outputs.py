"""Outputs read back as a hostile folder would serve them: compression bombs and record lengths
no file can hold (verify and inspect stay within bounded memory, measured from a child
process's peak RSS, VmHWM), a metadata.json tampered to hold millions of labels or huge texts (the
inspect page stays small), metadata.json's sums that disagree with the records (verify names
them), and an empty table (refused before anything is written)."""

import json
import os
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pandas as pd
import pytest

import tfrecorder_lite
from tfrecorder_lite import ManifestError, SchemaError, VerifyError
from tfrecorder_lite.read import report, verification
from tfrecorder_lite.record import encoding as example
from tfrecorder_lite.record import keys
from tfrecorder_lite.record.framing import (MAX_COMPRESSED_RECORD_BYTES, RecordError,
                                            file_digest, iter_records, masked_crc)
from conftest import photo, save

REPO = Path(__file__).resolve().parents[1]
MiB = 1 << 20


def _table(folder, n=6, sizes=((24, 32),), labels=("cat", "dog"), splits=("TRAIN",)):
    """A table of ``n`` real PNGs (sizes and labels cycling) in ``splits``."""
    rows = []
    for i in range(n):
        height, width = sizes[i % len(sizes)]
        path = save(photo(height, width, seed=i), folder / f"img{i}.png")
        rows.append((splits[i % len(splits)], path, labels[i % len(labels)]))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"])


def _metadata(out):
    return json.loads((out / "metadata.json").read_text())


def _write_metadata(out, metadata):
    (out / "metadata.json").write_text(json.dumps(metadata))


def _replace_shard(out, data, num_examples=None):
    """Put ``data`` in place of the output's only shard and make metadata.json agree with it
    (size, CRC32C, record count; the index file is dropped), as a forger would."""
    metadata = _metadata(out)
    (entry,) = [s for split in metadata["splits"].values() for s in split["shards"]]
    (out / entry["name"]).write_bytes(data)
    entry.update(bytes=len(data), crc32c=file_digest(data)["crc32c"])
    entry.pop("index", None)
    if num_examples is not None:
        for split in metadata["splits"].values():
            split["num_examples"] = entry["num_examples"] = num_examples
    _write_metadata(out, metadata)
    return entry["name"]


def _frame(payload):
    length = struct.pack("<Q", len(payload))
    return length + struct.pack("<I", masked_crc(length)) + payload + \
        struct.pack("<I", masked_crc(payload))


def _gzip_bomb(head, block, count):
    """A GZIP stream of ``head`` then ``count`` times ``block``, each compressed on its own
    (so the compressed block repeats: a few MB that expand to ``count`` blocks)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = compressor.compress(head) + compressor.flush(zlib.Z_FULL_FLUSH)
    repeated = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    crc = zlib.crc32(head)
    for _ in range(count):
        crc = zlib.crc32(block, crc)
    size = (len(head) + count * len(block)) & 0xFFFFFFFF
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + first + repeated * count +
            compressor.flush(zlib.Z_FINISH) + struct.pack("<II", crc, size))


@pytest.fixture(scope="module")
def gzip_output(tmp_path_factory):
    """A real GZIP output of one shard (two images), as the forgers below start from."""
    root = tmp_path_factory.mktemp("gzip")
    out = root / "out"
    _table(root / "images", n=2).tfrecord.to_tfrecord(out, compression="GZIP", num_shards=1,
                                                    progress=False)
    return out


def _copy(folder, tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    for name in os.listdir(folder):
        (target / name).write_bytes((folder / name).read_bytes())
    return target


def _one_tebibyte_claim():
    """2 MB of GZIP: a record header claiming 1 TiB, then 2 GiB of zeros."""
    length = struct.pack("<Q", 1 << 40)
    return _gzip_bomb(length + struct.pack("<I", masked_crc(length)), bytes(MiB), 2048)


def _valid_records_of_zeros():
    """2 MB of GZIP: 2048 well-formed records of about 1 MiB each (an Example whose image is
    zeros), 2 GiB in all; metadata.json will say the shard holds one."""
    kinds = dict(keys.IMAGE_FEATURES)
    record = example.encode_example(
        {keys.ENCODED: bytes(MiB), keys.FORMAT: "png", keys.HEIGHT: 24, keys.WIDTH: 32,
         keys.CHANNELS: 3, keys.FILENAME: "zeros.png", keys.LABEL: 0,
         keys.LABEL_TEXT: "cat"}, kinds)
    return _gzip_bomb(b"", _frame(record), 2048)


# Runs verify or inspect in a fresh interpreter and reports its peak resident memory.
MEASURED = """
import json, sys
import tfrecorder_lite
command, out = sys.argv[1], sys.argv[2]
error = page = None
try:
    if command == "verify":
        tfrecorder_lite.verify(out)
    else:
        page = tfrecorder_lite.inspect(out).html
except Exception as exc:
    error = f"{type(exc).__name__}: {exc}"
# this process's own high-water mark (ru_maxrss would count the parent's, kept over exec)
with open("/proc/self/status") as f:
    peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) * 1024
print(json.dumps({"error": error, "page": page, "peak": peak}))
"""


def _measured(command, out):
    run = subprocess.run([sys.executable, "-c", MEASURED, command, str(out)], cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.splitlines()[-1])


PEAK_LIMIT = 400 * MiB  # a clean output takes about 120 MB (the interpreter, pandas, Pillow)


@pytest.mark.parametrize("forge, expected", [
    (_one_tebibyte_claim, "record 0: claims 1099511627776 bytes"),
    (_valid_records_of_zeros, "more than the 1 records metadata.json says"),
], ids=["claims-1-TiB", "2-GiB-of-valid-records"])
def test_verify_and_inspect_read_a_compression_bomb_in_bounded_memory(
        gzip_output, tmp_path, forge, expected):
    out = _copy(gzip_output, tmp_path)
    name = _replace_shard(out, forge(), num_examples=1)
    assert os.path.getsize(out / name) < 3 * MiB

    verified = _measured("verify", out)
    assert verified["error"].startswith("VerifyError") and f"{name}: {expected}" in \
        verified["error"], verified["error"]
    assert verified["peak"] < PEAK_LIMIT, verified["peak"]

    inspected = _measured("inspect", out)
    assert inspected["error"] is None, inspected["error"]
    assert inspected["peak"] < PEAK_LIMIT, inspected["peak"]
    if forge is _one_tebibyte_claim:  # the page says which shard could not be read
        assert f"{name}: record 0: claims" in inspected["page"]
    else:  # the one record metadata.json promises is shown (its zeros are no image)
        assert "cannot decode" in inspected["page"]


def test_a_record_longer_than_its_file_is_named_before_it_is_awaited(tmp_path):
    out = tmp_path / "plain"
    _table(tmp_path / "images", n=2).tfrecord.to_tfrecord(out, num_shards=1, progress=False)
    (entry,) = _metadata(out)["splits"]["TRAIN"]["shards"]
    data = (out / entry["name"]).read_bytes()
    first = struct.unpack("<Q", data[:8])[0] + 16
    length = struct.pack("<Q", 1 << 40)  # the second record claims 1 TiB
    name = _replace_shard(out, data[:first] + length + struct.pack("<I", masked_crc(length)) +
                          data[first + 12:])
    with pytest.raises(VerifyError) as error:
        tfrecorder_lite.verify(out)
    left = len(data) - first - 16
    assert f"{name}: record 1: truncated record: it claims 1099511627776 bytes" in \
        str(error.value) and f"the file has {left} bytes left for it" in str(error.value)
    with open(out / name, "rb") as f:  # any reader of the library: the file's size bounds it
        with pytest.raises(RecordError, match="record 1: truncated record"):
            list(iter_records(f))


def test_a_compressed_stream_is_inflated_a_piece_at_a_time():
    """Records come out whole however the stream expands, and none over the cap is awaited."""
    import io

    records = [bytes(3 * MiB), b"small", os.urandom(70_000)]
    stream = _gzip_bomb(b"", b"".join(map(_frame, records)), 3)
    assert list(iter_records(io.BytesIO(stream), "GZIP")) == records * 3
    length = struct.pack("<Q", MAX_COMPRESSED_RECORD_BYTES + 1)
    bomb = _gzip_bomb(length + struct.pack("<I", masked_crc(length)), bytes(MiB), 4)
    with pytest.raises(RecordError, match="record 0: claims 1073741825 bytes .* more than "
                                          "the 1073741824 bytes"):
        next(iter_records(io.BytesIO(bomb), "GZIP"))


# ================================================================ inspect: a page stays small

@pytest.fixture
def small_output(tmp_path):
    out = tmp_path / "out"
    _table(tmp_path / "images", n=6).tfrecord.to_tfrecord(out, num_shards=1, progress=False)
    return out


# Tampers metadata.json with 2 million labels (and one of 1 MiB), then inspects the folder, in
# a child: the parsed metadata takes hundreds of MB, which this test process need not keep.
TWO_MILLION_LABELS = """
import json, sys
import tfrecorder_lite
out = sys.argv[1]
path = f"{out}/metadata.json"
metadata = json.load(open(path))
labels = ["cat", "dog"] + [f"label{i:07d}" for i in range(2_000_000)] + ["x" * (1 << 20)]
metadata["labels"] = labels
metadata["splits"]["TRAIN"]["label_counts"] = dict.fromkeys(labels, 1)
json.dump(metadata, open(path, "w"))
del metadata, labels
page = tfrecorder_lite.inspect(out, num=6)
found = tfrecorder_lite.read_metadata(out)
print(json.dumps({"html": page.html, "body": len(page.body), "summary": page.summary,
                  "num_images": page.num_images, "notebook": len(found._repr_html_()),
                  "info_lines": str(found).count("\\n")}))
"""


def test_two_million_labels_in_metadata_json_give_a_small_page(small_output):
    run = subprocess.run([sys.executable, "-c", TWO_MILLION_LABELS, str(small_output)],
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.splitlines()[-1])
    page, labels = found["html"], 2 + 2_000_000 + 1
    assert len(page) < 2 * MiB and found["body"] < 2 * MiB, (len(page), found["body"])
    assert f"and {labels - report.ROWS_SHOWN} more labels" in page  # the table says so
    assert f"... and {labels - report.ROWS_SHOWN} more labels" in found["summary"]
    assert found["summary"] in page and "label0000000: 1" in found["summary"]
    assert found["num_images"] == 6
    assert found["notebook"] < 64 * 1024  # read_metadata's notebook view is small too
    assert found["info_lines"] > 2_000_000  # info lists every label: as asked


def test_inspect_caps_its_images_and_says_so(small_output, monkeypatch):
    monkeypatch.setattr(report, "MAX_IMAGES", 4)
    page = tfrecorder_lite.inspect(small_output, num=100)
    assert page.num_images == 4
    assert "the contact sheets show 4 images, not the 100 asked for" in page.html


def test_inspect_draws_no_image_larger_than_its_limit(small_output, monkeypatch):
    monkeypatch.setattr(report, "MAX_DRAWN_PIXELS", 24 * 32 - 1)
    page = tfrecorder_lite.inspect(small_output, num=2)
    assert page.num_images == 2 and "24x32 is larger than inspect draws" in page.html


def test_a_huge_file_name_in_a_record_is_clipped_on_the_page(gzip_output, tmp_path):
    out = _copy(gzip_output, tmp_path)
    record = example.encode_example(
        {keys.ENCODED: (gzip_output.parent / "images" / "img0.png").read_bytes(),
         keys.FORMAT: "png", keys.HEIGHT: 24, keys.WIDTH: 32, keys.CHANNELS: 3,
         keys.FILENAME: "f" * (8 * MiB), keys.LABEL: 0,
         keys.LABEL_TEXT: "cat"}, dict(keys.IMAGE_FEATURES))
    compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    _replace_shard(out, compressor.compress(_frame(record)) + compressor.flush(),
                   num_examples=1)
    page = tfrecorder_lite.inspect(out)
    assert page.num_images == 1 and len(page.html) < 512 * 1024
    assert "f" * (report.TEXT_SHOWN + 1) not in page.html and "f" * 100 in page.html


def test_a_hostile_rejected_csv_is_read_only_in_part(small_output):
    metadata = _metadata(small_output)
    metadata["rejected"] = 3
    _write_metadata(small_output, metadata)
    rejected = small_output / "rejected.csv"
    rejected.write_text(",".join(f"c{i}" for i in range(1000)) + "\n" +
                        ",".join("v" * 300 for _ in range(1000)) + "\n")
    page = tfrecorder_lite.inspect(small_output, num=0).html
    assert "(its first 20 of 1000 columns)" in page and "c19" in page and "c20<" not in page
    assert "v" * report.TEXT_SHOWN not in page
    rejected.write_bytes(b"row," + b"x" * (2 * MiB) + b"\n1,2\n")
    page = tfrecorder_lite.inspect(small_output, num=0).html
    assert "its first line is longer than 1.0 MB" in page and len(page) < 256 * 1024


def test_metadata_json_lists_each_shard_once_and_only_known_splits(small_output):
    metadata = _metadata(small_output)
    shards = metadata["splits"]["TRAIN"]["shards"]
    metadata["splits"]["TRAIN"]["shards"] = shards * 1000  # verify would read it 1000 times
    metadata["splits"]["TRAIN"]["num_examples"] *= 1000
    _write_metadata(small_output, metadata)
    with pytest.raises(ManifestError, match=f"{shards[0]['name']} is listed twice"):
        tfrecorder_lite.verify(small_output)
    metadata["splits"] = {"TRAIN": {**metadata["splits"]["TRAIN"], "shards": shards,
                                    "num_examples": shards[0]["num_examples"]},
                          **{f"S{i}": {"num_examples": 0, "shards": []} for i in range(3)}}
    _write_metadata(small_output, metadata)
    with pytest.raises(ManifestError, match="splits: 'S0' is not one of TRAIN, VALIDATION, "
                                            "TEST"):
        tfrecorder_lite.inspect(small_output)


# ============================================= verify: what metadata.json sums up, against records

def _verify_problems(out):
    with pytest.raises(VerifyError) as error:
        tfrecorder_lite.verify(out)
    return error.value.problems


@pytest.fixture
def two_sizes(tmp_path):
    """A real output: 3 splits, two labels, images of two sizes, one shard each."""
    out = tmp_path / "out"
    table = _table(tmp_path / "images", n=9, sizes=((24, 32), (30, 20)),
                   splits=("TRAIN", "VALIDATION", "TEST"))
    table.tfrecord.to_tfrecord(out, num_shards=1, progress=False)
    assert tfrecorder_lite.verify(out).startswith("OK")
    return out


def test_verify_compares_label_counts_with_the_records(two_sizes):
    metadata = _metadata(two_sizes)
    counts = metadata["splits"]["TRAIN"]["label_counts"]
    assert counts == {"cat": 2, "dog": 1}
    metadata["splits"]["TRAIN"]["label_counts"] = {"cat": 1, "dog": 2}
    _write_metadata(two_sizes, metadata)
    assert _verify_problems(two_sizes) == [
        "metadata.json: splits.TRAIN.label_counts (label -> records) differs from the records: "
        "'cat' 1 in metadata.json, 2 in the records; 'dog' 2 in metadata.json, 1 in the "
        "records"]


def test_verify_compares_image_sizes_with_the_records(two_sizes):
    metadata = _metadata(two_sizes)
    assert metadata["image"]["size"] is None and metadata["image"]["max_size"] == [30, 32]
    metadata["image"].update(size=[24, 32], max_size=[24, 32], channels=1)
    _write_metadata(two_sizes, metadata)
    problems = _verify_problems(two_sizes)
    assert len(problems) == 3, problems
    assert problems[0].startswith("metadata.json: image.size is 24x32, and ") and \
        problems[0].endswith(" is 30x20")
    assert problems[1] == ("metadata.json: image.max_size is 24x32, the records' largest "
                           "height and width are 30x32")
    assert problems[2] == "metadata.json: image.channels is 1, the records hold [3]"


def test_verify_compares_label_files_with_metadata_json(two_sizes):
    (two_sizes / "labels.txt").write_text("dog\ncat\n")
    assert _verify_problems(two_sizes) == [
        "labels.txt does not match metadata.json's labels"]
    (two_sizes / "labels.txt").write_text("cat\ndog\n" + "x" * (4 * MiB))  # read no further
    assert len(_verify_problems(two_sizes)) == 1
    os.remove(two_sizes / "labels.txt")
    assert _verify_problems(two_sizes) == ["labels.txt is missing"]


def test_verify_finds_label_texts_that_metadata_json_does_not_give_their_ids(two_sizes):
    metadata = _metadata(two_sizes)
    metadata["labels"] = ["dog", "cat"]  # and labels.txt agrees: only the records tell
    _write_metadata(two_sizes, metadata)
    (two_sizes / "labels.txt").write_text("dog\ncat\n")
    (two_sizes / "image.class.label.labels.txt").write_text("dog\ncat\n")
    problems = _verify_problems(two_sizes)
    assert len(problems) == 3 and all(re.search(
        r"^\w+-00000-of-00001.tfrecord: record 0: image/class/text '(cat|dog)' is not the "
        r"text of label [01] in metadata.json \('(dog|cat)'\)$", p) for p in problems), problems


def test_verify_checks_each_level_of_labels(tmp_path):
    rows = [(("TRAIN", "TEST")[i % 2], save(photo(20, 20, seed=i), tmp_path / f"{i}.png"),
             ("cat", "dog")[i % 2], ("pet", "wild", "pet")[i % 3]) for i in range(6)]
    table = pd.DataFrame(rows, columns=["split", "image_uri", "species", "kind"])
    out = tmp_path / "out"
    table.tfrecord.to_tfrecord(out, label_col=["species", "kind"], progress=False)
    assert tfrecorder_lite.verify(out).startswith("OK")
    metadata = _metadata(out)
    metadata["splits"]["TEST"]["label_counts"]["kind"] = {"pet": 3}
    _write_metadata(out, metadata)
    (out / "labels-kind.txt").write_text("wild\npet\n")
    problems = _verify_problems(out)
    assert problems[0].startswith("metadata.json: splits.TEST.label_counts (label -> records) "
                                  "differs from the records: 'kind: pet' 3 in metadata.json, "
                                  "2 in the records; 'kind: wild' 0 in metadata.json, 1 in "
                                  "the records"), problems
    assert problems[1:] == ["labels-kind.txt does not match metadata.json's labels"]


def test_verify_counts_boxes_per_label_in_a_detection_output(tmp_path):
    images = [save(photo(40, 60, seed=i), tmp_path / f"{i}.jpg") for i in range(3)]
    table = pd.DataFrame(
        [("TRAIN", images[0], "car", .1, .1, .5, .5), ("TRAIN", images[0], "car", .2, .2, .6, .6),
         ("TRAIN", images[0], "person", .0, .0, .3, .3), ("TRAIN", images[1], "person", .1, .1, .9, .9),
         ("TEST", images[2], "car", .1, .2, .3, .4)],
        columns=["split", "image_uri", "label", "xmin", "ymin", "xmax", "ymax"])
    out = tmp_path / "out"
    table.tfrecord.to_tfrecord(out, progress=False)
    assert (out / "labels.txt").read_text() == "\ncar\nperson\n"  # line 0: the background
    assert tfrecorder_lite.verify(out).startswith("OK")
    metadata = _metadata(out)
    assert metadata["splits"]["TRAIN"]["label_counts"] == {"car": 2, "person": 2}  # boxes
    metadata["splits"]["TRAIN"]["label_counts"] = {"car": 1, "person": 2}  # records of car
    _write_metadata(out, metadata)
    (out / "label_map.pbtxt").write_text("item {\n  id: 1\n  name: 'truck'\n}\n")
    assert _verify_problems(out) == [
        "metadata.json: splits.TRAIN.label_counts (label -> boxes) differs from the records: "
        "'car' 1 in metadata.json, 2 in the records",
        "label_map.pbtxt does not match metadata.json's labels"]


def test_a_verify_error_message_stays_short_with_many_problems(tmp_path, monkeypatch):
    out = tmp_path / "out"
    _table(tmp_path / "images", n=6).tfrecord.to_tfrecord(out, num_shards=6, progress=False)
    for shard in _metadata(out)["splits"]["TRAIN"]["shards"]:
        os.remove(out / shard["name"])
    monkeypatch.setattr(verification, "_PROBLEMS_SHOWN", 2)
    with pytest.raises(VerifyError) as error:
        tfrecorder_lite.verify(out)
    assert len(error.value.problems) == 6
    assert str(error.value).count("shard file is missing") == 2
    assert "... and 4 more (exc.problems lists them all)" in str(error.value)


# ====================================================================== an empty table

def test_an_empty_table_is_refused_before_anything_is_written(tmp_path):
    empty = pd.DataFrame({"split": [], "image_uri": [], "label": []})
    out = tmp_path / "out"
    with pytest.raises(SchemaError, match="the table has no rows: there is nothing to convert"):
        empty.tfrecord.to_tfrecord(out, progress=False)
    assert not out.exists()
    csv = tmp_path / "empty.csv"
    csv.write_text("split,image_uri,label\n")
    run = subprocess.run([sys.executable, "-m", "tfrecorder_lite.cli", "convert", str(csv),
                          str(out), "--no-progress"], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert "the table has no rows" in run.stderr and not out.exists()


def test_a_table_whose_every_row_is_rejected_is_refused_naming_them(tmp_path):
    path = save(photo(10, 10), tmp_path / "a.png")
    table = pd.DataFrame({"split": ["", "TRIAN"], "image_uri": [path, path],
                          "label": ["a", "b"]}, index=["first", "second"])
    out = tmp_path / "out"
    with pytest.raises(SchemaError) as error:
        table.tfrecord.to_tfrecord(out, on_error="skip", progress=False)
    assert str(error.value).startswith("none of the table's 2 rows can be written (row "
                                       "'first': empty split; row 'second': unknown split "
                                       "'TRIAN'")
    assert not out.exists()
