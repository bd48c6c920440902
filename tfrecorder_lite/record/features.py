"""The features of a record: each knows its keys, how to encode its value of a row, its
``metadata.json`` entry, its tfds ``features.json`` entry and how ``load()`` decodes it.

A FeatureSet is what a conversion writes (built by the plan from the table) and what every
reader rebuilds from ``metadata.json`` (:meth:`FeatureSet.from_manifest`): writing, loading,
verify, inspect and the tfds files ask it, so a new kind of record is a new feature set.
TensorFlow is used only by the ``decode`` methods, which take the ``tf`` module.
"""

import hashlib
import json
from dataclasses import dataclass

from .boxes import box_problem
from .keys import (BBOX_KEYS, BYTES, CHANNELS, ENCODED, FILENAME, FLOAT, FORMAT, HEIGHT,
                   IMAGE_KEYS, INT64, KEY_SHA256, OBJECT_LABEL, OBJECT_PREFIX, OBJECT_TEXT,
                   SOURCE_ID, WIDTH, label_keys, object_key)
from .tensorflow import import_tensorflow

_TFDS = "tensorflow_datasets.core.features."
_JPEG_RATIOS = (8, 4, 2)


def tfds_tensor(dtype, shape=()):
    """A tfds ``Tensor`` feature entry of features.json."""
    dims = {"dimensions": ["-1" if d is None else str(d) for d in shape]} if shape else {}
    return {"pythonClassName": _TFDS + "tensor_feature.Tensor",
            "tensor": {"dtype": dtype, "encoding": "none", "shape": dims}}


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

    def encode(self, value, image=None):
        """Record key -> value(s) of this feature for one row's ``value`` (``image``: the
        row's ``(StoredImage, file name)``, or None).

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
    ``key_sha256``, the sha256 of the encoded bytes, as the Object Detection API keeps it)."""

    key_sha256: bool = False

    def describe(self):
        keys = {**IMAGE_KEYS, **({KEY_SHA256: BYTES} if self.key_sha256 else {})}
        return {key: {"dtype": kind, "shape": []} for key, kind in keys.items()}

    def encode(self, value, image=None):
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

    def encode(self, value, image=None):
        """``value``: ``(id, text)``, or tuples of ids and texts (multi-label)."""
        id_key, text_key = self.keys
        return {id_key: value[0], text_key: value[1]}

    def tfds(self, image_size=None):
        entries = super().tfds()
        label = {"pythonClassName": _TFDS + "class_label_feature.ClassLabel",
                 "classLabel": {"numClasses": str(len(self.vocabulary))}}
        if self.multi:
            label = {"pythonClassName": _TFDS + "sequence_feature.Sequence",
                     "sequence": {"feature": label, "length": "-1"}}
        entries[self.keys[0]] = label
        return entries

    def decode(self, tf, parsed, multi_hot=False):
        """The label of a parsed record: its id(s), or a k-hot float32 vector."""
        value = parsed[self.keys[0]]
        if not multi_hot:
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

    def encode(self, value, image=None):
        return {self.name: value}


BOX_FORMATS = ("rel_yxyx", "rel_xyxy", "rel_xywh", "rel_center_xywh", "yxyx", "xyxy", "xywh",
               "center_xywh", "center_yxhw")  # as keras.utils.bounding_boxes names them


