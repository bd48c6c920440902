"""metadata.json and shard receipts: the on-disk contract between writer and readers.

``metadata.json`` is written last; its presence means the output folder is complete. The
frozen classes here are the only place it (and a shard's receipt) is built, read and checked:
``to_json()`` gives the JSON content, ``from_json()`` checks a parsed one and names the first
malformed field.
"""

import json
import numbers
from collections import Counter
from html import escape
from dataclasses import dataclass, field, replace

from ..errors import ManifestError
from ..formats import FORMATS, format_named
from ..record.keys import BYTES, FLOAT, IMAGE_KEYS, INT64, LEVEL_NAME
from ..record.kinds import KIND_FIELDS, TASKS, kind_of
from .splits import SPLITS
from ..storage import Store, human_size, is_dir
from .record_hashes import RecordHashes
from .layout import (HASHES_NAME, METADATA, NEAR_DUPLICATES, NEAR_DUPLICATES_NAME,
                     REJECTED_NAME, STATE_DIR, generation_of, is_shard_of)

FORMAT_VERSION = 1


@dataclass(frozen=True)
class IndexEntry:
    """A shard's index file: name, size and CRC32C."""

    name: str
    bytes: int
    crc32c: str

    @property
    def checksums(self):
        return {"crc32c": self.crc32c}

    def to_json(self):
        return {"name": self.name, "bytes": self.bytes, "crc32c": self.crc32c}


@dataclass(frozen=True)
class ShardEntry:
    """One shard file as metadata.json lists it.

    Attributes:
        name: the file name (never a path).
        num_examples: its records.
        bytes: its size.
        crc32c, sha256: its checksums (hex); earlier versions wrote only a sha256, and a
            sha256 is taken only on request.
        index: its IndexEntry (None in outputs written before index files existed).
    """

    name: str
    num_examples: int
    bytes: int
    crc32c: str = None
    sha256: str = None
    index: IndexEntry = None

    @property
    def checksums(self):
        """``{"crc32c": ..., "sha256": ...}``: the checksums this entry has."""
        return {k: v for k, v in (("crc32c", self.crc32c), ("sha256", self.sha256)) if v}

    @property
    def generation(self):
        """The generation that wrote it: 0, or ``k`` for the ``k``-th append."""
        return generation_of(self.name)

    def to_json(self):
        return {"name": self.name, "num_examples": self.num_examples, "bytes": self.bytes,
                **self.checksums, **({"index": self.index.to_json()} if self.index else {}),
                **({"generation": self.generation} if self.generation else {})}

    @classmethod
    def from_json(cls, value, split, where, check):
        check.value(value, where, _is_object, "an object")
        check.field(value, where, "name", lambda v: is_shard_of(v, split),
                    f"a shard file name of split {split}" if split else "a shard file name")
        check.field(value, where, "num_examples", _is_count, "a count")
        check.field(value, where, "bytes", _is_count, "a count")
        if "generation" in value:
            check.field(value, where, "generation", lambda v: v == generation_of(value["name"]),
                        f"{generation_of(value['name'])} (the generation its name says)")
        if "crc32c" in value or "sha256" not in value:
            check.field(value, where, "crc32c", lambda v: _is_hex(v, 8), "8 hex digits")
        if "sha256" in value:
            check.field(value, where, "sha256", lambda v: _is_hex(v, 64), "64 hex digits")
        index = value.get("index")
        if index is not None:
            check.value(index, f"{where}.index", _is_object, "an object")
            check.field(index, f"{where}.index", "name", lambda v: isinstance(v, str), "a name")
            check.field(index, f"{where}.index", "bytes", _is_count, "a count")
            check.field(index, f"{where}.index", "crc32c", lambda v: _is_hex(v, 8),
                        "8 hex digits")
            index = IndexEntry(index["name"], index["bytes"], index["crc32c"])
        return cls(value["name"], value["num_examples"], value["bytes"], value.get("crc32c"),
                   value.get("sha256"), index)


