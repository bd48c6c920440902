"""Tables as people have them: several labels a row (multi-label), list columns (boxes,
embeddings) with optional declared types, tables without images, and labels per level. Every
output is read back with plain TensorFlow, ``load()``, ``verify()`` and tensorflow-datasets."""

import json
import re

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfrecorder_lite
from conftest import photo, save
from tfrecorder_lite import SchemaError, cli

ANIMALS = ["bird", "cat", "dog"]


def _tf_examples(out, split="TRAIN"):
    """The records of a split, parsed by TensorFlow's own proto (not the library)."""
    metadata = json.loads((out / "metadata.json").read_text())
    found = []
    for shard in metadata["splits"][split]["shards"]:
        for raw in tf.data.TFRecordDataset(str(out / shard["name"])):
            found.append(tf.train.Example.FromString(raw.numpy()).features.feature)
    return found


# ------------------------------------------------------------------ multi-label

@pytest.fixture(scope="module")
def automl_csv(tmp_path_factory):
    """An AutoML multi-label CSV without header: rows hold 1 to 3 labels (a ragged file), one
    row has a trailing empty field (Excel) and one no label at all."""
    root = tmp_path_factory.mktemp("multi")
    lines, expected = [], {}
    for i in range(18):
        name = f"{i}.jpg"
        save(photo(24 + i, 30, seed=i), root / name, "JPEG")
        labels = [ANIMALS[(i + k) % 3] for k in range(1 + i % 3)]
        split = "TEST" if i % 6 == 5 else "TRAIN"
        lines.append(",".join([split, name, *labels]) + ("," if i == 4 else ""))
        expected[name] = sorted(set(labels))
    save(photo(20, 20, seed=99), root / "none.jpg", "JPEG")
    lines.append("TRAIN,none.jpg")
    (root / "labels.csv").write_text("\n".join(lines) + "\n")
    return root / "labels.csv", expected


def test_a_ragged_automl_csv_is_read_as_multi_label(automl_csv, tmp_path):
    csv_path, expected = automl_csv
    result = tfrecorder_lite.convert(csv_path, tmp_path / "out", on_error="skip",
                                     progress=False)
    assert result.labels == ANIMALS
    assert result.rejected.reason.tolist() == ["empty label"]  # the row with no label
    metadata = result.metadata
    assert metadata["task"] == "multi-label"
    assert metadata["features"]["image/class/label"] == {"dtype": "int64", "shape": [None]}
    counted = {label: sum(label in labels for labels in expected.values()) for label in ANIMALS}
    assert {label: sum(split["label_counts"].get(label, 0) for split in
                       metadata["splits"].values()) for label in ANIMALS} == counted

    seen = {}
    for split in ("TRAIN", "TEST"):
        for feature in _tf_examples(tmp_path / "out", split):
            name = feature["image/filename"].bytes_list.value[0].decode()
            ids = list(feature["image/class/label"].int64_list.value)
            texts = [t.decode() for t in feature["image/class/text"].bytes_list.value]
            assert texts == [ANIMALS[i] for i in ids] and ids == sorted(ids)
            seen[name] = texts
    assert seen == expected
    assert tfrecorder_lite.verify(tmp_path / "out").startswith("OK")


