"""``verify()``: re-read every shard and check it against metadata.json."""

from collections import Counter

from ..errors import ManifestError, VerifyError
from ..images import content_hash
from ..near_duplicates.hashes_file import read_hashes_file
from ..output.layout import hashes_generation, index_name, label_files, label_problem, tfds_label_names
from ..output.manifest import as_of, hxw, label_counts, read_manifest
from ..record import encoding as example
from ..record import keys
from ..record.kinds import features_of, kind_of
from ..formats import format_named
from ..record.framing import FileDigest, RecordError
from ..storage import Store
from ..record.tensorflow import import_tensorflow


class _DigestingReader:
    """A read-only file wrapper that feeds what is read through it to a FileDigest."""

    def __init__(self, fileobj, digest):
        self._file = fileobj
        self.digest = digest

    def read(self, size=-1):
        data = self._file.read(size)
        self.digest.update(data)
        return data


def _check_record(data, features, decode_image, labels, label_features=()):
    """Check one record against the manifest; returns its parsed features.

    Raises:
        ValueError: what is wrong with it.
    """
    parsed = example.decode_example(data)
    for key, spec in features.items():
        if key not in parsed:
            raise ValueError(f"feature '{key}' missing")
        kind, values = parsed[key]
        if kind != spec["dtype"] or not example.value_count_fits(spec["shape"], len(values)):
            raise ValueError(f"feature '{key}' holds {len(values)} {kind} value(s), "
                             f"expected {_values_text(spec)}")
    values = {key: values for key, (_, values) in parsed.items()}
    for feature in label_features:
        problem = feature.check_values(values)
        if problem:
            raise ValueError(problem)
    for label in labels:
        label.check(parsed)
    if decode_image is not None and keys.ENCODED in parsed:
        height, width = decode_image(parsed[keys.ENCODED][1][0])
        stored = (parsed[keys.HEIGHT][1][0], parsed[keys.WIDTH][1][0])
        if (height, width) != stored:
            raise ValueError(f"its image decodes to {height}x{width}, the record says "
                             f"{hxw(stored)}")
    return parsed


class _Label:
    """One label field of an output: checks each record's ids and texts against
    metadata.json's labels and counts the ids, per split."""

    def __init__(self, feature):
        self.feature = feature
        self.level = getattr(feature, "level", None)
        self.vocabulary = list(feature.vocabulary)
        self.id_key, self.text_key = feature.keys
        self.first = feature.first_id
        self._texts = [text.encode("utf-8") for text in self.vocabulary]
        self.counts = {}  # split -> Counter of ids

    def check(self, parsed):
        ids, texts = parsed[self.id_key][1], parsed[self.text_key][1]
        if len(ids) != len(texts):
            raise ValueError(f"{len(ids)} value(s) in {self.id_key}, {len(texts)} in "
                             f"{self.text_key}")
        for label_id, text in zip(ids, texts):
            if not self.first <= label_id < len(self.vocabulary):
                raise ValueError(f"{self.id_key} {label_id} is no label id of metadata.json "
                                 f"({self.first} to {len(self.vocabulary) - 1})")
            if text != self._texts[label_id]:
                raise ValueError(f"{self.text_key} {_clip(text.decode('utf-8', 'replace'))!r} "
                                 f"is not the text of label {label_id} in metadata.json "
                                 f"({_clip(self.vocabulary[label_id])!r})")

    def count(self, split, parsed):
        counted = self.feature.counted({key: values for key, (_, values) in parsed.items()})
        self.counts.setdefault(split, Counter()).update(counted)

    def label_counts(self, split):
        """The split's label counts as metadata.json has them (label text -> count)."""
        return label_counts(self.vocabulary, [self.counts.get(split, {})])


