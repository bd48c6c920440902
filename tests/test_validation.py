"""Each validation rule, the error family, and what to_tfrecord does with bad rows."""

import os

import pandas as pd
import pytest

import tfrecorder_lite
from tfrecorder_lite import InvalidRowError, OutputExistsError, SchemaError, TFRecorderError
from tfrecorder_lite.output import layout


def _problems(table, **options):
    problems = table.tfrecord.validate(**options)
    assert list(problems.columns) == ["row", "column", "value", "problem"]
    return problems


def test_clean_table_has_no_problems(image_table):
    assert _problems(image_table).empty


def test_missing_columns_name_expected_and_found_before_any_io(tmp_path):
    table = pd.DataFrame({"set": ["TRAIN"], "path": [str(tmp_path / "none.jpg")], "label": ["a"]})
    for call in (table.tfrecord.validate,
                 lambda: table.tfrecord.to_tfrecord(tmp_path / "out")):
        with pytest.raises(SchemaError) as info:
            call()
        message = str(info.value)
        assert "split" in message and "image_uri" in message and "'set'" in message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value,expected", [("train", "TRAIN"), (" Train ", "TRAIN"),
                                            ("VAL", "VALIDATION"), ("valid", "VALIDATION"),
                                            ("Validation", "VALIDATION"), ("test", "TEST")])
def test_split_values_match_case_insensitively(tmp_path, image_table, value, expected):
    table = image_table.head(3).assign(split=value)
    result = table.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    assert result.counts == {expected: 3}


def test_each_bad_cell_is_reported_with_row_column_and_reason(image_table):
    table = image_table.copy()
    table.loc[1, "split"] = "TRIAN"
    table.loc[2, "label"] = "  "
    table.loc[3, "image_uri"] = ""
    table.loc[4, "image_uri"] = "/no/such/file.jpg"
    table.loc[5, "split"] = None
    problems = _problems(table).set_index("row")
    assert problems.loc[1, "problem"].startswith("unknown split 'TRIAN'")
    assert problems.loc[1, "column"] == "split"
    assert problems.loc[2, "problem"] == "empty label"
    assert problems.loc[3, "problem"] == "empty image_uri"
    assert problems.loc[4, "problem"] == "file not found"
    assert problems.loc[5, "problem"] == "empty split"
    assert sorted(problems.index) == [1, 2, 3, 4, 5]


def test_label_map_overrides_and_unknown_labels_are_reported(tmp_path, image_table):
    problems = _problems(image_table, label_map={"cat": 0})
    assert set(problems["problem"]) == {"label 'dog' not in label_map"}
    result = image_table.tfrecord.to_tfrecord(tmp_path / "out", label_map={"dog": 1, "cat": 0},
                                              progress=False)
    assert result.labels == ["cat", "dog"]
    result = image_table.tfrecord.to_tfrecord(tmp_path / "out2", label_map=["dog", "cat"],
                                              progress=False)
    assert result.labels == ["dog", "cat"]
    for image, label in tfrecorder_lite.load(tmp_path / "out2", "TEST"):
        assert label.numpy() in (0, 1)


def test_integer_labels_pass_through_and_negative_ones_are_reported(tmp_path, image_table):
    table = image_table.assign(label=[i % 4 for i in range(len(image_table))])
    result = table.tfrecord.to_tfrecord(tmp_path / "out", progress=False, shuffle=False)
    assert result.labels == ["0", "1", "2", "3"]
    labels = [int(y) for _, y in tfrecorder_lite.load(tmp_path / "out", "TRAIN")]
    assert labels == table.loc[table["split"] == "TRAIN", "label"].tolist()
    table.loc[0, "label"] = -1
    assert _problems(table).loc[0, "problem"] == "negative label -1"


def test_label_vocabulary_is_sorted_whatever_the_row_order(tmp_path, image_table):
    shuffled = image_table.sample(frac=1, random_state=3)
    a = image_table.tfrecord.to_tfrecord(tmp_path / "a", progress=False)
    b = shuffled.tfrecord.to_tfrecord(tmp_path / "b", progress=False)
    assert a.labels == b.labels == ["cat", "dog"]


def test_bad_rows_raise_by_default_naming_row_and_path(tmp_path, image_table):
    table = image_table.copy()
    table.loc[7, "image_uri"] = str(tmp_path / "missing.jpg")
    with pytest.raises(InvalidRowError) as info:
        table.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    assert info.value.row == 7 and "missing.jpg" in str(info.value)
    assert "file not found" in str(info.value)
    assert not (tmp_path / "out" / "metadata.json").exists()


def test_skip_accounts_for_every_row(tmp_path, image_table):
    table = image_table.copy()
    table.index = [f"r{i}" for i in range(len(table))]
    table.loc["r2", "image_uri"] = str(tmp_path / "missing.jpg")
    table.loc["r3", "split"] = "holdout"
    result = table.tfrecord.to_tfrecord(tmp_path / "out", on_error="skip", progress=False)
    assert sum(result.counts.values()) + len(result.rejected) == len(table)
    assert list(result.rejected.index) == ["r2", "r3"]
    assert list(result.rejected.columns) == ["split", "image_uri", "label", "reason"]
    assert result.rejected.loc["r2", "reason"] == "file not found"
    on_disk = pd.read_csv(tmp_path / "out" / "rejected.csv", index_col=0)
    assert list(on_disk.index) == ["r2", "r3"]
    assert result.metadata["rejected"] == 2


