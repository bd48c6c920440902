"""AutoML's UNASSIGNED (and empty) splits, and tables without a split column: each row is given
a split by a stable hash of its image URI, the same whatever the table's order or run."""

import pandas as pd
import pytest

import tfrecorder_lite
from conftest import photo, save
from tfrecorder_lite import SchemaError
from tfrecorder_lite.table import schema


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("assign")
    rows = []
    for i in range(40):
        split = ["TRAIN", "UNASSIGNED", "", "unassigned", "TEST"][i % 5]
        rows.append((split, save(photo(10, 12, seed=i), root / f"{i}.png", "PNG"), "ab"[i % 2]))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"])


def _splits_of_images(out):
    """{image file name: split} of everything written."""
    found = {}
    for split in tfrecorder_lite.read_metadata(out)["splits"]:
        for example in tfrecorder_lite.load(out, split, as_supervised=False):
            found[example["image/filename"].numpy().decode()] = split
    return found


def test_unassigned_rows_get_the_same_split_whatever_the_table_order(table, tmp_path):
    first = table.tfrecord.to_tfrecord(tmp_path / "a", unassigned="assign", progress=False)
    shuffled = table.sample(frac=1, random_state=7)
    second = shuffled.tfrecord.to_tfrecord(tmp_path / "b", unassigned="assign", progress=False)
    assert first.rejected.empty and sum(first.counts.values()) == 40
    a, b = _splits_of_images(tmp_path / "a"), _splits_of_images(tmp_path / "b")
    assert a == b and len(a) == 40
    given = {f"{i}.png": s for i, s in enumerate(table.split) if s in ("TRAIN", "TEST")}
    assert all(a[name] == split for name, split in given.items())  # given splits are kept
    assigned = [name for name in a if name not in given]
    assert len(assigned) == 24 and len({a[n] for n in assigned}) > 1
    assert first.metadata["split_assignment"]["ratios"] == {"TRAIN": 0.8, "VALIDATION": 0.1,
                                                            "TEST": 0.1}


def test_by_default_rows_without_a_split_are_rejected_with_their_reason(table, tmp_path):
    result = table.tfrecord.to_tfrecord(tmp_path / "out", on_error="skip", progress=False)
    assert len(result.rejected) == 24 and "split_assignment" not in result.metadata
    assert set(result.rejected.reason) == {
        "empty split", "unknown split 'UNASSIGNED' (expected TRAIN, VALIDATION or TEST)",
        "unknown split 'unassigned' (expected TRAIN, VALIDATION or TEST)"}
    assert table.tfrecord.validate(check=None, unassigned="assign").empty


def test_a_table_without_a_split_column(table, tmp_path):
    no_split = table.drop(columns=["split"])
    result = no_split.tfrecord.to_tfrecord(tmp_path / "out", split_col=None,
                                           split_ratios={"TRAIN": 3, "TEST": 1}, progress=False)
    assert set(result.counts) <= {"TRAIN", "TEST"} and sum(result.counts.values()) == 40
    assert result.metadata["split_assignment"]["ratios"] == {"TRAIN": 0.75, "TEST": 0.25}
    expected = {f"{i}.png": schema.assigned_split(uri, (("TRAIN", 0.75), ("TEST", 0.25)))
                for i, uri in enumerate(no_split.image_uri)}
    assert _splits_of_images(tmp_path / "out") == expected


def test_assigned_shares_follow_the_ratios_and_one_image_has_one_split():
    uris = pd.Series([f"gs://bucket/images/{i:05d}.jpg" for i in range(5000)])
    df = pd.DataFrame({"split": "UNASSIGNED", "image_uri": pd.concat([uris, uris]), "label": 0})
    assignment = schema.split_assignment("assign")
    splits = schema.table_splits(df.reset_index(drop=True), "split", "image_uri", assignment)
    shares = splits[:5000].value_counts(normalize=True)
    assert abs(shares["TRAIN"] - 0.8) < 0.02 and abs(shares["TEST"] - 0.1) < 0.02
    assert splits[:5000].tolist() == splits[5000:].tolist()  # the same image, the same split


@pytest.mark.parametrize("options, message", [
    ({"unassigned": "maybe"}, "unassigned must be"),
    ({"unassigned": "assign", "split_ratios": {"TRAIN": -1, "TEST": 1}}, "split_ratios must"),
    ({"unassigned": "assign", "split_ratios": {"TRAINS": 1}}, "split_ratios must"),
    ({"split_ratios": {"TRAIN": 1}}, "pass unassigned='assign'"),
])
def test_bad_assignment_options_are_refused(table, tmp_path, options, message):
    with pytest.raises(SchemaError, match=message):
        table.tfrecord.to_tfrecord(tmp_path / "out", progress=False, **options)


def test_cli_unassigned_assign_and_split_ratios(table, tmp_path, capsys):
    from tfrecorder_lite import cli

    csv = tmp_path / "t.csv"
    table.to_csv(csv, index=False)
    assert cli.main(["convert", str(csv), str(tmp_path / "out"), "--no-progress",
                     "--unassigned", "assign", "--split-ratios", "1,0,1"]) == 0
    metadata = tfrecorder_lite.read_metadata(tmp_path / "out")
    assert metadata["split_assignment"]["ratios"] == {"TRAIN": 0.5, "TEST": 0.5}
    assert sum(info["num_examples"] for info in metadata["splits"].values()) == 40
