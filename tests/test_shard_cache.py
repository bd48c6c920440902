"""shard_cache.py: local copies of remote shards, written through the storage layer (whole or
not at all), checked against metadata.json, fetched once."""

import hashlib
import os

import pytest

from tfrecorder_lite import SchemaError, VerifyError
from tfrecorder_lite.read import shard_cache
from tfrecorder_lite.output.manifest import read_manifest
from tfrecorder_lite.storage import Store


@pytest.fixture
def remote(outputs_of_every_kind, tmp_path):
    """The ``plain`` output copied to a ``memory://`` folder of this test: (Store, shards)."""
    import fsspec

    out, _ = outputs_of_every_kind["plain"]
    url = f"memory://cache-{hashlib.sha256(str(tmp_path).encode()).hexdigest()[:12]}/out"
    fs = fsspec.filesystem("memory")
    for name in os.listdir(out):
        fs.put_file(os.path.join(out, name), f"{url}/{name}")
    store = Store(url)
    manifest, _ = read_manifest(store)
    return store, [s for entry in manifest.splits.values() for s in entry.shards]


def test_copies_are_whole_checked_and_fetched_once(remote, tmp_path, outputs_of_every_kind):
    store, shards = remote
    cache = tmp_path / "cache"
    paths = shard_cache.local_copies(store, shards, cache)
    out, _ = outputs_of_every_kind["plain"]
    assert [open(p, "rb").read() for p in paths] == \
        [open(os.path.join(out, s.name), "rb").read() for s in shards]
    assert sorted(set(os.listdir(cache)) - {".lock"}) == sorted(os.path.basename(p) for p in paths)  # no .tmp
    store.fs.rm(store.path(shards[0].name))  # gone from the store: the copy serves
    assert shard_cache.local_copies(store, shards, f"file://{cache}") == paths


def test_a_damaged_download_is_refused_and_leaves_no_copy(remote, tmp_path):
    store, shards = remote
    data = bytearray(store.read_bytes(shards[0].name))
    data[len(data) // 2] ^= 0xFF
    store.fs.pipe_file(store.path(shards[0].name), bytes(data))
    with pytest.raises(VerifyError, match=f"{shards[0].name}: crc32c differs"):
        shard_cache.local_copies(store, shards[:1], tmp_path / "cache")
    assert os.listdir(tmp_path / "cache") == [".lock"]  # the lock the processes share


def test_the_cache_must_be_on_the_local_disk(remote):
    store, shards = remote
    with pytest.raises(SchemaError, match="cache_dir=s3://bucket/cache: the cache must be a "
                                          "local folder"):
        shard_cache.local_copies(store, shards, "s3://bucket/cache")


def test_a_tampered_copy_of_the_same_size_is_fetched_again(remote, tmp_path, caplog):
    """A cached copy rewritten with other bytes of the same length (say, records of other
    labels) is not used: its CRC32C is checked against metadata.json when load() opens it."""
    store, shards = remote
    cache = tmp_path / "cache"
    paths = shard_cache.local_copies(store, shards, cache)
    original = open(paths[0], "rb").read()
    tampered = bytes(b ^ 0xFF for b in original)  # every byte other, the same size
    with open(paths[0], "wb") as f:
        f.write(tampered)

    with caplog.at_level("WARNING", logger="tfrecorder_lite.read.shard_cache"):
        assert shard_cache.local_copies(store, shards, cache) == paths
    assert open(paths[0], "rb").read() == original
    assert "differs from metadata.json (CRC32C); fetching it again" in caplog.text
