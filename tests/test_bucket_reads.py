"""Training from a bucket: remote outputs streamed by ranged reads (no copy before the first
batch), the bounded cache folder shared by processes, a new permutation for each iteration of
a shuffled load(), and iterator checkpoints of every load() pipeline, bound to what they read.

The store is a real HTTP server in a child process (tests/hostile_http.py, ``/ok/``: ranged
reads honoured, every request counted)."""

import contextlib
import fcntl
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfrecorder_lite
from conftest import photo, save
from hostile_http import HostileServer
from processes import TESTS
from tfrecorder_lite import SchemaError, VerifyError
from tfrecorder_lite.read import shard_cache

N = 48  # TRAIN records, 6 shards


def _table(root, n, seed=0):
    rows = [("TRAIN", save(photo(10, 12, seed=seed * 1000 + i), root / f"{seed}-{i}.jpg"),
             f"label{i % 4}") for i in range(n)]
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"])


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``(local output, its URL on the server, server)``: N TRAIN records in 6 shards."""
    root = tmp_path_factory.mktemp("bucket")
    out = _table(root, N).tfrecord.to_tfrecord(root / "out", num_shards=6, progress=False,
                                               leakage="ignore").output_dir
    server = HostileServer(out)
    yield out, f"{server.url}/ok/out", server
    server.stop()


def _names(dataset):
    return [n.decode() for batch in dataset for n in np.atleast_1d(batch["image/filename"].numpy())]


def _shard_gets(server):
    """GET requests of shard files the server has answered since the last reset."""
    return sum(n for key, n in server.counts().items()
               if key.startswith("GET ") and key.endswith(".tfrecord"))


def _cache_files(folder):
    """``{name: size}`` of the cache folder's files, listed under the lock the cache takes
    to make room, start a copy or finish one (a listing beside those would see a copy
    evicted and the one made in its place together, a state the folder never had)."""
    found = {}
    with open(os.path.join(folder, ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            for entry in os.scandir(folder):
                with contextlib.suppress(FileNotFoundError):  # a copy found damaged, dropped
                    if entry.name != ".lock":
                        found[entry.name] = entry.stat().st_size
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return found


# ------------------------------------------------------------------ streaming

@pytest.mark.parametrize("shuffle", [False, "global"])
def test_a_remote_output_is_streamed_in_the_order_of_the_local_one(served, shuffle):
    out, url, server = served
    kept = set(os.listdir(shard_cache.default_cache_dir())) \
        if os.path.isdir(shard_cache.default_cache_dir()) else set()
    options = dict(batch_size=5, image_size=(8, 8), as_supervised=False, shuffle=shuffle,
                   seed=3)
    remote = tfrecorder_lite.load(url, "TRAIN", **options)
    assert _names(remote) == _names(tfrecorder_lite.load(out, "TRAIN", **options))
    # read by ranges from the store, nothing copied to the default cache folder
    assert not os.path.isdir(shard_cache.default_cache_dir()) or \
        set(os.listdir(shard_cache.default_cache_dir())) == kept


def test_shuffle_true_streams_whole_shards_in_a_new_order_each_epoch(served):
    out, url, _ = served
    ds = tfrecorder_lite.load(url, "TRAIN", as_supervised=False, shuffle=True, seed=1,
                              shuffle_buffer=2)
    first, second = _names(ds), _names(ds)
    assert sorted(first) == sorted(second) == sorted(_names(tfrecorder_lite.load(
        out, "TRAIN", as_supervised=False)))
    assert first != second


@pytest.mark.parametrize("shuffle", [False, "global"])
def test_the_first_records_are_fetched_while_the_pipeline_is_made(served, shuffle):
    out, url, server = served
    server.reset_counts()
    options = dict(batch_size=4, as_supervised=False, shuffle=shuffle, seed=5)
    remote = tfrecorder_lite.load(url, "TRAIN", **options)
    # shards are asked for before the dataset is iterated (waited for, up to a deadline)
    deadline = time.monotonic() + 30
    while not _shard_gets(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _shard_gets(server)
    assert _names(remote) == _names(tfrecorder_lite.load(out, "TRAIN", **options))


@pytest.mark.parametrize("shuffle", [False, "global"])
def test_the_first_records_are_fetched_as_their_own_bytes(served, shuffle):
    """The first records come by ranged reads of their own bytes (a whole block takes
    several times as long on a connection of limited rate), asked for before the dataset
    is iterated; every later read is of whole blocks."""
    out, url, server = served
    server.reset_counts()
    options = dict(batch_size=4, as_supervised=False, shuffle=shuffle, seed=5)
    remote = tfrecorder_lite.load(url, "TRAIN", **options)
    records = set()  # (shard, "bytes=a-b") of every record
    out = pathlib.Path(out)
    for shard in sorted(p.name for p in out.glob("train-*.tfrecord")):
        spans = np.loadtxt(out / shard.replace(".tfrecord", ".tfindex"), dtype=np.int64,
                           ndmin=2)
        records.update({(shard, f"bytes={a}-{a + n - 1}") for a, n in spans})
    deadline = time.monotonic() + 30
    while len([r for r in server.ranges() if _span(r) in records]) < N and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    before = [_span(r) for r in server.ranges()]
    assert set(before) >= records  # every record of the split: N, fewer than the first 128
    assert _names(remote) == _names(tfrecorder_lite.load(out, "TRAIN", **options))
    later = [_span(r) for r in server.ranges()][len(before):]
    assert not set(later) & records


def _span(request):
    """``(shard file name, Range header)`` of a request ``(path, Range header)``."""
    return request[0].rsplit("/", 1)[-1], request[1]


def test_records_waiting_on_the_store_hold_no_decoder(tmp_path):
    """Groups of records read ahead that wait on the store must not keep the decoders from
    the records already read: the first batch comes while the store holds every read of the
    second shard (tf.data's own threads, as many as cores, ran the reads before)."""
    first = 3 * 64  # three groups of reads in the first shard, the next ones in the second
    table = _table(tmp_path, 2 * first)
    out = table.tfrecord.to_tfrecord(tmp_path / "out", num_shards=2, progress=False,
                                     leakage="ignore").output_dir
    server = HostileServer(out)
    try:
        # epochs=2: read by index in manifest order, the first shard's records first
        dataset = tfrecorder_lite.load(f"{server.url}/hold/out", "TRAIN", batch_size=8,
                                       image_size=(8, 8), epochs=2, as_supervised=False)
        batches = iter(dataset)
        got = []
        reader = threading.Thread(target=lambda: got.append(next(batches)), daemon=True)
        reader.start()
        reader.join(timeout=60)
        came_while_held = bool(got)
        server.release()
        reader.join()
        assert came_while_held
        names = [n.decode() for n in got[0]["image/filename"].numpy()]
        names += [n.decode() for batch in batches for n in batch["image/filename"].numpy()]
        local = _names(tfrecorder_lite.load(out, "TRAIN", batch_size=8, image_size=(8, 8),
                                            epochs=2, as_supervised=False))
        assert names == local and len(names) == 2 * 2 * first
    finally:
        server.release()
        server.stop()


def test_the_cache_folder_stays_within_its_limit_and_keeps_only_its_own(served, tmp_path):
    out, url, _ = served
    sizes = [s.bytes for s in tfrecorder_lite.read_metadata(out).manifest.splits["TRAIN"].shards]
    limit = 2 * max(sizes) + 10  # two shards at most
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "notes.txt").write_text("the user's own file")
    dead = cache / f"{'0' * 64}.tfrecord.999999999-abcd.partial"  # of a process long gone
    dead.write_bytes(b"x" * 100)
    ds = tfrecorder_lite.load(url, "TRAIN", batch_size=4, as_supervised=False,
                              cache_dir=cache, cache_limit=limit)
    names, peak = [], 0
    for batch in ds:
        names += [n.decode() for n in batch["image/filename"].numpy()]
        peak = max(peak, sum(v for k, v in _cache_files(cache).items() if k != "notes.txt"))
    assert len(names) == N and len(set(names)) == N  # the epoch is complete
    assert 0 < peak <= limit
    assert (cache / "notes.txt").read_text() == "the user's own file"
    assert not dead.exists()
    # every copy kept is whole and checked: its bytes are the shard's
    local = {open(os.path.join(out, s.name), "rb").read()
             for s in tfrecorder_lite.read_metadata(out).manifest.splits["TRAIN"].shards}
    kept = []
    for name in _cache_files(cache):
        try:  # the read-ahead may still be making room for the next epoch's blocks
            if name.endswith(".tfrecord"):
                kept.append((cache / name).read_bytes())
        except FileNotFoundError:
            continue
    assert kept and all(data in local for data in kept)


