"""``load()``: ready ``tf.data`` pipelines from an output folder's manifest and records.

Reads only ``metadata.json`` and the shards it lists (never globs). TensorFlow is imported here,
lazily, so that ``import tfrecorder_lite`` stays light.
"""

import dataclasses
import functools
import os
from concurrent.futures import ThreadPoolExecutor

import joblib

from . import checkpoints, data_source, indexed, keras_layout, shard_cache, verification
from ..errors import SchemaError
from ..options import LoadOptions
from ..output.manifest import as_of, generation_number, read_manifest, split_shards
from ..record.features import ImageFeature, parse_spec
from ..record.kinds import features_of
from ..output.splits import pick
from ..storage import Store, stat_many
from ..redaction import redact
from ..record.tensorflow import as_written, import_tensorflow
from .data_source import check_uncompressed

CYCLE_LENGTH = 8  # shards read in turn by load() without shuffle="global"
# asks the store whether the shards are there while TensorFlow makes the pipeline
_POOL = ThreadPoolExecutor(1, thread_name_prefix="tfrecorder_lite-load")


def load(output_dir, split=None, *, batch_size=None, image_size=None, shuffle=False, seed=None,
         as_supervised=True, shuffle_buffer=1000, drop_remainder=False, channels=3,
         dct_method="INTEGER_ACCURATE", storage_options=None, cache_dir=None, label=None,
         multi_hot=False, box_format="rel_yxyx", start=0, epochs=1, num_hosts=1, host_index=0,
         input_context=None, generation=None, cache_limit=None):
    """Return a ``tf.data.Dataset`` of a split, or a dict split -> dataset when split is None.

    Args:
        output_dir: a folder written by ``to_tfrecord`` / ``convert``: a local path or any
            fsspec URL.
        split: "TRAIN", "VALIDATION" or "TEST" (case-insensitive), or None for all splits.
        batch_size: batch the examples, or None for single examples.
        image_size: (height, width) to resize to (images stay uint8), or None.
        shuffle: True: shuffle shard order and examples (with a buffer of
            ``shuffle_buffer``); "global": each epoch in a permutation of all the split's
            records, read by index (see docs/training.md). Either way, each iteration of the
            dataset (each epoch of Keras' ``fit``) is in an order of its own.
        seed: shuffle seed (None: a different order every run; a seed repeats exactly).
        as_supervised: yield ``(image, label)`` (``(features, label)`` for an output without
            images: a dict of its other columns); False yields the feature dict plus ``image``;
            "keras": the dict Keras 3's image augmentation layers take, ``{"images",
            "bounding_boxes": {"boxes", "labels"}}`` (boxes in ``box_format``), ``{"images",
            "segmentation_masks"}`` or ``{"images", "labels"}`` (see
            :mod:`~tfrecorder_lite.read.keras_layout`).
        shuffle_buffer: examples held by the shuffle buffer.
        drop_remainder: drop the last, smaller batch.
        channels: channels of the decoded image (3: RGB, 1: grayscale).
        dct_method: JPEG inverse DCT. "INTEGER_ACCURATE" (default) gives the pixels Pillow and
            most viewers show; "" is TensorFlow's default, faster and off by a few levels.
        storage_options: fsspec options for a remote ``output_dir``.
        cache_dir: a local folder where the remote shards read are also kept, whole, so that
            later epochs and processes read them from the disk (None: nothing is kept on
            disk, unless ``cache_limit`` is given: then ``~/.cache/tfrecorder_lite``). Remote
            shards are streamed by ranged reads as they are needed; TensorFlow reads
            ``gs://`` on Google Cloud itself when neither ``cache_dir``, ``cache_limit`` nor
            ``storage_options`` is given (and ``STORAGE_EMULATOR_HOST`` is not set).
        cache_limit: at most this many bytes in ``cache_dir`` (an int, or text such as
            ``"20GB"``): the copies used least recently make room; None: every shard read
            is kept. Compressed shards, which cannot be streamed, are copied whole first.
        label: with label levels, the level the label is (``"fine"``), or a list of levels
            for a dict of labels; None: a dict of every level.
        multi_hot: the label as a float32 vector of the vocabulary's size, 1 for each label
            of the record (multi-label outputs; ready for ``BinaryCrossentropy``). Without
            it, a multi-label record's label is its int64 ids, of varying length (batched as a
            ``tf.RaggedTensor``).
        start: the global position to start at: records read by all hosts together since
            the first epoch began (an epoch is the split's records).
        epochs: epochs the dataset holds from the epoch of ``start``, each in its own
            order with ``shuffle="global"``; None: endless.
        num_hosts, host_index: read only this host's share of the global order (host
            ``h`` of ``H`` reads global positions ``start + h``, ``start + h + H``, ...).
        input_context: a ``tf.distribute.InputContext``, for ``num_hosts`` and
            ``host_index``.

        ``shuffle="global"``, ``start``, ``epochs``, the hosts and remote outputs read the
        records by index (:mod:`~tfrecorder_lite.read.indexed`): their iterators save a few
        integers in a ``tf.train.Checkpoint``, and
        :class:`~tfrecorder_lite.read.resume.BackupAndRestore` restores them with Keras.
        Every pipeline's iterator can be saved in a ``tf.train.Checkpoint`` and restored
        into the pipeline it came from (elsewhere, it fails naming what differs).
        generation: read the output as it was after this generation (0: the first
            conversion, ``k``: after its ``k``-th append; None: all of it), for experiments
            that must see the same records after later appends.

    Returns:
        A dataset yielding uint8 ``[H, W, channels]`` images and int64 labels (batched when
        asked; features of varying length are batched as ``tf.RaggedTensor``).

    Raises:
        ManifestError: no finished output in ``output_dir``, no such generation, or a
            shard file missing.
        SchemaError: an unknown split, batching images of different sizes without
            image_size, or an argument out of its range.
    """
    options = LoadOptions.of(locals())
    store = Store(output_dir, storage_options)
    cache = (cache_dir, shard_cache.byte_count(cache_limit))
    # as it was after the generation: its labels (multi_hot's width), its images' sizes
    manifest = as_of(read_manifest(store)[0], generation, strict=False)
    by_index = None
    if indexed.by_index_wanted(shuffle, start, epochs, num_hosts, host_index, input_context):
        by_index = functools.partial(indexed.input_position, shuffle=shuffle, seed=seed,
                                     start=start, epochs=epochs, batch_size=batch_size,
                                     num_hosts=num_hosts, host_index=host_index,
                                     input_context=input_context)
        by_index(1)  # its arguments checked now, before any record is read
    keras_layout.check(features_of(manifest), options, redact(store.url))
    layout = functools.partial(keras_layout.apply, features_of(manifest), options)
    if split is None:
        return {name: layout(_load_split(store, manifest, name, options, cache, by_index,
                                         generation)) for name in manifest.splits}
    return layout(_load_split(store, manifest, pick(split, manifest.splits), options, cache,
                              by_index, generation))