@dataclass(frozen=True)
class Receipt:
    """What one shard task wrote, as it tells the driver (and leaves in the state folder).

    Attributes:
        shard: the ShardEntry of the file written.
        rejected: ``(table position, reason)`` of the rows it did not write.
        sizes: up to two distinct image sizes ``(height, width)`` written (two: they vary).
        max_size: the largest height and width written.
        channels: the channel counts written.
        formats: image format -> records.
        labels: per label field, label id (as text) -> records.
        failed: with ``on_error="raise"``, the ``(position, reason)`` of the row that stopped
            the task (then nothing was written), else None.
        hashes: when images were hashed, per record in writing order, a RecordHashes:
            ``(table position, content hash of the source file, perceptual hash (hex, or None),
            format, height, width, channels)`` kept as columns.
    """

    shard: ShardEntry
    rejected: tuple = ()
    sizes: tuple = ()
    max_size: tuple = (0, 0)
    channels: tuple = ()
    formats: dict = field(default_factory=dict)
    labels: tuple = ()
    failed: tuple = None
    hashes: RecordHashes = field(default_factory=RecordHashes)

    @property
    def name(self):
        return self.shard.name

    def to_json(self):
        return {**self.shard.to_json(), "rejected": [list(r) for r in self.rejected],
                "sizes": [list(s) for s in self.sizes], "max_size": list(self.max_size),
                "channels": list(self.channels), "formats": dict(self.formats),
                "labels": [dict(counts) for counts in self.labels],
                **({"hashes": [list(h) for h in self.hashes]} if self.hashes else {})}

    @classmethod
    def from_json(cls, value, where="receipt"):
        """A receipt read back from the state folder (ManifestError when malformed)."""
        check = _Fields(where)
        shard = ShardEntry.from_json(value, None, "receipt", check)
        labels = value.get("labels", [])
        labels = [labels] if isinstance(labels, dict) else labels  # earlier: one field's counts
        try:
            return cls(shard, tuple((int(p), str(r)) for p, r in value["rejected"]),
                       tuple(tuple(s) for s in value["sizes"]), tuple(value["max_size"]),
                       tuple(value["channels"]), dict(value["formats"]),
                       tuple(dict(counts) for counts in labels),
                       hashes=RecordHashes((int(p), str(d), h if h is None else str(h), f,
                                            int(y), int(x), int(c))
                                           for p, d, h, f, y, x, c in value.get("hashes", ())))
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"{where}: malformed ({exc})") from None


@dataclass(frozen=True)
class ImageSummary:
    """What metadata.json says of the images: ``stored`` ("encoded" or "resized"), their
    ``size`` when all share one, the ``max_size``, ``channels`` when all share one, and
    ``formats`` (format -> records)."""

    stored: str
    size: tuple = None
    max_size: tuple = None
    channels: int = None
    formats: dict = field(default_factory=dict)

    def to_json(self):
        return {"stored": self.stored, "size": None if self.size is None else list(self.size),
                **({"max_size": list(self.max_size)} if self.max_size is not None else {}),
                "channels": self.channels, "formats": dict(self.formats)}

    def merged(self, other):
        """The ImageSummary of these images and ``other``'s (None: no more images)."""
        if other is None:
            return self
        max_size = tuple(max(a, b) for a, b in zip(self.max_size or (0, 0),
                                                   other.max_size or (0, 0)))
        formats = Counter(self.formats)
        formats.update(other.formats)
        return ImageSummary(self.stored, self.size if self.size == other.size else None,
                            max_size, self.channels if self.channels == other.channels else None,
                            dict(sorted(formats.items())))

    @classmethod
    def from_receipts(cls, stored, receipts):
        sizes, channels, formats, max_size = set(), set(), Counter(), (0, 0)
        for receipt in receipts:
            sizes.update(tuple(s) for s in receipt.sizes)
            max_size = tuple(max(a, b) for a, b in zip(max_size, receipt.max_size))
            channels.update(receipt.channels)
            formats.update(receipt.formats)
        return cls(stored, sizes.pop() if len(sizes) == 1 else None, max_size,
                   channels.pop() if len(channels) == 1 else None, dict(sorted(formats.items())))


@dataclass(frozen=True)
class SplitEntry:
    """One split: its record count, label counts and shards (ShardEntry)."""

    num_examples: int
    label_counts: dict
    shards: tuple

    def to_json(self):
        return {"num_examples": self.num_examples, "label_counts": self.label_counts,
                "shards": [shard.to_json() for shard in self.shards]}


