"""The runner seam: whatever runs the shard tasks, the bytes are the same and a bad row arrives
on the driver as a whole InvalidRowError (row, path, reason)."""

import os

import joblib
import pandas as pd
import pytest

import tfrecorder_lite
from tfrecorder_lite import InvalidRowError
from conftest import photo, save
from processes import loaded_modules


@pytest.fixture
def table_with_truncated_jpeg(tmp_path):
    rows = []
    for i in range(12):
        path = save(photo(24, 32, seed=i), tmp_path / "images" / f"{i}.jpg", "JPEG")
        rows.append(("TRAIN" if i < 9 else "TEST", path, "cat" if i % 2 else "dog"))
    bad = tmp_path / "images" / "5.jpg"
    bad.write_bytes(bad.read_bytes()[:-100])
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"], index=range(100, 112))


@pytest.mark.parametrize("backend", ["threading", "loky"])
def test_a_bad_row_arrives_whole_from_threads_and_processes(table_with_truncated_jpeg, tmp_path,
                                                            backend):
    out = tmp_path / "out"
    with joblib.parallel_config(backend=backend, n_jobs=2), \
            pytest.raises(InvalidRowError) as caught:
        table_with_truncated_jpeg.tfrecord.to_tfrecord(out, num_shards=3, progress=False)
    assert caught.value.row == 105
    assert caught.value.path.endswith(os.path.join("images", "5.jpg"))
    assert caught.value.reason == "truncated JPEG"
    assert not (out / "metadata.json").exists()


def test_skipped_rows_from_process_workers_are_reported(table_with_truncated_jpeg, tmp_path):
    with joblib.parallel_config(backend="loky", n_jobs=2):
        result = table_with_truncated_jpeg.tfrecord.to_tfrecord(
            tmp_path / "out", num_shards=3, on_error="skip", progress=False)
    assert list(result.rejected.index) == [105]
    assert list(result.rejected.reason) == ["truncated JPEG"]
    assert result.counts == {"TRAIN": 8, "TEST": 3}
    assert tfrecorder_lite.verify(tmp_path / "out").startswith("OK")


@pytest.mark.parametrize("check", ["header", "decode"])
def test_the_same_table_gives_the_same_files_from_threads_and_processes(image_table, tmp_path,
                                                                         check):
    """Processes and threads write the same bytes, and a process worker that wrote shards has
    not imported pandas or TensorFlow."""
    digests = {}
    for backend in ("threading", "loky"):
        out = tmp_path / backend
        with joblib.parallel_config(backend=backend, n_jobs=2):
            image_table.tfrecord.to_tfrecord(out, num_shards=3, check=check, progress=False)
            if backend == "loky":  # the same workers, asked what they have loaded
                modules = joblib.Parallel()(joblib.delayed(loaded_modules)() for _ in range(4))
        digests[backend] = {p.name: p.read_bytes() for p in sorted(out.iterdir())
                            if p.is_file()}
    assert len([n for n in digests["loky"] if n.endswith(".tfrecord")]) == 9
    assert digests["threading"] == digests["loky"]
    assert any("tfrecorder_lite.shard" in m for m in modules)  # a worker that wrote shards
    assert not any({"pandas", "tensorflow"} & m for m in modules)
