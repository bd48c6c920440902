"""Local copies of remote shards, for readers that cannot open the store's URLs themselves.

TensorFlow reads local files and, natively, ``gs://`` on Google Cloud; shards anywhere else
(``s3://``, ``memory://``, a GCS emulator, ...) are downloaded once into a cache folder. Each
copy is named by the shard's checksum (with its URL and size) from ``metadata.json`` and
checked against it while it is downloaded, so a rewritten output never reuses a stale copy, and
unchanged shards are fetched once for every later load. The folder can be deleted at any time.
"""

import hashlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from . import verification
from .errors import VerifyError
from .record.framing import FileDigest

_CHUNK = 8 << 20
_PARALLEL_DOWNLOADS = 8


def default_cache_dir():
    """``$TFRECORDER_LITE_CACHE``, else ``$XDG_CACHE_HOME/tfrecorder_lite`` (``~/.cache/...``)."""
    if os.environ.get("TFRECORDER_LITE_CACHE"):
        return os.environ["TFRECORDER_LITE_CACHE"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tfrecorder_lite")


def local_copies(store, shards, cache_dir=None):
    """Local paths holding the bytes of ``shards``, downloading the missing ones concurrently.

    Args:
        store: the output folder (a Store).
        shards: ShardEntry of each shard.
        cache_dir: the cache folder (default: :func:`default_cache_dir`).

    Raises:
        ManifestError: a shard file is missing.
        VerifyError: a downloaded shard's checksum differs from the manifest's.
    """
    cache_dir = cache_dir or default_cache_dir()
    os.makedirs(cache_dir, exist_ok=True)
    paths = [os.path.join(cache_dir, copy_name(store, shard)) for shard in shards]
    missing = {path: shard for path, shard in zip(paths, shards) if not _cached(path, shard)}
    if missing:
        with ThreadPoolExecutor(min(_PARALLEL_DOWNLOADS, len(missing))) as pool:
            for done in [pool.submit(_download, store, s, p) for p, s in missing.items()]:
                done.result()
    return paths


def copy_name(store, shard):
    """The cache file name of a manifest entry of ``store``: its sha256 when it has one, else a
    digest of its URL, size and CRC32C (a 32-bit CRC alone would collide across many shards)."""
    key = shard.sha256 or hashlib.sha256(
        f"{store.path(shard.name)}\0{shard.bytes}\0{shard.crc32c}".encode()).hexdigest()
    return f"{key}.tfrecord"


def _cached(path, shard):
    try:
        return os.path.getsize(path) == shard.bytes
    except OSError:
        return False


def _download(store, shard, path):
    """Stream one shard into ``path`` (temporary name, then rename), checking its checksums."""
    digest = FileDigest.like(shard.checksums)
    temp = f"{path}.{os.getpid()}-{threading.get_ident()}.tmp"
    try:
        source = store.open_read(shard.name)
    except FileNotFoundError:
        raise verification.shard_error(store, shard,
                                       verification.size_problem(shard, None)) from None
    try:
        with source, open(temp, "wb") as target:
            for chunk in iter(lambda: source.read(_CHUNK), b""):
                digest.update(chunk)
                target.write(chunk)
        mismatches = digest.mismatches(shard.checksums)
        if mismatches:
            raise VerifyError(f"{store.path(shard.name)}: {' and '.join(mismatches)} "
                              "differs from metadata.json (changed or damaged since it was "
                              "written; run verify)")
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.remove(temp)