@pytest.mark.parametrize("options,match", [
    ({"check": "full"}, "check"), ({"on_error": "ignore"}, "on_error"),
    ({"compression": "lz4"}, "compression"), ({"image_size": (0, 10)}, "image_size"),
    ({"num_shards": 0}, "num_shards"), ({"image_format": "gif"}, "image_format"),
])
def test_bad_options_raise_schema_errors(tmp_path, image_table, options, match):
    with pytest.raises(SchemaError, match=match):
        image_table.tfrecord.to_tfrecord(tmp_path / "out", progress=False, **options)


def test_errors_are_one_family_and_builtin_types():
    assert issubclass(SchemaError, ValueError) and issubclass(SchemaError, TFRecorderError)
    assert issubclass(InvalidRowError, ValueError) and issubclass(InvalidRowError, TFRecorderError)
    assert issubclass(OutputExistsError, OSError)
    assert issubclass(tfrecorder_lite.ManifestError, OSError)


def test_num_shards_splits_rows_evenly_and_names_shards(tmp_path, image_table):
    result = image_table.tfrecord.to_tfrecord(tmp_path / "out", num_shards=3, progress=False)
    train = result.metadata["splits"]["TRAIN"]["shards"]
    assert [s["name"] for s in train] == [f"train-0000{i}-of-00003.tfrecord" for i in range(3)]
    assert [s["num_examples"] for s in train] == [5, 5, 6]
    assert set(os.listdir(tmp_path / "out")) == {
        "metadata.json", "labels.txt", layout.DATASET_INFO, layout.TFDS_FEATURES, layout.TFDS_LABEL_NAMES,
        layout.hashes_name(0),  # each image's sha256 and perceptual hash (issue 33)
        *(name for info in result.metadata["splits"].values() for s in info["shards"]
          for name in (s["name"], s["index"]["name"]))}


def test_problems_are_the_same_whatever_the_blocks_rows_are_read_in(image_table, monkeypatch):
    """validate() hashes rows and resolves and reads images a block at a time: repeated
    bytes, repeated rows, missing files and unusable URLs across the blocks' edges are found
    as in one block, in the same order."""
    from tfrecorder_lite import validation

    rows = image_table.iloc[[0, 1, 2, 3, 16, 17, 20, 21]].copy()
    copies = image_table.iloc[[0, 3, 17]].assign(split=["TEST", "TRAIN", "TRAIN"],
                                                  label="bird")
    rows = pd.concat([rows, copies, rows.iloc[[2]]], ignore_index=True)  # leakage, dup, row
    rows.loc[4, "image_uri"] = "no_such_file.png"
    rows.loc[6, "image_uri"] = "nosuchscheme://bucket/a.png"
    rows = rows.iloc[[10, 0, 4, 8, 1, 2, 6, 3, 9, 5, 11, 7]]
    one_block = _problems(rows, n_jobs=2)
    monkeypatch.setattr(validation, "_BLOCK", 3)
    in_blocks = _problems(rows, n_jobs=2)
    pd.testing.assert_frame_equal(in_blocks, one_block)
    found = {row: problem for row, problem in zip(one_block["row"], one_block["problem"])}
    assert found[11] == "identical to row 2"
    assert found[8].startswith("train/test leakage") and found[9].startswith("duplicate image")
    assert found[5].startswith("train/test leakage")  # row 10 comes first in the table
    assert found[4].startswith("file not found") and "nosuchscheme" in found[6]


def test_a_list_in_the_split_column_is_an_unknown_split(image_table):
    table = image_table.astype({"split": object})
    table.at[0, "split"] = ["TRAIN"]
    problems = _problems(table, check=None)
    assert problems.loc[problems.row == 0, "problem"].tolist() == [
        "unknown split '['TRAIN']' (expected TRAIN, VALIDATION or TEST)"]


def test_row_labels_of_an_integer_index_read_as_the_table_shows_them(tmp_path, image_table):
    # numpy 2 spells its scalars np.int64(10); a row label is shown as the table shows it
    df = image_table.iloc[:3].copy()
    df.index = pd.Index([10, 20, 30], dtype="int64")
    df["image_uri"] = df["image_uri"].iloc[0]
    df["split"] = ["TRAIN", "TEST", "TRAIN"]
    problems = df.tfrecord.validate()
    assert "train/test leakage: same image bytes as row 10 (" in problems.problem.iloc[0]
    assert not problems.problem.str.contains("np.").any()
    df.loc[20, "image_uri"] = str(tmp_path / "gone.png")
    with pytest.raises(InvalidRowError, match=r"^row 20 \("):
        df.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
