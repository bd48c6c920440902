"""Labels that mean one thing (stripped, one spelling per number, no control characters, no
id for a label only rejected rows carry, no runaway integer ids) and extra columns stored
exactly with their type, or refused up front naming the column."""

import math
import os

import numpy as np
import pandas as pd
import pytest

import tfrecorder_lite
from conftest import photo, save
from tfrecorder_lite import InvalidRowError, SchemaError


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("labels")
    return [save(photo(12, 14 + i, seed=i), root / f"{i}.png", "PNG") for i in range(8)]


def table(images, labels, **columns):
    n = len(labels)
    return pd.DataFrame({"split": ["TRAIN"] * n, "image_uri": images[:n], "label": labels,
                         **columns})


def convert(df, out, **options):
    return df.tfrecord.to_tfrecord(out, progress=False, shuffle=False, **options)


def loaded(out, **options):
    return list(tfrecorder_lite.load(out, "TRAIN", as_supervised=False, **options))


# ================================================================================= labels

def test_labels_are_stripped_and_a_whole_number_is_one_label(images, tmp_path):
    result = convert(table(images, ["cat", " cat", "cat ", "dog", 1, 1.0, "1.0", " 2 "]),
                     tmp_path / "out")
    assert result.labels == ["1", "2", "cat", "dog"]
    assert [int(e["image/class/label"]) for e in loaded(tmp_path / "out")] == \
        [2, 2, 2, 3, 0, 0, 0, 1]
    assert (tmp_path / "out" / "labels.txt").read_text() == "1\n2\ncat\ndog\n"


def test_validate_reports_labels_that_differ_only_in_case_or_spaces(images):
    problems = table(images, ["cat", "Cat", "cat ", "dog", "Cat"]).tfrecord.validate(check=None)
    assert problems["row"].tolist() == [1, 2]
    assert "only in case" in problems.problem[0] and "two classes (2 row(s)" in problems.problem[0]
    assert "only in surrounding spaces: both are stored as 'cat'" in problems.problem[1]


def test_a_label_with_a_control_character_is_a_rejected_row_and_takes_no_id(images, tmp_path):
    df = table(images, ["cat", "dog\nbird", "tab\there", "cat"])
    problems = df.tfrecord.validate(check=None)
    assert problems["row"].tolist() == [1, 2]
    assert all("control character" in p for p in problems.problem)
    result = convert(df, tmp_path / "out", on_error="skip")
    assert result.labels == ["cat"] and result.counts == {"TRAIN": 2}
    assert (tmp_path / "out" / "labels.txt").read_text() == "cat\n"
    with pytest.raises(SchemaError, match="control characters"):
        convert(df, tmp_path / "out2", label_map={"cat": 0, "a\nb": 1})


def test_a_label_only_rejected_rows_carry_takes_no_id_unless_label_map_gives_one(images,
                                                                               tmp_path):
    df = table(images, ["cat", "ghost", "dog"])
    df.loc[1, "image_uri"] = str(tmp_path / "missing.png")
    result = convert(df, tmp_path / "out", on_error="skip")
    assert result.labels == ["cat", "dog"] and len(result.rejected) == 1
    assert [int(e["image/class/label"]) for e in loaded(tmp_path / "out")] == [0, 1]
    result = convert(df, tmp_path / "mapped", on_error="skip",
                     label_map=["cat", "ghost", "dog"])
    assert result.labels == ["cat", "ghost", "dog"]


def test_an_integer_label_far_beyond_the_row_count_is_refused_clearly(images, tmp_path):
    df = table(images, [0, 10_000_000])
    problems = df.tfrecord.validate(check=None)
    assert problems["row"].tolist() == [1]
    assert "far beyond the table's 2 rows" in problems.problem[0]
    with pytest.raises(InvalidRowError, match="far beyond"):
        convert(df, tmp_path / "raised")
    result = convert(df, tmp_path / "out", on_error="skip")
    assert result.labels == ["0"] and os.path.getsize(tmp_path / "out" / "labels.txt") == 2
    ids = list(range(1000))  # sparse ids within reach stay ids
    result = convert(table(images, [3, 999]), tmp_path / "sparse")
    assert len(result.labels) == len(ids)
    with pytest.raises(SchemaError, match="class ids"):
        convert(table(images, ["a"]), tmp_path / "map", label_map={"a": 10**9})


# ============================================================================ extra columns

def test_extra_columns_are_stored_exactly_with_their_types(images, tmp_path):
    when = pd.Timestamp("2026-11-22 10:30:00.123456", tz="Europe/Paris")
    df = table(
        images, ["a", "b", "a"],
        flag=[True, False, True],
        big=np.array([2**63 - 1, 0, 7], dtype=np.uint64),
        small=[-2**63, 0, 5],
        nullable=pd.array([1, 2, 3], dtype="Int64"),
        score=pd.array([0.5, None, 2.25], dtype="Float64"),
        taken=[when, pd.NaT, when],
        wait=pd.to_timedelta(["1s", "2 days", "3ms"]),
        raw=[b"\x00\xff", b"", b"x"],
        kind=pd.Categorical(["x", "y", "x"]),
        note=["hello", None, "=1+1"],
    )
    result = convert(df, tmp_path / "out")
    features = result.metadata["features"]
    assert features["flag"] == {"dtype": "int64", "shape": [], "column_dtype": "bool"}
    assert features["score"]["missing"] == "NaN"
    assert features["note"]["missing"] == "empty string"
    assert features["taken"]["column_dtype"] == str(df["taken"].dtype)  # datetime64[.., tz]
    records = loaded(tmp_path / "out")
    column = {key: [r[key].numpy() for r in records] for key in records[0]}
    assert column["flag"] == [1, 0, 1]
    assert column["big"] == [2**63 - 1, 0, 7] and column["small"] == [-2**63, 0, 5]
    assert column["nullable"] == [1, 2, 3]
    assert column["score"][0] == 0.5 and math.isnan(column["score"][1])
    assert column["taken"] == [when.isoformat().encode(), b"", when.isoformat().encode()]
    assert pd.Timestamp(column["taken"][0].decode()) == when
    assert column["wait"] == [pd.Timedelta(v).isoformat().encode() for v in ["1s", "2 days",
                                                                             "3ms"]]
    assert column["raw"] == [b"\x00\xff", b"", b"x"]
    assert column["kind"] == [b"x", b"y", b"x"] and column["note"] == [b"hello", b"", b"=1+1"]


@pytest.mark.parametrize("column, message", [
    (pd.array([1, None, 3], dtype="Int64"), "column 'extra' has a missing value.*row 1"),
    (pd.array([True, None, False], dtype="boolean"), "column 'extra' has a missing value"),
    (np.array([1, 2**63, 3], dtype=np.uint64), "column 'extra' holds a value outside int64 at "
                                               "row 1"),
    ([[0.1, 0.2], 0.3, None], "column 'extra' mixes lists and single values"),
    ([{"a": 1}, None, "x"], "column 'extra' holds dicts or sets"),
    ([1e300, 0.0, 1.0], "beyond float32 at row 0"),
    (np.array([1 + 2j, 0, 1]), "complex"),
])
def test_a_column_that_cannot_be_stored_exactly_is_refused_up_front(images, tmp_path, column,
                                                                    message):
    df = table(images, ["a", "b", "a"], extra=column)
    with pytest.raises(SchemaError, match=message):
        df.tfrecord.validate()
    with pytest.raises(SchemaError, match=message):
        convert(df, tmp_path / "out", on_error="skip")
    assert not (tmp_path / "out").exists()  # nothing written, not even the state folder
