"""storage behind fsspec URLs, against the GCS and S3 emulators: many reads and stats at once,
each file's failure its own, uploads that appear whole or not at all."""

import glob
import os
import tempfile

import pytest

from conftest import GCS_OPTIONS
from tfrecorder_lite import storage

OPTIONS = {"gs": GCS_OPTIONS, "s3": {}}


@pytest.fixture(params=["gcs", "s3"])
def bucket(request):
    """A fresh bucket of each emulator: ``(ObjectStore, bucket URL)``."""
    store = request.getfixturevalue(request.param)
    return store, store.new_bucket()


def test_many_files_are_read_at_once_each_with_its_own_answer(bucket, tmp_path):
    store, url = bucket
    store.fs.pipe_file(f"{url}/a.bin", b"a" * 10)
    store.fs.pipe_file(f"{url}/empty.bin", b"")
    store.fs.pipe_file(f"{url}/big.bin", b"b" * 2000)
    (tmp_path / "local.bin").write_bytes(b"local")
    uris = [f"{url}/a.bin", f"{url}/empty.bin", str(tmp_path / "local.bin"),
            f"{url}/missing.bin", f"{url}/big.bin"]
    assert storage.read_many(uris[:4], OPTIONS)[:3] == [b"a" * 10, b"", b"local"]
    found = storage.read_many(uris, OPTIONS, max_bytes=1000)
    assert found[:3] == [b"a" * 10, b"", b"local"]  # an empty object within a range, too
    assert isinstance(found[3], FileNotFoundError)
    assert isinstance(found[4], storage.FileTooLarge) and found[4].limit == 1000
    assert found[4].reason == "file too large: over 1.0 kB (limit 1.0 kB)"  # fetched no further


def test_stats_identify_the_content_and_listing_a_folder_agrees(bucket):
    store, url = bucket
    store.fs.pipe_file(f"{url}/a.bin", b"first")
    store.fs.pipe_file(f"{url}/sub/b.bin", b"b")
    before = storage.stat_many([f"{url}/a.bin", f"{url}/sub", f"{url}/nope"], OPTIONS)
    assert before[0][0] == 5 and before[0][1]
    assert isinstance(before[1], IsADirectoryError) and isinstance(before[2], FileNotFoundError)
    store.fs.pipe_file(f"{url}/a.bin", b"other")  # same size, new content
    store.fs.invalidate_cache()
    after = storage.stat_many([f"{url}/a.bin"], OPTIONS)[0]
    assert after[0] == 5 and after[1] != before[0][1]


def test_an_object_appears_whole_on_commit_and_never_on_discard(bucket):
    store, url = bucket
    folder = storage.Store(f"{url}/out", OPTIONS)
    spools = set(glob.glob(os.path.join(tempfile.gettempdir(), "tfrecorder_lite-*")))
    pending = folder.open_for_commit("a.bin")
    pending.writelines([b"x" * 1000, b"y"])
    assert folder.list() == [] and folder.size("a.bin") is None
    pending.commit()
    assert folder.list() == ["a.bin"] and folder.read_bytes("a.bin") == b"x" * 1000 + b"y"
    discarded = folder.open_for_commit("b.bin")
    discarded.write(b"never")
    discarded.discard()
    assert folder.list() == ["a.bin"]
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "tfrecorder_lite-*"))) == spools


def test_a_remote_store_walks_lists_and_removes(bucket):
    store, url = bucket
    for name in ("b/2.jpg", "a.jpg", ".hidden/x.jpg", "b/.x.jpg", "b/1.jpg"):
        store.fs.pipe_file(f"{url}/set/{name}", name.encode())
    assert list(storage.walk_files(f"{url}/set", OPTIONS)) == [
        (("a.jpg",), f"{url}/set/a.jpg"), (("b", "1.jpg"), f"{url}/set/b/1.jpg"),
        (("b", "2.jpg"), f"{url}/set/b/2.jpg")]
    assert storage.is_dir(f"{url}/set/b", OPTIONS) and not storage.is_dir(f"{url}/set/a.jpg",
                                                                          OPTIONS)
    folder = storage.Store(f"{url}/set/", OPTIONS)
    assert folder.url == f"{url}/set" and folder.list() == [".hidden", "a.jpg", "b"]
    assert folder.child("b").list() == [".x.jpg", "1.jpg", "2.jpg"]
    assert folder.size("a.jpg") == 5 and folder.size("b") is None
    folder.remove("b")
    folder.remove("never-there")
    assert folder.list() == [".hidden", "a.jpg"]
    assert storage.write_file(f"{url}/set/page.html", "<p>", OPTIONS) == f"{url}/set/page.html"
    assert folder.read_text("page.html") == "<p>"
