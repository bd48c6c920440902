"""``load()``: ready ``tf.data`` pipelines from an output folder's manifest and records.

Reads only ``metadata.json`` and the shards it lists (never globs). TensorFlow is imported here,
lazily, so that ``import tfrecorder_lite`` stays light.
"""

import functools
import os

import joblib

from . import shard_cache, verification
from .errors import SchemaError
from .output.manifest import read_manifest
from .record import encoding as example
from .record import keys
from .splits import pick
from .storage import Store

_JPEG_RATIOS = (8, 4, 2)


def load(output_dir, split=None, *, batch_size=None, image_size=None, shuffle=False, seed=None,
         as_supervised=True, shuffle_buffer=1000, drop_remainder=False, channels=3,
         dct_method="INTEGER_ACCURATE", storage_options=None, cache_dir=None, label=None,
         multi_hot=False):
    """Return a ``tf.data.Dataset`` of a split, or a dict split -> dataset when split is None.

    Args:
        output_dir: a folder written by ``to_tfrecord`` / ``convert``: a local path or any
            fsspec URL.
        split: "TRAIN", "VALIDATION" or "TEST" (case-insensitive), or None for all splits.
        batch_size: batch the examples, or None for single examples.
        image_size: (height, width) to resize to (images stay uint8), or None.
        shuffle: shuffle shard order and examples (with a buffer of ``shuffle_buffer``).
        seed: shuffle seed (None: a different order every run; a seed repeats exactly).
        as_supervised: yield ``(image, label)`` (``(features, label)`` for an output without
            images: a dict of its other columns); False yields the feature dict plus ``image``.
        shuffle_buffer: examples held by the shuffle buffer.
        drop_remainder: drop the last, smaller batch.
        channels: channels of the decoded image (3: RGB, 1: grayscale).
        dct_method: JPEG inverse DCT. "INTEGER_ACCURATE" (default) gives the pixels Pillow and
            most viewers show; "" is TensorFlow's default, faster and off by a few levels.
        storage_options: fsspec options for a remote ``output_dir``.
        cache_dir: where remote shards are copied before reading (see ``shard_cache``).
            TensorFlow reads ``gs://`` on Google Cloud itself, so those are copied only when
            ``cache_dir`` or ``storage_options`` is given, or ``STORAGE_EMULATOR_HOST`` is set;
            every other remote shard is copied (default: ``~/.cache/tfrecorder_lite``).
        label: with label levels, the level the label is (``"fine"``), or a list of levels
            for a dict of labels; None: a dict of every level.
        multi_hot: the label as a float32 vector of the vocabulary's size, 1 for each label
            of the record (multi-label outputs; ready for ``BinaryCrossentropy``). Without
            it, a multi-label record's label is its int64 ids, of varying length (batched as a
            ``tf.RaggedTensor``).

    Returns:
        A dataset yielding uint8 ``[H, W, channels]`` images and int64 labels (batched when
        asked; features of varying length are batched as ``tf.RaggedTensor``).

    Raises:
        ManifestError: no finished output in ``output_dir``.
        SchemaError: an unknown split, or batching images of different sizes without image_size.
    """
    store = Store(output_dir, storage_options)
    manifest, _ = read_manifest(store)
    if split is None:
        return {name: load(output_dir, name, batch_size=batch_size, image_size=image_size,
                           shuffle=shuffle, seed=seed, as_supervised=as_supervised,
                           shuffle_buffer=shuffle_buffer, drop_remainder=drop_remainder,
                           channels=channels, dct_method=dct_method,
                           storage_options=storage_options, cache_dir=cache_dir, label=label,
                           multi_hot=multi_hot)
                for name in manifest.splits}
    split = pick(split, manifest.splits)
    labels = label_outputs(manifest.labels, label, multi_hot)
    if image_size is not None:
        image_size = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
    image = manifest.image
    if image is None and image_size is not None:
        raise SchemaError(f"{output_dir} holds no images, so image_size does not apply")
    if batch_size and image is not None and image_size is None and image.size is None:
        raise SchemaError(
            f"the images in {output_dir} have different sizes, so they cannot be batched as "
            "they are: pass image_size=(height, width) to load(), or batch_size=None"
        )
    import tensorflow as tf

    shards = manifest.splits[split].shards
    paths = _shard_files(store, shards, cache_dir)
    num_examples = manifest.splits[split].num_examples
    read_shard = _shard_reader(tf, manifest.compression or "", store.url)
    spec = example.parse_spec(manifest.features)
    ratios = _useful_jpeg_ratios(image, image_size) if image else ()
    decode = decoder(tf, spec, image_size, channels, as_supervised, ratios, dct_method, labels,
                     images=image is not None)

    deterministic = not shuffle or seed is not None  # a seeded shuffle must repeat exactly
    names = [store.path(shard.name) for shard in shards]  # for messages, with any copy read
    names = [name if name == path else f"{name} (local copy {path})"
             for name, path in zip(names, paths)]
    files = tf.data.Dataset.from_tensor_slices(
        (paths, names, tf.constant([shard.num_examples for shard in shards], tf.int64)))
    if shuffle:
        files = files.shuffle(len(paths), seed=seed, reshuffle_each_iteration=True)
    cycle_length = max(1, min(len(paths), 8))
    records = files.interleave(
        read_shard, cycle_length=cycle_length, num_parallel_calls=cycle_length,
        deterministic=deterministic,
    ).apply(tf.data.experimental.assert_cardinality(num_examples))
    return decoded_pipeline(tf, records, decode, shuffle=shuffle, seed=seed,
                            shuffle_buffer=shuffle_buffer, batch_size=batch_size,
                            drop_remainder=drop_remainder, deterministic=deterministic)