def test_multi_hot_labels_are_ready_for_binary_crossentropy(automl_csv, tmp_path):
    csv_path, expected = automl_csv
    tfrecorder_lite.convert(csv_path, tmp_path / "out", on_error="skip", progress=False)
    dataset = tfrecorder_lite.load(tmp_path / "out", "TRAIN", multi_hot=True, batch_size=5,
                                   image_size=16)
    assert dataset.element_spec[1].shape.as_list() == [None, 3]
    assert dataset.element_spec[1].dtype == tf.float32
    by_file = tfrecorder_lite.load(tmp_path / "out", "TRAIN", as_supervised=False)
    wanted = [[float(a in expected[f["image/filename"].numpy().decode()]) for a in ANIMALS]
              for f in by_file]
    got = [row.tolist() for _, labels in dataset for row in labels.numpy()]
    assert got == wanted
    model = tf.keras.Sequential([tf.keras.Input((16, 16, 3)), tf.keras.layers.Flatten(),
                                 tf.keras.layers.Dense(3, activation="sigmoid")])
    model.compile("sgd", tf.keras.losses.BinaryCrossentropy())
    history = model.fit(dataset.map(lambda x, y: (tf.cast(x, tf.float32) / 255, y)), epochs=1,
                        verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_multi_label_ids_unbatched_and_ragged_batches(automl_csv, tmp_path):
    csv_path, expected = automl_csv
    tfrecorder_lite.convert(csv_path, tmp_path / "out", on_error="skip", progress=False)
    single = [labels.numpy().tolist() for _, labels in
              tfrecorder_lite.load(tmp_path / "out", "TRAIN")]
    batched = tfrecorder_lite.load(tmp_path / "out", "TRAIN", batch_size=4, image_size=8)
    assert isinstance(batched.element_spec[1], tf.RaggedTensorSpec)
    assert [row for _, labels in batched for row in labels.to_list()] == single
    assert sorted(len(ids) for ids in single) == sorted(
        len(v) for name, v in expected.items() if name not in ("5.jpg", "11.jpg", "17.jpg"))


@pytest.mark.parametrize("column", [
    ["cat|dog", "bird", " dog | cat |", "cat"],
    [["cat", "dog"], ("bird",), np.array(["dog", "cat"]), "cat"],
])
def test_label_lists_in_a_dataframe_or_text_split_by_label_sep(tmp_path, column):
    paths = [save(photo(10, 10, seed=i), tmp_path / f"{i}.png", "PNG") for i in range(4)]
    df = pd.DataFrame({"split": "TRAIN", "image_uri": paths, "label": column})
    sep = "|" if isinstance(column[0], str) else None
    result = df.tfrecord.to_tfrecord(tmp_path / "out", label_sep=sep, shuffle=False,
                                     progress=False)
    assert result.labels == ["bird", "cat", "dog"]
    ids = [list(f["image/class/label"].int64_list.value) for f in _tf_examples(tmp_path / "out")]
    assert ids == [[1, 2], [0], [1, 2], [1]]
    assert df.tfrecord.validate(label_sep=sep, check="header").empty


def test_multi_label_problems_name_the_label(tmp_path):
    paths = [save(photo(10, 10, seed=i), tmp_path / f"{i}.png", "PNG") for i in range(4)]
    df = pd.DataFrame({"split": "TRAIN", "image_uri": paths,
                       "label": [["cat"], [], ["cat", "fox"], ["Cat", "dog"]]})
    problems = df.tfrecord.validate(check=None, label_map=["cat", "dog"])
    assert problems.problem.tolist()[:3] == ["empty label", "label 'fox' not in label_map",
                                             "label 'Cat' not in label_map"]
    assert "'Cat' differs from 'cat' (row 0) only in case" in problems.problem.iloc[3]
    result = df.tfrecord.to_tfrecord(tmp_path / "out", label_map=["cat", "dog"],
                                     on_error="skip", progress=False)
    assert result.counts == {"TRAIN": 1} and len(result.rejected) == 3


def test_single_label_records_keep_one_value_and_no_task(tmp_path):
    paths = [save(photo(10, 10, seed=i), tmp_path / f"{i}.png", "PNG") for i in range(3)]
    df = pd.DataFrame({"split": "TRAIN", "image_uri": paths, "label": ["a", "b", "a"]})
    result = df.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    assert "task" not in result.metadata
    assert result.metadata["features"]["image/class/label"] == {"dtype": "int64", "shape": []}
    assert all(len(f["image/class/label"].int64_list.value) == 1
               for f in _tf_examples(tmp_path / "out"))


# ------------------------------------------------------------------ list columns, features=

@pytest.fixture(scope="module")
def detection_table(tmp_path_factory):
    """Images with 0 to 3 boxes each, a fixed-length embedding and a variable list of tags."""
    root = tmp_path_factory.mktemp("boxes")
    rows = []
    for i in range(10):
        boxes = [[0.1 * k, 0.05 * i, 0.1 * k + 0.5, 0.9] for k in range(i % 4)]
        rows.append(("TRAIN" if i < 8 else "TEST", save(photo(20, 24, seed=i), root / f"{i}.png",
                                                          "PNG"), ANIMALS[i % 3], boxes,
                     np.arange(3, dtype=np.float64) + i, ["x"] * (i % 3), i * 10))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label", "boxes", "embedding",
                                       "tags", "count"])