class _Images:
    """What the records' image fields add up to, as metadata.json's ``image`` says it."""

    def __init__(self):
        self.sizes, self.channels, self.formats = {}, set(), Counter()
        self.max_size = (0, 0)

    def add(self, where, parsed):
        size = (parsed[keys.HEIGHT][1][0], parsed[keys.WIDTH][1][0])
        if len(self.sizes) < 2:
            self.sizes.setdefault(size, where)
        self.max_size = (max(self.max_size[0], size[0]), max(self.max_size[1], size[1]))
        self.channels.add(parsed[keys.CHANNELS][1][0])
        self.formats[parsed[keys.FORMAT][1][0].decode("utf-8", "replace")] += 1

    def problems(self, image):
        """How metadata.json's ImageSummary ``image`` differs from the records."""
        problems, sizes = [], list(self.sizes)
        if not sizes:
            return problems
        if image.size is not None and sizes != [tuple(image.size)]:
            other = next(s for s in sizes if s != tuple(image.size))
            problems.append(f"metadata.json: image.size is {hxw(image.size)}, and "
                            f"{self.sizes[other]} is {hxw(other)}")
        if image.size is None and len(sizes) == 1:
            problems.append(f"metadata.json: image.size is null (sizes vary), and every "
                            f"record is {hxw(sizes[0])}")
        if image.max_size is not None and tuple(image.max_size) != self.max_size:
            problems.append(f"metadata.json: image.max_size is {hxw(image.max_size)}, the "
                            f"records' largest height and width are {hxw(self.max_size)}")
        if image.channels is not None and self.channels != {image.channels}:
            problems.append(f"metadata.json: image.channels is {image.channels}, the records "
                            f"hold {sorted(self.channels)}")
        if dict(image.formats) != dict(self.formats):
            problems.append(f"metadata.json: image.formats is {_clip(image.formats)}, the "
                            f"records hold {dict(sorted(self.formats.items()))}")
        return problems


def _clip(value, limit=80):
    """``value`` as text, cut to ``limit`` characters (texts from a file may be any size)."""
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


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


def _check_shard(store, shard, split, compression, features, decode_image, labels, images,
                 label_features=(), file_format=format_named(None)):
    """Problems of one shard file (empty list when it is sound); counts what its records
    hold into ``labels`` and ``images`` (None: no images).

    Returns:
        The problems found (what the split sums up is judged only when there are none).
    """
    name = shard.name
    size = store.size(name)
    problem = size_problem(shard, size)
    if size is None:
        return [f"{name}: {problem}"]
    problems, count, damaged, sizes = [f"{name}: {problem}"] if problem else [], 0, False, []
    with store.open_read(name) as f:
        reader = _DigestingReader(f, FileDigest.like(shard.checksums))
        try:
            for count, data in enumerate(file_format.records(reader, compression, size),
                                         start=1):
                if count > shard.num_examples:  # read no further into a file that lies
                    problems.append(f"{name}: more than the {shard.num_examples} records "
                                    "metadata.json says")
                    damaged = True
                    break
                sizes.append(len(data))
                try:
                    parsed = _check_record(data, features, decode_image, labels,
                                           label_features)
                except Exception as exc:  # a record that does not parse or decode
                    problems.insert(0, f"{name}: record {count - 1}: {exc}")
                    damaged = True
                    break
                for label in labels:
                    label.count(split, parsed)
                if images is not None:
                    images.add(f"{name} record {count - 1}", parsed)
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
                problems += _index_problems(store, shard, sizes, file_format)
    return problems


def _index_problems(store, shard, record_sizes, file_format):
    """Problems of a shard's index file against the records just read (none without one)."""
    entry = shard.index
    if entry is None:  # written before index files existed
        return []
    shard_name, name = shard.name, index_name(shard.name)
    if entry.name != name:
        return [f"{shard_name}: metadata.json names its index {entry.name!r}, "
                f"expected {name!r}"]
    expected = file_format.index_text(record_sizes).encode()
    found = _read_head(store, name, len(expected) + 1)
    if found is None:
        return [f"{shard_name}: index file {name} is missing"]
    if found != expected:
        return [f"{shard_name}: index file {name} does not match its records"]
    return []


