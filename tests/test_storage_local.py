"""storage on the local disk: reads that trust no file, durable writes, locks, the Store."""

import os
import pickle
import socket
import threading

import pytest

from tfrecorder_lite import SchemaError, storage
from tfrecorder_lite.storage import local


# ------------------------------------------------------------------ refusals

def test_what_is_no_regular_file_is_refused_saying_what_it_is(tmp_path):
    os.mkfifo(tmp_path / "pipe")  # opening it for reading must not wait for a writer
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    try:
        found = storage.read_many([str(tmp_path / "pipe"), str(tmp_path / "sock"), "/dev/null",
                                   str(tmp_path), str(tmp_path / "missing")])
    finally:
        sock.close()
    assert [getattr(e, "reason", type(e)) for e in found] == [
        "a FIFO (named pipe), not a regular file", "a socket, not a regular file",
        "a device, not a regular file", IsADirectoryError, FileNotFoundError]
    stats = storage.stat_many([str(tmp_path / "pipe"), str(tmp_path)])
    assert isinstance(stats[0], storage.FileRefused) and isinstance(stats[1], IsADirectoryError)


def test_a_file_over_the_limit_is_refused_unread_with_its_size(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 1500)
    (tmp_path / "fits").write_bytes(b"y" * 1000)
    big, fits = storage.read_many([str(tmp_path / "big"), str(tmp_path / "fits")],
                                  max_bytes=1000)
    assert fits == b"y" * 1000
    assert isinstance(big, storage.FileTooLarge) and (big.size, big.limit) == (1500, 1000)
    assert big.reason == "file too large: 1.5 kB (limit 1.0 kB)"  # no option named here
    assert big.filename == str(tmp_path / "big")
    copy = pickle.loads(pickle.dumps(big))
    assert (type(copy), copy.size, copy.limit, copy.reason) == (storage.FileTooLarge, 1500,
                                                                1000, big.reason)


def test_a_large_file_is_judged_by_its_head_before_it_is_read(tmp_path):
    heads = []

    def judge(head):
        heads.append(len(head))
        return "not wanted" if head.startswith(b"no") else None

    small, large, wanted = (tmp_path / "small"), (tmp_path / "large"), (tmp_path / "wanted")
    small.write_bytes(b"no" * 10)
    large.write_bytes(b"no" * local.HEAD_BYTES)
    wanted.write_bytes(b"ok" * local.HEAD_BYTES)
    found = storage.read_many([str(small), str(large), str(wanted)], check_head=judge)
    assert found[0] == b"no" * 10  # small files are read whole, never judged by a head
    assert found[1].reason == "not wanted" and found[2] == b"ok" * local.HEAD_BYTES
    assert heads == [local.HEAD_BYTES, local.HEAD_BYTES]


# ------------------------------------------------------------------ durable writes

def test_a_pending_file_shows_nothing_under_its_name_until_committed(tmp_path):
    store = storage.Store(tmp_path)
    pending = store.open_for_commit("a.bin")
    pending.write(b"head")
    pending.writelines([b"-", b"tail"])
    assert sorted(os.listdir(tmp_path)) == ["a.bin.tmp"] and store.size("a.bin") is None
    pending.commit()
    assert os.listdir(tmp_path) == ["a.bin"] and store.read_bytes("a.bin") == b"head-tail"
    assert pending.bytes_written == 9

    discarded = store.open_for_commit("b.bin")
    discarded.write(b"never")
    discarded.discard()
    assert os.listdir(tmp_path) == ["a.bin"]


def test_a_commit_fsyncs_the_file_then_renames_it_then_fsyncs_the_folder(tmp_path, monkeypatch):
    events, real_fsync, real_replace = [], os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: events.append(
        ("fsync", os.readlink(f"/proc/self/fd/{fd}"))) or real_fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: events.append(("rename", a, b)) or
                        real_replace(a, b))
    pending = storage.Store(tmp_path).open_for_commit("a.bin")
    pending.write(b"x")
    pending.commit()
    final = str(tmp_path / "a.bin")
    assert events == [("fsync", final + ".tmp"), ("rename", final + ".tmp", final),
                      ("fsync", str(tmp_path))]