@dataclass(frozen=True)
class Boxes(ClassLabel):
    """The objects of a detection record, with the Object Detection API's keys: each box's
    relative ``xmin``, ``ymin``, ``xmax``, ``ymax``, its class id (from 1: 0 is the background
    of the API's label maps) and text, the per-box columns as ``image/object/<name>``, and the
    image's ``image/source_id``.

    Attributes:
        vocabulary: class id -> text (id 0, the background, has no text).
        box_columns: ``(column, kind)`` of each per-box column.
        units: "relative" or "pixels" (divided by the image's size as it is written).
        declared_sizes: each value holds, after the boxes, the image's ``(height, width)`` as
            its annotation file declares it (or None), compared with the image's own size as it
            is written (relative boxes were divided by the declared one).
    """

    box_columns: tuple = ()
    units: str = "relative"
    declared_sizes: bool = False

    @property
    def keys(self):
        return OBJECT_LABEL, OBJECT_TEXT

    def describe(self):
        entries = {SOURCE_ID: {"dtype": BYTES, "shape": []}}
        entries.update({key: {"dtype": FLOAT, "shape": [None]} for key in BBOX_KEYS})
        entries[OBJECT_LABEL] = {"dtype": INT64, "shape": [None]}
        entries[OBJECT_TEXT] = {"dtype": BYTES, "shape": [None]}
        entries.update({object_key(column): {"dtype": kind, "shape": [None]}
                        for column, kind in self.box_columns})
        return entries

    def encode(self, value, image=None):
        """``value``: ``(class ids, class texts, source id, boxes, *per-box column values)``,
        boxes as ``(xmin, ymin, xmax, ymax)``."""
        ids, texts, source_id, boxes, *columns = value
        if self.declared_sizes:
            declared, *columns = columns
            problem = declared_size_problem(declared, image[0])
            if problem:
                raise RecordRejected(problem)
        if self.units == "pixels":
            stored = image[0]
            height, width = stored.source_size or (stored.height, stored.width)
            problem = box_problem(boxes, "pixels", (height, width))
            if problem:
                raise RecordRejected(problem)
            boxes = [(x0 / width, y0 / height, x1 / width, y1 / height)
                     for x0, y0, x1, y1 in boxes]
        record = {SOURCE_ID: source_id, OBJECT_LABEL: ids, OBJECT_TEXT: texts}
        for i, key in enumerate(BBOX_KEYS):
            record[key] = [box[i] for box in boxes]
        for (column, _), values in zip(self.box_columns, columns):
            record[object_key(column)] = values
        return record

    def check(self, values):
        """What is wrong with a written record's objects (``values``: record key -> list of
        values), or None: list lengths that differ, boxes not relative or not ordered."""
        keys = [*BBOX_KEYS, *self.keys, *(object_key(c) for c, _ in self.box_columns)]
        lengths = {key: len(values.get(key, ())) for key in keys}
        if len(set(lengths.values())) > 1:
            return "object lists of different lengths: " + ", ".join(
                f"{key.removeprefix(OBJECT_PREFIX)} {n}" for key, n in lengths.items())
        return box_problem(list(zip(*(values[key] for key in BBOX_KEYS))))

    @staticmethod
    def manifest_entry(num_boxes, label_map):
        """metadata.json's ``boxes``: the box convention, the label map's file name
        ``label_map`` and ``num_boxes`` (split -> boxes written)."""
        return {"keys": "image/object/bbox/xmin, ymin, xmax, ymax (the Object Detection API's)",
                "units": "relative to the image, 0,0 at the top left",
                "label_offset": 1, "label_map": label_map, "num_boxes": num_boxes}

    def manifest_problems(self, entry, num_boxes, label_map):
        """How metadata.json's ``boxes`` differs from :meth:`manifest_entry` of the boxes the
        records hold (``num_boxes``: split -> boxes counted; None when a damaged shard left
        them uncounted), one text per difference."""
        expected = self.manifest_entry(num_boxes, label_map)
        if not isinstance(entry, dict):
            return [f"metadata.json: boxes is {_clip(entry)}, expected an object with "
                    f"{', '.join(expected)}"]
        if num_boxes is None:
            expected.pop("num_boxes")
        return [f"metadata.json: boxes.{key} is {_clip(entry.get(key, 'missing'))}, "
                f"{'the records hold' if key == 'num_boxes' else 'expected'} {_clip(value)}"
                for key, value in expected.items()
                if json.dumps(entry.get(key), sort_keys=True) != json.dumps(value, sort_keys=True)]

    def tfds(self, image_size=None):
        entries = Feature.tfds(self)
        entries[OBJECT_LABEL] = {
            "pythonClassName": _TFDS + "sequence_feature.Sequence",
            "sequence": {"feature": {"pythonClassName": _TFDS + "class_label_feature.ClassLabel",
                                     "classLabel": {"numClasses": str(len(self.vocabulary))}},
                         "length": "-1"}}
        return entries

    def decode(self, tf, parsed, multi_hot=False, box_format="rel_yxyx", image=None):
        """``{"boxes": float32 [N, 4] in box_format, "labels": int64 [N]}`` of a parsed
        record; absolute formats are in pixels of ``image`` (the returned image)."""
        xmin, ymin, xmax, ymax = (parsed[key] for key in BBOX_KEYS)
        height = width = 1.0
        if not box_format.startswith("rel_"):
            shape = tf.cast(tf.shape(image), tf.float32)
            height, width = shape[0], shape[1]
        x0, x1, y0, y1 = xmin * width, xmax * width, ymin * height, ymax * height
        name = box_format.removeprefix("rel_")
        columns = {"yxyx": (y0, x0, y1, x1), "xyxy": (x0, y0, x1, y1),
                   "xywh": (x0, y0, x1 - x0, y1 - y0),
                   "center_xywh": ((x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0),
                   "center_yxhw": ((y0 + y1) / 2, (x0 + x1) / 2, y1 - y0, x1 - x0)}[name]
        boxes = tf.reshape(tf.stack(columns, axis=-1), [-1, 4])
        return {"boxes": boxes, "labels": parsed[OBJECT_LABEL]}


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

    def encode(self, image, values):
        """Record key -> value for one row: ``image`` is ``(StoredImage, file name)`` or None,
        ``values`` one value per row feature."""
        record = {} if image is None else self.image.encode(image)
        for feature, value in zip(self.row_features, values):
            record.update(feature.encode(value, image))
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

    @property
    def boxes(self):
        """The Boxes of a detection record set, else None."""
        return next((f for f in self.labels if isinstance(f, Boxes)), None)

    @classmethod
    def from_manifest(cls, manifest):
        """The feature set of an output, from its (checked) Manifest."""
        features = manifest.features
        if manifest.task == "detection":
            box_columns = tuple(
                (key.removeprefix(OBJECT_PREFIX), spec["dtype"]) for key, spec in features.items()
                if key.startswith(OBJECT_PREFIX) and key not in (*BBOX_KEYS, OBJECT_LABEL,
                                                                 OBJECT_TEXT))
            labels = (Boxes(vocabulary=tuple(manifest.labels), box_columns=box_columns),)
        else:
            labels = tuple(ClassLabel(level, manifest.multi_label,
                                      tuple(manifest.level_labels(level)))
                           for level in manifest.levels)
        image = None if manifest.image is None else ImageFeature(KEY_SHA256 in features)
        taken = {key for feature in ([image] if image else []) + list(labels)
                 for key in feature.describe()}
        columns = tuple(Column(key, spec["dtype"], spec.get("column_dtype"), spec.get("missing"),
                               tuple(spec["shape"]))
                        for key, spec in features.items() if key not in taken)
        return cls(image, labels, columns)


def declared_size_problem(declared, stored):
    """Why an image whose annotation file declares its ``(height, width)`` as ``declared``
    (None: not declared) cannot be written with its boxes, or None: the StoredImage
    ``stored`` (before any resize) is another size."""
    if declared is None:
        return None
    height, width = stored.source_size or (stored.height, stored.width)
    if tuple(declared) == (height, width):
        return None
    return (f"the annotation file gives the image width {declared[1]:g} and height "
            f"{declared[0]:g}, the image itself is {width}x{height} (width x height): its "
            "boxes were divided by the wrong size. Correct the file's width and height")


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