def decoded_pipeline(tf, records, decode, *, shuffle, seed, shuffle_buffer, batch_size,
                     drop_remainder, deterministic):
    """Shuffle serialized ``records``, decode them in parallel, batch and prefetch."""
    if shuffle:
        records = records.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    # decoding is CPU-bound: one decoder per core the process may use (affinity, cgroup quota)
    dataset = records.map(decode, num_parallel_calls=joblib.cpu_count(), deterministic=deterministic)
    if batch_size and _varies(tf, dataset.element_spec):  # lists of varying length
        dataset = dataset.ragged_batch(batch_size, drop_remainder=drop_remainder)
    elif batch_size:
        # a plain batch: parallel batching only adds threads that compete with the decoders
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    options = tf.data.Options()
    # With TensorFlow's autotuner on, a core sat partly or wholly idle in about half of the
    # epochs (this pipeline and a hand-written one alike, 2 cores); with it off, in none.
    options.autotune.enabled = False
    return dataset.prefetch(tf.data.AUTOTUNE).with_options(options)


def _varies(tf, element_spec):
    """Whether a component of the elements other than the image (``(image, label)``'s first,
    or the dict's ``image``) has a dimension of varying size: a list feature."""
    if isinstance(element_spec, tuple):
        images = not isinstance(element_spec[0], dict)  # else: (features, label), no images
        parts = element_spec[1:] if images else element_spec
    else:
        parts = [spec for key, spec in element_spec.items() if key != "image"]
    return any(not spec.shape.is_fully_defined() for spec in tf.nest.flatten(parts))


def label_outputs(labels, label=None, multi_hot=False):
    """What the label of ``(image, label)`` is, for an output's ``labels`` (a list, or a dict
    level -> list).

    Returns:
        ``(outputs, as_dict, keys)``: outputs are ``(name, id key, multi-hot size or None)``
        per label; ``as_dict``: the label is a dict name -> label (label levels), not one
        tensor; ``keys``: every label feature key of the records.

    Raises:
        SchemaError: ``label`` names no level of the output.
    """
    if not isinstance(labels, dict):
        if label is not None:
            raise SchemaError(f"label={label!r}: this output has one label per record (no "
                              "levels), so label takes no value")
        return ((None, keys.LABEL, len(labels) if multi_hot else None),), False, \
            keys.label_keys()
    wanted = list(labels) if label is None else [label] if isinstance(label, str) else label
    unknown = [name for name in wanted if name not in labels]
    if unknown or not wanted:
        raise SchemaError(f"label={label!r}: this output's label levels are {list(labels)}")
    outputs = tuple((name, keys.label_keys(name)[0], len(labels[name]) if multi_hot else None)
                    for name in wanted)
    label_keys = tuple(key for name in labels for key in keys.label_keys(name))
    return outputs, not isinstance(label, str), label_keys


def reads_natively(store, cache_dir=None):
    """True when TensorFlow should open the store's shard URLs itself (local, or real GCS)."""
    if store.is_local:
        return True
    return (store.protocol == "gs" and cache_dir is None and not store.storage_options
            and not os.environ.get("STORAGE_EMULATOR_HOST"))


