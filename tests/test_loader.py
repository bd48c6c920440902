"""load(): pipelines per split, batching, shuffling, errors."""

import joblib
import numpy as np
import pytest
import tensorflow as tf

import tfrecorder_lite
from tfrecorder_lite.read import loader


@pytest.fixture
def written(tmp_path, image_table):
    image_table.tfrecord.to_tfrecord(tmp_path / "out", num_shards=2, progress=False)
    return tmp_path / "out"


def test_split_none_gives_every_split_with_its_length(written):
    datasets = tfrecorder_lite.load(written)
    assert {k: len(v) for k, v in datasets.items()} == {"TRAIN": 16, "VALIDATION": 4, "TEST": 4}


def test_batches_are_uint8_rgb_of_the_asked_size(written):
    dataset = tfrecorder_lite.load(written, "train", batch_size=5, image_size=(10, 14))
    assert len(dataset) == 4
    shapes = [images.shape for images, _ in dataset]
    assert shapes == [(5, 10, 14, 3)] * 3 + [(1, 10, 14, 3)]
    images, labels = next(iter(dataset))
    assert images.dtype == tf.uint8 and labels.dtype == tf.int64


def test_the_autotuner_is_off_on_few_cores_and_on_elsewhere(written, monkeypatch):
    assert [loader.autotune_enabled(n) for n in (1, 2, 8, 16, 64)] == [False, False, True,
                                                                       True, True]
    dataset = tfrecorder_lite.load(written, "train", batch_size=5, image_size=(10, 14))
    assert bool(dataset.options().autotune.enabled) is \
        loader.autotune_enabled(joblib.cpu_count())
    monkeypatch.setattr(joblib, "cpu_count", lambda: 16)  # a process of 16 usable cores
    many = tfrecorder_lite.load(written, "train", batch_size=5, image_size=(10, 14))
    assert many.options().autotune.enabled is not False
    assert [images.shape[0] for images, _ in many] == [5, 5, 5, 1]
    monkeypatch.setattr(joblib, "cpu_count", lambda: 2)
    few = tfrecorder_lite.load(written, "train", batch_size=5, image_size=(10, 14))
    assert few.options().autotune.enabled is False
    # options set by the user afterwards take precedence, as tf.data merges them
    options = tf.data.Options()
    options.autotune.enabled = True
    mine = few.map(lambda images, labels: (images, labels)).with_options(options)
    assert mine.options().autotune.enabled is True
    assert [images.shape[0] for images, _ in mine] == [5, 5, 5, 1]


def test_autograph_converts_none_of_the_pipelines_functions(written, capsys):
    # AutoGraph logs each call it converts ("Converted call: <function ...>"); rewriting the
    # library's functions was most of a process's first load()
    tf.autograph.set_verbosity(1, alsologtostdout=True)
    try:
        capsys.readouterr()
        dataset = tfrecorder_lite.load(written, "train", batch_size=5, image_size=(10, 14))
        assert [images.shape[0] for images, _ in dataset] == [5, 5, 5, 1]
        logged = capsys.readouterr().out
    finally:
        tf.autograph.set_verbosity(0, alsologtostdout=False)
    assert "Converted call" not in logged, logged[:2000]


def test_batching_images_of_different_sizes_needs_image_size(written):
    with pytest.raises(tfrecorder_lite.SchemaError, match="image_size"):
        tfrecorder_lite.load(written, "TRAIN", batch_size=4)


def test_same_size_images_batch_without_image_size(tmp_path, image_table):
    image_table.tfrecord.to_tfrecord(tmp_path / "out", image_size=(9, 9), progress=False)
    images, _ = next(iter(tfrecorder_lite.load(tmp_path / "out", "TRAIN", batch_size=4)))
    assert images.shape == (4, 9, 9, 3)


def test_shuffle_is_seeded_and_keeps_every_example(written):
    def names(**options):
        dataset = tfrecorder_lite.load(written, "TRAIN", as_supervised=False, **options)
        return [f["image/filename"] for f in dataset.as_numpy_iterator()]

    plain = names()
    assert names() == plain
    shuffled = names(shuffle=True, seed=1)
    assert shuffled == names(shuffle=True, seed=1)
    assert sorted(shuffled) == sorted(plain) and shuffled != plain


def test_grayscale_channels(written):
    image, _ = next(iter(tfrecorder_lite.load(written, "TEST", channels=1)))
    assert image.shape[-1] == 1


def test_unknown_split_and_unfinished_folder_are_clear_errors(written, tmp_path):
    with pytest.raises(tfrecorder_lite.SchemaError, match="TRAIN"):
        tfrecorder_lite.load(written, "holdout")
    with pytest.raises(tfrecorder_lite.ManifestError, match="metadata.json"):
        tfrecorder_lite.load(tmp_path / "empty")


def test_trains_a_keras_model(written):
    dataset = tfrecorder_lite.load(written, "TRAIN", batch_size=8, image_size=(16, 16),
                                   shuffle=True, seed=0)
    model = tf.keras.Sequential([
        tf.keras.Input((16, 16, 3)), tf.keras.layers.Rescaling(1 / 255),
        tf.keras.layers.GlobalAveragePooling2D(), tf.keras.layers.Dense(2)])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(dataset, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
