"""Conversions on a real dask cluster through joblib's dask backend: each shard is a task that
a worker process writes straight to the output storage, with the bytes of a local run."""

import hashlib
import os
import signal
import tempfile
import threading

import distributed
import joblib
import pandas as pd
import pytest

import imagegen as ig
import processes
from processes import TESTS, wait_for_file
from tfrecorder_lite import InvalidRowError, storage

OPTIONS = {"progress": False, "on_error": "skip", "num_shards": 3}


@pytest.fixture(scope="module")
def client(s3):
    """A LocalCluster of 2 single-threaded worker processes on 127.0.0.1 (started after the S3
    server, so that the workers inherit its endpoint from the environment)."""
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None)
    with distributed.Client(cluster) as dask_client:
        yield dask_client
    cluster.close()


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """The mixed table (good images of four formats, five bad rows) and its local conversion."""
    root = tmp_path_factory.mktemp("cluster")
    df, _ = ig.mixed_table(root / "images", n_good=36)
    reference = df.tfrecord.to_tfrecord(str(root / "reference"), **OPTIONS)
    return df, reference, ig.tree_digest(root / "reference")


def on_cluster(client, convert):
    """Run ``convert()`` inside ``parallel_config(backend="dask")``; returns its result and the
    workers that ran shard tasks."""
    with distributed.get_task_stream(client) as stream:
        with joblib.parallel_config(backend="dask"):
            result = convert()
    workers = {t["worker"] for t in stream.data if "write_shard" in t["key"]}
    return result, workers


def test_shard_tasks_run_on_the_workers_and_write_the_local_bytes(client, table, tmp_path):
    df, reference, digest = table
    out = tmp_path / "out"
    result, workers = on_cluster(client, lambda: df.tfrecord.to_tfrecord(str(out), **OPTIONS))
    assert len(workers) == 2  # both worker processes wrote shards
    assert ig.tree_digest(out) == digest
    assert result.metadata == reference.metadata
    assert list(result.rejected.index) == list(reference.rejected.index)  # from every worker


def test_an_append_on_the_cluster_writes_the_bytes_of_a_local_append(client, table, tmp_path):
    df, _, _ = table
    first, new = df.iloc[:24], df.iloc[12:]  # new: rows already there, new ones, the bad rows
    out, reference = tmp_path / "out", tmp_path / "reference"
    for folder in (out, reference):
        first.tfrecord.to_tfrecord(str(folder), **OPTIONS)
    expected = new.tfrecord.to_tfrecord(str(reference), append=True, **OPTIONS)
    result, workers = on_cluster(client, lambda: new.tfrecord.to_tfrecord(
        str(out), append=True, **OPTIONS))
    assert workers  # the generation's shards were written by the workers
    assert result.skipped == expected.skipped > 0
    assert list(result.rejected.index) == list(expected.rejected.index) and \
        len(result.rejected) == 5  # the bad rows, in rejected-g0001.csv
    assert ig.tree_digest(out) == ig.tree_digest(reference)
    assert "rejected-g0001.csv" in os.listdir(out)


def test_workers_write_straight_to_an_object_store(client, table, s3):
    df, reference, digest = table
    out = s3.new_bucket() + "/out"
    result, workers = on_cluster(client, lambda: df.tfrecord.to_tfrecord(out, **OPTIONS))
    assert len(workers) == 2
    assert result.metadata == reference.metadata
    names = {name for name in digest if not name.startswith(".")}
    got = {name: hashlib.sha256(storage.Store(out).read_bytes(name)).hexdigest()
           for name in names}
    assert got == {name: digest[name] for name in names}


def test_on_error_raise_names_the_row_across_processes(client, table, tmp_path):
    df, reference, _ = table
    bad = df.copy()
    bad.loc["truncated", "split"] = "train"
    good_rows = bad.drop(index=[i for i in reference.rejected.index if i != "truncated"])
    with pytest.raises(InvalidRowError) as info:
        on_cluster(client, lambda: good_rows.tfrecord.to_tfrecord(
            str(tmp_path / "out"), **{**OPTIONS, "on_error": "raise"}))
    assert info.value.row == "truncated"  # raised in a worker, unpickled here whole
    assert info.value.path == df.loc["truncated", "image_uri"]
    assert info.value.reason.startswith("truncated")
    assert not (tmp_path / "out" / "metadata.json").exists()


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_worker_killed_mid_shard_leaves_no_partial_shard_and_the_job_finishes(
        client, s3, tmp_path, where):
    """SIGKILL the worker process that holds a shard written but not committed (its temporary
    file beside the shard, or its local spool before the upload): dask reruns the task on a
    live worker, and the output is byte-identical to a local run."""
    root = tmp_path / "images"
    rows = []
    for i in range(48):
        path = ig.save(root / f"{i:03d}.jpg", ig.pattern(96, 128, seed=i), "JPEG", quality=90)
        rows.append(("train" if i % 4 else "test", path, f"c{i % 3}"))
    df = pd.DataFrame(rows, columns=["split", "image_uri", "label"])
    options = {**OPTIONS, "num_shards": 4}
    expected = ig.tree_digest(df.tfrecord.to_tfrecord(str(tmp_path / "reference"),
                                                      **options).output_dir)
    if where == "local":
        out, partial = str(tmp_path / "out"), (str(tmp_path / "out"), ".tfrecord.tmp")
    else:
        out = s3.new_bucket() + "/out"
        partial = (os.path.join(tempfile.gettempdir(), "tfrecorder_lite-"), ".tmp")
    gate = str(tmp_path / "gate")
    client.run(exec, f"import sys; sys.path.insert(0, {TESTS!r})")
    client.run(processes.stop_before_shard_commit, gate)  # the first worker at a commit stops
    killed = []

    def kill_the_stopped_worker():
        pid = int(wait_for_file(gate, timeout=60))
        killed.append(_holds_open(pid, *partial))  # the shard's bytes, not yet committed
        os.kill(pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_the_stopped_worker)
    killer.start()
    try:
        on_cluster(client, lambda: df.tfrecord.to_tfrecord(out, **options))
    finally:
        killer.join()
        client.wait_for_workers(2, timeout=60)  # the nanny restarts the killed worker
        client.run(processes.let_shard_commits_go)
    assert killed == [True], "a worker was killed holding its uncommitted shard"
    if where == "local":
        assert ig.tree_digest(out) == expected
    else:
        store = storage.Store(out)
        assert {name: hashlib.sha256(store.read_bytes(name)).hexdigest()
                for name in store.list()} == expected


def _holds_open(pid, prefix, suffix):
    """True when process ``pid`` has a file open whose path has this prefix and suffix."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix) and target.endswith(suffix):
            return True
    return False