def test_boxes_and_vectors_round_trip_with_their_shapes(detection_table, tmp_path):
    result = detection_table.tfrecord.to_tfrecord(tmp_path / "out", shuffle=False,
                                                  progress=False)
    features = result.metadata["features"]
    assert features["boxes"]["shape"] == [None, 4] and features["boxes"]["dtype"] == "float32"
    assert features["embedding"]["shape"] == [3]
    assert features["tags"] == {"dtype": "string", "shape": [None], "column_dtype": "object"}
    train = detection_table[detection_table.split == "TRAIN"]
    for row, feature in zip(train.itertuples(), _tf_examples(tmp_path / "out")):
        assert list(feature["boxes"].float_list.value) == pytest.approx(
            [v for box in row.boxes for v in box])
    loaded = list(tfrecorder_lite.load(tmp_path / "out", "TRAIN", as_supervised=False))
    for row, example in zip(train.itertuples(), loaded):
        assert example["boxes"].shape == (len(row.boxes), 4)
        np.testing.assert_allclose(example["boxes"].numpy().reshape(-1, 4),
                                   np.array(row.boxes, dtype=np.float32).reshape(-1, 4))
        np.testing.assert_array_equal(example["embedding"].numpy(), row.embedding)
        assert example["tags"].numpy().tolist() == [t.encode() for t in row.tags]
        assert example["count"].numpy() == row.count
    batched = tfrecorder_lite.load(tmp_path / "out", "TRAIN", as_supervised=False,
                                   batch_size=4, image_size=8)
    first = next(iter(batched))
    assert isinstance(first["boxes"], tf.RaggedTensor)
    assert first["boxes"].to_list() == [e["boxes"].numpy().tolist() for e in loaded[:4]]
    assert first["embedding"].shape == (4, 3)  # fixed shapes stay dense
    assert tfrecorder_lite.verify(tmp_path / "out").startswith("OK")


def test_features_declare_types_and_shapes(detection_table, tmp_path):
    declared = {"embedding": "float32[None]", "count": "float32",
                "boxes": {"dtype": "float32", "shape": [None, 4]}}
    result = detection_table.tfrecord.to_tfrecord(tmp_path / "out", features=declared,
                                                  progress=False)
    features = result.metadata["features"]
    assert features["embedding"]["shape"] == [None] and features["count"]["dtype"] == "float32"
    example = next(iter(tfrecorder_lite.load(tmp_path / "out", "TRAIN", as_supervised=False)))
    assert example["count"].dtype == tf.float32 and example["embedding"].shape == (3,)
    flat = detection_table.assign(boxes=[[v for box in b for v in box]
                                         for b in detection_table.boxes])  # x0, y0, x1, y1, ...
    flat.tfrecord.to_tfrecord(tmp_path / "flat", progress=False,
                              features={**declared, "boxes": "float32[None,4]"})
    assert (tmp_path / "flat" / "train-00000-of-00001.tfrecord").read_bytes() == \
        (tmp_path / "out" / "train-00000-of-00001.tfrecord").read_bytes()
    for bad, message in [
        ({"boxes": "float32[None,3]"}, "holds 1 rows of 4 at row 1, which does not fit"),
        ({"embedding": "int64[4]"}, "'embedding' holds 3 values at row 0"),
        ({"count": "float32[]"}, "write \\[None\\] for a list"),
        ({"nope": "int64"}, "not extra columns"),
        ({"count": "complex64"}, "is not a type such as"),
    ]:
        with pytest.raises(SchemaError, match=message):
            detection_table.tfrecord.to_tfrecord(tmp_path / "bad", features=bad, progress=False)


def test_list_columns_that_cannot_be_stored_are_refused_by_name(tmp_path):
    paths = [save(photo(10, 10, seed=i), tmp_path / f"{i}.png", "PNG") for i in range(2)]
    base = pd.DataFrame({"split": "TRAIN", "image_uri": paths, "label": ["a", "b"]})
    cases = {
        "mixed kinds": ([[1, "x"], [2]], "holds lists of values of different kinds"),
        "ragged rows": ([[[1, 2], [3]], []], "holds lists of lists of different lengths"),
        "list and scalar": ([[1.0], 2.0], "mixes lists and single values"),
        "only empty": ([[], []], "holds only empty lists"),
        "dicts": ([{"a": 1}, {}], "holds dicts or sets"),
    }
    for name, (cells, message) in cases.items():
        df = base.assign(extra=pd.Series(cells, dtype=object))
        with pytest.raises(SchemaError, match=f"column 'extra' {message}"):
            df.tfrecord.to_tfrecord(tmp_path / name, progress=False)
        with pytest.raises(SchemaError, match=message):
            df.tfrecord.validate(check=None)