@dataclass(frozen=True)
class Manifest:
    """The content of metadata.json.

    Attributes:
        labels: label id -> text (a list), or with label levels a dict level -> list.
        features: record key -> ``{"dtype", "shape", ...}``.
        compression: None, "GZIP" or "ZLIB".
        image: an ImageSummary, or None for records without images.
        splits: split name -> SplitEntry, in TRAIN, VALIDATION, TEST order.
        rejected: how many input rows were not written.
        rejected_rows: their table positions.
        fingerprint: the plan's fingerprint (the same table and options give the same one).
        created_by: the library and version that wrote it.
        task: None (one label per record), or the task of its record kind ("multi-label",
            see ``record/kinds.py``).
        kind_fields: the fields its record kind adds (e.g. ``boxes``), in metadata.json's form.
        file_format: the shard files' format, ``"tfrecord"`` (None in outputs written before
            metadata.json named it: TFRecord).
        split_assignment: how rows without a split were given one, or None.
        generations: with appends, one object per generation (``generation``, its records
            per split, ``skipped``, ``rejected``, its ``rejected_file``, ``hashes`` file and
            ``fingerprint``), oldest first; None for an output never appended to.
        near_duplicates: how images were hashed and compared across splits (the hash, the
            largest distance, ``leakage``, the number of pairs found, the hashes files and
            the file listing the pairs), or None when they were not.
        other: fields this version does not know (kept as they are).
    """

    labels: object
    features: dict
    compression: str
    image: ImageSummary
    splits: dict
    rejected: int = 0
    rejected_rows: tuple = ()
    fingerprint: str = None
    created_by: str = None
    task: str = None
    split_assignment: dict = None
    kind_fields: dict = field(default_factory=dict)
    file_format: str = None
    near_duplicates: dict = None
    generations: list = None
    other: dict = field(default_factory=dict)

    @property
    def format(self):
        """The shard files' format (``formats``)."""
        return format_named(self.file_format)

    @property
    def multi_label(self):
        return self.task == "multi-label"

    @property
    def levels(self):
        """The label levels' names, or [None] for one label per record."""
        return list(self.labels) if isinstance(self.labels, dict) else [None]

    def level_labels(self, level):
        """The label texts of a level (None: the one label of a record)."""
        return self.labels if level is None else self.labels[level]

    def to_json(self):
        content = {"format_version": FORMAT_VERSION}
        content.update({"created_by": self.created_by} if self.created_by is not None else {})
        content.update({"fingerprint": self.fingerprint} if self.fingerprint is not None else {})
        content.update({"format": self.file_format} if self.file_format else {})
        content.update({"task": self.task} if self.task else {})
        content.update(self.kind_fields)
        content.update({
            "labels": self.labels, "features": self.features, "compression": self.compression,
            "image": None if self.image is None else self.image.to_json()})
        content.update({"split_assignment": self.split_assignment}
                       if self.split_assignment else {})
        content.update({"rejected": self.rejected, "rejected_rows": list(self.rejected_rows),
                        "splits": {name: s.to_json() for name, s in self.splits.items()}})
        content.update({"near_duplicates": self.near_duplicates}
                       if self.near_duplicates else {})
        content.update({"generations": self.generations} if self.generations else {})
        content.update(self.other)
        return content

    @classmethod
    def from_json(cls, content, path):
        """Check a parsed ``metadata.json`` and return its Manifest.

        Shard names must be plain file names of their split (never ``../``, absolute paths or
        URLs), so readers never open a file outside the output folder.

        Raises:
            ManifestError: naming the first missing or malformed field, e.g.
                ``.../metadata.json: splits.TRAIN.shards[0].name: '../x.tfrecord' is not a
                shard file name of split TRAIN``.
        """
        check = _Fields(path)
        check.value(content, "metadata.json", _is_object, "an object")
        if content.get("format_version") != FORMAT_VERSION:
            raise ManifestError(f"{path}: unsupported format_version "
                                f"{content.get('format_version')!r} (this reader knows "
                                f"{FORMAT_VERSION})")
        labels = check.field(content, "", "labels", lambda v: _is_texts(v) or (
            _is_object(v) and v and all(LEVEL_NAME.match(k) and _is_texts(t)
                                        for k, t in v.items())),
            "a list of label texts, or an object level -> list of label texts")
        task = check.field(content, "", "task", lambda v: v in TASKS,
                           " or ".join(map(repr, TASKS))) if "task" in content else None
        if task and isinstance(labels, dict):
            raise ManifestError(f"{path}: task: a {task} output has one list of labels")
        file_format = check.field(content, "", "format", lambda v: v in FORMATS,
                                  " or ".join(map(repr, FORMATS))) \
            if "format" in content else None
        compression = check.field(content, "", "compression",
                                  lambda v: v in (None, "GZIP", "ZLIB"),
                                  "null, 'GZIP' or 'ZLIB'")
        image = check.field(content, "", "image", lambda v: v is None or _is_object(v),
                            "null (no images) or an object")
        if image is not None:
            image = _image_from_json(image, check)
        features = check.field(content, "", "features", _is_object, "an object")
        _check_features(features, labels, task, image is not None, check)
        check.field(content, "", "rejected", _is_count, "a count")
        splits = check.field(content, "", "splits", lambda v: _is_object(v) and v,
                             "an object of splits")
        entries, names = {}, set()
        for split in splits:
            if split not in SPLITS:
                raise ManifestError(f"{path}: splits: {_short_repr(split)} is not one of "
                                    f"{', '.join(SPLITS)}")
            info = check.field(splits, "splits", split, _is_object, "an object")
            where = f"splits.{split}"
            num_examples = check.field(info, where, "num_examples", _is_count, "a count")
            shards = check.field(info, where, "shards", lambda v: isinstance(v, list), "a list")
            shards = tuple(ShardEntry.from_json(shard, split, f"{where}.shards[{i}]", check)
                           for i, shard in enumerate(shards))
            for shard in shards:  # else a reader reads it twice (or a million times)
                if shard.name in names:
                    raise ManifestError(f"{path}: {where}.shards: {shard.name} is listed twice")
                names.add(shard.name)
            listed = sum(shard.num_examples for shard in shards)
            if listed != num_examples:
                raise ManifestError(f"{path}: {where}.num_examples: {num_examples} is not the "
                                    f"sum of its shards' num_examples ({listed})")
            counts = info.get("label_counts", {})
            check.value(counts, f"{where}.label_counts", lambda v: _is_counts(v) or (
                isinstance(labels, dict) and _is_object(v) and
                all(_is_counts(c) for c in v.values())),
                "an object label -> count" + (", per level" if isinstance(labels, dict) else ""))
            entries[split] = SplitEntry(num_examples, counts, shards)
        known = {"format_version", "created_by", "fingerprint", "task", "labels", "features",
                 "compression", "image", "split_assignment", "rejected", "rejected_rows",
                 "splits", "format", "near_duplicates", "generations", *KIND_FIELDS}
        generations = content.get("generations")
        if generations is not None:
            check.value(generations, "generations", lambda v: isinstance(v, list) and v and all(
                _is_object(g) and g.get("generation") == i for i, g in enumerate(v)),
                "a list of objects with generation 0, 1, ...")
            for g in generations:  # readers open these files: names, never paths
                where = f"generations[{g['generation']}]"
                for key in ("skipped", "rejected"):
                    if key in g:
                        check.field(g, where, key, _is_count, "a count")
                if "num_examples" in g:
                    check.field(g, where, "num_examples", _is_counts, "an object split -> count")
                if "labels" in g:
                    check.field(g, where, "labels", lambda v: _is_count(v) and v <= len(labels),
                                f"a count of labels (at most {len(labels)})")
                if "label_counts" in g:
                    check.field(g, where, "label_counts", lambda v: _is_object(v) and all(
                        _is_counts(c) for c in v.values()), "an object split -> label counts")
                if g.get("rejected_file") is not None:
                    check.field(g, where, "rejected_file", lambda v: isinstance(v, str) and
                                REJECTED_NAME.match(v), "a rejected-gNNNN.csv file name")
                if g.get("hashes") is not None:
                    check.field(g, where, "hashes", lambda v: isinstance(v, str) and
                                HASHES_NAME.match(v), "a hashes-gNNNN.csv file name")
        for split, entry in entries.items():  # else readers would leave the shard out
            for shard in entry.shards:
                if shard.generation >= len(generations or [None]):
                    raise ManifestError(f"{path}: splits.{split}.shards: {shard.name} is of "
                                        f"generation {shard.generation}, and the output has "
                                        f"{len(generations or [None])} generation(s)")
        near = content.get("near_duplicates")
        if near is not None:
            check.value(near, "near_duplicates", _is_object, "an object")
            check.field(near, "near_duplicates", "hashes",
                        lambda v: isinstance(v, list) and all(
                            isinstance(n, str) and HASHES_NAME.match(n) for n in v),
                        "a list of hashes file names")
            if "checksums" in near:  # written since the hashes files' checksums are recorded
                check.field(near, "near_duplicates", "checksums", lambda v: _is_object(v) and all(
                    n in near["hashes"] and _is_object(c) and _is_count(c.get("bytes")) and
                    _is_hex(c.get("crc32c"), 8) for n, c in v.items()),
                    "an object hashes file name -> its bytes and crc32c")
            check.field(near, "near_duplicates", "file",
                        lambda v: v is None or v == NEAR_DUPLICATES or (
                            isinstance(v, str) and NEAR_DUPLICATES_NAME.match(v)),
                        f"null or {NEAR_DUPLICATES!r}")
        return cls(labels, features, compression, image, entries, content["rejected"],
                   tuple(content.get("rejected_rows", ())), content.get("fingerprint"),
                   content.get("created_by"), task, content.get("split_assignment"),
                   {k: content[k] for k in KIND_FIELDS if k in content}, file_format, near,
                   generations,
                   {k: v for k, v in content.items() if k not in known})


