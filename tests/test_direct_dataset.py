"""df.tfrecord.dataset(): tf.data straight from the table, with the elements load() gives."""

import numpy as np
import pandas as pd
import pytest

import tfrecorder_lite
from conftest import photo, save
from tfrecorder_lite import InvalidRowError


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("direct")
    rows = []
    for i in range(18):
        fmt, ext = ("JPEG", "jpg") if i % 2 else ("PNG", "png")
        mode = "CMYK" if i == 5 else "L" if i == 4 else "RGB"
        path = save(photo(14 + i, 18, seed=i, mode=mode), root / f"{i}.{ext}", fmt)
        rows.append(("TRAIN" if i < 14 else "TEST", path, ["cat", "dog", "owl"][i % 3], i * 1.5))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label", "weight"]), root


def _by_filename(dataset):
    return {bytes(e["image/filename"].numpy()): e for e in dataset}


def test_the_direct_pipeline_gives_load_s_elements(table, tmp_path):
    df, _ = table
    result = df.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    written = _by_filename(tfrecorder_lite.load(tmp_path / "out", "TRAIN", as_supervised=False))
    direct = df.tfrecord.dataset("TRAIN", as_supervised=False)
    straight = _by_filename(direct)
    assert direct.labels == result.labels and direct.rejected == []
    assert straight.keys() == written.keys() and len(straight) == 14
    for name, element in straight.items():
        np.testing.assert_array_equal(element["image"], written[name]["image"])
        for key in ("image/class/label", "image/class/text", "weight", "image/format"):
            assert element[key].numpy() == written[name][key].numpy(), (name, key)
    first = [int(y) for _, y in df.tfrecord.dataset("TEST", seed=3)]
    assert first == [int(y) for _, y in df.tfrecord.dataset("TEST", seed=3)]  # a fixed order


def test_batches_and_resizes_like_load(table):
    df, _ = table
    images, labels = next(iter(df.tfrecord.dataset("TRAIN", batch_size=4, image_size=(8, 10))))
    assert images.shape == (4, 8, 10, 3) and images.dtype.name == "uint8"
    assert labels.shape == (4,) and labels.dtype.name == "int64"


def test_bad_rows_are_skipped_and_reported_or_raised(table, tmp_path):
    df, root = table
    broken = root / "broken.jpg"
    data = open(save(photo(200, 200, seed=1), root / "big.jpg", "JPEG"), "rb").read()
    broken.write_bytes(data[:len(data) * 2 // 3])  # cut inside the compressed data
    bad = pd.concat([df, pd.DataFrame([("TRAIN", str(root / "gone.png"), "cat", 0.0),
                                       ("TRAIN", str(broken), "dog", 0.0)], columns=df.columns,
                                      index=["gone", "broken"])])
    dataset = bad.tfrecord.dataset("TRAIN")
    # every bad row is known before the dataset is iterated: the table's, then the images'
    assert [(row, reason) for row, _, reason in dataset.rejected] == [
        ("gone", "file not found"), ("broken", "truncated JPEG")]
    assert len(dataset) == 14 and len(list(dataset)) == 14
    with pytest.raises(InvalidRowError, match="file not found"):
        bad.tfrecord.dataset("TRAIN", on_error="raise")
    with pytest.raises(InvalidRowError, match="truncated JPEG") as raised:
        bad.drop(index="gone").tfrecord.dataset("TRAIN", on_error="raise")
    assert raised.value.row == "broken"


def test_length_labels_and_rejected_survive_map_and_batch(table):
    df, root = table
    bad = pd.concat([df, pd.DataFrame([("TRAIN", str(root / "gone.png"), "cat", 0.0)],
                                      columns=df.columns, index=["gone"])])
    dataset, info = bad.tfrecord.dataset("TRAIN", image_size=(8, 8), with_info=True)
    mapped = dataset.map(lambda image, label: (image, label + 1))
    assert len(mapped) == info.num_examples == 14
    assert len(mapped.batch(4)) == 4 and len(mapped.batch(4, drop_remainder=True)) == 3
    assert info.split == "TRAIN" and info.labels == ["cat", "dog", "owl"]
    assert [(row, reason) for row, _, reason in info.rejected] == [("gone", "file not found")]
    assert len(list(mapped)) == 14
    _, test_info = df.tfrecord.dataset("test", with_info=True)
    assert test_info.split == "TEST" and test_info.num_examples == 4


def test_an_image_that_changes_after_the_check_stops_iteration(table, tmp_path):
    df, _ = table
    changing = tmp_path / "changing.png"
    save(photo(20, 20, seed=9), changing, "PNG")
    one = pd.DataFrame([("TRAIN", str(changing), "cat", 1.0)], columns=df.columns)
    dataset = one.tfrecord.dataset("TRAIN")
    assert len(dataset) == 1
    changing.write_bytes(b"not an image any more")
    with pytest.raises(Exception, match="changed"):
        list(dataset)
