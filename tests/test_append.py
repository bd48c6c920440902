"""to_tfrecord(append=True): a new generation beside the earlier ones, and readers that know
generations."""

import hashlib
import json
import os
import shutil
import sys
import textwrap

import google_crc32c
import numpy as np
import pandas as pd
import pytest

import tensorflow as tf
import tfrecorder_lite
from tfrecorder_lite.near_duplicates.perceptual_hash import CROPS
from tfrecorder_lite.output import layout
from tfrecorder_lite.output.manifest import read_manifest, split_shards

from imagegen import rich_photo
from processes import TESTS, kill_when


def _table(root, n=16, labels=("cat", "dog", "bird")):
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        path = root / f"img{i}.jpg"
        rich_photo(200 + 8 * i, 240, seed=100 + i).save(path, quality=90)
        rows.append(("TRAIN" if i % 4 else "TEST", str(path), labels[i % len(labels)]))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"])


def _files(folder):
    return {name: (folder / name).read_bytes() for name in os.listdir(folder)}


def _records(out, generation=None):
    """(split, image bytes, label text) of every record load() gives."""
    found = []
    for split, dataset in tfrecorder_lite.load(out, as_supervised=False,
                                               generation=generation).items():
        for example in dataset:
            found.append((split, example["image/encoded"].numpy(),
                          example["image/class/text"].numpy().decode()))
    return sorted(found)


def test_an_append_holds_both_tables_once_and_changes_no_earlier_file(tmp_path):
    df = _table(tmp_path / "images")
    a, b = df.iloc[:10], df.iloc[6:].assign(label=lambda d: d.label.where(d.index < 12,
                                                                          "fish"))
    out = tmp_path / "out"
    first = a.tfrecord.to_tfrecord(out, progress=False, num_shards=1)
    before = _files(out)
    result = b.tfrecord.to_tfrecord(out, progress=False, num_shards=1, append=True)
    assert result.skipped == 4 and result.rejected.empty
    assert result.counts == {"TRAIN": 5, "TEST": 1}
    after = _files(out)
    changed = {name for name in before if after[name] != before[name]}
    # labels.txt grew by "fish", and so did tfds' names of the labels and its features.json;
    # tfds' splits now list generation 1
    assert changed == {layout.METADATA, layout.LABELS, layout.TFDS_LABEL_NAMES,
                       layout.TFDS_FEATURES, layout.DATASET_INFO}
    assert after[layout.LABELS] == before[layout.LABELS] + b"fish\n"  # earlier ids kept
    assert {n for n in after if n not in before} == {
        "train-g0001-00000-of-00001.tfrecord", "train-g0001-00000-of-00001.tfindex",
        "test-g0001-00000-of-00001.tfrecord", "test-g0001-00000-of-00001.tfindex",
        layout.hashes_name(1)}
    assert tfrecorder_lite.verify(out).startswith("OK")
    # every image once: the output is A and B
    union = _records(out)
    assert len(union) == len(df) == len({image for _, image, _ in union})
    metadata = json.loads((out / layout.METADATA).read_text())
    assert [g["generation"] for g in metadata["generations"]] == [0, 1]
    assert metadata["generations"][1]["skipped"] == 4
    assert metadata["splits"]["TRAIN"]["num_examples"] == 12
    shards = metadata["splits"]["TRAIN"]["shards"]
    assert [s.get("generation", 0) for s in shards] == [0, 1]  # earlier generations first
    manifest, _ = read_manifest(out)
    assert [s.name for s in split_shards(manifest, "TRAIN", 0)] == \
        [s["name"] for s in first.metadata["splits"]["TRAIN"]["shards"]]
    summary = str(tfrecorder_lite.read_metadata(out))
    assert "2 generations: 0: TRAIN 7, TEST 3; 1: TRAIN 5, TEST 1 (4 already there)" in summary
    assert "TRAIN: 12 examples in 2 shard(s)" in summary


def test_appending_the_whole_table_again_plans_only_the_rows_not_there(tmp_path):
    df = _table(tmp_path / "images", n=12)
    out = tmp_path / "out"
    df.iloc[:8].tfrecord.to_tfrecord(out, progress=False)
    first = _records(out)
    rich_photo(260, 240, seed=999).save(df.image_uri[1], quality=90)  # new content, same path
    result = df.tfrecord.to_tfrecord(out, progress=False, num_shards={"TRAIN": 5},
                                     append=True)
    # rows 0 and 2 to 7 are there already: left out before the shards are planned, so the 4
    # TRAIN rows to write (the edited file's, 9, 10, 11) make 4 shards, not 5 with 6 rows
    # skipped after writing
    assert result.skipped == 7 and result.counts == {"TRAIN": 4, "TEST": 1}
    shards = sorted(out.glob("train-g0001-*.tfrecord"))
    assert [s.name for s in shards] == [f"train-g0001-0000{i}-of-00004.tfrecord"
                                        for i in range(4)]
    assert all(sum(1 for _ in tf.data.TFRecordDataset(str(s))) == 1 for s in shards)
    both = _records(out)
    assert len(both) == 13 and set(first) <= set(both)  # the edited file's old image stays
    assert _records(out, generation=0) == first and tfrecorder_lite.verify(out).startswith("OK")