def _image_from_json(image, check):
    check.field(image, "image", "stored", lambda v: v in ("encoded", "resized"),
                "'encoded' or 'resized'")
    size = check.field(image, "image", "size", lambda v: v is None or _is_size(v),
                       "null or [height, width]")
    formats = check.field(image, "image", "formats", _is_object, "an object")
    max_size = check.field(image, "image", "max_size", _is_size, "[height, width]") \
        if "max_size" in image else None
    return ImageSummary(image["stored"], None if size is None else tuple(size),
                        None if max_size is None else tuple(max_size), image.get("channels"),
                        formats)


def _check_features(features, labels, task, images, check):
    """The image and label features must be there with their fixed types; other features
    take any type and shape a record can hold."""
    fixed = dict(IMAGE_KEYS) if images else {}
    label_keys, label_shape = kind_of(task).fixed_keys(labels, task)
    fixed.update(label_keys)
    for key in [*fixed, *features]:
        spec = check.field(features, "features", key, _is_object, "an object")
        dtypes = [fixed[key]] if key in fixed else [BYTES, INT64, FLOAT]
        check.field(spec, f"features.{key}", "dtype", lambda v: v in dtypes,
                    " or ".join(map(repr, dtypes)))
        if key in fixed:
            shape = [] if key in IMAGE_KEYS else label_shape
            check.field(spec, f"features.{key}", "shape", lambda v: v == shape,
                        json.dumps(shape))
        else:
            check.field(spec, f"features.{key}", "shape", _is_shape,
                        "a shape: [], [n], [null], [n, k] or [null, k]")


