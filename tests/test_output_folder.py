"""The output folder under contention: one writer at a time (real concurrent subprocesses, a
killed holder, leases on an object store), overwrite that removes only the library's own files,
durable commits, and a rejected.csv that is safe to open in a spreadsheet."""

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import tfrecorder_lite
from tfrecorder_lite.sources import registry
from tfrecorder_lite import OutputExistsError, OutputLockedError
from tfrecorder_lite.output import lock as folder_lock
from tfrecorder_lite.output.layout import LOCK
from tfrecorder_lite.output.lock import FolderLock
from tfrecorder_lite.storage import Store
from conftest import photo, save
from processes import PAUSED_AFTER_FIRST_SHARD

CLI = [sys.executable, "-m", "tfrecorder_lite.cli"]


def _table(folder, prefix, n, size=256):
    """A CSV of ``n`` JPEGs whose labels start with ``prefix``; slow enough to overlap."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(len(prefix) + n)
    lines = ["split,image_uri,label"]
    for i in range(n):
        pixels = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"{prefix}{i}.jpg", quality=90)
        lines.append(f"{'TEST' if i % 5 == 0 else 'TRAIN'},{prefix}{i}.jpg,{prefix}{i % 3}")
    (folder / "table.csv").write_text("\n".join(lines) + "\n")
    return str(folder / "table.csv")


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    root = tmp_path_factory.mktemp("contention")
    return _table(root / "a", "a", 400, size=320), _table(root / "b", "b", 40)


def _start(csv, out, *extra):
    """Start a conversion (resizing: a few seconds for table a, with one worker)."""
    return subprocess.Popen(CLI + ["convert", csv, str(out), "--no-progress", "--jobs", "1",
                                   "--num-shards", "4", "--image-size", "160x160", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(condition, timeout=60):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


def _snapshot(out):
    return {n: (os.stat(out / n).st_mtime_ns, os.stat(out / n).st_size)
            for n in os.listdir(out) if n != LOCK}


def _labels_of(out):
    return tfrecorder_lite.read_metadata(out)["labels"]


# ========================================================================= one writer per folder

@pytest.fixture
def start_gated():
    """Starts conversions that hold ``out`` after their first shard until ``gate`` is created;
    any still running at the end of the test is killed."""
    started = []

    def start(csv, out, gate):
        proc = subprocess.Popen([sys.executable, "-c", PAUSED_AFTER_FIRST_SHARD, csv, str(out),
                                 str(gate)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(proc)
        _wait_for(lambda: os.path.exists(f"{gate}.waiting") or proc.poll() is not None)
        assert proc.poll() is None, proc.stderr.read()
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)


def test_a_second_conversion_fails_at_once_naming_the_holder_and_changes_nothing(
        tables, tmp_path, start_gated):
    a_csv, b_csv = tables
    out, gate = tmp_path / "out", tmp_path / "gate"
    first = start_gated(a_csv, out, gate)
    before = _snapshot(out)
    second = _start(b_csv, out, "--overwrite")  # the command line: exit 2, one line
    _, err = second.communicate(timeout=60)
    assert second.returncode == 2 and "being written by another conversion" in err, err
    assert len(err.strip().splitlines()) == 1
    started = time.monotonic()
    with pytest.raises(OutputLockedError, match=f"pid {first.pid} on {socket.gethostname()}"):
        tfrecorder_lite.convert(b_csv, out, overwrite=True, progress=False)
    assert time.monotonic() - started < 5  # at once, not after waiting for the holder
    assert _snapshot(out) == before  # the holder is paused: any change was the refused runs'
    gate.touch()
    assert first.wait(timeout=120) == 0, first.stderr.read()  # the holder was not disturbed
    assert _labels_of(out) == ["a0", "a1", "a2"]
    tfrecorder_lite.verify(out)
    assert not (out / LOCK).exists()


def test_a_lock_left_by_a_killed_run_does_not_block_the_next(tables, tmp_path, start_gated):
    a_csv, _ = tables
    out = tmp_path / "out"
    holder = start_gated(a_csv, out, tmp_path / "never")
    holder.kill()
    holder.wait(timeout=60)
    left = json.loads((out / LOCK).read_text())  # left behind, naming a dead process
    assert left["pid"] == holder.pid
    result = tfrecorder_lite.convert(a_csv, out, progress=False, num_shards=4, n_jobs=1)
    assert sum(result.counts.values()) == 400
    tfrecorder_lite.verify(out)
    assert not (out / LOCK).exists()


@pytest.mark.parametrize("delay", [0.0, 0.4, 1.5])
def test_two_writers_in_any_interleaving_leave_a_folder_that_verifies(tables, tmp_path, delay):
    a_csv, b_csv = tables
    out = tmp_path / "out"
    first = _start(a_csv, out, "--overwrite")
    time.sleep(delay)
    second = _start(b_csv, out, "--overwrite")
    outcomes = {}
    for name, proc in (("a", first), ("b", second)):
        _, err = proc.communicate(timeout=180)
        assert proc.returncode in (0, 2), err
        if proc.returncode == 2:
            assert "being written by another conversion" in err, err
        outcomes[name] = proc.returncode
    assert 0 in outcomes.values()
    labels = _labels_of(out)
    winner = labels[0][0]
    assert outcomes[winner] == 0 and labels == [f"{winner}0", f"{winner}1", f"{winner}2"]
    report = tfrecorder_lite.verify(out)
    assert f"{400 if winner == 'a' else 40} records" in report


def test_locks_on_the_local_disk_exclude_each_other_in_one_process_too(tmp_path):
    store = Store(str(tmp_path / "out"))
    with FolderLock(store):
        with pytest.raises(OutputLockedError, match=f"pid {os.getpid()}"):
            FolderLock(store).__enter__()
    with FolderLock(store):  # released: free again
        pass
    assert os.listdir(tmp_path / "out") == []


def _write_lease(store, **holder):
    store.make_dirs()
    store.write_atomic(LOCK, json.dumps({"pid": 1, "host": "elsewhere", "token": "t",
                                         "started": time.time(), "heartbeat": time.time(),
                                         **holder}))


def test_a_lease_on_an_object_store_refuses_a_second_writer(s3, tmp_path, tables):
    _, b_csv = tables
    store = Store(s3.new_bucket() + "/records")
    with FolderLock(store):
        assert json.loads(store.read_text(LOCK))["pid"] == os.getpid()
        proc = subprocess.run(CLI + ["convert", b_csv, store.url, "--no-progress"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and f"pid {os.getpid()}" in proc.stderr, proc.stderr
        assert store.list() == [LOCK]  # nothing else was written
    assert store.list() == []
    result = tfrecorder_lite.convert(b_csv, store.url, progress=False)
    assert sum(result.counts.values()) == 40 and LOCK not in store.list()


def test_stale_leases_are_taken_over_and_live_ones_are_not(s3, monkeypatch):
    store = Store(s3.new_bucket() + "/records")
    _write_lease(store)  # another machine, renewed just now
    with pytest.raises(OutputLockedError, match="pid 1 on elsewhere"):
        FolderLock(store).__enter__()
    _write_lease(store, heartbeat=time.time() - folder_lock.STALE_SECONDS - 1)
    with FolderLock(store):  # not renewed for too long: its holder is gone
        assert json.loads(store.read_text(LOCK))["pid"] == os.getpid()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    _write_lease(store, host=socket.gethostname(), pid=int(dead.stdout))
    with FolderLock(store):  # a process of this machine that no longer exists
        pass
    monkeypatch.setattr(folder_lock, "HEARTBEAT_SECONDS", 0.05)
    with FolderLock(store):  # the holder renews its lease while it works
        first = json.loads(store.read_text(LOCK))["heartbeat"]
        time.sleep(0.5)
        assert json.loads(store.read_text(LOCK))["heartbeat"] > first
    assert LOCK not in store.list()


# ==================================================== overwrite removes only what the library wrote

@pytest.fixture
def small(tmp_path):
    return _table(tmp_path / "small", "s", 12, size=24)


def test_overwrite_never_removes_a_same_named_file_the_library_did_not_write(small, tmp_path):
    out = tmp_path / "out"
    tfrecorder_lite.convert(small, out, progress=False, num_shards=1)
    (out / "train-00000-of-00002.tfrecord").write_bytes(b"the user's own file")
    before = _snapshot(out)
    with pytest.raises(OutputExistsError, match="train-00000-of-00002.tfrecord"):
        tfrecorder_lite.convert(small, out, progress=False, num_shards=2, overwrite=True)
    assert _snapshot(out) == before


def test_overwrite_never_removes_a_folder_named_like_a_library_file(small, tmp_path):
    out = tmp_path / "out"
    (out / "labels.txt").mkdir(parents=True)
    (out / "labels.txt" / "mine.txt").write_text("keep me")
    with pytest.raises(OutputExistsError, match="labels.txt"):
        tfrecorder_lite.convert(small, out, progress=False, overwrite=True)
    assert (out / "labels.txt" / "mine.txt").read_text() == "keep me"


def test_overwrite_replaces_the_earlier_output_and_keeps_unrelated_files(small, tables,
                                                                         tmp_path):
    out = tmp_path / "out"
    tfrecorder_lite.convert(small, out, progress=False, num_shards=3)
    (out / "notes.txt").write_text("mine")
    tfrecorder_lite.convert(tables[1], out, progress=False, num_shards=1, overwrite=True)
    shards = sorted(n for n in os.listdir(out) if n.endswith(".tfrecord"))
    assert shards == ["test-00000-of-00001.tfrecord", "train-00000-of-00001.tfrecord"]
    assert (out / "notes.txt").read_text() == "mine"
    assert _labels_of(out) == ["b0", "b1", "b2"]
    tfrecorder_lite.verify(out)


def test_resume_removes_only_the_unfinished_shards_of_its_own_job(small, tmp_path):
    out = tmp_path / "out"
    df, _ = registry.read_source(small)
    df["image_uri"] = [os.path.join(os.path.dirname(small), p) for p in df["image_uri"]]
    plan_names = ["train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord",
                  "test-00000-of-00001.tfrecord"]
    state = out / ".tfrecorder_lite"
    state.mkdir(parents=True)
    fingerprint = tfrecorder_lite.write.plan.plan_table(
        df, split_col="split", image_col="image_uri", label_col="label",
        num_shards={"TRAIN": 2, "TEST": 1}).fingerprint
    (state / "job.json").write_text(json.dumps({"fingerprint": fingerprint,
                                                "files": plan_names}))
    (out / plan_names[0]).write_bytes(b"half a shard of the killed run")
    (out / "validation-00000-of-00001.tfrecord").write_bytes(b"not from this job")
    result = df.tfrecord.to_tfrecord(out, progress=False, num_shards={"TRAIN": 2, "TEST": 1})
    assert sum(result.counts.values()) == 12
    assert (out / "validation-00000-of-00001.tfrecord").read_bytes() == b"not from this job"
    tfrecorder_lite.verify(out)


# ============================================================================== durable commits

def test_every_file_reaches_the_disk_before_its_rename_and_metadata_comes_last(small, tmp_path,
                                                                              monkeypatch):
    """A power cut cannot be staged in a test; the order of the real system calls can be
    watched: each file is fsynced before it is renamed into place, the folder after it."""
    events, real_fsync, real_replace = [], os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst):
        events.append(("rename", str(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    out = tmp_path / "out"
    tfrecorder_lite.convert(small, out, progress=False, num_shards=2, n_jobs=1)
    renames = [i for i, (kind, _) in enumerate(events) if kind == "rename"]
    assert renames
    for i in renames:
        final = events[i][1]
        assert ("fsync", final + ".tmp") in events[:i], final
        assert ("fsync", os.path.dirname(final)) in events[i + 1:], final
    shards = [i for i in renames if events[i][1].endswith(".tfrecord")]
    durable = [events.index(("fsync", str(out)), i) for i in shards]
    assert len(shards) == 4
    assert events.index(("rename", str(out / "metadata.json"))) > max(durable)


# ================================================================ rejected.csv in a spreadsheet

def test_rejected_csv_neutralizes_formulas_and_the_result_keeps_exact_values(tmp_path):
    rows = [("TRAIN", "=HYPERLINK(\"http://x\")", "cat"), ("TRAIN", "@SUM(A1)", "-2+3"),
            ("TRAIN", "+cmd", "-5"), ("TRAIN", "missing.jpg", "=1+1")]
    sound = save(photo(8, 8), tmp_path / "sound.png")  # a table of no sound row is refused
    df = pd.DataFrame(rows + [("TRAIN", sound, "cat")], columns=["split", "image_uri", "label"])
    result = df.tfrecord.to_tfrecord(tmp_path / "out", on_error="skip", progress=False)
    assert result.rejected["image_uri"].tolist() == [r[1] for r in rows]  # exact values
    written = pd.read_csv(tmp_path / "out" / "rejected.csv", dtype=str, keep_default_na=False)
    assert written["image_uri"].tolist() == ["'=HYPERLINK(\"http://x\")", "'@SUM(A1)", "'+cmd",
                                             "missing.jpg"]
    assert written["label"].tolist() == ["cat", "'-2+3", "-5", "'=1+1"]  # numbers stay numbers
