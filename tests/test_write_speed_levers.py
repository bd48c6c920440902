"""The write path's speed levers keep the bytes and the durability they replace.

Write-behind (the disk starts on a shard while it grows) and gathered writes (a batch of
records handed to the OS as a list of pieces, never joined) must give byte-identical files, and
the commit must still fsync the whole file before its rename.
"""

import os
import sys

import pytest

from tfrecorder_lite import storage
from tfrecorder_lite.storage import local
from tfrecorder_lite.record import framing as tfrecord

MiB = 1 << 20


def test_write_behind_hands_every_range_to_the_disk_once_in_order(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(local, "_start_writeback",
                        lambda fd, offset, length: calls.append((offset, length)))
    monkeypatch.setattr(local, "WRITE_BEHIND_BYTES", 4 * MiB)
    pending = storage.Store(tmp_path).open_for_commit("a.bin")
    for _ in range(9):
        pending.write(b"x" * (MiB + 1))
    pending.write([b"y" * MiB, b"z" * (2 * MiB)])  # a gathered write counts the same
    pending.commit()
    assert calls == [(0, 4 * (MiB + 1)), (4 * (MiB + 1), 4 * (MiB + 1)),
                     (8 * (MiB + 1), MiB + 1 + 3 * MiB)]
    assert os.path.getsize(tmp_path / "a.bin") == 9 * (MiB + 1) + 3 * MiB


def test_write_behind_is_off_at_zero_and_for_remote_spools(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(local, "_start_writeback", lambda *args: calls.append(args))
    monkeypatch.setattr(local, "WRITE_BEHIND_BYTES", 0)
    pending = storage.Store(tmp_path).open_for_commit("a.bin")
    pending.write(b"x" * (2 * MiB))
    pending.commit()
    monkeypatch.setattr(local, "WRITE_BEHIND_BYTES", MiB)
    pending = storage.Store("memory://levers").open_for_commit("b.bin")
    pending.write(b"x" * (2 * MiB))
    pending.commit()
    assert calls == []
    assert storage.Store("memory://levers").size("b.bin") == 2 * MiB


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range is Linux's")
def test_write_behind_really_starts_the_writeback_on_linux(tmp_path):
    """The ctypes binding must be found and accepted by the kernel (a wrong signature would
    make every call fail, silently, and the fsync of each commit slow again)."""
    assert local._sync_file_range() is not None
    with open(tmp_path / "f", "wb") as f:
        f.write(b"x" * MiB)
        f.flush()
        assert local._sync_file_range()(f.fileno(), 0, MiB, local._SYNC_FILE_RANGE_WRITE) == 0


def test_commit_still_fsyncs_the_whole_file_after_write_behind(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.fstat(fd).st_size)
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(local, "WRITE_BEHIND_BYTES", MiB)
    pending = storage.Store(tmp_path).open_for_commit("a.bin")
    pending.write(b"x" * (3 * MiB + 5))
    pending.commit()
    assert synced[0] == 3 * MiB + 5  # the file itself, whole, before the folder


def test_gathered_writes_survive_short_writes(tmp_path, monkeypatch):
    real_writev = os.writev
    monkeypatch.setattr(os, "writev", lambda fd, buffers: real_writev(
        fd, [memoryview(b"".join(bytes(b) for b in buffers))[:1000]]))
    pieces = [os.urandom(n) for n in (0, 1, 999, 1000, 1001, 5000, 3)]
    pending = storage.Store(tmp_path).open_for_commit("a.bin")
    pending.write(b"head")
    pending.writelines(pieces)
    pending.write(b"tail")
    pending.commit()
    assert (tmp_path / "a.bin").read_bytes() == b"head" + b"".join(pieces) + b"tail"
    assert pending.bytes_written == len(b"head" + b"".join(pieces) + b"tail")


def test_gathered_writes_take_more_pieces_than_one_writev_call(tmp_path):
    pieces = [bytes([i % 251]) * (i % 7) for i in range(3 * local._IOV_MAX + 17)]
    pending = storage.Store(tmp_path).open_for_commit("a.bin")
    pending.writelines(pieces)
    pending.commit()
    assert (tmp_path / "a.bin").read_bytes() == b"".join(pieces)


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_records_written_through_a_pending_file_match_a_plain_file(tmp_path, compression):
    """The shard path (PendingFile: gathered writes) and any file object (writelines) give the
    same bytes and checksums as records framed one by one."""
    big = os.urandom(70_000)
    records = [b"", b"a", [b"head", big, b"tail"], [os.urandom(5000)], b"last" * 2000]
    pending = storage.Store(tmp_path).open_for_commit("ours.tfrecord")
    ours = tfrecord.RecordWriter(pending, compression, sha256=True)
    ours.write_many(records[:3])
    ours.write_many(records[3:])
    ours_sums = ours.close()
    pending.commit()
    with open(tmp_path / "plain.tfrecord", "wb") as f:
        plain = tfrecord.RecordWriter(f, compression, sha256=True)
        for record in records:
            plain.write(b"".join(record) if isinstance(record, list) else record)
        plain_sums = plain.close()
    assert (tmp_path / "ours.tfrecord").read_bytes() == (tmp_path / "plain.tfrecord").read_bytes()
    assert ours_sums == plain_sums
    assert ours.bytes_written == pending.bytes_written == os.path.getsize(
        tmp_path / "ours.tfrecord")
    assert ours.record_sizes == plain.record_sizes
    with open(tmp_path / "ours.tfrecord", "rb") as f:
        assert list(tfrecord.iter_records(f, compression)) == \
            [b"".join(r) if isinstance(r, list) else r for r in records]
