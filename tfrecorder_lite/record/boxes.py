"""The detection record kind: boxes with the TF Object Detection API's keys.

Its record features (:class:`Boxes`: each box's relative coordinates, class id and text, the
per-box columns and the image's source id), the checks an image's boxes pass before it is
written, its label map (``label_map.pbtxt``) and its metadata.json entry (:data:`DETECTION`).
Plain Python (a shard task imports it); TensorFlow only in ``decode``, Pillow only in ``draw``.
"""

import io
import itertools
import numbers
from dataclasses import dataclass

from .. import redaction
from .features import ClassLabel, Feature, RecordKind, RecordRejected, tfds_labels
from .keys import BYTES, FLOAT, HEIGHT, INT64, KEY_SHA256, SOURCE_ID, WIDTH

# The TF Object Detection API's keys (research/object_detection/core/standard_fields.py),
# which the TF Model Garden's decoder reads too.
OBJECT_PREFIX = "image/object/"
BBOX_KEYS = tuple(f"image/object/bbox/{name}" for name in ("xmin", "ymin", "xmax", "ymax"))
OBJECT_LABEL = "image/object/class/label"
OBJECT_TEXT = "image/object/class/text"
OBJECT_MASK = "image/object/mask"  # one single-channel PNG of 0/1 per box
OBJECT_KEYS = {**dict.fromkeys(BBOX_KEYS, FLOAT), OBJECT_LABEL: INT64, OBJECT_TEXT: BYTES}
IMAGE_ID_KEYS = {SOURCE_ID: BYTES, KEY_SHA256: BYTES}
LABEL_MAP = "label_map.pbtxt"  # the Object Detection API's label map


def object_key(column):
    """The record key of a per-box column: ``image/object/<column>`` (``iscrowd`` is
    ``is_crowd``, as the Object Detection API names it)."""
    return OBJECT_PREFIX + {"iscrowd": "is_crowd"}.get(column, column)

BOX_COLUMNS = ("xmin", "ymin", "xmax", "ymax")
MAX_BOXES = 500  # AutoML's limit an image

def box_problem(boxes, units="relative", size=None):
    """The reason one image's boxes cannot be written, or None when they can.

    Args:
        boxes: the image's boxes, each ``(xmin, ymin, xmax, ymax)``.
        units: ``"relative"`` (fractions of the image, in [0, 1]) or ``"pixels"``.
        size: ``(height, width)`` of the image, with ``units="pixels"``.

    Returns:
        None, or e.g. ``"box 2 of 3: xmin 0.6 > xmax 0.2"`` (boxes counted from 1).
    """
    if units == "relative":
        limits, within = (1, 1, 1, 1), ("[0, 1]",) * 4
    elif units == "pixels" and size is not None:
        height, width = size
        limits = (width, height, width, height)
        within = (f"[0, {width}] (the image's width)", f"[0, {height}] (the image's height)") * 2
    else:
        raise ValueError(f"units must be 'relative', or 'pixels' with size=(height, width); "
                         f"got units={units!r}, size={size!r}")
    count = len(boxes)
    if count > MAX_BOXES:
        return f"{count} boxes: at most {MAX_BOXES} an image"
    for number, box in enumerate(boxes, 1):
        problem = _coordinate_problem(box, limits, within) or _order_problem(box)
        if problem:
            return f"box {number} of {count}: {problem}"
    return None


def _coordinate_problem(box, limits, within):
    """What is wrong with one of the box's coordinates (missing, no number, out of range)."""
    if len(box) != 4:
        return f"{len(box)} coordinates, expected 4 (xmin, ymin, xmax, ymax)"
    for name, value, limit, where in zip(BOX_COLUMNS, box, limits, within):
        if type(value) is not float and (isinstance(value, bool) or
                                          not isinstance(value, numbers.Real)):
            if value is None or type(value).__name__ == "NAType":
                return f"{name} is missing"
            return f"{name} {redaction.shown(value)} is not a number"
        if value != value:
            return f"{name} is missing or not a number"
        if not 0 <= value <= limit:
            return f"{name} {_shown(value)} is outside {where}"
    return None


def _order_problem(box):
    """``xmin >= xmax`` or ``ymin >= ymax``, in words."""
    for low, high in ((0, 2), (1, 3)):
        if box[low] >= box[high]:
            sign = ">" if box[low] > box[high] else "="
            return (f"{BOX_COLUMNS[low]} {_shown(box[low])} {sign} "
                    f"{BOX_COLUMNS[high]} {_shown(box[high])}")
    return None