_EPOCH = textwrap.dedent("""
    import sys
    import tfrecorder_lite
    url, cache = sys.argv[1:]
    ds = tfrecorder_lite.load(url, "TRAIN", batch_size=8, as_supervised=False,
                              cache_dir=cache, cache_limit="1GB")
    print(sum(len(b["image/filename"]) for b in ds))
""")


def test_a_second_epoch_in_a_new_process_reads_the_cache_not_the_store(served, tmp_path):
    _, url, server = served
    server.reset_counts()
    epochs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _EPOCH, url, str(tmp_path / "cache")],
                              capture_output=True, text=True, timeout=300, cwd=TESTS)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.split()[-1] == str(N)
        epochs.append(_shard_gets(server))
        server.reset_counts()
    assert epochs[0] >= 6 and epochs[1] == 0  # every shard fetched once, then from the disk


def test_a_cache_limit_is_a_size(served, tmp_path):
    _, url, _ = served
    assert shard_cache.byte_count("20GB") == 20 << 30
    assert shard_cache.byte_count("512 MiB") == 512 << 20
    assert shard_cache.byte_count(np.int64(4096)) == 4096
    for bad in ("lots", 0, -1, 1.5, True):
        with pytest.raises(SchemaError, match="cache_limit must be a positive number of bytes"):
            tfrecorder_lite.load(url, "TRAIN", cache_limit=bad)
        with pytest.raises(SchemaError, match="block_size must be a positive number of bytes"):
            tfrecorder_lite.data_source(url, "TRAIN", block_size=bad)
    # the sizes of data_source() are spelled as cache_limit is: numpy ints and text too
    src = tfrecorder_lite.data_source(url, "TRAIN", block_size=np.int64(4096),
                                      cache_bytes="64KiB")
    assert len(src.read_serialized(range(len(src)))) == N