def _read_head(store, name, limit):
    """The first ``limit`` bytes of the file ``name`` (all of a smaller one), or None when it
    is missing: a file expected to hold less is never read whole."""
    try:
        with store.open_read(name) as f:
            return f.read(limit)
    except FileNotFoundError:
        return None


def _label_file_problems(store, manifest):
    """Problems of the label files (labels.txt, labels-<level>.txt, the record kind's files
    such as label_map.pbtxt, tfds' label names where present) against metadata.json's labels."""
    files = {name: "".join(f"{text}\n" for text in texts)
             for name, texts in label_files(manifest.labels).items()}
    files.update(kind_of(manifest.task).files_listed(manifest))
    optional = set()
    if not manifest.compression:  # tfds' files, written for uncompressed outputs
        for label in features_of(manifest).labels:
            name = tfds_label_names(label.keys[0])
            files[name] = "".join(f"{text}\n" for text in label.vocabulary)
            optional.add(name)
    problems = [f"metadata.json: {name} line {i + 1}: {problem}"
                for name, texts in label_files(manifest.labels).items()
                for i, problem in enumerate(map(label_problem, texts)) if problem]
    if problems:  # files that cannot be written as metadata.json says
        return problems
    for name, text in files.items():
        expected = text.encode("utf-8")
        found = _read_head(store, name, len(expected) + 1)
        if found is None:
            if name not in optional:
                problems.append(f"{name} is missing")
        elif found != expected:
            problems.append(f"{name} does not match metadata.json's labels")
    return problems


def _label_count_problems(manifest, split, labels):
    """How a split's label_counts in metadata.json differ from those counted in its records."""
    info = manifest.splits[split]
    if isinstance(manifest.labels, dict):
        found = {label.level: label.label_counts(split) for label in labels}
        listed = {f"{level}: {text}": n for level, counts in _items(info.label_counts)
                  for text, n in _items(counts)}
        counted = {f"{level}: {text}": n for level, counts in found.items()
                   for text, n in counts.items()}
    else:
        listed, counted = dict(_items(info.label_counts)), labels[0].label_counts(split)
    if listed == counted:
        return []
    differ = [text for text in dict.fromkeys([*counted, *listed])
              if listed.get(text) != counted.get(text)]
    shown = "; ".join(f"{_clip(text)!r} {listed.get(text, 0)} in metadata.json, "
                      f"{counted.get(text, 0)} in the records" for text in differ[:5])
    more = f"; and {len(differ) - 5} more" if len(differ) > 5 else ""
    what = kind_of(manifest.task).counted
    return [f"metadata.json: splits.{split}.label_counts (label -> {what}) differs from the "
            f"records: {shown}{more}"]


def _items(value):
    """The items of a dict read from metadata.json (none when it is not a dict)."""
    return value.items() if isinstance(value, dict) else ()


def _tf_decoder():
    tf = import_tensorflow()

    def decode_image(encoded):
        """(height, width) of the decoded image."""
        shape = tf.io.decode_image(encoded, channels=3, expand_animations=False).shape
        return int(shape[0]), int(shape[1])

    return decode_image


_PROBLEMS_SHOWN = 100  # lines of a VerifyError's message (exc.problems has them all)


def _generation_problems(manifest):
    """How metadata.json's ``generations`` differ from its shards: the records each lists per
    split against those of its shards."""
    problems = []
    for g in manifest.generations or ():
        listed = {split: n for split, n in _items(g.get("num_examples")) if n}
        found = {split: sum(s.num_examples for s in info.shards
                            if s.generation == g["generation"])
                 for split, info in manifest.splits.items()}
        found = {split: n for split, n in found.items() if n}
        if listed != found:
            problems.append(f"metadata.json: generations[{g['generation']}].num_examples is "
                            f"{_clip(listed)}, its shards hold {found}")
    return problems