def test_load_of_generation_0_gives_the_first_table_exactly(tmp_path):
    df = _table(tmp_path / "images", n=12)
    a, b = df.iloc[:8], df.iloc[8:]
    out = tmp_path / "out"
    a.tfrecord.to_tfrecord(out, progress=False)
    alone = _records(out)
    b.tfrecord.to_tfrecord(out, progress=False, append=True)
    assert _records(out, generation=0) == alone
    assert len(_records(out, generation=1)) == 12
    with pytest.raises(tfrecorder_lite.ManifestError, match="generation must be 0 to 1"):
        tfrecorder_lite.load(out, "TRAIN", generation=2)


def test_a_changed_label_or_split_is_rejected_naming_both(tmp_path):
    df = _table(tmp_path / "images", n=6)
    out = tmp_path / "out"
    df.tfrecord.to_tfrecord(out, progress=False)
    changed = df.iloc[[1, 2]].copy()
    changed.loc[1, "label"] = "horse"       # TRAIN row 1 was "dog"
    changed.loc[2, "split"] = "TEST"        # row 2 was in TRAIN
    with pytest.raises(tfrecorder_lite.InvalidRowError, match="label changed from 'dog' to "
                                                              "'horse'"):
        changed.tfrecord.to_tfrecord(out, progress=False, append=True)
    result = changed.tfrecord.to_tfrecord(out, progress=False, append=True, on_error="skip")
    reasons = result.rejected.reason.to_dict()
    assert reasons[1].startswith("label changed from 'dog' to 'horse': the same image as "
                                 f"row '1' ({df.image_uri[1]}) of generation 0")
    assert reasons[2].startswith("already in TRAIN: the same image as row '2'")
    assert tfrecorder_lite.verify(out).startswith("OK")


def test_labels_a_spreadsheet_would_run_are_compared_as_the_table_has_them(tmp_path):
    # the hashes file keeps "+ve" as "'+ve" (spreadsheet-safe); the table's "+ve" is the same
    # label, and a table's "'+ve" is another
    labels = ("+ve", "-ve", "=x", "@y", "cat")
    df = _table(tmp_path / "images", n=10, labels=labels)
    out = tmp_path / "out"
    df.tfrecord.to_tfrecord(out, progress=False)
    assert "'+ve" in (out / layout.hashes_name(0)).read_text()
    result = df.tfrecord.to_tfrecord(out, progress=False, append=True)
    assert result.skipped == 10 and result.counts == {} and result.rejected.empty
    quoted = df.iloc[[0, 1]].assign(label=["'+ve", "-ve"])
    result = quoted.tfrecord.to_tfrecord(out, progress=False, append=True, on_error="skip")
    assert result.skipped == 1
    assert result.rejected.reason[0].startswith(
        "label changed from '+ve' to \"'+ve\": the same image as row '0'")
    assert tfrecorder_lite.verify(out).startswith("OK")


def test_an_append_with_nothing_new_changes_no_file(tmp_path):
    df = _table(tmp_path / "images", n=8)
    out = tmp_path / "out"
    df.tfrecord.to_tfrecord(out, progress=False)
    before = _files(out)
    result = df.iloc[2:].tfrecord.to_tfrecord(out, progress=False, append=True)
    assert result.skipped == 6 and result.counts == {}
    assert _files(out) == before


@pytest.mark.parametrize("options, message", [
    ({"compression": "GZIP"}, "compression must be the output's"),
    ({"image_size": 32}, "the output's records were written with size None"),
    ({"check": "header"}, "check 'decode' \\(asked: 'header'\\)"),
    ({"overwrite": True}, "choose one"),
])
def test_options_that_change_records_must_be_the_outputs(tmp_path, options, message):
    df = _table(tmp_path / "images", n=6)
    out = tmp_path / "out"
    df.iloc[:3].tfrecord.to_tfrecord(out, progress=False)
    before = _files(out)
    with pytest.raises(tfrecorder_lite.SchemaError, match=message):
        df.iloc[3:].tfrecord.to_tfrecord(out, progress=False, append=True, **options)
    assert _files(out) == before


def test_append_needs_a_finished_output_with_hashes(tmp_path):
    df = _table(tmp_path / "images", n=4)
    with pytest.raises(tfrecorder_lite.ManifestError, match="not found"):
        df.tfrecord.to_tfrecord(tmp_path / "none", progress=False, append=True)
    df.iloc[:2].tfrecord.to_tfrecord(tmp_path / "plain", progress=False, leakage="ignore")
    with pytest.raises(tfrecorder_lite.SchemaError, match="keeps no hashes of its images"):
        df.iloc[2:].tfrecord.to_tfrecord(tmp_path / "plain", progress=False, append=True)


def test_an_append_that_would_not_hash_is_refused_before_anything_is_written(tmp_path):
    df = _table(tmp_path / "images", n=8)
    out = tmp_path / "out"
    df.iloc[:5].tfrecord.to_tfrecord(out, progress=False)
    before = _files(out)
    with pytest.raises(tfrecorder_lite.SchemaError, match="leakage='ignore' cannot append"):
        df.iloc[5:].tfrecord.to_tfrecord(out, progress=False, append=True, leakage="ignore")
    assert _files(out) == before
    # appends hash their images, so the same rows appended twice are written once
    first = df.iloc[5:].tfrecord.to_tfrecord(out, progress=False, append=True)
    again = df.iloc[5:].tfrecord.to_tfrecord(out, progress=False, append=True)
    assert sum(first.counts.values()) == 3 and again.skipped == 3 and not again.counts
    assert len(_records(out)) == len(df)


