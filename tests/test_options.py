"""Options are owned and checked before any file is read, and every door reads a table the
same way: ``to_tfrecord``, ``df.tfrecord.dataset`` and ``validate`` see the same problems."""

import pandas as pd
import pytest

import tfrecorder_lite
from conftest import photo, save
from hostile_http import HostileServer
from tfrecorder_lite import InvalidRowError, SchemaError
from tfrecorder_lite import table_dataset as direct


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Six images on a local HTTP server that counts every request."""
    root = tmp_path_factory.mktemp("served")
    for i in range(6):
        save(photo(8, 8, seed=i), root / f"{i}.jpg", "JPEG")
    server = HostileServer(root)
    yield server
    server.stop()


def remote_table(server):
    return pd.DataFrame({"split": ["TRAIN"] * 4 + ["TEST"] * 2,
                         "image_uri": [f"{server.url}/ok/{i}.jpg" for i in range(6)],
                         "label": ["cat", "dog"] * 3})


BAD_OPTIONS = [
    (dict(num_shards=0), "num_shards must be"),
    (dict(num_shards={"TRAIN": 2, "HOLDOUT": 1}), "num_shards must be"),
    (dict(on_error="ignore"), "on_error must be one of"),
    (dict(check="everything"), "check must be one of"),
    (dict(box_units="cm"), "box_units must be one of"),
    (dict(unassigned="keep"), "unassigned must be one of"),
    (dict(compression="BZIP2"), "compression"),
    (dict(image_format="gif"), "image_format must be one of"),
]


@pytest.mark.parametrize("options, message", BAD_OPTIONS, ids=[str(o) for o, _ in BAD_OPTIONS])
def test_a_bad_option_is_refused_before_any_image_is_requested(served, tmp_path, options,
                                                               message):
    served.reset_counts()
    with pytest.raises(SchemaError, match=message):
        tfrecorder_lite.to_tfrecord(remote_table(served), tmp_path / "out", progress=False,
                                    **options)
    assert served.counts() == {"GET /counts": 1}  # only the test's own question
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("options, message", [
    (dict(on_error="ignore"), "on_error must be one of"),
    (dict(check="everything"), "check must be one of"),
    (dict(box_units="cm"), "box_units must be one of"),
    (dict(batch_size=0), "batch_size must be"),
    (dict(box_format="corners"), "box_format must be one of"),
])
def test_the_table_dataset_refuses_bad_options_before_any_request(served, options, message):
    served.reset_counts()
    with pytest.raises(SchemaError, match=message):
        direct.dataset(remote_table(served), "TRAIN", **options)
    assert served.counts() == {"GET /counts": 1}


def test_validate_refuses_bad_table_options_before_any_request(served):
    served.reset_counts()
    for options in (dict(box_units="cm"), dict(unassigned="keep"),
                    dict(split_ratios=[1, 2, 3])):
        with pytest.raises(SchemaError):
            tfrecorder_lite.validate(remote_table(served), **options)
    assert served.counts() == {"GET /counts": 1}


# ----------------------------------------------------------------------------- the same problems

@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("doors")
    for i in range(8):
        save(photo(16, 16, seed=10 + i), root / f"{i}.jpg", "JPEG")
    return root


def _problem_rows(df, out, **options):
    """The rows each door refuses: ``{row: reason}`` of validate, to_tfrecord and dataset."""
    found = tfrecorder_lite.validate(df, check=None, **options)
    validated = {row: problem for row, problem in zip(found["row"], found["problem"])}
    result = tfrecorder_lite.to_tfrecord(df, out, on_error="skip", progress=False, **options)
    written = dict(zip(result.rejected.index, result.rejected["reason"]))
    from_dataset = {}
    for split in result.counts:
        _, info = direct.dataset(df, split, with_info=True, **options)
        from_dataset.update({row: reason for row, _, reason in info.rejected})
    return validated, written, from_dataset


def _same(validated, written, from_dataset):
    assert set(validated) == set(written) == set(from_dataset) != set()
    for row in written:
        assert written[row] == from_dataset[row]
        assert validated[row].split(":")[0] in written[row] or \
            written[row].split(":")[0] in validated[row], (row, validated[row], written[row])


def test_a_label_map_in_attrs_reaches_every_door(images, tmp_path):
    df = pd.DataFrame({"split": ["TRAIN"] * 5 + ["TEST"] * 3,
                       "image_uri": [str(images / f"{i}.jpg") for i in range(8)],
                       "label": ["cat", "dog", "owl", "cat", "dog", "cat", "dog", "eel"]})
    df.attrs["label_map"] = {"cat": 0, "dog": 1}  # as read_coco keeps COCO's ids
    validated, written, from_dataset = _problem_rows(df, out=tmp_path / "a")
    assert set(written) == {2, 7}  # owl and eel are not in the label map
    _same(validated, written, from_dataset)


def test_box_columns_reach_every_door(images, tmp_path):
    df = pd.DataFrame({"split": ["TRAIN", "TRAIN", "TRAIN", "TEST"],
                       "image_uri": [str(images / f"{i}.jpg") for i in (0, 0, 1, 2)],
                       "label": ["car", "bike", "car", "car"],
                       "xmin": [0.1, 0.2, 0.1, 0.3], "ymin": [0.1, 0.1, 0.2, 0.3],
                       "xmax": [0.5, 0.6, 0.7, 0.8], "ymax": [0.5, 0.6, 0.7, 0.8],
                       "hidden": [0, 1, 0, 1]})
    with pytest.raises(SchemaError, match="box_columns names \\['nope'\\]"):
        tfrecorder_lite.validate(df, box_columns=["nope"])
    with pytest.raises(SchemaError, match="box_columns names \\['nope'\\]"):
        direct.dataset(df, "TRAIN", box_columns=["nope"])
    out = tmp_path / "b"
    tfrecorder_lite.to_tfrecord(df, out, box_columns=["hidden"], progress=False)
    element = next(iter(tfrecorder_lite.load(out, "TRAIN", as_supervised=False)))
    from_table = next(iter(direct.dataset(df, "TRAIN", as_supervised=False,
                                          box_columns=["hidden"], shuffle=False)))
    assert "image/object/hidden" in element and "image/object/hidden" in from_table


def _boxes(images):
    """A table of boxes: images 0 (two boxes), 1, 2 and 3 (one each)."""
    return pd.DataFrame({"split": ["TRAIN", "TRAIN", "TRAIN", "TEST", "TEST"],
                         "image_uri": [str(images / f"{i}.jpg") for i in (0, 0, 1, 2, 3)],
                         "label": ["car", "bike", "bike", "car", "owl"],
                         "xmin": [0.1, 0.2, 0.1, 0.3, 0.2], "ymin": [0.1, 0.1, 0.2, 0.3, 0.2],
                         "xmax": [0.5, 0.6, 0.7, 0.8, 0.6], "ymax": [0.5, 0.6, 0.7, 0.8, 0.6],
                         "hidden": [0, 1, 0, 1, 0]})


def test_a_label_map_in_attrs_reaches_every_door_for_a_table_of_boxes(images, tmp_path):
    df = _boxes(images)
    df.attrs["label_map"] = {"car": 1, "owl": 2}  # as read_coco keeps COCO's ids
    validated, written, from_dataset = _problem_rows(df, out=tmp_path / "a")
    assert set(written) == {0, 1, 2}  # every row of the images with a bike
    _same(validated, written, from_dataset)


def test_a_bad_per_box_column_is_refused_alike_by_every_door(images, tmp_path):
    df = _boxes(images).assign(hidden=["yes", "no", "no", "yes", "no"])
    messages = []
    for call in (lambda: tfrecorder_lite.validate(df, box_columns=["hidden"], check=None),
                 lambda: direct.dataset(df, "TRAIN", box_columns=["hidden"]),
                 lambda: tfrecorder_lite.to_tfrecord(df, tmp_path / "b", progress=False,
                                                     box_columns=["hidden"])):
        with pytest.raises(SchemaError, match="per-box columns hold numbers") as refused:
            call()
        messages.append(str(refused.value))
    assert len(set(messages)) == 1


def test_separators_and_unassigned_rows_are_the_same_problems_everywhere(images, tmp_path):
    df = pd.DataFrame({"split": ["TRAIN", "UNASSIGNED", "TRAIN", "TEST", "", "TRAIN"],
                       "image_uri": [str(images / f"{i}.jpg") for i in range(6)],
                       "label": ["cat|dog", "cat", "|", "dog", "cat", "owl|cat"]})
    validated, written, from_dataset = _problem_rows(df, out=tmp_path / "c", label_sep="|")
    assert {1, 2, 4} <= set(written)
    assert set(validated) == set(written)
    for row in written:
        assert written[row].split(":")[0] in validated[row] or \
            validated[row].split(":")[0] in written[row], (row, validated[row], written[row])
    # the dataset of each split sees its own split's rows (unassigned ones belong to none)
    assert set(from_dataset) == {2}


def test_the_same_first_bad_row_is_raised_by_every_door(images, tmp_path):
    df = pd.DataFrame({"split": ["TRAIN"] * 4,
                       "image_uri": [str(images / f"{i}.jpg") for i in range(3)] +
                                    [str(images / "missing.jpg")],
                       "label": ["cat", "dog", "cat", "dog"]})
    with pytest.raises(InvalidRowError) as written:
        tfrecorder_lite.to_tfrecord(df, tmp_path / "d", progress=False)
    with pytest.raises(InvalidRowError) as read:
        direct.dataset(df, "TRAIN", on_error="raise")
    assert written.value.row == read.value.row == 3
    assert str(written.value) == str(read.value)


def test_convert_checks_its_options_before_reading_its_source(served, tmp_path):
    remote_table(served).to_csv(served.root / "table.csv", index=False)  # the CSV is served too
    served.reset_counts()
    for options, message in BAD_OPTIONS:
        with pytest.raises(SchemaError, match=message):
            tfrecorder_lite.convert(f"{served.url}/ok/table.csv", tmp_path / "out",
                                    progress=False, **options)
    assert served.counts() == {"GET /counts": 1}
    assert not (tmp_path / "out").exists()
