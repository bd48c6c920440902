"""Label maps that would lose labels, and labels that are quantities: refused with the labels
named and the fix, before any image is read; whole-number floats stay class ids."""

import json

import numpy as np
import pandas as pd
import pytest

import imagegen as ig
from tfrecorder_lite import SchemaError


@pytest.fixture
def table(image_table):
    """The 24-image table with four labels."""
    return image_table.assign(label=[["cat", "dog", "fox", "owl"][i % 4]
                                     for i in range(len(image_table))])


def test_a_label_map_giving_two_labels_one_id_is_refused_naming_them(table, tmp_path):
    labels = sorted(set(table.label))
    for label_map, named in (({label: 0 for label in labels}, "id 0: ['cat', 'dog', 'fox', 'owl']"),
                             ({"cat": 0, "dog": 1, "fox": 1, "owl": 2}, "id 1: ['dog', 'fox']")):
        with pytest.raises(SchemaError, match="label_map gives one id to several labels") as e:
            table.tfrecord.to_tfrecord(str(tmp_path / "out"), label_map=label_map,
                                       progress=False)
        assert named in str(e.value) and "replace" in str(e.value)
        with pytest.raises(SchemaError, match=r"id \d: \["):
            table.tfrecord.validate(label_map=label_map, check=None)
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_a_label_map_list_with_repeats_is_refused_naming_them(table, tmp_path):
    with pytest.raises(SchemaError) as e:
        table.tfrecord.to_tfrecord(str(tmp_path / "out"), label_map=list(table.label),
                                   progress=False)
    message = str(e.value)
    assert message.startswith("label_map lists 4 label(s) more than once: 'cat' at positions "
                              "[0, 4, 8, 12, 16, 20]; 'dog' at positions [1, 5, 9, 13, 17, 21]")
    assert "sorted(set(labels))" in message
    with pytest.raises(SchemaError, match="more than once"):
        table.tfrecord.validate(label_map=list(table.label), check=None)


def test_label_map_labels_written_alike_are_refused(table, tmp_path):
    with pytest.raises(SchemaError, match="written alike in labels.txt: 'cat' and ' cat '"):
        table.tfrecord.to_tfrecord(str(tmp_path / "out"), progress=False,
                                   label_map={"cat": 0, " cat ": 1, "dog": 2, "fox": 3, "owl": 4})


def test_a_good_label_map_still_gives_each_label_its_id(table, tmp_path):
    label_map = {"owl": 0, "fox": 1, "dog": 2, "cat": 3}
    result = table.tfrecord.to_tfrecord(str(tmp_path / "out"), label_map=label_map,
                                        progress=False)
    assert result.labels == ["owl", "fox", "dog", "cat"]
    records = ig.read_examples(str(tmp_path / "out"))
    assert {(r["image/class/label"], r["image/class/text"]) for r in records} == {
        (0, b"owl"), (1, b"fox"), (2, b"dog"), (3, b"cat")}


def test_fractional_labels_are_refused_and_listed_with_the_fix(table, tmp_path):
    values = np.round(np.linspace(0.5, 3.0, len(table)), 2)  # a regression target
    target = table.assign(label=values)
    with pytest.raises(SchemaError) as e:
        target.tfrecord.to_tfrecord(str(tmp_path / "out"), progress=False, on_error="skip")
    message = str(e.value)
    assert message.startswith(f"label column 'label' holds {int((values % 1 != 0).sum())} "
                              "fractional number(s), e.g. 0.5, ")
    assert "df['label'] = df['label'].astype(str)" in message
    assert not (tmp_path / "out").exists()

    problems = target.tfrecord.validate(check=None)
    fractional = problems[problems.problem.str.startswith("fractional label")]
    assert fractional.value.tolist() == [v for v in values if v % 1]
    assert fractional.problem.iloc[0].startswith(
        "fractional label 0.5: labels are classes, and each such number would be a class of "
        "its own")
    assert all("astype(str)" in p for p in fractional.problem)

    # the fix the message gives: the numbers become class names
    fixed = target.assign(label=target.label.astype(str))
    result = fixed.tfrecord.to_tfrecord(str(tmp_path / "fixed"), progress=False)
    assert "2.73" not in result.labels and "0.5" in result.labels


def test_fractional_labels_in_an_object_column_are_found_too(table):
    mixed = table.assign(label=pd.Series(["cat", 2.5] * (len(table) // 2), dtype=object))
    problems = mixed.tfrecord.validate(check=None)
    assert problems.problem.str.startswith("fractional label 2.5").sum() == len(table) // 2


def test_whole_number_floats_stay_class_ids(table, tmp_path):
    ids = table.assign(label=[float(i % 3) for i in range(len(table))])  # 0.0, 1.0, 2.0
    ids.loc[5, "label"] = np.nan  # a blank makes the column float, as pandas reads a CSV
    assert ids.tfrecord.validate(check=None).problem.tolist() == ["empty label"]
    result = ids.tfrecord.to_tfrecord(str(tmp_path / "out"), progress=False, on_error="skip")
    assert result.labels == ["0", "1", "2"]
    metadata = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert metadata["labels"] == ["0", "1", "2"]
    records = ig.read_examples(str(tmp_path / "out"))
    assert {(r["image/class/label"], r["image/class/text"]) for r in records} == {
        (0, b"0"), (1, b"1"), (2, b"2")}


def test_a_label_map_decides_for_numeric_labels(table, tmp_path):
    target = table.assign(label=[[0.5, 1.5][i % 2] for i in range(len(table))])
    result = target.tfrecord.to_tfrecord(str(tmp_path / "out"), progress=False,
                                         label_map={0.5: 0, 1.5: 1})
    assert result.labels == ["0.5", "1.5"] and sum(result.counts.values()) == len(table)