def _shard_files(store, shards, cache_dir):
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
    if reads_natively(store, cache_dir):
        return [store.path(shard.name) for shard in shards]
    return shard_cache.local_copies(store, shards, cache_dir)


def _shard_reader(tf, compression, output_url):
    """The interleave function: the records of one shard, as many as metadata.json lists.

    TensorFlow's errors on a damaged shard name only a byte offset. Here a read error ends the
    shard's records instead (``ignore_errors``), and a shard that ends before its
    ``num_examples`` fails with a message naming the shard file and its first missing record
    (counted again, on this error path only). Records beyond ``num_examples`` are not read. No
    function runs per record: counting records in the pipeline (``scan``, even on groups of 64)
    cost up to 10% of an epoch of small images.
    """
    def records(path):
        return tf.data.TFRecordDataset(path, compression_type=compression).ignore_errors()

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

    return read_shard


def _useful_jpeg_ratios(image_info, image_size):
    """The JPEG DCT scales (8, 4, 2) that can still cover ``image_size`` for some image."""
    if image_size is None or "jpeg" not in image_info.formats:
        return ()
    max_height, max_width = image_info.max_size or (float("inf"), float("inf"))
    return tuple(r for r in _JPEG_RATIOS
                 if max_height // r >= image_size[0] and max_width // r >= image_size[1])


def decoder(tf, spec, image_size, channels, as_supervised, ratios, dct_method,
            labels=(((None, keys.LABEL, None),), False, keys.label_keys()), images=True):
    """The map function: parse one record, decode (and resize) its image.

    Args:
        spec: the parse spec of every record feature.
        image_size: the size to resize to, or None.
        labels: what the label is (see :func:`label_outputs`).
        images: the records hold images.
    """
    outputs, as_dict, label_keys = labels
    if as_supervised and images:  # parse only what the image and label need
        wanted = (keys.ENCODED, keys.FORMAT, keys.HEIGHT, keys.WIDTH)
        spec = {key: spec[key] for key in (*wanted, *(key for _, key, _ in outputs))}

    def decode_image(features):
        # JPEGs go to decode_jpeg (decode_image has no dct_method). JPEG can also decode at
        # 1/2, 1/4 or 1/8 scale for free: pick the smallest that still covers the target size,
        # then resize the rest of the way. One switch (no nesting): branch i < len(ratios)
        # decodes at 1/ratios[i], then full-size JPEG, then any other format.
        encoded = features[keys.ENCODED]
        branches = [lambda r=r: tf.io.decode_jpeg(encoded, channels=channels, ratio=r,
                                                  dct_method=dct_method)
                    for r in ratios]
        branches += [lambda: tf.io.decode_jpeg(encoded, channels=channels,
                                               dct_method=dct_method),
                     lambda: tf.io.decode_image(encoded, channels=channels,
                                                expand_animations=False)]
        jpeg_index = len(ratios)  # full size
        if ratios:
            height, width = features[keys.HEIGHT], features[keys.WIDTH]
            fits = [tf.logical_and(height // r >= image_size[0], width // r >= image_size[1])
                    for r in ratios]
            # fits is monotone (a smaller ratio fits whenever a larger one does), so the
            # count of ratios that do not fit is the index of the largest one that does.
            jpeg_index = tf.reduce_sum(tf.cast(tf.logical_not(tf.stack(fits)), tf.int32))
        index = tf.where(tf.equal(features[keys.FORMAT], "jpeg"), jpeg_index,
                         len(ratios) + 1)
        return tf.switch_case(index, branches)

    def label_of(features):
        found = {}
        for name, key, size in outputs:
            value = features[key]
            if size is not None:  # k-hot: 1 for each id of the record
                hot = tf.reduce_sum(tf.one_hot(tf.reshape(value, [-1]), size), axis=0)
                value = tf.ensure_shape(tf.minimum(hot, 1.0), [size])
            found[name] = value
        return found if as_dict else found[outputs[0][0]]

    def decode(serialized):
        features = tf.io.parse_single_example(serialized, spec)
        if not images:
            if as_supervised:
                return ({k: v for k, v in features.items() if k not in label_keys},
                        label_of(features))
            return features
        image = decode_image(features)
        if image_size is not None:
            image = tf.image.resize(image, image_size)
            # bilinear output lies within [0, 255]: adding 0.5 and truncating rounds it
            image = tf.cast(image + 0.5, tf.uint8)
            image = tf.ensure_shape(image, (*image_size, channels))
        if as_supervised:
            return image, label_of(features)
        return {**features, "image": image}

    return decode