def _load_split(store, manifest, split, options, cache, by_index=None, generation=None):
    """The pipeline of one split of the output in ``store`` (see :func:`load`; ``cache``:
    ``(cache_dir, cache_limit)``)."""
    features = features_of(manifest)
    label_outputs(features, options.label)  # SchemaError before TensorFlow starts
    image = manifest.image
    if image is None and options.image_size is not None:
        raise SchemaError(f"{store.url} holds no images, so image_size does not apply")
    if options.batch_size and image is not None and options.image_size is None and \
            image.size is None:
        raise SchemaError(
            f"the images in {store.url} have different sizes, so they cannot be batched as "
            "they are: pass image_size=(height, width) to load(), or batch_size=None"
        )
    shards = split_shards(manifest, split, generation)  # ManifestError: no such generation
    num_examples = sum(shard.num_examples for shard in shards)
    streamed = by_index is None and not reads_natively(store, *cache) and \
        not manifest.compression
    if streamed:  # remote shards, read by ranged reads as the pipeline needs them
        by_index = functools.partial(
            indexed.input_position, shuffle=False, seed=options.seed, start=0, epochs=1,
            batch_size=options.batch_size, num_hosts=1, host_index=0, input_context=None)
    if by_index is not None:  # shuffle="global", a start, epochs or hosts, or streamed
        position = by_index(num_examples)
        check_uncompressed(store, manifest, "load() by index (shuffle='global', start, "
                                            "epochs, hosts)")
        cached = data_source.shard_cache_of(store, *cache)
        checked = None
        if not store.is_local:  # the store asked while the pipeline is made
            checked = _POOL.submit(_check_remote_shards, store, shards, cached)
        tf = import_tensorflow()
        dataset = _load_by_index(tf, store, manifest, split, options, position, features,
                                 shards, generation, cached, streamed)
        if checked is not None:
            checked.result()  # ManifestError: a shard missing or not of its size
        return dataset

    paths = _shard_files(store, shards, cache)
    tf = import_tensorflow()
    read_shard = _shard_reader(tf, manifest.format, manifest.compression or "", store.url)
    ratios = ImageFeature.useful_jpeg_ratios(image, options.image_size) if image else ()
    decode = decoder(tf, features, options, ratios, parse_spec(manifest.features))

    # a seeded shuffle must repeat exactly
    deterministic = not options.shuffle or options.seed is not None
    names = [store.path(shard.name) for shard in shards]  # for messages, with any copy read
    names = [name if name == path else f"{name} (local copy {path})"
             for name, path in zip(names, paths)]
    files = tf.data.Dataset.from_tensor_slices(
        (paths, names, tf.constant([shard.num_examples for shard in shards], tf.int64)))
    if options.shuffle:
        files = files.shuffle(len(paths), seed=options.seed, reshuffle_each_iteration=True)
    cycle_length = max(1, min(len(paths), CYCLE_LENGTH))
    records = files.interleave(
        read_shard, cycle_length=cycle_length, num_parallel_calls=cycle_length,
        deterministic=deterministic,
    ).apply(tf.data.experimental.assert_cardinality(num_examples))
    dataset = decoded_pipeline(tf, records, decode, options, deterministic, features)
    return checkpoints.bind(tf, dataset, checkpoints.describe(
        split, shards, generation_number(manifest, generation), bool(options.shuffle),
        options.seed))