def split_shards(manifest, split, generation=None):
    """The shards of ``split`` as the output was after ``generation`` (None: the latest), in
    the order metadata.json lists them (earlier generations first): what every reader reads.

    Raises:
        ManifestError: ``split`` is not in the output, or ``generation`` is not one of its
            generations (naming them).
    """
    if split not in manifest.splits:
        raise ManifestError(f"split {split!r} is not in the output (it has "
                            f"{', '.join(manifest.splits)})")
    generation = generation_number(manifest, generation)
    return tuple(s for s in manifest.splits[split].shards if s.generation <= generation)


def generation_number(manifest, generation):
    """``generation`` as the int of one of the output's generations (None: the latest; a
    numpy integer is an integer, a bool is not).

    Raises:
        ManifestError: ``generation`` is no whole number of the output's generations (the
            message says which are).
    """
    latest = len(manifest.generations) - 1 if manifest.generations else 0
    if generation is None:
        return latest
    whole = isinstance(generation, numbers.Integral) and not isinstance(generation, bool)
    if not whole or not 0 <= generation <= latest:
        allowed = "0 (the output has one generation)" if latest == 0 else \
            f"0 to {latest} (the output's generations)"
        raise ManifestError(f"generation must be {allowed}, not "
                            f"{int(generation) if whole else repr(generation)}")
    return int(generation)