def _shown(value):
    """A coordinate as short text that still tells two different values apart."""
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


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
        masks: each box has an instance mask (``image/object/mask``: one PNG of 0/1 per box,
            the image's size, as the Object Detection API's ``create_coco_tf_record.py
            --include_masks`` writes them).
        declared_sizes: each value holds, after the boxes, the image's ``(height, width)`` as
            its annotation file declares it (or None), compared with the image's own size as it
            is written (relative boxes were divided by the declared one).
    """

    box_columns: tuple = ()
    units: str = "relative"
    masks: bool = False
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
        if self.masks:
            entries[OBJECT_MASK] = {"dtype": BYTES, "shape": [None]}
        return entries

    def encode(self, value, image=None, files=()):
        """``value``: ``(class ids, class texts, source id, boxes, *per-box column values)``,
        boxes as ``(xmin, ymin, xmax, ymax)``, and with ``masks`` each box's COCO polygons or
        RLE last."""
        ids, texts, source_id, boxes, *columns = value
        if self.declared_sizes:
            declared, *columns = columns
            problem = declared_size_problem(declared, image[0])
            if problem:
                raise RecordRejected(problem)
        if self.masks:
            *columns, masks = columns
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
        if self.masks:
            record[OBJECT_MASK] = instance_masks(masks, image[0])
        return record

    first_id = 1  # 0 is the background of the Object Detection API's label maps
    whole_target = True

    def check_values(self, values):
        """What is wrong with a written record's objects (``values``: record key -> list of
        values), or None: list lengths that differ, boxes not relative or not ordered."""
        keys = [*BBOX_KEYS, *self.keys, *(object_key(c) for c, _ in self.box_columns),
                *([OBJECT_MASK] if self.masks else [])]
        lengths = {key: len(values.get(key, ())) for key in keys}
        if len(set(lengths.values())) > 1:
            return "object lists of different lengths: " + ", ".join(
                f"{key.removeprefix(OBJECT_PREFIX)} {n}" for key, n in lengths.items())
        problem = box_problem(list(zip(*(values[key] for key in BBOX_KEYS))))
        if problem or not self.masks:
            return problem
        return _mask_problem(values)

    def tfds(self, image_size=None):
        entries = Feature.tfds(self)
        entries[OBJECT_LABEL] = tfds_labels(len(self.vocabulary), several=True)
        return entries

    def decode(self, tf, parsed, options, image=None):
        """``{"boxes": float32 [N, 4] in options.box_format, "labels": int64 [N]}`` of a
        parsed record; absolute formats are in pixels of ``image`` (the returned image)."""
        box_format = options.box_format
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
        if not self.masks:
            return {"boxes": boxes, "labels": parsed[OBJECT_LABEL]}
        return {"boxes": boxes, "labels": parsed[OBJECT_LABEL],
                "masks": _decode_masks(tf, parsed, options.image_size)}

    def batch_padding(self, tf):
        """Boxes and labels padded with -1, as Keras' bounding-box layers and KerasHub's
        detectors take them."""
        padding = {"boxes": tf.constant(-1, tf.float32), "labels": tf.constant(-1, tf.int64)}
        if self.masks:
            padding["masks"] = tf.constant(0, tf.uint8)
        return padding

    def draw(self, thumbnail, values, font):
        """Draw the record's boxes, each with its label (and its instance mask, translucent),
        on its thumbnail."""
        from PIL import Image, ImageDraw

        if BBOX_KEYS[0] not in values:
            return
        ids = values.get(OBJECT_LABEL, (None, []))[1]
        for encoded, number in zip(values.get(OBJECT_MASK, (None, []))[1], ids):
            mask = Image.open(io.BytesIO(encoded)).convert("L").resize(
                thumbnail.size, Image.Resampling.NEAREST)
            colour = Image.new("RGB", thumbnail.size, _BOX_COLOURS[number % len(_BOX_COLOURS)])
            thumbnail.paste(colour, (0, 0), mask.point([0] + [_MASK_ALPHA] * 255))
        draw = ImageDraw.Draw(thumbnail)
        width, height = thumbnail.size
        boxes = zip(*(values[key][1] for key in BBOX_KEYS))
        labels = values.get(OBJECT_TEXT, (None, []))[1]
        ids = values.get(OBJECT_LABEL, (None, []))[1]
        for box, label, number in itertools.zip_longest(boxes, labels, ids):
            if box is None:
                break
            x0, y0, x1, y1 = box
            colour = _BOX_COLOURS[(number or 0) % len(_BOX_COLOURS)]
            corners = (x0 * width, y0 * height, x1 * width, y1 * height)
            draw.rectangle(corners, outline=colour, width=2)
            if label:
                draw.text((corners[0] + 2, corners[1] + 1), label.decode("utf-8", "replace"),
                          fill=colour, font=font)


def instance_masks(masks, stored):
    """One PNG of 0/1 per box from its COCO polygons or RLE, or its polygons relative to the
    image (``{"relative_polygons": [[x1, y1, ...]]}``, scaled to the source's pixel size), or
    their JSON text, at the size of the StoredImage ``stored`` (rasterized at the source's
    size, then resized by nearest neighbour when the image was).

    Raises:
        RecordRejected: "box 2 of 3: ..." for a missing mask, a polygon outside the image or an
            RLE of another size.
    """
    import numpy as np
    from PIL import Image

    from ..images import instance_masks as rasterize

    height, width = stored.source_size or (stored.height, stored.width)
    encoded = []
    for number, mask in enumerate(masks, 1):
        try:
            pixels = rasterize.rasterize_instance(mask, height, width)
        except rasterize.MaskRejected as exc:
            raise RecordRejected(f"box {number} of {len(masks)}: {exc}") from None
        if (height, width) != (stored.height, stored.width):
            pixels = np.asarray(Image.fromarray(pixels, "L").resize(
                (stored.width, stored.height), Image.Resampling.NEAREST))
        encoded.append(rasterize.instance_png(pixels))
    return encoded


def _mask_problem(values):
    """What is wrong with a record's instance masks (one PNG of 0/1 each, the image's size)."""
    from ..images.mask_pixels import decode_ids

    size = (values[HEIGHT][0], values[WIDTH][0]) if HEIGHT in values else None
    count = len(values[OBJECT_MASK])
    for number, encoded in enumerate(values[OBJECT_MASK], 1):
        try:
            mask = decode_ids(encoded)
        except ValueError as exc:
            return f"mask {number} of {count}: {str(exc).removeprefix('its mask ')}"
        if size is not None and mask.shape != tuple(size):
            return (f"mask {number} of {count} is {mask.shape[0]}x{mask.shape[1]} pixels, its "
                    f"image {size[0]}x{size[1]}")
        if int(mask.max(initial=0)) > 1:
            return f"mask {number} of {count} holds {int(mask.max())}: instance masks hold 0 and 1"
    return None


def _decode_masks(tf, parsed, image_size):
    """The uint8 ``[N, H, W]`` instance masks of a parsed record (``image_size``: resized by
    nearest neighbour)."""
    height, width = parsed[HEIGHT], parsed[WIDTH]
    encoded = parsed[OBJECT_MASK]
    masks = tf.cond(  # map_fn cannot stack no masks
        tf.size(encoded) > 0,
        lambda: tf.map_fn(lambda png: tf.io.decode_png(png, channels=1)[..., 0], encoded,
                          fn_output_signature=tf.TensorSpec([None, None], tf.uint8)),
        lambda: tf.zeros(tf.stack([0, height, width]), tf.uint8))
    masks = tf.reshape(masks, tf.stack([-1, height, width]))
    if image_size is None:
        return masks
    masks = tf.image.resize(masks[..., None], image_size, method="nearest")[..., 0]
    return tf.ensure_shape(tf.cast(masks, tf.uint8), (None, *image_size))


_MASK_ALPHA = 110  # of 255: an instance mask's opacity
_BOX_COLOURS = ((230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180))


def label_map_pbtxt(vocabulary):
    """The text of a ``label_map.pbtxt`` in the Object Detection API's form
    (``item { id: 1 name: 'car' }``) for class id -> text (ids without a text left out)."""
    items = []
    for i, text in enumerate(vocabulary):
        if i and text:
            name = text.replace("\\", "\\\\").replace("'", "\\'")
            items.append(f"item {{\n  id: {i}\n  name: '{name}'\n}}\n")
    return "".join(items)


class DetectionRecords(RecordKind):
    """Records of images and their boxes (metadata.json's ``task: "detection"``)."""

    tasks = ("detection",)
    counted = "boxes"
    annotations = "boxes"
    fields = ("boxes",)
    files = (LABEL_MAP,)
    label_id_keys = (OBJECT_LABEL,)

    def label_fields(self, manifest):
        fixed = (*BBOX_KEYS, OBJECT_LABEL, OBJECT_TEXT, OBJECT_MASK)
        box_columns = tuple(
            (key.removeprefix(OBJECT_PREFIX), spec["dtype"])
            for key, spec in manifest.features.items()
            if key.startswith(OBJECT_PREFIX) and key not in fixed)
        return (Boxes(vocabulary=tuple(manifest.labels), box_columns=box_columns,
                      masks=OBJECT_MASK in manifest.features),)

    def fixed_keys(self, labels, task):
        return OBJECT_KEYS, [None]

    def extra_files(self, labels):
        return {LABEL_MAP: label_map_pbtxt(labels)}

    def manifest_entry(self, features, label_counts):
        return {"boxes": {
            "keys": "image/object/bbox/xmin, ymin, xmax, ymax (the Object Detection API's)",
            "units": "relative to the image, 0,0 at the top left",
            "label_offset": 1, "label_map": LABEL_MAP,
            "num_boxes": {split: sum(counts.values()) for split, counts in label_counts.items()}}}


DETECTION = DetectionRecords()