def _load_by_index(tf, store, manifest, split, options, position, features, shards,
                   generation, cache, streamed=False):
    """The pipeline of one split (its ``shards``) read by index at the global positions of
    ``position``: in the global order of ``shuffle="global"``, else in manifest order, or
    when ``streamed`` (a remote output read as load() reads local ones) in the order of
    the local pipeline (``shuffle=True``: whole shards in an order of each epoch's, and a
    shuffle buffer)."""
    image = manifest.image
    source = data_source.DataSource(store, split, shards, data_source.value_specs(manifest),
                                    cache=cache, generation=generation)
    seed, sizes = options.seed, tuple(s.num_examples for s in shards)
    if options.shuffle is True:  # streamed: the shards shuffled, their records in order
        order = indexed.global_order(position.num_records, True, seed, sizes)
    elif streamed:  # in the order load() reads local shards: CYCLE_LENGTH of them in turn
        order = indexed.global_order(position.num_records, False, seed, sizes,
                                     min(len(shards), CYCLE_LENGTH))
    else:
        order = indexed.global_order(position.num_records, options.shuffle == "global", seed)
    buffered = options.shuffle is True  # the by-index orders need no buffer
    description = checkpoints.describe(
        split, shards, generation_number(manifest, generation), options.shuffle,
        order.seed if order.shuffle else None, position.num_hosts, position.host_index)
    records = indexed.records(tf, source, order, position, description, symbolic=not buffered)
    if position.repeats_evenly:
        records = records.apply(tf.data.experimental.assert_cardinality(
            indexed.count(position)))
    ratios = ImageFeature.useful_jpeg_ratios(image, options.image_size) if image else ()
    decode = decoder(tf, features, options, ratios, parse_spec(manifest.features))
    dataset = decoded_pipeline(tf, records, decode,
                               dataclasses.replace(options, shuffle=buffered),
                               not buffered or seed is not None, features)
    dataset._tfrecorder_lite_position = position  # for BackupAndRestore
    return dataset


def _check_remote_shards(store, shards, cache):
    """ManifestError for a remote shard that is missing or not of its size (asked of the
    store at once for all, but those the cache holds a checked copy of)."""
    if cache is not None:
        shards = [s for s in shards
                  if cache.copy_of(shard_cache.copy_name(store, s), s) is None]
    found = stat_many([store.path(s.name) for s in shards], store.storage_options)
    for shard, info in zip(shards, found):
        if isinstance(info, FileNotFoundError):
            raise verification.shard_error(store, shard,
                                           verification.size_problem(shard, None))
        if isinstance(info, tuple) and info[0] and info[0] != shard.bytes:
            raise verification.shard_error(store, shard,
                                           verification.size_problem(shard, info[0]))