@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_a_missing_or_cut_hashes_file_refuses_an_append_before_anything_is_written(
        tmp_path, damage):
    df = _table(tmp_path / "images", n=8)
    out = tmp_path / "out"
    df.iloc[:5].tfrecord.to_tfrecord(out, progress=False)
    hashes = out / layout.hashes_name(0)
    if damage == "deleted":
        hashes.unlink()
    else:
        hashes.write_bytes(hashes.read_bytes()[:-40])
    before = _files(out)
    message = "missing. metadata.json lists it" if damage == "deleted" else \
        r"not the file this output wrote \(\d+ bytes; metadata.json records \d+ bytes\)"
    with pytest.raises(tfrecorder_lite.ManifestError,
                       match=rf"{layout.hashes_name(0)}: {message}.*convert the whole table"):
        df.iloc[5:].tfrecord.to_tfrecord(out, progress=False, append=True)
    assert _files(out) == before  # not a file written, not a state folder left
    with pytest.raises(tfrecorder_lite.VerifyError, match=layout.hashes_name(0)):
        tfrecorder_lite.verify(out)


def test_an_edited_hashes_file_is_refused_by_append_and_verify(tmp_path):
    df = _table(tmp_path / "images", n=8)
    out = tmp_path / "out"
    df.iloc[:5].tfrecord.to_tfrecord(out, progress=False)
    hashes = out / layout.hashes_name(0)
    recorded = json.loads((out / layout.METADATA).read_text())["near_duplicates"]["checksums"]
    data = hashes.read_bytes()
    assert recorded == {layout.hashes_name(0): {
        "bytes": len(data), "crc32c": f"{google_crc32c.value(data):08x}"}}
    # the same size: row 0 moved from TEST to TRAIN and relabelled, as by hand
    edited = data.replace(b",TEST,", b",TRAI,", 1)
    assert edited != data and len(edited) == len(data)
    hashes.write_bytes(edited)
    with pytest.raises(tfrecorder_lite.ManifestError,
                       match=r"not the file this output wrote \(\d+ bytes, CRC32C [0-9a-f]{8}; "
                             r"metadata.json records \d+ bytes, CRC32C [0-9a-f]{8}\): edited"):
        df.iloc[5:].tfrecord.to_tfrecord(out, progress=False, append=True)
    with pytest.raises(tfrecorder_lite.VerifyError, match="edited or damaged"):
        tfrecorder_lite.verify(out)
    digest = data.split(b"\n")[1].split(b",")[3]
    # edited so that it is no hashes file either: the checksums say what happened
    hashes.write_bytes(data.replace(digest, b"z" + digest[1:]))
    with pytest.raises(tfrecorder_lite.ManifestError, match="edited or damaged"):
        df.iloc[5:].tfrecord.to_tfrecord(out, progress=False, append=True)
    hashes.write_bytes(data)  # restored: the append (resumed) finishes and verifies
    result = df.iloc[5:].tfrecord.to_tfrecord(out, progress=False, append=True)
    assert sum(result.counts.values()) == 3
    checksums = json.loads((out / layout.METADATA).read_text())["near_duplicates"]["checksums"]
    assert sorted(checksums) == [layout.hashes_name(0), layout.hashes_name(1)]
    assert tfrecorder_lite.verify(out).startswith("OK")


def test_hashes_files_of_outputs_without_their_checksums_are_read_and_counted(tmp_path):
    df = _table(tmp_path / "images", n=8)
    out = tmp_path / "out"
    df.iloc[:5].tfrecord.to_tfrecord(out, progress=False)
    metadata = json.loads((out / layout.METADATA).read_text())
    del metadata["near_duplicates"]["checksums"]  # as written before they were recorded
    (out / layout.METADATA).write_text(json.dumps(metadata))
    assert tfrecorder_lite.verify(out).startswith("OK")
    hashes = out / layout.hashes_name(0)
    data = hashes.read_bytes()
    hashes.write_bytes(data[:data.rindex(b"\n", 0, -1) + 1])  # its last row gone
    with pytest.raises(tfrecorder_lite.VerifyError,
                       match=rf"{layout.hashes_name(0)}: lists 4 images, and generation 0's "
                             "shards hold 5 records"):
        tfrecorder_lite.verify(out)
    hashes.write_text("not,a,hashes,file\n1,2,3,4\n")
    with pytest.raises(tfrecorder_lite.ManifestError,
                       match="not a hashes file .its columns are not, a, hashes, file"):
        df.iloc[5:].tfrecord.to_tfrecord(out, progress=False, append=True)
    rows = data.decode().split("\n")
    metadata_before = (out / layout.METADATA).read_bytes()
    digest, phash = rows[1].split(",")[3], rows[1].split(",")[5]
    for edited, why in (((digest, digest[:-1]), "a content hash .xxh3_128. that is not 32 "
                                                "hex digits"),
                        ((phash, "z" + phash[1:]), "a hash that is not hex digits"),
                        ((phash, phash + "00"), "perceptual hashes of unequal lengths")):
        hashes.write_text("\n".join([rows[0], rows[1].replace(*edited), *rows[2:]]))
        with pytest.raises(tfrecorder_lite.ManifestError,
                           match=rf"{layout.hashes_name(0)}: not a hashes file \({why}\)"):
            df.iloc[5:].tfrecord.to_tfrecord(out, progress=False, append=True)
        assert (out / layout.METADATA).read_bytes() == metadata_before
    hashes.write_bytes(data)
    result = df.iloc[5:].tfrecord.to_tfrecord(out, progress=False, append=True)
    assert sum(result.counts.values()) == 3 and tfrecorder_lite.verify(out).startswith("OK")


