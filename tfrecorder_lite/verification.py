"""``verify()``: re-read every shard and check it against metadata.json."""

from .errors import ManifestError, VerifyError
from .output.layout import index_name
from .output.manifest import read_manifest
from .record import encoding as example
from .record import keys
from .record.features import FeatureSet
from .record.framing import FileDigest, RecordError, index_text, iter_records
from .storage import Store
from .record.tensorflow import import_tensorflow


class _DigestingReader:
    """A read-only file wrapper that feeds what is read through it to a FileDigest."""

    def __init__(self, fileobj, digest):
        self._file = fileobj
        self.digest = digest

    def read(self, size=-1):
        data = self._file.read(size)
        self.digest.update(data)
        return data


def _check_record(data, features, decode_image, boxes=None):
    parsed = example.decode_example(data)
    for key, spec in features.items():
        if key not in parsed:
            raise ValueError(f"feature '{key}' missing")
        kind, values = parsed[key]
        if kind != spec["dtype"] or not example.value_count_fits(spec["shape"], len(values)):
            raise ValueError(f"feature '{key}' holds {len(values)} {kind} value(s), "
                             f"expected {_values_text(spec)}")
    problem = boxes.check({key: values for key, (_, values) in parsed.items()}) if boxes else None
    if problem:
        raise ValueError(problem)
    if decode_image is not None and keys.ENCODED in parsed:
        decode_image(parsed[keys.ENCODED][1][0])


def _values_text(spec):
    """What a feature of this manifest spec holds, in words: "one int64", "rows of 4 float32"."""
    shape, dtype = spec["shape"], spec["dtype"]
    if not shape:
        return f"one {dtype}"
    if shape[0] is None:
        return f"rows of {shape[1]} {dtype}" if len(shape) > 1 else f"a list of {dtype}"
    return f"{' x '.join(map(str, shape))} {dtype}"


def size_problem(shard, size):
    """What is wrong with a shard file of ``size`` bytes (None: no such file) against its
    manifest entry ``shard``, or None when nothing is."""
    if size is None:
        return "shard file is missing"
    if size != shard.bytes:
        return f"{size} bytes, metadata.json says {shard.bytes} (truncated or changed)"
    return None


def shard_error(store, shard, problem):
    """A ManifestError naming the file of ``shard`` (a manifest entry of ``store``), its
    ``problem`` and what to do."""
    return ManifestError(f"{store.path(shard.name)}: {problem}; run tfrecorder-lite verify "
                         f"{store.url}")


def _check_shard(store, shard, compression, features, decode_image, boxes=None):
    """Problems of one shard file (empty list when it is sound)."""
    name = shard.name
    size = store.size(name)
    problem = size_problem(shard, size)
    if size is None:
        return [f"{name}: {problem}"]
    problems, count, damaged, sizes = [f"{name}: {problem}"] if problem else [], 0, False, []
    with store.open_read(name) as f:
        reader = _DigestingReader(f, FileDigest.like(shard.checksums))
        try:
            for count, data in enumerate(iter_records(reader, compression), start=1):
                sizes.append(len(data))
                try:
                    _check_record(data, features, decode_image, boxes)
                except Exception as exc:  # a record that does not parse or decode
                    problems.insert(0, f"{name}: record {count - 1}: {exc}")
                    damaged = True
                    break
        except RecordError as exc:
            problems.insert(0, f"{name}: {exc}")
            damaged = True
        if not damaged:
            if count != shard.num_examples:
                problems.append(f"{name}: {count} records, metadata.json says "
                                f"{shard.num_examples}")
            for kind in reader.digest.mismatches(shard.checksums):
                problems.append(f"{name}: {kind} differs from metadata.json")
            if not problems:  # an index can only be judged against sound records
                problems += _index_problems(store, shard, sizes)
    return problems


def _index_problems(store, shard, record_sizes):
    """Problems of a shard's index file against the records just read (none without one)."""
    entry = shard.index
    if entry is None:  # written before index files existed
        return []
    shard_name, name = shard.name, index_name(shard.name)
    if entry.name != name:
        return [f"{shard_name}: metadata.json names its index {entry.name!r}, "
                f"expected {name!r}"]
    try:
        found = store.read_bytes(name)
    except FileNotFoundError:
        return [f"{shard_name}: index file {name} is missing"]
    if found != index_text(record_sizes).encode():
        return [f"{shard_name}: index file {name} does not match its records"]
    return []


def _tf_decoder():
    tf = import_tensorflow()

    def decode_image(encoded):
        tf.io.decode_image(encoded, channels=3, expand_animations=False)

    return decode_image


def verify(output_dir, decode=False, *, storage_options=None):
    """Read every record of every shard and check it against ``metadata.json``.

    ``output_dir`` is a local path or any fsspec URL; remote shards are streamed, not copied.

    Checks both CRCs of each record, that each parses as an Example with the manifest's
    features, each shard's record count, size and checksums (CRC32C, and sha256 where
    metadata.json has it), that its index file lists its records, and a detection record's
    objects (lists of one length, boxes relative and ordered); with ``decode`` also decodes
    every image with TensorFlow.

    Returns:
        A one-line summary, e.g. "OK: 3 splits, 5 shards, 3000 records verified".

    Raises:
        ManifestError: no finished output in ``output_dir``.
        VerifyError: naming each damaged shard file and record index (``exc.problems``).
    """
    store = Store(output_dir, storage_options)
    manifest, _ = read_manifest(store)
    decode_image = _tf_decoder() if decode else None
    boxes = FeatureSet.from_manifest(manifest).boxes
    problems, shards, records = [], 0, 0
    for info in manifest.splits.values():
        for shard in info.shards:
            problems += _check_shard(store, shard, manifest.compression, manifest.features,
                                     decode_image, boxes)
            shards += 1
            records += shard.num_examples
    if problems:
        raise VerifyError(f"{len(problems)} problem(s) in {store.url}:\n  " +
                          "\n  ".join(problems), problems)
    what = "records verified" + (" and decoded" if decode else "")
    return f"OK: {len(manifest.splits)} split(s), {shards} shard(s), {records} {what}"