def test_a_missing_list_is_stored_empty_and_validate_takes_list_cells(tmp_path):
    paths = [save(photo(10, 10, seed=i), tmp_path / f"{i}.png", "PNG") for i in range(3)]
    df = pd.DataFrame({"split": "TRAIN", "image_uri": paths, "label": ["a", "b", "a"],
                       "scores": [[0.5, 0.25], None, [1.0, 0.0]]})
    assert df.tfrecord.validate(check="header").empty
    result = df.tfrecord.to_tfrecord(tmp_path / "out", shuffle=False, progress=False)
    assert result.metadata["features"]["scores"]["shape"] == [None]
    assert result.metadata["features"]["scores"]["missing"] == "empty list"
    stored = [list(f["scores"].float_list.value) for f in _tf_examples(tmp_path / "out")]
    assert stored == [[0.5, 0.25], [], [1.0, 0.0]]


# ------------------------------------------------------------------ tables without images

@pytest.fixture(scope="module")
def vectors():
    """A float-vector table with no images (the seeds' ``feature`` float_list records)."""
    rng = np.random.default_rng(0)
    return pd.DataFrame({
        "split": ["TRAIN"] * 30 + ["VALIDATION"] * 6 + ["TEST"] * 4,
        "label": [ANIMALS[i % 3] for i in range(40)],
        "feature": [rng.normal(size=8).astype(np.float32) for _ in range(40)],
        "weight": rng.uniform(size=40),
    })


def test_a_table_without_images_round_trips(vectors, tmp_path):
    result = vectors.tfrecord.to_tfrecord(tmp_path / "out", image_col=None, num_shards=2,
                                          progress=False)
    metadata = result.metadata
    assert metadata["image"] is None and result.counts == {"TRAIN": 30, "VALIDATION": 6,
                                                           "TEST": 4}
    assert not any(key.startswith("image/") and not key.startswith("image/class")
                   for key in metadata["features"])
    assert len(metadata["splits"]["TRAIN"]["shards"]) == 2
    assert tfrecorder_lite.verify(tmp_path / "out").startswith("OK")
    by_weight = {round(float(w), 6): (f, ANIMALS.index(a)) for w, f, a in
                 zip(vectors.weight, vectors.feature, vectors.label)}
    dataset = tfrecorder_lite.load(tmp_path / "out", "TRAIN", batch_size=7)
    assert set(dataset.element_spec[0]) == {"feature", "weight"}
    assert vectors.tfrecord.validate(image_col=None).empty
    seen = 0
    for features, labels in dataset:
        for vector, weight, label in zip(features["feature"].numpy(), features["weight"].numpy(),
                                         labels.numpy()):
            expected, expected_label = by_weight[round(float(weight), 6)]
            np.testing.assert_array_equal(vector, expected)
            assert label == expected_label
            seen += 1
    assert seen == 30
    assert "no images" in str(tfrecorder_lite.read_metadata(tmp_path / "out"))
    with pytest.raises(SchemaError, match="holds no images"):
        tfrecorder_lite.load(tmp_path / "out", "TRAIN", image_size=8)
    with pytest.raises(SchemaError, match="image_col=None writes none"):
        vectors.tfrecord.to_tfrecord(tmp_path / "resized", image_col=None, image_size=8)


def test_a_table_without_images_or_splits_is_assigned_by_its_cells(vectors, tmp_path):
    table = vectors.drop(columns=["split"])
    first = table.tfrecord.to_tfrecord(tmp_path / "a", image_col=None, split_col=None,
                                       progress=False)
    second = table.iloc[::-1].tfrecord.to_tfrecord(tmp_path / "b", image_col=None,
                                                   split_col=None, progress=False)
    assert first.counts == second.counts and sum(first.counts.values()) == 40

    def weights(out):
        return {split: sorted(round(float(f["weight"].numpy()), 6) for f, _ in
                              tfrecorder_lite.load(out, split))
                for split in tfrecorder_lite.read_metadata(out)["splits"]}

    assert weights(tmp_path / "a") == weights(tmp_path / "b")