def test_the_earlier_images_are_the_hashes_files_rows_whatever_the_chunk(tmp_path):
    from tfrecorder_lite.near_duplicates.hashes_file import read_hashes_file, read_written_images
    from tfrecorder_lite.storage import Store

    df = _table(tmp_path / "images", n=9)
    for i, name in ((1, 'a,b "c".jpg'), (2, "ü\nx.jpg")):  # quoted and cut in the CSV
        renamed = tmp_path / "images" / name
        os.rename(df.image_uri[i], renamed)
        df.loc[i, "image_uri"] = str(renamed)
    df.index = [f"r{i}" for i in range(9)]
    out = tmp_path / "out"
    df.iloc[:5].tfrecord.to_tfrecord(out, progress=False)
    df.iloc[5:].tfrecord.to_tfrecord(out, progress=False, append=True)
    store, near = Store(str(out)), read_manifest(str(out))[0].near_duplicates
    want = []
    for name in near["hashes"]:
        frame = read_hashes_file(store, name, hashed_by=near["content_hash"])
        want += [(layout.hashes_generation(name), r.row, r.split, r.image_uri, r.xxh3_128,
                  r.label, r.phash + r.crops) for r in frame.itertuples()]
    assert len(want) == 9 and {w[3] for w in want} == set(df.image_uri)
    for chunk in (1 << 16, 2):
        images = read_written_images(store, near, chunk=chunk)
        assert [tuple(images.image(i)) + ("".join(f"{h:016x}" for h in images.perceptual[i]),)
                for i in range(len(images))] == want
        groups = images.split_groups(np.arange(9), ["VALIDATION", "TEST", "NEW", "NEW"])
        splits = [w[2] for w in want] + ["VALIDATION", "TEST", "NEW", "NEW"]
        assert len(groups) == 13 and all(  # a code a split, the same for the names after
            (groups[a] == groups[b]) == (splits[a] == splits[b])
            for a in range(13) for b in range(13))
        assert images.holding([want[7][4], want[2][4]]).tolist() == [2, 7]
        assert images.hashed.all()
    hashes = out / layout.hashes_name(0)  # a row without hashes (an image that did not
    lines = hashes.read_text().split("\n")  # decode), alone in its chunk
    cells = lines[2].split(",")
    lines[2] = ",".join(cells[:-2] + ["", ""])
    hashes.write_text("\n".join(lines))
    images = read_written_images(store, {"hashes": near["hashes"],
                                         "content_hash": near["content_hash"]}, chunk=1)
    assert images.hashed.tolist() == [True] + [False] + [True] * 7
    assert images.perceptual.shape == (9, 1 + len(CROPS)) and not images.perceptual[1].any()
    assert [images.image(i).digest for i in range(9)] == [w[4] for w in want]


def test_a_near_duplicate_of_an_earlier_generation_is_found(tmp_path):
    from PIL import Image

    df = _table(tmp_path / "images", n=6)
    out = tmp_path / "out"
    df.tfrecord.to_tfrecord(out, progress=False)
    copy = tmp_path / "images" / "copy.png"
    Image.open(df.image_uri[0]).save(copy)  # row 0 is in TEST
    new = pd.DataFrame([("TRAIN", str(copy), "cat")], columns=df.columns)
    result = new.tfrecord.to_tfrecord(out, progress=False, append=True)
    assert result.problems.problem[0].startswith(
        f"near-duplicate across splits: looks like row '0' ({df.image_uri[0]}, TEST, "
        "generation 0)")
    pairs = pd.read_csv(out / layout.near_duplicates_name(1))
    assert pairs.other_row.tolist() == [0]


def test_hashes_of_an_earlier_hash_version_are_still_compared_and_the_user_is_told(
        tmp_path, caplog):
    from PIL import Image

    df = _table(tmp_path / "images", n=6)
    out = tmp_path / "out"
    df.tfrecord.to_tfrecord(out, progress=False)
    metadata = json.loads((out / layout.METADATA).read_text())
    metadata["near_duplicates"]["hash"] = "64-bit DCT perceptual hash of the luminance"
    (out / layout.METADATA).write_text(json.dumps(metadata))  # as an earlier version wrote it
    copy = tmp_path / "images" / "copy.png"
    Image.open(df.image_uri[0]).save(copy)
    new = pd.DataFrame([("TRAIN", str(copy), "cat")], columns=df.columns)
    with caplog.at_level("WARNING", logger="tfrecorder_lite"):
        result = new.tfrecord.to_tfrecord(out, progress=False, append=True)
    assert "hashed by another version (64-bit DCT perceptual hash of the luminance)" in \
        caplog.text
    assert result.problems.problem[0].startswith(
        "near-duplicate across splits: looks like row '0'")
    kept = json.loads((out / layout.METADATA).read_text())["near_duplicates"]["hash"]
    assert kept == "64-bit DCT perceptual hash of the luminance"  # the earlier generations'
    caplog.clear()  # an output this version hashed: no word of versions
    df.tfrecord.to_tfrecord(tmp_path / "fresh", progress=False)
    with caplog.at_level("WARNING", logger="tfrecorder_lite"):
        again = new.tfrecord.to_tfrecord(tmp_path / "fresh", progress=False, append=True)
    assert len(again.problems) == 1 and "another version" not in caplog.text