def test_unique_temporary_names_let_several_writers_fill_one_folder(tmp_path):
    store = storage.Store(tmp_path)
    mine = store.open_for_commit("same.bin", unique_temp=True)
    names = []
    thread = threading.Thread(target=lambda: names.append(
        store.open_for_commit("same.bin", unique_temp=True)))
    thread.start()
    thread.join()
    theirs = names[0]
    temps = sorted(os.listdir(tmp_path))
    assert len(temps) == 2 and all(n.startswith(f"same.bin.{os.getpid()}-") and
                                   n.endswith(".tmp") for n in temps)
    theirs.write(b"theirs")
    mine.write(b"mine")
    theirs.commit()
    mine.commit()
    assert os.listdir(tmp_path) == ["same.bin"] and store.read_bytes("same.bin") == b"mine"


def test_write_file_writes_a_whole_file_by_path_and_refuses_read_only_urls(tmp_path,
                                                                           monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert storage.write_file("page.html", "<p>é</p>") == str(tmp_path / "page.html")
    assert (tmp_path / "page.html").read_text(encoding="utf-8") == "<p>é</p>"
    with pytest.raises(FileNotFoundError):
        storage.write_file(tmp_path / "no" / "such" / "page.html", b"x")
    assert os.listdir(tmp_path) == ["page.html"]
    with pytest.raises(SchemaError, match="https:// URLs are read-only"):
        storage.write_file("https://example.invalid/page.html", b"x")


# ------------------------------------------------------------------ the folder, and its lock

def test_a_commit_that_cannot_take_its_name_leaves_no_temporary_file(tmp_path):
    (tmp_path / "taken").mkdir()  # the final name is a folder
    with pytest.raises(OSError):
        storage.write_file(tmp_path / "taken", "{}")
    assert sorted(os.listdir(tmp_path)) == ["taken"]


def test_a_local_store_lists_sizes_reads_and_removes(tmp_path):
    store = storage.Store(f"file://{tmp_path}/out")
    assert store.url == str(tmp_path / "out") and store.is_local
    assert store.list() == [] and store.size("x") is None
    store.make_dirs()
    store.write_atomic("b.json", '{"a": 1}')
    store.child("sub").make_dirs()
    store.child("sub").write_atomic("c.txt", b"c")
    (tmp_path / "out" / "bad.json").write_text("{")
    assert store.list() == ["b.json", "bad.json", "sub"]
    assert store.size("b.json") == 8 and store.size("sub") is None
    assert store.read_json("b.json") == {"a": 1} and store.read_json("bad.json") is None
    assert store.read_json("missing.json") is None
    assert store.child("sub").read_text("c.txt") == "c"
    store.remove("sub")
    store.remove("b.json")
    store.remove("never-there")
    assert store.list() == ["bad.json"]
    assert pickle.loads(pickle.dumps(store)).path("bad.json") == str(tmp_path / "out" /
                                                                     "bad.json")


@pytest.mark.skipif(not local.CAN_LOCK, reason="flock is POSIX's")
def test_a_locked_file_refuses_a_second_holder_and_names_the_first(tmp_path):
    path = str(tmp_path / "lock")
    fd = local.lock_file(path, b'{"pid": 1}')
    with pytest.raises(local.FileLocked) as info:
        local.lock_file(path, b'{"pid": 2}')  # another open file: flock excludes it too
    assert info.value.content == b'{"pid": 1}'
    local.unlock_file(path, fd)
    assert not os.path.exists(path)
    fd = local.lock_file(path, b"again")
    with open(path, "rb") as f:
        assert f.read() == b"again"
    local.unlock_file(path, fd)