def test_a_truncated_remote_shard_is_named(served, tmp_path):
    out, _, _ = served
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in os.listdir(out):
        copy.joinpath(name).write_bytes(open(os.path.join(out, name), "rb").read())
    shard = tfrecorder_lite.read_metadata(out).manifest.splits["TRAIN"].shards[-1].name
    data = (copy / shard).read_bytes()
    (copy / shard).write_bytes(data[:-7])
    server = HostileServer(copy)
    try:
        url = f"{server.url}/ok/out"
        src = tfrecorder_lite.data_source(url, "TRAIN")
        with pytest.raises(VerifyError, match=f"{url}/{shard}: ends at byte {len(data) - 7}, "
                                              f"metadata.json says it holds {len(data)} bytes"):
            src.read_serialized(range(len(src)))
        with pytest.raises(tfrecorder_lite.ManifestError, match=f"{shard}: {len(data) - 7} bytes"):
            tfrecorder_lite.load(url, "TRAIN")
    finally:
        server.stop()


# ------------------------------------------------------------------ every iteration its epoch

def test_each_iteration_of_a_global_shuffle_is_the_next_permutation(served):
    out, _, _ = served
    ds = tfrecorder_lite.load(out, "TRAIN", shuffle="global", seed=5, as_supervised=False,
                              batch_size=4)
    first, second, third = _names(ds), _names(ds), _names(ds)
    everything = sorted(first)
    assert len(first) == N and sorted(second) == sorted(third) == everything
    assert len({tuple(first), tuple(second), tuple(third)}) == 3
    # a pure function of (seed, epoch): the second iteration is epoch 1 of a fresh dataset
    assert second == _names(tfrecorder_lite.load(out, "TRAIN", shuffle="global", seed=5,
                                                 as_supervised=False, batch_size=4, start=N))
    repeated = _names(tfrecorder_lite.load(out, "TRAIN", shuffle="global", seed=5,
                                           as_supervised=False, batch_size=4).repeat(2))
    assert repeated == first + second
    assert len(ds) == N // 4  # every iteration as long as the first