def _as_sha256_output(out, df):
    """Turn the output in ``out`` (converted from ``df``) into one an earlier version wrote:
    its hashes file keeping each file's SHA-256, and metadata.json naming no content hash."""
    hashes = out / layout.hashes_name(0)
    frame = pd.read_csv(hashes, dtype=str, keep_default_na=False)
    frame["xxh3_128"] = [hashlib.sha256(open(df.image_uri[int(row)], "rb").read()).hexdigest()
                         for row in frame.row]
    frame.rename(columns={"xxh3_128": "sha256"}).to_csv(hashes, index=False)
    data = hashes.read_bytes()
    metadata = json.loads((out / layout.METADATA).read_text())
    near = metadata["near_duplicates"]
    del near["content_hash"]
    near["checksums"][layout.hashes_name(0)] = {
        "bytes": len(data), "crc32c": f"{google_crc32c.value(data):08x}"}
    (out / layout.METADATA).write_text(json.dumps(metadata))


def test_an_output_whose_hashes_files_keep_sha256_is_appended_to_by_sha256(tmp_path, caplog):
    from PIL import Image

    df = _table(tmp_path / "images", n=10)
    out = tmp_path / "out"
    df.iloc[:6].tfrecord.to_tfrecord(out, progress=False)
    _as_sha256_output(out, df)
    assert tfrecorder_lite.verify(out).startswith("OK")
    copy = tmp_path / "images" / "copy-of-2.jpg"  # the same bytes under another name
    shutil.copyfile(df.image_uri[2], copy)
    look = tmp_path / "images" / "look-of-0.png"  # row 0 (TEST) saved again as a PNG
    Image.open(df.image_uri[0]).save(look)
    new = pd.concat([df.iloc[4:], pd.DataFrame([("TEST", str(copy), df.label[2]),
                                                ("TRAIN", str(look), df.label[0])],
                                               columns=df.columns, index=[10, 11])])
    with caplog.at_level("WARNING", logger="tfrecorder_lite"):
        result = new.tfrecord.to_tfrecord(out, progress=False, append=True, on_error="skip")
    # rows 4 and 5 are there (found by their files' SHA-256, before writing); the copy is
    # found by its bytes' SHA-256 after writing
    assert result.skipped == 2 and result.counts == {"TRAIN": 4, "TEST": 1}
    assert result.rejected.reason[10].startswith("already in TRAIN: the same image as row '2'")
    # the PNG's pair is confirmed by reading row 0's file, whose SHA-256 is checked first
    assert result.problems.row.tolist() == [11] and "unconfirmed" not in caplog.text
    near = json.loads((out / layout.METADATA).read_text())["near_duplicates"]
    assert "content_hash" not in near and near["hashes"] == [layout.hashes_name(g)
                                                             for g in (0, 1)]
    second = pd.read_csv(out / layout.hashes_name(1))
    assert list(second.columns)[3] == "sha256" and sorted(second.row) == [6, 7, 8, 9, 11]
    files = {**df.image_uri.to_dict(), 11: str(look)}
    for row in second.itertuples():
        assert row.sha256 == hashlib.sha256(open(files[row.row], "rb").read()).hexdigest()
    assert tfrecorder_lite.verify(out).startswith("OK")
    assert len(_records(out)) == 11


# A real append that stops for good before committing the shard that follows its first
# argv[4] shard commits, once it has written the file argv[3] (then it is killed).
APPEND_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[5])
    import pandas as pd
    from processes import stop_before_shard_commit
    import tfrecorder_lite
    stop_before_shard_commit(sys.argv[3], after=int(sys.argv[4]))
    tfrecorder_lite.to_tfrecord(pd.read_csv(sys.argv[1]), sys.argv[2], append=True,
                                num_shards=3, n_jobs=1, progress=False)