def as_of(manifest, generation=None, strict=True):
    """The Manifest of the output as it was after ``generation`` (None: the latest, which is
    ``manifest`` itself): its shards, counts, label counts, images, labels and generations
    then, from what metadata.json's ``generations`` record of each.

    Args:
        manifest: the output's Manifest.
        generation: the generation, or None.
        strict: when metadata.json does not record what its generations held (an output
            appended to by an earlier version), raise; else give ``manifest`` itself (readers
            still read only the generation's shards, through :func:`split_shards`).

    Raises:
        ManifestError: ``generation`` is not one of the output's, or (``strict``)
            metadata.json does not record what its generations held.
    """
    generation = generation_number(manifest, generation)
    shards = {split: split_shards(manifest, split, generation) for split in manifest.splits}
    if generation == len(manifest.generations or [None]) - 1:
        return manifest
    entries = manifest.generations[:generation + 1]
    lacking = [g["generation"] for g in entries
               if not all(k in g for k in ("labels", "label_counts", "image"))]
    if lacking and not strict:
        return manifest
    if lacking:
        raise ManifestError(f"metadata.json does not record the labels and images of "
                            f"generation {lacking[0]} (appended by an earlier version), so the "
                            "output as it was then can be read (load, data_source) but not "
                            "summed up")
    splits = {}
    for split, kept in shards.items():
        if not kept:
            continue
        total = Counter()
        for g in entries:
            total.update(g["label_counts"].get(split, {}))
        splits[split] = SplitEntry(sum(s.num_examples for s in kept),
                                   {text: total[text] for text in manifest.labels
                                    if total[text]}, kept)
    image = None
    for g in entries:
        if g["image"] is not None:
            summary = _image_from_json(g["image"], _Fields("metadata.json generations"))
            image = summary if image is None else image.merged(summary)
    near = manifest.near_duplicates and {**manifest.near_duplicates, "hashes": [
        g["hashes"] for g in entries if g.get("hashes")]}
    if near and "checksums" in near:
        near["checksums"] = {n: c for n, c in near["checksums"].items() if n in near["hashes"]}
    return replace(manifest, labels=manifest.labels[:entries[-1]["labels"]], splits=splits,
                   image=image, fingerprint=entries[-1].get("fingerprint"),
                   near_duplicates=near, generations=entries if generation else None)


def label_counts(vocabulary, shard_counts):
    """label text -> records of one label field, summed over shards' counts (id as text ->
    records), in id order."""
    total = Counter()
    for counts in shard_counts:
        total.update({int(k): v for k, v in counts.items()})
    return {vocabulary[i]: total[i] for i in sorted(total)}


def split_entry(receipts, label_fields):
    """The SplitEntry of a split's shard receipts; ``label_fields``: (level, vocabulary) of
    each label field, as the receipts count them."""
    counts = [label_counts(vocabulary, [r.labels[i] for r in receipts])
              for i, (_, vocabulary) in enumerate(label_fields)]
    levels = [level for level, _ in label_fields]
    return SplitEntry(sum(r.shard.num_examples for r in receipts),
                      counts[0] if levels[0] is None else dict(zip(levels, counts)),
                      tuple(r.shard for r in receipts))


def write_manifest(store, manifest):
    """Write ``metadata.json`` atomically (call this last)."""
    store.write_atomic(METADATA, json.dumps(manifest.to_json(), indent=2, sort_keys=False) + "\n")


def read_manifest(output_dir, storage_options=None):
    """Read and check ``metadata.json`` of an output folder (a path, any fsspec URL, or a Store).

    Returns:
        ``(Manifest, content)``: the checked manifest and the parsed JSON as it is.

    Raises:
        ManifestError: when the folder has no (readable, well-formed) metadata.json; the
            message says why (no such folder, an unfinished conversion, ...) or names the
            malformed field.
    """
    store = output_dir if isinstance(output_dir, Store) else Store(output_dir, storage_options)
    path = store.path(METADATA)
    try:
        text = store.read_text(METADATA)
    except FileNotFoundError:
        raise ManifestError(f"{path} not found: {_why_unfinished(store)}") from None
    except (OSError, ValueError) as exc:
        raise ManifestError(f"cannot read {path}: {exc}") from None
    try:
        content = json.loads(text)
    except ValueError as exc:
        raise ManifestError(f"cannot read {path}: {exc}") from None
    return Manifest.from_json(content, path), content


def read_metadata(output_dir, storage_options=None, generation=None):
    """Read and check ``metadata.json`` of an output folder (a path, any fsspec URL, or a Store).

    Args:
        output_dir: the folder.
        storage_options: fsspec options for a remote folder.
        generation: the output as it was after this generation (0: the first conversion;
            None: as it is).

    Returns:
        A Metadata: the content as a dict; ``print()`` of it shows the folder's summary, as
        ``tfrecorder-lite info`` does.

    Raises:
        ManifestError: when the folder has no (readable, well-formed) metadata.json; the
            message says why (no such folder, an unfinished conversion, ...) or names the
            malformed field; or no such generation.
    """
    store = output_dir if isinstance(output_dir, Store) else Store(output_dir, storage_options)
    manifest, content = read_manifest(store)
    if generation is not None:
        manifest = as_of(manifest, generation)
        content = manifest.to_json()
    return Metadata(content, store.url, manifest)