# ------------------------------------------------------------------ checkpoints

def _checkpoint(iterator, folder):
    return tf.train.Checkpoint(it=iterator).write(str(folder / "it"))


@pytest.mark.parametrize("options", [
    dict(), dict(shuffle=True, seed=2), dict(shuffle="global", seed=2)],
    ids=["default", "buffer", "global"])
def test_every_iterator_checkpoint_is_refused_by_another_pipeline(served, tmp_path, options):
    out, _, _ = served
    it = iter(tfrecorder_lite.load(out, "TRAIN", batch_size=4, as_supervised=False, **options))
    next(it)
    path = _checkpoint(it, tmp_path)
    rest = [n.decode() for b in it for n in b["image/filename"].numpy()]

    again = iter(tfrecorder_lite.load(out, "TRAIN", batch_size=4, as_supervised=False,
                                      **options))
    tf.train.Checkpoint(it=again).read(path).assert_consumed()
    assert [n.decode() for b in again for n in b["image/filename"].numpy()] == rest

    other = _table(tmp_path / "other", N, seed=1).tfrecord.to_tfrecord(
        tmp_path / "other-out", num_shards=6, progress=False, leakage="ignore").output_dir
    elsewhere = iter(tfrecorder_lite.load(other, "TRAIN", batch_size=4, as_supervised=False,
                                          **options))
    # refused as it is restored (by index), or at its first element (load()'s own pipeline)
    with pytest.raises(tf.errors.OpError, match="restored from a checkpoint of another "
                                                "pipeline.*data '[0-9a-f]+' in the checkpoint"):
        tf.train.Checkpoint(it=elsewhere).read(path)
        next(elsewhere)


@pytest.mark.parametrize("options", [dict(), dict(shuffle="global", seed=2)],
                         ids=["default", "global"])
def test_a_remote_iterator_resumes_exactly_from_its_checkpoint(served, tmp_path, options):
    """Records read ahead from a store (eight groups, in prefetch's thread) are not lost or
    read twice by a checkpoint taken while they wait to be decoded."""
    _, url, _ = served
    it = iter(tfrecorder_lite.load(url, "TRAIN", batch_size=4, as_supervised=False, **options))
    seen = [n.decode() for _ in range(3) for n in next(it)["image/filename"].numpy()]
    path = _checkpoint(it, tmp_path)
    rest = [n.decode() for b in it for n in b["image/filename"].numpy()]
    again = iter(tfrecorder_lite.load(url, "TRAIN", batch_size=4, as_supervised=False,
                                      **options))
    tf.train.Checkpoint(it=again).read(path).assert_consumed()
    assert [n.decode() for b in again for n in b["image/filename"].numpy()] == rest
    assert len(rest) == N - 12 and not set(rest) & set(seen)