""")


def test_a_killed_append_leaves_the_output_readable_and_a_rerun_finishes_it(tmp_path):
    df = _table(tmp_path / "images", n=20)
    a, b = df.iloc[:8], df.iloc[4:]  # B repeats 4 of A's rows: left out before writing
    b.to_csv(tmp_path / "b.csv", index=False)
    script = tmp_path / "append.py"
    script.write_text(APPEND_SCRIPT)
    out, reference = tmp_path / "out", tmp_path / "reference"
    for folder in (out, reference):
        a.tfrecord.to_tfrecord(folder, progress=False, num_shards=3)
    before = _files(out)
    killed = kill_when([sys.executable, str(script), str(tmp_path / "b.csv"), str(out),
                        str(tmp_path / "gate"), "1", TESTS],
                       lambda: os.path.exists(tmp_path / "gate"))
    assert killed, "the append ended before it reached the gate"
    # the earlier generation is untouched and still reads as it was
    assert all((out / name).read_bytes() == data for name, data in before.items())
    assert tfrecorder_lite.verify(out).startswith("OK")
    assert any(n.startswith(("train-g0001", "test-g0001")) for n in os.listdir(out))
    # the re-run finishes it: the same files, byte for byte, as an uninterrupted append
    result = pd.read_csv(tmp_path / "b.csv").tfrecord.to_tfrecord(
        out, progress=False, append=True, num_shards=3, n_jobs=1)
    pd.read_csv(tmp_path / "b.csv").tfrecord.to_tfrecord(reference, progress=False,
                                                         append=True, num_shards=3, n_jobs=1)
    assert result.skipped == 4 and sum(result.counts.values()) == 12
    assert _files(out) == _files(reference)
    assert tfrecorder_lite.verify(out).startswith("OK")


def test_a_killed_run_of_a_version_hashing_by_sha256_is_finished_with_one_hash(tmp_path):
    # a conversion killed after its first shard, as a version that hashed files by SHA-256
    # left it (its receipts keep SHA-256 digests): the re-run writes that shard again, and
    # the output is the uninterrupted one's
    df = _table(tmp_path / "images", n=12)
    df.to_csv(tmp_path / "table.csv", index=False)
    script = tmp_path / "convert.py"
    script.write_text(APPEND_SCRIPT.replace("append=True", "append=False"))
    out, reference = tmp_path / "out", tmp_path / "reference"
    killed = kill_when([sys.executable, str(script), str(tmp_path / "table.csv"), str(out),
                        str(tmp_path / "gate"), "1", TESTS],
                       lambda: os.path.exists(tmp_path / "gate"))
    assert killed, "the conversion ended before it reached the gate"
    state = out / layout.STATE_DIR
    receipts = [p for p in state.glob("*.json") if p.name != layout.JOB]
    assert len(receipts) == 1
    for path in receipts:
        receipt = json.loads(path.read_text())
        for entry in receipt["hashes"]:
            entry[1] = hashlib.sha256(open(df.image_uri[entry[0]], "rb").read()).hexdigest()
        path.write_text(json.dumps(receipt))
    table = pd.read_csv(tmp_path / "table.csv")
    table.tfrecord.to_tfrecord(out, progress=False, num_shards=3, n_jobs=1)
    table.tfrecord.to_tfrecord(reference, progress=False, num_shards=3, n_jobs=1)
    assert _files(out) == _files(reference)
    assert tfrecorder_lite.verify(out).startswith("OK")


def test_an_append_to_an_output_on_s3(s3, tmp_path):
    df = _table(tmp_path / "images", n=10)
    out = s3.new_bucket() + "/out"
    df.iloc[:6].tfrecord.to_tfrecord(out, progress=False)
    first = {name: s3.fs.cat_file(f"{out}/{name}") for name in
             (p.rsplit("/", 1)[1] for p in s3.fs.ls(out, detail=False))}
    result = df.iloc[4:].tfrecord.to_tfrecord(out, progress=False, append=True)
    assert result.skipped == 2 and sum(result.counts.values()) == 4
    for name, data in first.items():
        if name not in (layout.METADATA, layout.DATASET_INFO):  # these list generation 1
            assert s3.fs.cat_file(f"{out}/{name}") == data, name
    assert tfrecorder_lite.verify(out).startswith("OK")
    manifest, _ = read_manifest(out)
    assert sum(s.num_examples for split in manifest.splits
               for s in split_shards(manifest, split, 0)) == 6
    assert sum(e.num_examples for e in manifest.splits.values()) == 10


def test_data_source_and_load_by_index_read_every_generation_or_the_one_asked(tmp_path):
    df = _table(tmp_path / "images", n=12)
    out = tmp_path / "out"
    df.iloc[:8].tfrecord.to_tfrecord(out, progress=False)
    df.iloc[8:].tfrecord.to_tfrecord(out, progress=False, append=True)
    whole = tfrecorder_lite.data_source(out, "TRAIN")
    first = tfrecorder_lite.data_source(out, "TRAIN", generation=0)
    assert len(whole) == 9 and len(first) == 6
    # generation 0's records come first, in the same order, in both
    assert [first[i]["image/encoded"] for i in range(6)] == \
        [whole[i]["image/encoded"] for i in range(6)]
    by_index = tfrecorder_lite.load(out, "TRAIN", as_supervised=False, shuffle="global", seed=1,
                                   generation=0)
    assert sorted(e["image/encoded"].numpy() for e in by_index) == \
        sorted(first[i]["image/encoded"] for i in range(6))


def test_tfds_reads_every_generation_by_its_split_and_refuses_a_partial_train(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    df = _table(tmp_path / "images", n=16)
    a = df.iloc[:10]
    # B: A's TRAIN images again under other names (known only once written, then skipped)
    # and new rows, one with a new label, over 3 TRAIN shards: most of generation 1's TRAIN
    # shards hold nothing new, and stay numbered
    new = df.loc[[11, 12, 14]].assign(label=["cat", "cat", "fish"])  # 12 is in TEST
    again = a[a.split == "TRAIN"].copy()
    for i, path in again.image_uri.items():
        again.loc[i, "image_uri"] = str(tmp_path / "images" / f"copy{i}.jpg")
        shutil.copyfile(path, again.image_uri[i])
    b = pd.concat([again, new])
    out = tmp_path / "out"
    a.tfrecord.to_tfrecord(out, progress=False, num_shards={"TRAIN": 3})
    first = _records(out)
    b.tfrecord.to_tfrecord(out, progress=False, num_shards={"TRAIN": 3}, append=True)
    builder = tfds.builder_from_directory(str(out))
    splits = builder.info.splits
    assert list(splits) == ["train-g0000", "train-g0001", "test-g0000", "test-g0001"]
    assert [splits[name].num_shards for name in splits] == [3, 3, 1, 1]
    assert builder.info.features["image/class/label"].names == \
        ["bird", "cat", "dog", "fish"]

    def read(split):
        return sorted((split_name, bytes(e["image/encoded"]),
                       e["image/class/text"].decode())
                      for split_name, name in split
                      for e in tfds.as_numpy(builder.as_dataset(
                          split=name, decoders={"image/encoded": tfds.decode.SkipDecoding()})))

    both = read([("TRAIN", "train-g0000+train-g0001"), ("TEST", "test-g0000+test-g0001")])
    assert both == _records(out) and len(both) == 13  # A and B, each image once
    assert read([("TRAIN", "train-g0000"), ("TEST", "test-g0000")]) == first
    with pytest.raises(ValueError, match="train-g0000"):  # never A alone under "train"
        builder.as_dataset(split="train")
    assert tfrecorder_lite.verify(out).startswith("OK")
    source = tfrecorder_lite.data_source(out, "TRAIN")  # an empty shard reads as none
    assert sorted(source[i]["image/encoded"] for i in range(len(source))) == \
        sorted(image for split, image, _ in both if split == "TRAIN")


def test_verify_info_and_inspect_see_every_generation_or_the_output_as_it_was(tmp_path):
    from tfrecorder_lite import cli

    df = _table(tmp_path / "images", n=16)
    out = tmp_path / "out"
    df.iloc[:8].tfrecord.to_tfrecord(out, progress=False)
    before = json.loads((out / layout.METADATA).read_text())
    summary = str(tfrecorder_lite.read_metadata(out))
    report = tfrecorder_lite.inspect(out, num=100)
    b = df.iloc[8:].assign(label=lambda d: d.label.where(d.index < 12, "fish"))
    b.loc[9, "image_uri"] = str(tmp_path / "missing.jpg")
    result = b.tfrecord.to_tfrecord(out, progress=False, append=True, on_error="skip")
    assert sum(result.counts.values()) == 7 and len(result.rejected) == 1
    # as it was after generation 0: metadata, summary, report and verify as before the append
    assert tfrecorder_lite.read_metadata(out, generation=0) == before
    assert str(tfrecorder_lite.read_metadata(out, generation=0)) == summary
    then = tfrecorder_lite.inspect(out, num=100, generation=0)
    assert then.summary == report.summary and then.num_images == report.num_images == 8
    assert tfrecorder_lite.verify(out, generation=0) == \
        "OK: 2 split(s), 2 shard(s), 8 records verified (the output as it was after generation 0)"
    # as it is: every generation
    now = tfrecorder_lite.inspect(out, num=100)
    assert now.num_images == 15 and "Rejected rows of generation 1: 1" in now.html
    assert "1: TRAIN 5, TEST 2 (1 rejected)" in now.summary and "fish" in now.summary
    assert "compression none, 1 rejected" in now.summary  # every generation's rejected rows
    assert tfrecorder_lite.verify(out) == "OK: 2 split(s), 4 shard(s), 15 records verified"
    # a damaged generation 1 fails the whole output, not the output as it was before it
    shard = out / "train-g0001-00000-of-00001.tfrecord"
    data = bytearray(shard.read_bytes())
    data[-6] ^= 1
    shard.write_bytes(bytes(data))
    with pytest.raises(tfrecorder_lite.VerifyError, match="train-g0001-00000-of-00001"):
        tfrecorder_lite.verify(out)
    assert tfrecorder_lite.verify(out, generation=0).startswith("OK")
    assert cli.main(["verify", str(out), "--generation", "0"]) == 0
    assert cli.main(["verify", str(out)]) == 1
    assert cli.main(["info", str(out), "--generation", "2"]) != 0
    with pytest.raises(tfrecorder_lite.ManifestError, match="generation must be 0 to 1"):
        tfrecorder_lite.inspect(out, generation=2)


def test_an_output_appended_before_generations_recorded_labels_reads_but_is_not_summed(
        tmp_path):
    df = _table(tmp_path / "images", n=12)
    out = tmp_path / "out"
    df.iloc[:8].tfrecord.to_tfrecord(out, progress=False)
    df.iloc[8:].tfrecord.to_tfrecord(out, progress=False, append=True)
    metadata = json.loads((out / layout.METADATA).read_text())
    for entry in metadata["generations"]:  # as the first appends wrote them
        for key in ("labels", "label_counts", "image"):
            del entry[key]
    (out / layout.METADATA).write_text(json.dumps(metadata))
    assert tfrecorder_lite.verify(out).startswith("OK")
    assert len(_records(out, generation=0)) == 8
    with pytest.raises(tfrecorder_lite.ManifestError,
                       match="does not record the labels and images of generation 0"):
        tfrecorder_lite.read_metadata(out, generation=0)


def test_verify_checks_what_each_generation_lists(tmp_path):
    df = _table(tmp_path / "images", n=12)
    out = tmp_path / "out"
    df.iloc[:8].tfrecord.to_tfrecord(out, progress=False)
    df.iloc[8:].tfrecord.to_tfrecord(out, progress=False, append=True)
    metadata = json.loads((out / layout.METADATA).read_text())
    metadata["generations"][1]["num_examples"]["TRAIN"] += 1
    (out / layout.METADATA).write_text(json.dumps(metadata))
    with pytest.raises(tfrecorder_lite.VerifyError,
                       match=r"generations\[1\].num_examples is \{'TRAIN': 4, 'TEST': 1\}, its "
                             r"shards hold \{'TRAIN': 3, 'TEST': 1\}"):
        tfrecorder_lite.verify(out)


def test_info_generation_on_the_command_line(tmp_path, capsys):
    from tfrecorder_lite import cli

    df = _table(tmp_path / "images", n=12)
    out = tmp_path / "out"
    df.iloc[:8].tfrecord.to_tfrecord(out, progress=False)
    assert cli.main(["info", str(out)]) == 0
    first = capsys.readouterr().out
    df.iloc[8:].tfrecord.to_tfrecord(out, progress=False, append=True)
    assert cli.main(["info", str(out), "--generation", "0"]) == 0
    assert capsys.readouterr().out == first
    assert cli.main(["info", str(out)]) == 0
    assert "TRAIN: 9 examples in 2 shard(s)" in capsys.readouterr().out


def test_outputs_of_boxes_masks_or_label_levels_are_refused_with_the_reason(tmp_path):
    from PIL import Image

    df = _table(tmp_path / "images", n=6)
    boxes = df.assign(xmin=0.1, ymin=0.2, xmax=0.6, ymax=0.7)
    masks = df.assign(mask_uri=[str(tmp_path / "images" / f"mask{i}.png") for i in range(6)])
    for i, uri in enumerate(masks.mask_uri):
        size = Image.open(df.image_uri[i]).size
        Image.new("L", size, i % 2).save(uri)
    levels = df.assign(coarse="animal")
    cases = [(boxes, {}, "is a detection output, .* not its boxes"),
             (masks, {}, "is a segmentation output, .* not its mask"),
             (levels, {"label_col": ["coarse", "label"]},
              r"has label levels \(coarse, label\)")]
    for i, (table, options, message) in enumerate(cases):
        out = tmp_path / f"out{i}"
        table.iloc[:3].tfrecord.to_tfrecord(out, progress=False, **options)
        before = _files(out)
        with pytest.raises(tfrecorder_lite.SchemaError, match=message):
            table.iloc[3:].tfrecord.to_tfrecord(out, progress=False, append=True, **options)
        assert _files(out) == before  # refused before anything was written
    df.iloc[:3].tfrecord.to_tfrecord(tmp_path / "plain", progress=False)
    with pytest.raises(tfrecorder_lite.SchemaError, match="it takes no label_map"):
        df.iloc[3:].tfrecord.to_tfrecord(tmp_path / "plain", progress=False, append=True,
                                         label_map=["cat", "dog", "bird"])


@pytest.mark.parametrize("change, message", [
    (lambda m: m.pop("generations"), "train-g0001-00000-of-00001.tfrecord is of generation 1, "
                                     "and the output has 1 generation"),
    (lambda m: m["generations"][1].update(rejected_file="../secret.csv"),
     r"generations\[1\].rejected_file: '../secret.csv' is not a rejected-gNNNN.csv file name"),
    (lambda m: m["generations"][1].update(skipped=-1),
     r"generations\[1\].skipped: -1 is not a count"),
])
def test_a_malformed_generation_is_named(tmp_path, change, message):
    df = _table(tmp_path / "images", n=12)
    out = tmp_path / "out"
    df.iloc[:8].tfrecord.to_tfrecord(out, progress=False, num_shards=1)
    df.iloc[8:].tfrecord.to_tfrecord(out, progress=False, append=True, num_shards=1)
    metadata = json.loads((out / layout.METADATA).read_text())
    change(metadata)
    (out / layout.METADATA).write_text(json.dumps(metadata))
    with pytest.raises(tfrecorder_lite.ManifestError, match=message):
        tfrecorder_lite.read_metadata(out)


def test_load_of_generation_0_batches_and_encodes_labels_as_before_the_append(tmp_path):
    root = tmp_path / "images"
    root.mkdir()
    rows = []
    for i in range(10):  # generation 0: one size; generation 1: others, and a new label
        size = (64, 48) if i < 6 else (80 + 8 * i, 60)
        path = root / f"img{i}.jpg"
        rich_photo(*size, seed=i).save(path, quality=90)
        rows.append(("TRAIN", str(path), "cat|dog" if i % 2 else ("fish" if i >= 6 else "cat")))
    df = pd.DataFrame(rows, columns=["split", "image_uri", "label"])
    out = tmp_path / "out"
    df.iloc[:6].tfrecord.to_tfrecord(out, progress=False, label_sep="|")

    def first_batch(**options):
        images, labels = next(iter(tfrecorder_lite.load(out, "TRAIN", batch_size=6,
                                                         multi_hot=True, **options)))
        return images.numpy(), labels.numpy()

    before = first_batch()
    assert before[1].shape == (6, 2)  # cat, dog
    df.iloc[6:].tfrecord.to_tfrecord(out, progress=False, label_sep="|", append=True)
    after = first_batch(generation=0)
    assert after[1].shape == (6, 2)
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1], before[1])
    with pytest.raises(tfrecorder_lite.SchemaError, match="different sizes"):
        first_batch()  # every generation: sizes vary now
    assert len(tfrecorder_lite.data_source(out, "TRAIN", generation=0)) == 6
    files = _files(out)  # the whole table again, the labels "cat|dog" read as written:
    result = df.sample(frac=1, random_state=0).tfrecord.to_tfrecord(  # every row skipped
        out, progress=False, label_sep="|", append=True)
    assert result.skipped == 10 and result.counts == {} and not len(result.rejected)
    assert _files(out) == files