def summary_text(manifest, where, max_labels=None, max_text=None):
    """The text summary of an output folder: what ``tfrecorder-lite info`` prints, what heads
    an ``inspect`` report, and what ``print(read_metadata(...))`` shows.

    Args:
        manifest: the folder's Manifest.
        where: how to name the folder (its path or URL).
        max_labels: list at most this many labels (and formats) per split, and say how many
            more there are (None: all of them).
        max_text: cut each label text to this many characters (None: whole).
    """
    def short(text):
        text = str(text)
        return text if max_text is None or len(text) <= max_text else text[:max_text - 3] + "..."

    def first(items, what, indent):
        items = list(items)
        if max_labels is None or len(items) <= max_labels:
            return items, []
        return items[:max_labels], [f"{indent}... and {len(items) - max_labels} more {what}"]

    image, labels = manifest.image, manifest.labels
    counted = kind_of(manifest.task).counted  # what label_counts count: records, or boxes
    if isinstance(labels, dict):
        levels, more = first(labels.items(), "levels", "")
        what = " and ".join(f"{len(texts)} {short(level)} labels" for level, texts in levels) \
            + "".join(f" {line}" for line in more)
    elif counted != "records":  # a kind that counts objects: its ids without a text aside
        objects = sum(_count(info) for info in manifest.splits.values())
        what = f"{sum(1 for text in labels if text)} labels ({manifest.task}: {objects} {counted})"
    else:
        what = f"{len(labels)} labels" + (f" ({manifest.task})" if manifest.task else "")
    compression = manifest.compression or "none"
    rejected = manifest.rejected + sum(g.get("rejected", 0) for g in manifest.generations or ())
    if image is None:
        lines = [f"{where}: {what}, no images, compression {compression},"
                 f" {rejected} rejected"]
    else:
        if image.size:
            size = hxw(image.size)
        else:
            size = "various sizes" + (f", up to {hxw(image.max_size)}" if image.max_size else "")
        formats, more = first(image.formats.items(), "formats", "")
        formats = ", ".join(f"{short(fmt)} {n}" for fmt, n in formats) or "none"
        lines = [f"{where}: {what}, images {image.stored} ({size}), "
                 f"compression {compression}, {rejected} rejected",
                 f"formats: {formats}" + (f" {more[0]}" if more else "")]
    if manifest.generations:  # an output appended to: what each generation added
        lines.append(f"{len(manifest.generations)} generations: " + "; ".join(
            f"{g['generation']}: " + (", ".join(f"{split} {n}" for split, n in
                                                g.get("num_examples", {}).items()) or "none")
            + (" (" + ", ".join(part for part in (
                f"{g['skipped']} already there" if g.get("skipped") else "",
                f"{g['rejected']} rejected" if g.get("rejected") else "") if part) + ")"
               if g.get("skipped") or g.get("rejected") else "")
            for g in manifest.generations))
    counted = kind_of(manifest.task).counted
    unit = "" if counted == "records" else f" {counted}"
    for split, info in manifest.splits.items():
        size = human_size(sum(shard.bytes for shard in info.shards))
        objects = f" ({_count(info)} {counted})" if counted != "records" else ""
        lines.append(f"{split}: {info.num_examples} examples{objects} in {len(info.shards)} "
                     f"shard(s), {size}")
        counts = info.label_counts
        levels, more_levels = first(counts.items(), "levels", "  ") \
            if isinstance(labels, dict) else ([(None, counts)], [])
        for level, level_counts in levels:
            lines += [f"  {short(level)}:"] if level else []
            indent = "    " if level else "  "
            shown, more = first(level_counts.items(), "labels", indent)
            lines += [f"{indent}{short(label)}: {count}{unit}" for label, count in shown] + more
        lines += more_levels
    return "\n".join(lines)


def _count(info):
    """What a split's label counts add up to (the objects of a kind that counts them)."""
    return sum(n for n in info.label_counts.values() if isinstance(n, int))


_HTML_LABELS_SHOWN = 50  # label rows of the notebook view (the text summary lists them all)


