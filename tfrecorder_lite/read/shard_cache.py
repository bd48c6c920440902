"""Local copies of remote shards, for readers that cannot open the store's URLs themselves.

TensorFlow reads local files and, natively, ``gs://`` on Google Cloud; shards anywhere else
(``s3://``, ``memory://``, a GCS emulator, ...) are downloaded once into a cache folder. Each
copy is named by the shard's checksum (with its URL and size) from ``metadata.json`` and
checked against it while it is downloaded, so a rewritten output never reuses a stale copy, and
unchanged shards are fetched once for every later load. The folder can be deleted at any time.
"""

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

from .. import redaction
from . import verification
from ..errors import SchemaError, VerifyError
from ..formats import DEFAULT
from ..record.framing import FileDigest
from ..storage import Store

logger = redaction.logger(__name__)  # every record redacted

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
        cache_dir: the cache folder, a local path or ``file://`` URL (default:
            :func:`default_cache_dir`).

    Raises:
        SchemaError: ``cache_dir`` is not on the local disk.
        ManifestError: a shard file is missing.
        VerifyError: a downloaded shard's checksum differs from the manifest's.
    """
    cache = Store(cache_dir or default_cache_dir())
    if not cache.is_local:
        raise SchemaError(f"cache_dir={cache.url}: the cache must be a local folder "
                          "(TensorFlow reads the copies from there)")
    cache.make_dirs()
    names = [copy_name(store, shard) for shard in shards]
    missing = {name: shard for name, shard in zip(names, shards)
               if not _cached(cache, name, shard)}
    if missing:
        with ThreadPoolExecutor(min(_PARALLEL_DOWNLOADS, len(missing))) as pool:
            for done in [pool.submit(_download, store, s, cache, n) for n, s in missing.items()]:
                done.result()
    return [cache.path(name) for name in names]


def _cached(cache, name, shard):
    """Whether the cache holds ``shard``'s bytes as ``name``: its size and CRC32C (its sha256
    in outputs that list no CRC32C), read back whole, are the manifest's, so that a copy
    rewritten with other records of the same size is not trusted. A copy that differs is
    fetched again, with a warning."""
    size = cache.size(name)
    if size is None:
        return False
    checksums = {"crc32c": shard.crc32c} if shard.crc32c else shard.checksums  # the cheaper
    if size == shard.bytes and \
            not cache.digest(name, FileDigest.like(checksums)).mismatches(checksums):
        return True
    logger.warning("%s: the cached copy differs from metadata.json (%s); fetching it again",
                   cache.path(name), "size" if size != shard.bytes else "CRC32C")
    return False


def copy_name(store, shard):
    """The cache file name of a manifest entry of ``store``: its sha256 when it has one, else a
    digest of its URL, size and CRC32C (a 32-bit CRC alone would collide across many shards)."""
    key = shard.sha256 or hashlib.sha256(
        f"{store.path(shard.name)}\0{shard.bytes}\0{shard.crc32c}".encode()).hexdigest()
    return key + DEFAULT.suffixes[None]  # a copy of any format (none but TFRecord yet)


def _download(store, shard, cache, name):
    """Stream one shard into the cache as ``name`` (committed whole under a temporary name of
    this thread's: other processes may fetch the same shard), checking its checksums."""
    digest = FileDigest.like(shard.checksums)
    try:
        source = store.open_read(shard.name)
    except FileNotFoundError:
        raise verification.shard_error(store, shard,
                                       verification.size_problem(shard, None)) from None
    with source:
        target = cache.open_for_commit(name, unique_temp=True)
        try:
            for chunk in iter(lambda: source.read(_CHUNK), b""):
                digest.update(chunk)
                target.write(chunk)
            mismatches = digest.mismatches(shard.checksums)
            if mismatches:
                raise VerifyError(f"{store.path(shard.name)}: {' and '.join(mismatches)} "
                                  "differs from metadata.json (changed or damaged since it "
                                  "was written; run verify)")
            target.commit()
        except BaseException:
            target.discard()
            raise
