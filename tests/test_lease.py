"""The lease of an output folder on an object store (the GCS emulator and moto's S3), fenced:
a writer paused past its lease while another takes the folder over stops and writes nothing
more; a renewal that finds another holder stops the run; every write, a task's in its own
process too, checks the lease first, metadata.json's included; the loser of a simultaneous
start, and a lock file that is no lease, get an OutputLockedError that says what to do; the
takeover warning reaches the user. Lease timings are shortened (the module's constants) and
every race is made to happen at a chosen moment."""

import json
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import tfrecorder_lite
from tfrecorder_lite import OutputLockedError
from tfrecorder_lite.write import runners, driver as writer
from tfrecorder_lite.output import lock as folder_lock
from tfrecorder_lite.output.layout import LOCK
from tfrecorder_lite.output.lock import Fence, FencedStore, FolderLock
from tfrecorder_lite.storage import Store
from conftest import photo, save
from processes import PAUSED_AFTER_FIRST_SHARD

REPO = Path(__file__).resolve().parents[1]


def _env():
    """The environment of a child: this checkout, and the emulators' addresses (set by their
    fixtures)."""
    return {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.fixture(params=["gcs", "s3"])
def bucket(request):
    """A fresh folder on the GCS emulator or moto's S3 (a Store with its options)."""
    store = request.getfixturevalue(request.param)
    return Store(store.new_bucket() + "/records", store.options or None)


@pytest.fixture
def short_lease(monkeypatch):
    """Leases renewed every 0.2 s and stale after 2 s, in this process."""
    monkeypatch.setattr(folder_lock, "HEARTBEAT_SECONDS", 0.2)
    monkeypatch.setattr(folder_lock, "STALE_SECONDS", 2.0)


def _table_csv(folder, prefix, n=8):
    """A CSV of ``n`` small PNGs labelled ``<prefix>0``, ``<prefix>1``, in TRAIN and TEST."""
    rows = [("TEST" if i % 4 == 0 else "TRAIN",
             save(photo(16, 16, seed=i + len(prefix)), folder / f"{prefix}{i}.png"),
             f"{prefix}{i % 2}") for i in range(n)]
    path = folder / f"{prefix}.csv"
    pd.DataFrame(rows, columns=["split", "image_uri", "label"]).to_csv(path, index=False)
    return str(path)


def _write_lease(store, **fields):
    """Write another conversion's lease (pid 1 on elsewhere, renewed just now) into ``store``.

    A renewal of the holder's lease (a read, then a write) can land between this write and
    its check, as it can against a real taker; like the library's own takeover, which reads
    the lease back, this one writes again until the store holds it.
    """
    lease = {"pid": 1, "host": "elsewhere", "token": "other", **fields}
    for _ in range(20):
        try:
            store.write_atomic(LOCK, json.dumps({"started": time.time(),
                                                 "heartbeat": time.time(), **lease}))
        except OSError:  # the store holds other bytes than were uploaded: a renewal's
            continue
        if store.read_json(LOCK).get("token") == lease["token"]:
            return
    raise AssertionError("the lease could not be written over the holder's renewals")


def _lease(store):
    return json.loads(store.read_bytes(LOCK))


def _files(store):
    """Every file below ``store`` and its bytes."""
    store.fs.invalidate_cache()
    root = store.fs._strip_protocol(store.url)
    return {path[len(root) + 1:]: store.fs.cat_file(path) for path in store.fs.find(root)}


def _cli(args, store):
    options = ["--storage-options", json.dumps(store.storage_options)] \
        if store.storage_options else []
    return subprocess.run([sys.executable, "-m", "tfrecorder_lite.cli", *args, *options],
                          capture_output=True, text=True, env=_env(), cwd=REPO, timeout=180)


def _raised(check, timeout=20):
    """The OutputLockedError ``check()`` raises within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            check()
        except OutputLockedError as exc:
            return exc
        assert time.monotonic() < deadline, "never raised"
        time.sleep(0.02)


# ============================================================== taken over while writing

def test_a_writer_paused_past_its_lease_stops_and_writes_nothing_more(
        bucket, tmp_path, short_lease, caplog):
    a_csv, b_csv = _table_csv(tmp_path, "a"), _table_csv(tmp_path, "b")
    gate = tmp_path / "gate"
    first = subprocess.Popen([sys.executable, "-c", PAUSED_AFTER_FIRST_SHARD, a_csv,
                              bucket.url, str(gate), json.dumps(bucket.storage_options),
                              "short-lease"], env=_env(), cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(f"{gate}.waiting"):
            assert first.poll() is None, first.stderr.read()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(first.pid, signal.SIGSTOP)  # paused: its lease is no longer renewed
        time.sleep(folder_lock.STALE_SECONDS + 0.5)
        with caplog.at_level(logging.WARNING, logger="tfrecorder_lite.output.lock"):
            result = tfrecorder_lite.convert(b_csv, bucket.url, overwrite=True, num_shards=4,
                                             n_jobs=1, progress=False,
                                             storage_options=bucket.storage_options)
        assert f"taking over the stale lock of {bucket.url} (pid {first.pid} on " \
            f"{socket.gethostname()}" in caplog.text
        assert result.labels == ["b0", "b1"]
        written = _files(bucket)
        gate.touch()
    finally:
        os.kill(first.pid, signal.SIGCONT)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 1 and "OutputLockedError" in err, err
    assert "this one stopped and wrote nothing more" in err or \
        "it stopped and wrote nothing more" in err, err
    assert _files(bucket) == written  # the second conversion's output, untouched
    assert tfrecorder_lite.read_metadata(bucket.url, bucket.storage_options)["labels"] == \
        ["b0", "b1"]
    verified = tfrecorder_lite.verify(bucket.url, storage_options=bucket.storage_options)
    assert verified.startswith("OK: 2 split(s)") and "8 records" in verified


def test_a_renewal_that_finds_another_holder_stops_the_run(bucket, short_lease):
    lock = FolderLock(bucket).__enter__()
    try:
        _write_lease(bucket)  # another conversion took the folder over (say we were paused)
        error = _raised(lock.check)
        assert str(error).startswith(f"{bucket.url} was taken over by another conversion (pid "
                                     "1 on elsewhere")
        time.sleep(5 * folder_lock.HEARTBEAT_SECONDS)
        assert _lease(bucket)["token"] == "other"  # its heartbeat stopped: nothing overwritten
        for write in (lambda: lock.store.write_atomic("labels.txt", "late\n"),
                      lambda: lock.store.child(".tfrecorder_lite").write_atomic("job.json", "{}"),
                      lambda: lock.store.remove(LOCK)):
            with pytest.raises(OutputLockedError, match="pid 1 on elsewhere"):
                write()
    finally:
        lock.release()
    assert bucket.list() == [LOCK] and _lease(bucket)["token"] == "other"  # left to its holder


def test_a_removed_lease_stops_the_run_too(bucket, short_lease):
    with FolderLock(bucket) as lock:
        bucket.remove(LOCK)
        error = _raised(lock.check)
        assert "the lease of this conversion" in str(error) and "was removed" in str(error)
        with pytest.raises(OutputLockedError, match="was removed"):
            lock.store.write_atomic("labels.txt", "late\n")
    assert bucket.list() == []


def test_metadata_json_is_written_only_while_the_lease_is_held(bucket, tmp_path, monkeypatch):
    """The heartbeat has not noticed yet (20 s beats): the write of metadata.json checks."""
    real = writer.write_manifest

    def taken_over_just_before(store, manifest):
        _write_lease(bucket)
        return real(store, manifest)

    monkeypatch.setattr(writer, "write_manifest", taken_over_just_before)
    with pytest.raises(OutputLockedError, match="was taken over by another conversion"):
        tfrecorder_lite.convert(_table_csv(tmp_path, "a"), bucket.url, n_jobs=1,
                                progress=False, storage_options=bucket.storage_options)
    names = bucket.list()
    assert "metadata.json" not in names and any(n.endswith(".tfrecord") for n in names)
    assert _lease(bucket)["token"] == "other"


def test_the_driver_stops_between_receipts_when_a_renewal_found_the_lease_lost(
        bucket, tmp_path, short_lease, monkeypatch):
    real, written = runners.write_shard, []

    def first_shard_then_taken_over(task, store, on_error):
        receipt = real(task, store, on_error)
        written.append(receipt.name)
        if len(written) == 1:
            _write_lease(bucket)  # taken over; our heartbeat sees it within a beat or two
            _raised(lock_of[0].check)
        return receipt

    lock_of = []
    real_enter = FolderLock.__enter__

    def remember(self):
        lock_of.append(self)
        return real_enter(self)

    monkeypatch.setattr(runners, "write_shard", first_shard_then_taken_over)
    monkeypatch.setattr(FolderLock, "__enter__", remember)
    with pytest.raises(OutputLockedError, match="was taken over"):
        tfrecorder_lite.convert(_table_csv(tmp_path, "a"), bucket.url, num_shards=4, n_jobs=1,
                                progress=False, storage_options=bucket.storage_options)
    assert len(written) == 1  # no task started after the renewal found it


FENCED_WRITE = textwrap.dedent("""
    # What a task does in its own process: write a file through the Store it was given.
    import pickle, sys
    from tfrecorder_lite import OutputLockedError
    store = pickle.loads(open(sys.argv[1], "rb").read())
    try:
        store.child("part").write_atomic(sys.argv[2], b"a task's file")
        print("written")
    except OutputLockedError as exc:
        print(exc)
""")


def test_tasks_check_the_lease_where_they_run(bucket, tmp_path, short_lease):
    with FolderLock(bucket) as lock:
        assert isinstance(lock.store, FencedStore)
        pickled = tmp_path / "store.pickle"
        pickled.write_bytes(pickle.dumps(lock.store))

        def task(name):
            run = subprocess.run([sys.executable, "-c", FENCED_WRITE, str(pickled), name],
                                 capture_output=True, text=True, env=_env(), cwd=REPO, timeout=120)
            assert run.returncode == 0, run.stderr
            return run.stdout.strip()

        assert task("a.bin") == "written"
        lock._stop.set()  # this holder renews no more: no renewal can race the takeover below
        lock._heartbeat.join()
        _write_lease(bucket)
        assert "was taken over by another conversion (pid 1 on elsewhere" in task("b.bin")
    assert bucket.child("part").list() == ["a.bin"]


def test_a_lease_not_renewed_lately_holds_writes_for_one_beat(bucket, monkeypatch):
    """A holder that just resumed renews at once: a write waits for that; without it, it
    stops before the lease could be taken over."""
    monkeypatch.setattr(folder_lock, "HEARTBEAT_SECONDS", 1.0)
    monkeypatch.setattr(folder_lock, "STALE_SECONDS", 5.0)
    _write_lease(bucket, token="mine", heartbeat=time.time() - 4.5)  # past 5 - 1 s
    fenced = FencedStore.around(bucket, Fence(bucket, "mine"))
    with pytest.raises(OutputLockedError, match=r"lease was last renewed \d+ s ago"):
        fenced.write_atomic("a.txt", "x")
    renewal = threading.Timer(0.1, lambda: _write_lease(bucket, token="mine"))
    renewal.start()
    fenced.write_atomic("b.txt", "x")  # renewed meanwhile: written
    renewal.join()
    assert sorted(bucket.list()) == [LOCK, "b.txt"]


# ====================================================================== starting

def test_the_loser_of_a_simultaneous_start_gets_output_locked_error(bucket, monkeypatch):
    """The other writer's lease lands right after ours, before we read it back."""
    other = json.dumps({"pid": 1, "host": "elsewhere", "token": "other",
                        "started": time.time(), "heartbeat": time.time(), "size": "differs"})
    fs, real = bucket.fs, bucket.fs.put_file

    def put_then_the_other_lands(lpath, rpath, *args, **kwargs):
        result = real(lpath, rpath, *args, **kwargs)
        if rpath.endswith(LOCK):
            fs.pipe_file(rpath, other.encode())
        return result

    monkeypatch.setattr(fs, "put_file", put_then_the_other_lands)
    with pytest.raises(OutputLockedError, match="being written by another conversion \\(pid 1 "
                                                "on elsewhere"):
        FolderLock(bucket).__enter__()
    assert bucket.list() == [LOCK] and _lease(bucket)["token"] == "other"


NOT_LEASES = {
    "not-json": ("{oops", "not JSON"),
    "garbage-heartbeat": (json.dumps({"pid": 7, "host": "h", "token": "t", "started": 1.0,
                                      "heartbeat": "yesterday"}),
                          "heartbeat 'yesterday' is not a time"),
    "garbage-pid": (json.dumps({"pid": [1], "host": "h", "token": "t", "started": 1.0,
                                "heartbeat": 1.0}), "pid [1] is not a process id"),
    "future": (json.dumps({"pid": 7, "host": "h", "token": "t", "started": time.time(),
                           "heartbeat": time.time() + 10 * 86400}),
               "its heartbeat is dated "),
}


@pytest.mark.parametrize("kind", NOT_LEASES)
def test_a_lock_file_that_is_no_lease_is_reported_with_how_to_clear_it(bucket, kind):
    content, problem = NOT_LEASES[kind]
    bucket.write_atomic(LOCK, content)
    with pytest.raises(OutputLockedError) as error:
        FolderLock(bucket).__enter__()
    assert str(error.value).startswith(
        f"{bucket.url}: its lock file {bucket.path(LOCK)} is not a tfrecorder_lite lease "
        f"({problem}")
    assert str(error.value).endswith("nothing was changed. If no conversion is writing this "
                                     "folder, delete that file and run again.")
    assert bucket.list() == [LOCK] and bucket.read_text(LOCK) == content
    bucket.remove(LOCK)  # as it says
    with FolderLock(bucket):
        pass


def test_the_command_line_reports_a_future_lease_in_one_line(s3, tmp_path):
    bucket = Store(s3.new_bucket() + "/records")
    bucket.write_atomic(LOCK, NOT_LEASES["future"][0])
    run = _cli(["convert", _table_csv(tmp_path, "a"), bucket.url, "--no-progress"], bucket)
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert "is not a tfrecorder_lite lease (its heartbeat is dated" in run.stderr
    assert "delete that file and run again" in run.stderr and bucket.list() == [LOCK]


def test_the_takeover_warning_reaches_the_user(gcs, tmp_path, caplog):
    bucket = Store(gcs.new_bucket() + "/records", gcs.options)
    stale = time.time() - folder_lock.STALE_SECONDS - 5
    _write_lease(bucket, heartbeat=stale)
    run = _cli(["convert", _table_csv(tmp_path, "a"), bucket.url, "--no-progress"], bucket)
    assert run.returncode == 0, run.stderr
    assert f"WARNING tfrecorder_lite.output.lock: taking over the stale lock of {bucket.url} " \
        f"(pid 1 on elsewhere" in run.stderr
    _write_lease(bucket, heartbeat=stale)
    with caplog.at_level(logging.WARNING, logger="tfrecorder_lite"):
        with FolderLock(bucket):
            pass
    assert "taking over the stale lock" in caplog.text and "last seen" in caplog.text