def _hashes_file_problems(store, manifest):
    """What is wrong with the hashes files metadata.json lists: missing, not the bytes it
    records of them, no hashes file, or not a row per record of their generation."""
    near = manifest.near_duplicates or {}
    recorded = near.get("checksums", {})
    problems = []
    for name in near.get("hashes", ()):
        try:
            frame = read_hashes_file(store, name, recorded.get(name), columns=["row"],
                                     hashed_by=content_hash.of_output(near))
        except ManifestError as exc:
            problems.append(str(exc))
            continue
        generation = hashes_generation(name)
        records = sum(shard.num_examples for info in manifest.splits.values()
                      for shard in info.shards if shard.generation == generation)
        if len(frame) != records:
            problems.append(f"{store.path(name)}: lists {len(frame)} images, and generation "
                            f"{generation}'s shards hold {records} records")
    return problems


def verify(output_dir, decode=False, *, storage_options=None, generation=None):
    """Read every record of every shard and check it against ``metadata.json``.

    ``output_dir`` is a local path or any fsspec URL; remote shards are streamed, not copied,
    and memory stays bounded whatever a shard holds (see ``iter_records``).

    Checks both CRCs of each record, that each parses as an Example with the manifest's
    features, that its label ids and texts are metadata.json's labels, each shard's record
    count, size and checksums (CRC32C, and sha256 where metadata.json has it), that its index
    file lists its records, and what each label feature checks of its values (boxes: lists
    of one length, relative and ordered). Then what metadata.json sums up: each split's
    ``label_counts`` (per label: records, or what the record kind counts, e.g. boxes), the
    image sizes, channels and formats, and the label files (``labels.txt``,
    ``labels-<level>.txt``, the kind's own such as ``label_map.pbtxt``), the hashes files
    (present, the bytes metadata.json records, a row per record), and in an output appended
    to, the records each generation lists. With ``decode`` also decodes every image
    with TensorFlow and checks its height and width. With ``generation=k`` checks the output
    as it was after generation ``k``: its shards, and what metadata.json records of it then.

    Returns:
        A one-line summary, e.g. "OK: 3 splits, 5 shards, 3000 records verified".

    Raises:
        ManifestError: no finished output in ``output_dir``, or no such generation.
        VerifyError: naming each damaged shard file and record index (``exc.problems``).
    """
    store = Store(output_dir, storage_options)
    latest, _ = read_manifest(store)
    manifest = as_of(latest, generation)
    decode_image = _tf_decoder() if decode else None
    feature_set = features_of(manifest)
    labels = [_Label(feature) for feature in feature_set.labels]
    images = _Images() if manifest.image is not None else None
    problems, shards, records, whole = [], 0, 0, True
    for split, info in manifest.splits.items():
        split_whole = True
        for shard in info.shards:
            found = _check_shard(store, shard, split, manifest.compression,
                                          manifest.features, decode_image, labels, images,
                                          feature_set.labels, manifest.format)
            problems += found
            split_whole = split_whole and not found
            shards += 1
            records += shard.num_examples
        if split_whole:  # the counts of a split with a faulty shard tell nothing more
            problems += _label_count_problems(manifest, split, labels)
        whole = whole and split_whole
    if whole and images is not None:
        problems += images.problems(manifest.image)
    kind = kind_of(manifest.task)
    if whole and kind.fields:  # the kind's own fields (e.g. boxes) against the records
        counted = {split: labels[0].label_counts(split) for split in manifest.splits}
        problems += kind.manifest_problems(manifest, feature_set, counted)
    problems += _generation_problems(latest)
    problems += _hashes_file_problems(store, latest)  # every generation's, as appends read them
    problems += _label_file_problems(store, latest)  # the files hold the latest labels
    if problems:
        shown = problems[:_PROBLEMS_SHOWN]
        more = [f"... and {len(problems) - len(shown)} more (exc.problems lists them all)"] \
            if len(problems) > len(shown) else []
        raise VerifyError(f"{len(problems)} problem(s) in {store.url}:\n  " +
                          "\n  ".join(shown + more), problems)
    what = "records verified" + (" and decoded" if decode else "")
    when = "" if generation is None else f" (the output as it was after generation {generation})"
    return f"OK: {len(manifest.splits)} split(s), {shards} shard(s), {records} {what}{when}"