def decoded_pipeline(tf, records, decode, options, deterministic, features):
    """Shuffle serialized ``records``, decode them in parallel, batch and prefetch, as the
    LoadOptions ``options`` say (``features``: the records' FeatureSet). tf.data's autotuner
    stays on, but on machines of few cores (see :func:`autotune_enabled`)."""
    batch_size, drop_remainder = options.batch_size, options.drop_remainder
    if options.shuffle:
        records = records.shuffle(options.shuffle_buffer, seed=options.seed,
                                  reshuffle_each_iteration=True)
    # decoding is CPU-bound: one decoder per core the process may use (affinity, cgroup quota)
    cores = joblib.cpu_count()
    dataset = records.map(decode, num_parallel_calls=cores, deterministic=deterministic)
    target = whole_target(features)
    padding = target.batch_padding(tf) if target is not None else None
    if batch_size and padding is not None and _is_image_and_target(dataset.element_spec):
        image_spec, _ = dataset.element_spec  # the target padded as its feature says
        dataset = dataset.padded_batch(batch_size, drop_remainder=drop_remainder,
                                       padding_values=(tf.constant(0, image_spec.dtype), padding))
    elif batch_size and _varies(tf, dataset.element_spec):  # lists of varying length
        dataset = dataset.ragged_batch(batch_size, drop_remainder=drop_remainder)
    elif batch_size:
        # a plain batch: parallel batching only adds threads that compete with the decoders
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    tuning = tf.data.Options()
    # checkpoints: the reads in tf.py_function and the count on a damaged shard's error path
    # hold no state of their own
    tuning.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    if not autotune_enabled(cores):
        tuning.autotune.enabled = False
    return dataset.with_options(tuning)


# With tf.data's autotuner on, a core sat partly or wholly idle in about half of the epochs
# (this pipeline and a hand-written one alike), and in none with it off: measured on 2 cores
# (the 3,000-image set of benchmarks/, 2026-11); see benchmarks/README.md, "load() and tf.data's
# autotuner", for the rows at 1 and 2 cores. Machines of more cores were not measured: there
# the autotuner keeps its job of sizing the buffers for the cores left to the training step.
_AUTOTUNE_OFF_UP_TO_CORES = 2


def autotune_enabled(cores):
    """Whether ``load()`` leaves tf.data's autotuner on, for a process of ``cores`` usable cores:
    off on machines of few cores, where it was measured to leave cores idle; on elsewhere."""
    return cores > _AUTOTUNE_OFF_UP_TO_CORES


def _is_image_and_target(element_spec):
    """Whether elements are ``(image, {...})``: an image and a whole target (a dict)."""
    return isinstance(element_spec, tuple) and isinstance(element_spec[1], dict) and \
        not isinstance(element_spec[0], dict)


def whole_target(features):
    """The label feature that decodes to a record's whole target (e.g. boxes), or None."""
    return next((f for f in features.labels if f.whole_target), None)


def _varies(tf, element_spec):
    """Whether a component of the elements other than the image (``(image, label)``'s first,
    or the dict's ``image``) has a dimension of varying size: a list feature."""
    if isinstance(element_spec, tuple):
        images = not isinstance(element_spec[0], dict)  # else: (features, label), no images
        parts = element_spec[1:] if images else element_spec
    else:
        parts = [spec for key, spec in element_spec.items() if key != "image"]
    return any(not spec.shape.is_fully_defined() for spec in tf.nest.flatten(parts))


def label_outputs(features, label=None):
    """What the label of ``(image, label)`` is, for an output's FeatureSet.

    Returns:
        ``(outputs, as_dict)``: the ClassLabel of each label given, and whether the label is a
        dict level -> label (label levels), not one tensor.

    Raises:
        SchemaError: ``label`` names no level of the output.
    """
    levels = {feature.level: feature for feature in features.labels}
    if None in levels:
        if label is not None:
            raise SchemaError(f"label={label!r}: this output has one label per record (no "
                              "levels), so label takes no value")
        return features.labels, False
    wanted = list(levels) if label is None else [label] if isinstance(label, str) else label
    unknown = [name for name in wanted if name not in levels]
    if unknown or not wanted:
        raise SchemaError(f"label={label!r}: this output's label levels are {list(levels)}")
    return tuple(levels[name] for name in wanted), not isinstance(label, str)