def test_tfds_reads_every_kind_of_table(automl_csv, detection_table, vectors, tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    tfrecorder_lite.convert(automl_csv[0], tmp_path / "multi", on_error="skip", progress=False)
    detection_table.tfrecord.to_tfrecord(tmp_path / "boxes", progress=False)
    vectors.tfrecord.to_tfrecord(tmp_path / "vectors", image_col=None, progress=False)
    for name in ("multi", "boxes", "vectors"):
        ours = list(tfrecorder_lite.load(tmp_path / name, "TRAIN", as_supervised=False,
                                         dct_method=""))
        theirs = list(tfds.builder_from_directory(str(tmp_path / name)).as_dataset(split="train"))
        assert len(ours) == len(theirs) > 0
        for mine, other in zip(ours, theirs):
            for key, value in mine.items():
                if key in ("image", "image/encoded"):
                    continue
                np.testing.assert_array_equal(value.numpy(), other[key].numpy(), err_msg=key)


# ------------------------------------------------------------------ labels per level

@pytest.fixture(scope="module")
def levels(tmp_path_factory):
    root = tmp_path_factory.mktemp("levels")
    fine = ["cat", "dog", "oak", "fern"]
    rows = [("TRAIN" if i < 10 else "TEST", save(photo(12, 12, seed=i), root / f"{i}.png", "PNG"),
             "animal" if i % 4 < 2 else "plant", fine[i % 4]) for i in range(12)]
    return pd.DataFrame(rows, columns=["split", "image_uri", "coarse", "fine"])


def test_two_label_levels_each_with_its_vocabulary(levels, tmp_path):
    out = tmp_path / "out"
    result = levels.tfrecord.to_tfrecord(out, label_col=["coarse", "fine"], shuffle=False,
                                         progress=False)
    assert result.labels == {"coarse": ["animal", "plant"], "fine": ["cat", "dog", "fern", "oak"]}
    assert (out / "labels-coarse.txt").read_text() == "animal\nplant\n"
    assert (out / "labels-fine.txt").read_text() == "cat\ndog\nfern\noak\n"
    assert not (out / "labels.txt").exists()
    assert result.metadata["splits"]["TEST"]["label_counts"] == {
        "coarse": {"plant": 2}, "fine": {"fern": 1, "oak": 1}}
    for row, feature in zip(levels.itertuples(), _tf_examples(out)):
        assert feature["image/label/fine/text"].bytes_list.value == [row.fine.encode()]
        assert result.labels["coarse"][feature["image/label/coarse"].int64_list.value[0]] == \
            row.coarse
    fine = [int(y) for _, y in tfrecorder_lite.load(out, "TRAIN", label="fine")]
    assert [result.labels["fine"][i] for i in fine] == levels.fine[:10].tolist()
    both = next(iter(tfrecorder_lite.load(out, "TRAIN", batch_size=10)))[1]
    assert set(both) == {"coarse", "fine"} and both["fine"].numpy().tolist() == fine
    chosen = next(iter(tfrecorder_lite.load(out, "TRAIN", label=["fine"])))[1]
    assert set(chosen) == {"fine"}
    with pytest.raises(SchemaError, match="label levels are \\['coarse', 'fine'\\]"):
        tfrecorder_lite.load(out, "TRAIN", label="family")
    assert tfrecorder_lite.verify(out).startswith("OK")
    summary = str(tfrecorder_lite.read_metadata(out))
    assert "2 coarse labels and 4 fine labels" in summary and "    fern: 1" in summary


def test_label_levels_from_the_command_line_and_their_label_maps(levels, tmp_path):
    csv_path = tmp_path / "levels.csv"
    levels.to_csv(csv_path, index=False)
    out = tmp_path / "out"
    assert cli.main(["convert", str(csv_path), str(out), "--label-col", "coarse,fine",
                     "--no-progress"]) == 0
    assert json.loads((out / "metadata.json").read_text())["labels"]["coarse"] == [
        "animal", "plant"]
    mapped = levels.tfrecord.to_tfrecord(
        tmp_path / "mapped", label_col=["coarse", "fine"],
        label_map={"coarse": ["plant", "animal"]}, progress=False)
    assert mapped.labels["coarse"] == ["plant", "animal"]
    with pytest.raises(SchemaError, match="a label level takes one label per row"):
        levels.tfrecord.to_tfrecord(tmp_path / "bad", label_col=["coarse", "fine"],
                                    label_sep="|", progress=False)
    with pytest.raises(SchemaError, match="label level 'fine' holds lists"):
        levels.assign(fine=[["a"]] * 12).tfrecord.to_tfrecord(
            tmp_path / "bad", label_col=["coarse", "fine"], progress=False)


def test_multi_label_from_the_command_line(tmp_path):
    paths = [save(photo(10, 10, seed=i), tmp_path / f"{i}.png", "PNG") for i in range(3)]
    csv_path = tmp_path / "t.csv"
    pd.DataFrame({"split": "TRAIN", "image_uri": paths,
                  "label": ["cat|dog", "dog", "bird|cat"]}).to_csv(csv_path, index=False)
    assert cli.main(["convert", str(csv_path), str(tmp_path / "out"), "--label-sep", "|",
                     "--no-progress"]) == 0
    metadata = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert metadata["task"] == "multi-label" and metadata["labels"] == ANIMALS


def test_direct_dataset_gives_what_load_gives_for_rich_tables(levels, vectors, tmp_path):
    levels.tfrecord.to_tfrecord(tmp_path / "levels", label_col=["coarse", "fine"],
                                progress=False)
    direct = levels.tfrecord.dataset("TRAIN", label_col=["coarse", "fine"], label="fine")
    loaded = tfrecorder_lite.load(tmp_path / "levels", "TRAIN", label="fine")
    assert [int(y) for _, y in direct] == [int(y) for _, y in loaded]
    vectors.tfrecord.to_tfrecord(tmp_path / "vectors", image_col=None, progress=False)
    direct = vectors.tfrecord.dataset("TRAIN", image_col=None, batch_size=30)
    loaded = tfrecorder_lite.load(tmp_path / "vectors", "TRAIN", batch_size=30)
    (a, la), (b, lb) = next(iter(direct)), next(iter(loaded))
    np.testing.assert_array_equal(a["feature"].numpy(), b["feature"].numpy())
    np.testing.assert_array_equal(la.numpy(), lb.numpy())


def test_inspect_shows_every_kind_of_label(automl_csv, levels, vectors, tmp_path):
    tfrecorder_lite.convert(automl_csv[0], tmp_path / "multi", on_error="skip", progress=False)
    levels.tfrecord.to_tfrecord(tmp_path / "levels", label_col=["coarse", "fine"],
                                progress=False)
    vectors.tfrecord.to_tfrecord(tmp_path / "vectors", image_col=None, progress=False)
    multi = tfrecorder_lite.inspect(tmp_path / "multi", num=30).html
    assert "bird, cat" in multi or "cat, dog" in multi  # a sample's labels, joined
    assert "3 labels (multi-label)" in multi
    by_level = tfrecorder_lite.inspect(tmp_path / "levels", num=4).html
    assert "coarse: animal" in by_level and "fine: fern" in by_level
    assert "animal / cat" in by_level or "plant / oak" in by_level
    no_images = tfrecorder_lite.inspect(tmp_path / "vectors").html
    assert "no images" in no_images and "<h2>Images</h2>" not in no_images


def test_a_malformed_manifest_of_a_rich_table_names_its_field(automl_csv, detection_table,
                                                              levels, tmp_path):
    tfrecorder_lite.convert(automl_csv[0], tmp_path / "multi", on_error="skip", progress=False)
    detection_table.tfrecord.to_tfrecord(tmp_path / "boxes", progress=False)
    levels.tfrecord.to_tfrecord(tmp_path / "levels", label_col=["coarse", "fine"],
                                progress=False)
    cases = [
        ("multi", lambda m: m.update(task="multi"), ": task: 'multi' is not 'multi-label'"),
        ("multi", lambda m: m["features"]["image/class/label"].update(shape=[]),
         ": features.image/class/label.shape: [] is not [null]"),
        ("boxes", lambda m: m["features"]["boxes"].update(shape=[None, None]),
         ": features.boxes.shape: [None, None] is not a shape"),
        ("levels", lambda m: m["labels"].update({"../x": ["a"]}),
         "is not a list of label texts, or an object level -> list of label texts"),
        ("levels", lambda m: m["features"].pop("image/label/fine/text"),
         " has no 'features.image/label/fine/text'"),
    ]
    for name, change, message in cases:
        path = tmp_path / name / "metadata.json"
        original = path.read_text()
        metadata = json.loads(original)
        change(metadata)
        path.write_text(json.dumps(metadata))
        with pytest.raises(tfrecorder_lite.ManifestError, match=re.escape(message)):
            tfrecorder_lite.load(tmp_path / name, "TRAIN")
        path.write_text(original)