def summary_html(manifest, where):
    """The summary as a small HTML table per split and label (a notebook's view of it)."""
    splits = list(manifest.splits)
    head = escape(summary_text(manifest, where, max_labels=0, max_text=200).splitlines()[0])
    rows = "".join(
        f"<tr><td>{escape(name)}</td><td>{entry.num_examples}</td><td>{len(entry.shards)}</td>"
        f"<td>{human_size(sum(s.bytes for s in entry.shards))}</td></tr>"
        for name, entry in manifest.splits.items())
    counts = {name: _flat_counts(entry.label_counts) for name, entry in manifest.splits.items()}
    labels = list(dict.fromkeys(label for c in counts.values() for label in c))
    shown = labels[:_HTML_LABELS_SHOWN]
    label_rows = "".join(
        f"<tr><td>{escape(_clip(label))}</td>" + "".join(f"<td>{counts[s].get(label, 0)}</td>"
                                                  for s in splits) + "</tr>" for label in shown)
    more = (f"<p>and {len(labels) - len(shown)} more labels (print() lists them all)</p>"
            if len(labels) > len(shown) else "")
    return (f"<p>{head}</p><table><tr><th>split</th><th>examples</th><th>shards</th>"
            f"<th>size</th></tr>{rows}</table>"
            f"<table><tr><th>label</th>{''.join(f'<th>{escape(s)}</th>' for s in splits)}</tr>"
            f"{label_rows}</table>{more}")


def _clip(text, limit=200):
    """``text`` cut to ``limit`` characters, with "..." when it was longer."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _flat_counts(label_counts):
    """A split's label counts as ``{label: n}`` (with levels, labels are "level: text")."""
    if label_counts and all(isinstance(v, dict) for v in label_counts.values()):
        return {f"{level}: {label}": n for level, counts in label_counts.items()
                for label, n in counts.items()}
    return label_counts


def hxw(size):
    """``[224, 224]`` -> ``"224x224"``."""
    return "x".join(map(str, size))


class Metadata(dict):
    """The content of metadata.json, a dict; ``str()`` of it (``print``) is its summary.

    Attributes:
        where: the folder's path or URL.
        manifest: the checked Manifest.
    """

    def __init__(self, content, where, manifest):
        super().__init__(content)
        self.where = where
        self.manifest = manifest

    def __str__(self):
        return summary_text(self.manifest, self.where)

    def _repr_html_(self):
        return summary_html(self.manifest, self.where)


def _why_unfinished(store):
    """Why a folder without metadata.json is no finished output, for the error message."""
    names = store.list()
    if STATE_DIR in names:
        return (f"{store.url} is not a finished tfrecorder_lite output (the conversion may "
                "still be running, or was interrupted: re-run it to finish)")
    if names:
        return (f"{store.url} is not a tfrecorder_lite output (it holds "
                f"{', '.join(names[:5])}{', ...' if len(names) > 5 else ''})")
    if is_dir(store.url, store.storage_options):
        return f"{store.url} is an empty folder, not a tfrecorder_lite output"
    return f"{store.url} does not exist, so it is not a finished tfrecorder_lite output"


class _Fields:
    """Checks of the values in one JSON file; errors name the file and the field."""

    def __init__(self, path):
        self.path = path

    def value(self, value, name, test, what):
        """``value``, or ManifestError when ``test(value)`` is false."""
        if not test(value):
            raise ManifestError(f"{self.path}: {name}: {_short_repr(value)} is not {what}")
        return value

    def field(self, parent, where, key, test, what):
        """``parent[key]``, checked; ``where`` is the parent's dotted name ("" at the top)."""
        name = f"{where}.{key}" if where else key
        if key not in parent:
            raise ManifestError(f"{self.path} has no {name!r}")
        return self.value(parent[key], name, test, what)


def _is_texts(value):
    return isinstance(value, list) and all(isinstance(t, str) for t in value)


def _short_repr(value, limit=200):
    shown = repr(value)
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."


def _is_counts(value):
    return _is_object(value) and all(_is_count(n) for n in value.values())


def _is_shape(value):
    return isinstance(value, list) and len(value) <= 2 and \
        all(_is_count(d) or (d is None and i == 0) for i, d in enumerate(value))


def _is_object(value):
    return isinstance(value, dict)


def _is_count(value):
    return type(value) is int and value >= 0  # noqa: E721 (bool is an int, not a count)


def _is_size(value):
    return isinstance(value, list) and len(value) == 2 and all(_is_count(v) for v in value)


def _is_hex(value, digits):
    return isinstance(value, str) and len(value) == digits and all(
        c in "0123456789abcdef" for c in value)