def reads_natively(store, cache_dir=None, cache_limit=None):
    """True when TensorFlow should open the store's shard URLs itself (local, or real GCS)."""
    if store.is_local:
        return True
    return (store.protocol == "gs" and cache_dir is None and cache_limit is None and
            not store.storage_options and not os.environ.get("STORAGE_EMULATOR_HOST"))


def _shard_files(store, shards, cache):
    """Paths or URLs that TensorFlow can open for ``shards`` (manifest entries).

    Raises:
        ManifestError: a local shard file is missing or not of the size metadata.json lists
            (remote copies are checked as they are downloaded).
    """
    if store.is_local:
        for shard in shards:
            problem = verification.size_problem(shard, store.size(shard.name))
            if problem:
                raise verification.shard_error(store, shard, problem)
    if reads_natively(store, *cache):
        return [store.path(shard.name) for shard in shards]
    return shard_cache.local_copies(store, shards, *cache)


def _shard_reader(tf, file_format, compression, output_url):
    """The interleave function: the records of one shard, as many as metadata.json lists.

    TensorFlow's errors on a damaged shard name only a byte offset. Here a read error ends the
    shard's records instead (``ignore_errors``), and a shard that ends before its
    ``num_examples`` fails with a message naming the shard file and its first missing record
    (counted again, on this error path only). Records beyond ``num_examples`` are not read. No
    function runs per record: counting records in the pipeline (``scan``, even on groups of 64)
    cost up to 10% of an epoch of small images.
    """
    def records(path):
        return file_format.dataset(tf, path, compression).ignore_errors()

    def fail(name, expected, path):
        read = tf.strings.as_string(records(path).reduce(tf.constant(0, tf.int64),
                                                         lambda count, _: count + 1))
        message = tf.strings.join([
            name, ": record ", read, " is damaged or missing (read ", read, " of the ",
            tf.strings.as_string(expected), " records metadata.json lists); run tfrecorder-lite "
            f"verify {output_url}"])
        with tf.control_dependencies([tf.debugging.Assert(False, [message])]):
            return tf.constant(b"")

    def read_shard(path, name, expected):
        ends_early = tf.data.Dataset.from_tensors(path).map(functools.partial(fail, name, expected))
        return records(path).concatenate(ends_early).take(expected)

    return as_written(tf, read_shard)


def decoder(tf, features, options, ratios=(), spec=None):
    """The map function: parse one record, decode (and resize) its image.

    Args:
        features: the FeatureSet of the records.
        options: the LoadOptions (image size, channels, labels, ...).
        ratios: the JPEG scales worth trying (``ImageFeature.useful_jpeg_ratios``).
        spec: the parse spec of every record feature (default: the feature set's).
    """
    outputs, as_dict = label_outputs(features, options.label)
    as_supervised = options.as_supervised
    target = whole_target(features)  # a feature that decodes to the whole target, or None
    spec = spec or parse_spec(features.describe())
    if as_supervised and features.image is not None:  # parse only what image and label need
        wanted = target.describe() if target else [o.keys[0] for o in outputs]
        spec = {key: spec[key] for key in (*ImageFeature.decode_keys, *wanted)}

    def label_of(parsed, image=None):
        if target is not None:  # e.g. boxes: {"boxes": [N, 4], "labels": [N]}
            return target.decode(tf, parsed, options, image)
        found = {output.name: output.decode(tf, parsed, options) for output in outputs}
        return found if as_dict else found[outputs[0].name]

    def decode(serialized):
        parsed = tf.io.parse_single_example(serialized, spec)
        if features.image is None:
            if as_supervised:
                return ({k: v for k, v in parsed.items() if k not in features.label_keys},
                        label_of(parsed))
            return parsed
        image = features.image.decode(tf, parsed, options.image_size, options.channels, ratios,
                                      options.dct_method)
        if as_supervised:
            return image, label_of(parsed, image)
        if target is not None:  # a dict of outputs, or one tensor under the feature's name
            found = label_of(parsed, image)
            return {**parsed, "image": image,
                    **(found if isinstance(found, dict) else {target.name: found})}
        return {**parsed, "image": image}

    return as_written(tf, decode)
