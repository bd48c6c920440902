"""The features of a record: each knows its keys, how to encode its value of a row, its
``metadata.json`` entry, its tfds ``features.json`` entry and how ``load()`` decodes it.

A FeatureSet is what a conversion writes (built by the plan from the table) and what every
reader rebuilds from ``metadata.json`` (through its RecordKind, see ``record/kinds.py``):
writing, loading, verify, inspect and the tfds files ask it, so a new kind of record is a new
feature set and a RecordKind, in a module of its own.
TensorFlow is used only by the ``decode`` methods, which take the ``tf`` module.
"""

import hashlib
import json
from dataclasses import dataclass

from .keys import (BYTES, CHANNELS, ENCODED, FILENAME, FORMAT, HEIGHT, IMAGE_KEYS, INT64,
                   KEY_SHA256, WIDTH, label_keys)
from .tensorflow import import_tensorflow

_TFDS = "tensorflow_datasets.core.features."
_JPEG_RATIOS = (8, 4, 2)


def tfds_tensor(dtype, shape=()):
    """A tfds ``Tensor`` feature entry of features.json."""
    dims = {"dimensions": ["-1" if d is None else str(d) for d in shape]} if shape else {}
    return {"pythonClassName": _TFDS + "tensor_feature.Tensor",
            "tensor": {"dtype": dtype, "encoding": "none", "shape": dims}}


def tfds_labels(num_classes, several=False):
    """A tfds ``ClassLabel`` feature entry of features.json (a ``Sequence`` of them with
    ``several``: a list of labels per record)."""
    label = {"pythonClassName": _TFDS + "class_label_feature.ClassLabel",
             "classLabel": {"numClasses": str(num_classes)}}
    if several:
        label = {"pythonClassName": _TFDS + "sequence_feature.Sequence",
                 "sequence": {"feature": label, "length": "-1"}}
    return label


class RecordRejected(Exception):
    """A row that cannot become a record; ``str(exc)`` is the reason (e.g. a box outside
    the image)."""


class Feature:
    """One group of record keys. Subclasses are frozen dataclasses (picklable, hashable)."""

    def describe(self):
        """Its entries of metadata.json's ``features``: key -> ``{"dtype", "shape", ...}``."""
        raise NotImplementedError

    def kinds(self):
        """Record key -> kind (BYTES, INT64 or FLOAT) of what :meth:`encode` gives."""
        return {key: spec["dtype"] for key, spec in self.describe().items()}

    def encode(self, value, image=None, files=()):
        """Record key -> value(s) of this feature for one row's ``value`` (``image``: the
        row's ``(StoredImage, file name)``, or None; ``files``: the bytes of the row's other
        files, in the order of its table kind's file columns).

        Raises:
            RecordRejected: the row cannot be written, with the reason.
        """
        raise NotImplementedError

    def tfds(self, image_size=None):
        """Its entries of tfds' features.json: key -> feature entry."""
        return {key: tfds_tensor(spec["dtype"], spec["shape"])
                for key, spec in self.describe().items()}