def test_a_global_checkpoint_is_refused_with_another_seed_hosts_or_after_an_append(tmp_path):
    table = _table(tmp_path / "images", 24)
    out = table.tfrecord.to_tfrecord(tmp_path / "out", num_shards=2,
                                     progress=False).output_dir
    it = iter(tfrecorder_lite.load(out, "TRAIN", shuffle="global", seed=1, batch_size=4))
    next(it)
    path = _checkpoint(it, tmp_path)

    def restored(**options):
        other = iter(tfrecorder_lite.load(out, "TRAIN", batch_size=4,
                                          **{"shuffle": "global", "seed": 1, **options}))
        tf.train.Checkpoint(it=other).read(path)
        return other

    with pytest.raises(tf.errors.OpError, match="seed 1 in the checkpoint, 2 here"):
        next(restored(seed=2))
    with pytest.raises(tf.errors.OpError, match="hosts '0 of 1' in the checkpoint, '1 of 2' "
                                                "here"):
        next(restored(num_hosts=2, host_index=1))
    _table(tmp_path / "more", 12, seed=2).tfrecord.to_tfrecord(out, append=True,
                                                               progress=False)
    with pytest.raises(tf.errors.OpError, match="records 24 in the checkpoint, 36 here"):
        next(restored())
    # the output as it was (generation 0) is what the checkpoint read: it resumes
    assert len(list(restored(generation=0))) == 5


@pytest.mark.parametrize("arguments,message", [
    (dict(seed="1"), "seed must be an int"), (dict(seed=1.5), "seed must be an int"),
    (dict(start=2**63 - 10), "start must be a global position"),
    (dict(start=2**64), "start must be a global position"),
    (dict(start=2**62 - 5, epochs=3), "end past global position 2\\*\\*62"),
])
def test_load_checks_its_arguments_at_the_call(served, arguments, message):
    out, _, _ = served
    with pytest.raises(SchemaError, match=message):
        tfrecorder_lite.load(out, "TRAIN", **{"shuffle": "global", "seed": 1, **arguments})
    if "seed" in arguments:  # the buffer shuffle's seed too
        with pytest.raises(SchemaError, match=message):
            tfrecorder_lite.load(out, "TRAIN", shuffle=True, seed=arguments["seed"])


# ------------------------------------------------------------------ data sources

def test_a_remote_data_source_asks_again_after_its_check_failed(served, tmp_path):
    """The check of metadata.json that a process's first read waits for is asked again by the
    next read when it failed (a store that could not answer), not kept as the answer."""
    out, _, _ = served
    folder = tmp_path / "out"
    shutil.copytree(out, folder)
    server = HostileServer(folder)
    try:
        src = tfrecorder_lite.data_source(f"{server.url}/ok/out", "TRAIN")
        manifest = (folder / "metadata.json").read_bytes()
        (folder / "metadata.json").unlink()  # the store cannot answer for it now
        with pytest.raises(VerifyError, match="the output this data source was opened on"):
            src[0]
        (folder / "metadata.json").write_bytes(manifest)
        assert src[0]["image/filename"] == tfrecorder_lite.data_source(
            out, "TRAIN")[0]["image/filename"]
    finally:
        server.stop()


def test_a_data_source_refuses_an_output_rewritten_under_it(tmp_path):
    out = _table(tmp_path / "a", 12).tfrecord.to_tfrecord(tmp_path / "out", progress=False,
                                                          leakage="ignore").output_dir
    opened = tfrecorder_lite.data_source(out, "TRAIN")
    read_before = tfrecorder_lite.data_source(out, "TRAIN")
    first = read_before[0]["image/filename"]
    _table(tmp_path / "b", 12, seed=1).tfrecord.to_tfrecord(out, overwrite=True,
                                                            progress=False, leakage="ignore")
    for src in (opened, read_before):
        with pytest.raises(VerifyError, match="the output was rewritten after this data "
                                              "source was opened"):
            src[0]
    assert tfrecorder_lite.data_source(out, "TRAIN")[0]["image/filename"] != first
