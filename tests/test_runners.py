"""The runner seam: whatever runs the shard tasks, the bytes are the same and a bad row arrives
on the driver as a whole InvalidRowError (row, path, reason)."""

import os
import time
from types import SimpleNamespace

import joblib
import pandas as pd
import pytest

import tfrecorder_lite
from tfrecorder_lite import InvalidRowError
from tfrecorder_lite.write import runners
from tfrecorder_lite.images.normalize import ImageOptions
from tfrecorder_lite.storage import is_remote
from tfrecorder_lite.write.plan import ShardSpec
from tfrecorder_lite.table.row_columns import TextColumn
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
    assert any("tfrecorder_lite.write.task" in m for m in modules)  # a worker that wrote shards
    assert not any({"pandas", "tensorflow"} & m for m in modules)


# ============================================================== the policy

def _plan(rows, image_bytes, shards, check="header", size=None, url="/data/img.jpg"):
    """A plan's shape as the policy sees it: rows of images of ``image_bytes`` in ``shards``."""
    image = None if check is None else ImageOptions(check=check, size=size)
    per_shard = [range(i * rows // shards, (i + 1) * rows // shards) for i in range(shards)]
    return SimpleNamespace(
        image=image, paths=TextColumn([[url] * rows], [is_remote(url)] * rows), shards=tuple(
            ShardSpec("TRAIN", i, shards, tuple(positions), None, len(positions) * image_bytes)
            for i, positions in enumerate(per_shard)))


def _policy(plan, n_jobs=-1):
    outer, prefer, threads = runners.parallelism(plan, plan.shards, n_jobs)
    return prefer, outer, threads


@pytest.fixture
def two_cores(monkeypatch):
    monkeypatch.setattr(joblib, "cpu_count", lambda *args, **kwargs: 2)
    monkeypatch.setattr(joblib, "effective_n_jobs", lambda n_jobs=-1: 2 if n_jobs == -1 else n_jobs)
    monkeypatch.setattr(runners, "_pool", {"workers": 0, "last_used": float("-inf")})


def test_small_header_writes_stay_in_threads_and_large_ones_go_to_processes(two_cores):
    assert _policy(_plan(3_000, 74_000, 4)) == ("threads", 2, 1)
    assert _policy(_plan(300_000, 74_000, 170)) == ("processes", 2, 1)
    assert _policy(_plan(300_000, 74_000, 170), n_jobs=1)[0] == "threads"  # one task at a time
    assert _policy(_plan(300_000, 74_000, 1))[0] == "threads"  # one shard: nothing to spread
    assert _policy(_plan(3_000, 74_000, 4, check="resize")) == ("processes", 2, 2)
    remote = _plan(300_000, 74_000, 170, url="gs://bucket/img.jpg")
    assert _policy(remote) == ("threads", 2, 2 * runners._FETCHING_THREADS_PER_WORKER)


def test_more_cores_move_the_crossover_down():
    def crossover(cores, check="header"):
        """The fewest rows (of 74 KB images, ~1,600 a shard) that processes write sooner."""
        for n in range(1_000, 400_001, 1_000):
            work = runners.Work(check, n, n * 74_000, n // 1_600 + 3, 1_600)
            if runners.predicted_seconds(work, cores, True) < \
                    runners.predicted_seconds(work, cores, False):
                return n
        return None

    header = [crossover(cores) for cores in (2, 8, 16, 64)]
    assert None not in header and header == sorted(header, reverse=True)
    assert header[0] > header[-1]
    # decoding releases the GIL: threads keep up on few cores, not on many
    decode = [crossover(cores, "decode") for cores in (2, 16, 64)]
    assert decode[0] is None and decode[1] > decode[2]


def test_a_pool_started_lately_costs_no_start(two_cores):
    plan = _plan(12_000, 74_000, 8)
    cold = _policy(plan)[0]
    runners._pool.update(workers=2, last_used=time.monotonic())
    assert (cold, _policy(plan)[0]) == ("threads", "processes")
    runners._pool.update(last_used=time.monotonic() - 2 * runners._POOL_KEPT_SECONDS)
    assert _policy(plan)[0] == "threads"


def test_the_callers_parallel_config_wins(two_cores):
    large, small = _plan(300_000, 74_000, 170), _plan(3_000, 74_000, 4)
    with joblib.parallel_config(backend="threading"):
        assert _policy(large) == ("threads", 2, 1)
    with joblib.parallel_config(prefer="threads"):
        assert _policy(large) == ("threads", 2, 1)
    with joblib.parallel_config(backend="loky"):
        assert _policy(small)[:2] == ("processes", 2)
    with joblib.parallel_config(prefer="processes"):
        assert _policy(small)[:2] == ("processes", 2)
    with joblib.parallel_config(backend="threading"):
        assert _policy(_plan(3_000, 74_000, 4, check="resize"))[0] == "threads"