@dataclass(frozen=True)
class ImageFeature(Feature):
    """The image: its encoded bytes, format, size, channels and file name (and with
    ``key_sha256``, the sha256 of the encoded bytes, ``image/key/sha256``)."""

    key_sha256: bool = False

    def describe(self):
        keys = {**IMAGE_KEYS, **({KEY_SHA256: BYTES} if self.key_sha256 else {})}
        return {key: {"dtype": kind, "shape": []} for key, kind in keys.items()}

    def encode(self, value, image=None, files=()):
        """``value``: ``(StoredImage, file name)``."""
        stored, filename = value
        record = {ENCODED: stored.encoded, FORMAT: stored.format, HEIGHT: stored.height,
                  WIDTH: stored.width, CHANNELS: stored.channels, FILENAME: filename}
        if self.key_sha256:
            record[KEY_SHA256] = hashlib.sha256(stored.encoded).hexdigest()
        return record

    def tfds(self, image_size=None):
        entries = super().tfds()
        height, width = image_size or (-1, -1)
        entries[ENCODED] = {"pythonClassName": _TFDS + "image_feature.Image", "image": {
            "dtype": "uint8", "shape": {"dimensions": [str(height), str(width), "3"]}}}
        return entries

    @staticmethod
    def useful_jpeg_ratios(image, image_size):
        """The JPEG DCT scales (8, 4, 2) that can still cover ``image_size`` for some image of
        an output whose ImageSummary is ``image``."""
        if image_size is None or "jpeg" not in image.formats:
            return ()
        max_height, max_width = image.max_size or (float("inf"), float("inf"))
        return tuple(r for r in _JPEG_RATIOS
                     if max_height // r >= image_size[0] and max_width // r >= image_size[1])

    @staticmethod
    def decode(tf, parsed, image_size, channels, ratios, dct_method):
        """The uint8 image of a parsed record, resized to ``image_size`` when given.

        JPEGs go to decode_jpeg (decode_image has no dct_method). JPEG can also decode at 1/2,
        1/4 or 1/8 scale for free: the smallest that still covers the target size is picked,
        then resized the rest of the way. One switch (no nesting): branch i < len(ratios)
        decodes at 1/ratios[i], then full-size JPEG, then any other format.
        """
        encoded = parsed[ENCODED]
        branches = [lambda r=r: tf.io.decode_jpeg(encoded, channels=channels, ratio=r,
                                                  dct_method=dct_method)
                    for r in ratios]
        branches += [lambda: tf.io.decode_jpeg(encoded, channels=channels,
                                               dct_method=dct_method),
                     lambda: tf.io.decode_image(encoded, channels=channels,
                                                expand_animations=False)]
        jpeg_index = len(ratios)  # full size
        if ratios:
            height, width = parsed[HEIGHT], parsed[WIDTH]
            fits = [tf.logical_and(height // r >= image_size[0], width // r >= image_size[1])
                    for r in ratios]
            # fits is monotone (a smaller ratio fits whenever a larger one does), so the
            # count of ratios that do not fit is the index of the largest one that does.
            jpeg_index = tf.reduce_sum(tf.cast(tf.logical_not(tf.stack(fits)), tf.int32))
        index = tf.where(tf.equal(parsed[FORMAT], "jpeg"), jpeg_index, len(ratios) + 1)
        image = tf.switch_case(index, branches)
        if image_size is not None:
            image = tf.image.resize(image, image_size)
            # bilinear output lies within [0, 255]: adding 0.5 and truncating rounds it
            image = tf.cast(image + 0.5, tf.uint8)
            image = tf.ensure_shape(image, (*image_size, channels))
        return image

    #: the keys ``decode`` reads
    decode_keys = (ENCODED, FORMAT, HEIGHT, WIDTH)


@dataclass(frozen=True)
class ClassLabel(Feature):
    """One label of every record: its id and text (lists of them for multi-label).

    Attributes:
        level: the level's name (per-level labels), or None for the one label of a record.
        multi: each record holds a list of labels (multi-label).
        vocabulary: label id -> label text.
        column: the table column it came from (None when read from an output).
    """

    level: str = None
    multi: bool = False
    vocabulary: tuple = ()
    column: str = None

    @property
    def keys(self):
        """(id key, text key) of its record features."""
        return label_keys(self.level)

    @property
    def name(self):
        """The label's name in ``load()``'s outputs (its level; None for the one label)."""
        return self.level

    def describe(self):
        shape = [None] if self.multi else []
        id_key, text_key = self.keys
        return {id_key: {"dtype": INT64, "shape": shape},
                text_key: {"dtype": BYTES, "shape": shape}}

    def encode(self, value, image=None, files=()):
        """``value``: ``(id, text)``, or tuples of ids and texts (multi-label)."""
        id_key, text_key = self.keys
        return {id_key: value[0], text_key: value[1]}

    def tfds(self, image_size=None):
        entries = super().tfds()
        entries[self.keys[0]] = tfds_labels(len(self.vocabulary), self.multi)
        return entries

    #: the smallest label id (0; a kind whose id 0 means "none" starts at 1)
    first_id = 0
    #: whether :meth:`decode` gives the whole target of a record (a dict), not one label
    whole_target = False

    def check_values(self, values):
        """What is wrong with a written record's values of this feature (record key -> list
        of values), beyond ids and texts, or None."""
        return None

    def counted(self, values):
        """What a split's ``label_counts`` count of one record (``values``: record key ->
        value(s), as encoded or as read back): its label id(s), each once, or a mapping
        id -> amount (e.g. pixels)."""
        return values[self.keys[0]]

    def batch_padding(self, tf):
        """The values that pad a batch of this feature's targets, or None (ragged lists)."""
        return None

    def draw(self, thumbnail, values, font):
        """Draw this feature of a record (record key -> list of values) on its thumbnail, an
        RGB Pillow image (``inspect``); labels are shown as text, so nothing by default."""

    def decode(self, tf, parsed, options, image=None):
        """The label of a parsed record: its id(s), or a k-hot float32 vector
        (``options.multi_hot``)."""
        value = parsed[self.keys[0]]
        if not options.multi_hot:
            return value
        size = len(self.vocabulary)
        hot = tf.reduce_sum(tf.one_hot(tf.reshape(value, [-1]), size), axis=0)
        return tf.ensure_shape(tf.minimum(hot, 1.0), [size])


@dataclass(frozen=True)
class Column(Feature):
    """An extra table column, carried as a feature of its own name with its type.

    Attributes:
        name: the feature key (the column name as text).
        kind: BYTES, INT64 or FLOAT.
        column_dtype: the column's pandas dtype, as text (None when read from an output).
        missing: how a missing value is stored ("NaN", "empty string", "empty list"), or None.
        shape: the values of one record: ``()`` one value, ``(3,)`` three, ``(None,)`` any
            number, ``(None, 4)`` rows of four.
    """

    name: str
    kind: str
    column_dtype: str = None
    missing: str = None
    shape: tuple = ()

    def describe(self):
        return {self.name: {"dtype": self.kind, "shape": list(self.shape),
                            **({"column_dtype": self.column_dtype}
                               if self.column_dtype is not None else {}),
                            **({"missing": self.missing} if self.missing else {})}}

    def kinds(self):
        return {self.name: self.kind}

    def encode(self, value, image=None, files=()):
        return {self.name: value}


@dataclass(frozen=True)
class FeatureSet:
    """The features of every record of an output.

    Attributes:
        image: the ImageFeature, or None for records without images.
        labels: the ClassLabel of each label field.
        columns: the Column of each extra column.
    """

    image: ImageFeature = None
    labels: tuple = ()
    columns: tuple = ()

    @property
    def row_features(self):
        """The features after the image, in the order of a task row's values."""
        return (*self.labels, *self.columns)

    def describe(self):
        """metadata.json's ``features``."""
        entries = {} if self.image is None else self.image.describe()
        for feature in self.row_features:
            entries.update(feature.describe())
        return entries

    def kinds(self):
        """Record key -> kind, for encoding."""
        kinds = {} if self.image is None else self.image.kinds()
        for feature in self.row_features:
            kinds.update(feature.kinds())
        return kinds

    def encode(self, image, values, files=()):
        """Record key -> value for one row: ``image`` is ``(StoredImage, file name)`` or None,
        ``values`` one value per row feature, ``files`` the bytes of the row's other files."""
        record = {} if image is None else self.image.encode(image)
        for feature, value in zip(self.row_features, values):
            record.update(feature.encode(value, image, files))
        return record

    def tfds(self, image_size=None):
        """tfds' ``features.json`` features, in metadata.json's key order."""
        entries = {}
        for feature in ([self.image] if self.image else []) + list(self.row_features):
            entries.update(feature.tfds(image_size))
        return entries

    @property
    def label_keys(self):
        """Every record key of the labels."""
        return tuple(key for label in self.labels for key in label.keys)


class RecordKind:
    """What one kind of record is, seen from an output: the ``task`` metadata.json names it by,
    the feature set readers rebuild from metadata.json, the fixed keys the manifest checks, its
    extra files, its metadata.json entry. One instance per kind, registered in
    ``record/kinds.py``; subclasses override what differs."""

    #: metadata.json's ``task`` values of this kind (None: no ``task`` field)
    tasks = (None,)
    #: what the split's ``label_counts`` count
    counted = "records"
    #: the metadata.json fields (beside every output's) and the files this kind writes
    fields = ()
    files = ()
    #: the label id keys of the kind's own label features (beside ``keys.label_keys``)
    label_id_keys = ()
    #: what a record keeps of its image beside its labels, as messages name it (None: nothing)
    annotations = None

    def task(self, features):
        """metadata.json's ``task`` of an output with these features (None: no field)."""
        return self.tasks[0]

    def label_fields(self, manifest):
        """The label features of an output, from its Manifest."""
        raise NotImplementedError

    def fixed_keys(self, labels, task):
        """``({key: dtype}, shape)`` of the label keys every record of the kind has, and their
        shape (``labels`` and ``task``: metadata.json's)."""
        raise NotImplementedError

    def features(self, manifest):
        """The FeatureSet of an output, from its (checked) Manifest."""
        labels = self.label_fields(manifest)
        image = None if manifest.image is None else \
            ImageFeature(KEY_SHA256 in manifest.features)
        taken = {key for feature in ([image] if image else []) + list(labels)
                 for key in feature.describe()}
        columns = tuple(Column(key, spec["dtype"], spec.get("column_dtype"), spec.get("missing"),
                               tuple(spec["shape"]))
                        for key, spec in manifest.features.items() if key not in taken)
        return FeatureSet(image, labels, columns)

    def extra_files(self, labels):
        """``{file name: text}`` of the files this kind writes beside the label files
        (``labels``: metadata.json's labels)."""
        return {}

    def written_labels(self, features, labels, label_counts):
        """metadata.json's labels of an output once its records are written (``labels``: the
        plan's, ``label_counts``: split -> label -> count): the plan's by default."""
        return labels

    def manifest_entry(self, features, label_counts):
        """metadata.json fields of this kind (``label_counts``: split -> label -> count)."""
        return {}

    def files_listed(self, manifest):
        """``{file name: text}`` of the extra files an output of this kind has, checked by
        ``verify`` whatever metadata.json's own fields say of them."""
        return self.extra_files(manifest.labels)

    def manifest_problems(self, manifest, features, label_counts):
        """How the metadata.json fields of this kind differ from :meth:`manifest_entry` of
        what the records hold (``label_counts``: split -> label -> count, as counted in them),
        one text per difference."""
        problems = []
        for field, expected in self.manifest_entry(features, label_counts).items():
            found = manifest.kind_fields.get(field, "missing")
            if isinstance(expected, dict) and isinstance(found, dict):
                differ = [(f"{field}.{key}", found.get(key, "missing"), value)
                          for key, value in expected.items() if not _same(found.get(key), value)]
            else:
                differ = [] if _same(found, expected) else [(field, found, expected)]
            problems += [f"metadata.json: {name} is {_clip(was)}, expected {_clip(is_)}"
                         for name, was, is_ in differ]
        return problems


def _same(a, b):
    """Whether two JSON values are equal as JSON (``true`` is not ``1``, ``1.0`` not ``1``)."""
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _clip(value, limit=80):
    """A value read from a file, as short JSON text."""
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def parse_spec(features):
    """``tf.io.parse_single_example`` spec for metadata.json's ``features`` mapping.

    A shape with a variable first dimension (``[null]``, ``[null, 4]``) parses into a dense
    tensor of as many rows as the record holds; a fixed shape (``[]``, ``[3]``) into that shape.
    """
    tf = import_tensorflow()

    spec = {}
    for key, feature in features.items():
        dtype, shape = tf.as_dtype(feature["dtype"]), feature["shape"]
        if shape and shape[0] is None:
            spec[key] = tf.io.FixedLenSequenceFeature(shape[1:], dtype, allow_missing=True)
        else:
            spec[key] = tf.io.FixedLenFeature(shape, dtype)
    return spec
