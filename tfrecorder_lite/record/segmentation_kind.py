"""The semantic segmentation record kind: a mask of class ids per image, with the TF Model
Garden's keys.

Its record feature (:class:`SegmentationMask`: the mask as a single-channel PNG of class ids,
``image/segmentation/class/encoded`` and ``/format`` as the Model Garden writes and reads them,
the ids the mask holds with their texts and pixel counts, and the image's source id), the
checks a written mask passes (``verify``), its overlay (``inspect``) and its metadata.json entry
(:data:`SEGMENTATION`). Plain Python and Pillow (a shard task imports it); TensorFlow only in
``decode``.
"""

from dataclasses import dataclass

from .features import ClassLabel, Feature, RecordKind, RecordRejected, _TFDS, tfds_labels
from .keys import BYTES, HEIGHT, INT64, SOURCE_ID, WIDTH

# official/vision/dataloaders/segmentation_input.py reads MASK_ENCODED; Model Garden's example
# builder (and DeepLab's decoders) write and read MASK_FORMAT beside it.
MASK_ENCODED = "image/segmentation/class/encoded"
MASK_FORMAT = "image/segmentation/class/format"
# The class ids a mask holds (ascending), their texts and pixels: what verify and info count.
MASK_LABEL = "image/segmentation/class/label"
MASK_TEXT = "image/segmentation/class/text"
MASK_PIXELS = "image/segmentation/class/pixels"
MASK_KEYS = {MASK_LABEL: INT64, MASK_TEXT: BYTES, MASK_PIXELS: INT64}
_SHOWN = 3


@dataclass(frozen=True)
class SegmentationMask(ClassLabel):
    """The mask of a segmentation record: a single-channel PNG of class ids, the size of the
    record's image, and the ids it holds (``image/segmentation/class/label``) with their texts
    and pixel counts.

    Attributes:
        vocabulary: class id -> text (id = position).
        colors: ``((r, g, b), id)`` pairs of the colour table masks are read through (id None:
            the ignore value), or None for masks of class ids.
        ignore_value: the id of pixels to ignore (kept in the mask, counted apart), or None.
        allow_lossy: take JPEG and WebP masks.
        bounded: ids beyond the vocabulary are refused (labels given); without it the
            vocabulary is every id but the ignore value.
    """

    colors: tuple = None
    ignore_value: int = 255
    allow_lossy: bool = False
    bounded: bool = True

    @property
    def keys(self):
        return MASK_LABEL, MASK_TEXT

    @property
    def name(self):
        """The mask's name in ``load(..., as_supervised=False)``'s dicts."""
        return "mask"

    def describe(self):
        return {SOURCE_ID: {"dtype": BYTES, "shape": []},
                MASK_ENCODED: {"dtype": BYTES, "shape": []},
                MASK_FORMAT: {"dtype": BYTES, "shape": []},
                **{key: {"dtype": kind, "shape": [None]} for key, kind in MASK_KEYS.items()}}

    def mask_options(self):
        """The MaskOptions its masks are read with."""
        from ..images.mask_pixels import MaskOptions

        return MaskOptions(len(self.vocabulary) if self.bounded else None, self.colors,
                           self.ignore_value, self.allow_lossy)

    def encode(self, value, image=None, files=()):
        """``value``: ``((), (), source id)`` (the ids and texts the mask holds are known once
        it is read); ``image``: the row's ``(StoredImage, file name)``; ``files``: the mask
        file's bytes. A mask is checked against the image as it was read and is displayed (upright,
        its EXIF orientation applied, as it is stored); an image resized as it is written takes
        its mask resized by nearest neighbour."""
        from ..images import mask_pixels as masks

        (_, _, source_id), (data,) = value, files
        stored = image[0]
        size = stored.source_size or (stored.height, stored.width)
        try:
            mask = masks.prepare_mask(data, size, self.mask_options(), stored.orientation)
            if size != (stored.height, stored.width):
                mask = masks.resized(mask, (stored.height, stored.width), self.ignore_value)
        except masks.MaskRejected as exc:
            raise RecordRejected(str(exc)) from None
        return {SOURCE_ID: source_id, MASK_ENCODED: mask.encoded, MASK_FORMAT: "png",
                MASK_LABEL: mask.ids, MASK_TEXT: tuple(self.vocabulary[i] for i in mask.ids),
                MASK_PIXELS: mask.pixels}

    def counted(self, values):
        """Pixels per class id: what a split's ``label_counts`` count."""
        return dict(zip(values[MASK_LABEL], values[MASK_PIXELS]))

    whole_target = True

    def check_values(self, values):
        """What is wrong with a written mask, or None: not a single-channel PNG, another size
        than its image, ids that are no label, ids or pixel counts its record does not list."""
        import numpy as np
        from PIL import Image

        from ..images.mask_pixels import decode_ids

        try:
            ids = decode_ids(values[MASK_ENCODED][0])
        except ValueError as exc:
            return str(exc)
        size = (values[HEIGHT][0], values[WIDTH][0]) if HEIGHT in values else ids.shape
        if ids.shape != tuple(size):
            return (f"its mask is {ids.shape[0]}x{ids.shape[1]} pixels, its image "
                    f"{size[0]}x{size[1]}")
        counts = np.array(Image.fromarray(ids, "L").histogram())
        present = [i for i in np.flatnonzero(counts).tolist() if i != self.ignore_value]
        unknown = [i for i in present if i >= len(self.vocabulary)]
        if unknown:
            return "its mask holds class id " + ", ".join(
                f"{i} ({int(counts[i])} pixels)" for i in unknown[:_SHOWN]) + \
                f", not a label of metadata.json (0 to {len(self.vocabulary) - 1})"
        listed = dict(zip(values.get(MASK_LABEL, ()), values.get(MASK_PIXELS, ())))
        found = {i: int(counts[i]) for i in present}
        if listed != found:
            return (f"its mask holds pixels per class id {found}, its record lists "
                    f"{listed} ({MASK_LABEL}, {MASK_PIXELS})")
        return None

    def tfds(self, image_size=None):
        entries = Feature.tfds(self)
        height, width = image_size or (-1, -1)
        entries[MASK_ENCODED] = {"pythonClassName": _TFDS + "image_feature.Image", "image": {
            "dtype": "uint8", "shape": {"dimensions": [str(height), str(width), "1"]},
            "encodingFormat": "png"}}
        entries[MASK_LABEL] = tfds_labels(len(self.vocabulary), several=True)
        return entries

    def decode(self, tf, parsed, options, image=None):
        """The uint8 ``[H, W, 1]`` mask of class ids of a parsed record, resized by nearest
        neighbour to ``options.image_size`` when given (never interpolated)."""
        mask = tf.io.decode_png(parsed[MASK_ENCODED], channels=1)
        mask = tf.reshape(mask, tf.stack([parsed[HEIGHT], parsed[WIDTH], 1]))
        if options.image_size is not None:
            mask = tf.image.resize(mask, options.image_size, method="nearest")
            mask = tf.ensure_shape(tf.cast(mask, tf.uint8), (*options.image_size, 1))
        return mask

    #: the keys ``decode`` reads beside the image's
    decode_keys = (MASK_ENCODED,)

    def draw(self, thumbnail, values, font):
        """Draw the record's mask on its thumbnail as a translucent overlay (the ignore value
        left clear), with a legend of the labels it holds."""
        from PIL import Image, ImageDraw

        from ..images.mask_pixels import decode_ids

        if MASK_ENCODED not in values:
            return
        ids = decode_ids(values[MASK_ENCODED][1][0])
        mask = Image.fromarray(ids, "L").resize(thumbnail.size, Image.Resampling.NEAREST)
        palette = [c for i in range(256) for c in overlay_colour(i)]
        colours = mask.copy()
        colours.putpalette(palette)
        alpha = mask.point([0 if i == self.ignore_value else _ALPHA for i in range(256)])
        thumbnail.paste(colours.convert("RGB"), (0, 0), alpha)
        draw = ImageDraw.Draw(thumbnail)
        present = [i for i in values.get(MASK_LABEL, (None, []))[1] if i < len(self.vocabulary)]
        y = thumbnail.height - 4 - 13 * len(present[:_LEGEND])
        for i in present[:_LEGEND]:  # the legend, bottom left
            draw.rectangle((3, y + 2, 12, y + 11), fill=overlay_colour(i), outline="white")
            draw.text((15, y), self.vocabulary[i] or str(i), fill="white", font=font,
                      stroke_width=1, stroke_fill="black")
            y += 13


_ALPHA = 110  # of 255: the overlay's opacity
_LEGEND = 6  # labels listed on a thumbnail
_OVERLAY = ((230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48),
            (145, 30, 180), (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212),
            (0, 128, 128), (220, 190, 255), (170, 110, 40), (255, 250, 200), (128, 0, 0))


def overlay_colour(class_id):
    """The colour ``inspect`` draws a class id in."""
    return _OVERLAY[class_id % len(_OVERLAY)]


class SegmentationRecords(RecordKind):
    """Records of images and their masks of class ids (metadata.json's
    ``task: "segmentation"``)."""

    tasks = ("segmentation",)
    counted = "pixels"
    annotations = "mask"
    fields = ("segmentation",)
    label_id_keys = (MASK_LABEL,)

    def label_fields(self, manifest):
        entry = manifest.kind_fields.get("segmentation")
        entry = entry if isinstance(entry, dict) else {}
        vocabulary = tuple(manifest.labels)
        colors = entry.get("mask_colors")
        if isinstance(colors, list):  # the colour table, as metadata.json lists it
            ids = {text: i for i, text in enumerate(vocabulary)}
            colors = tuple((tuple(c.get("color") or ()), ids.get(c.get("label")))
                           for c in colors if isinstance(c, dict))
        else:
            colors = None
        return (SegmentationMask(vocabulary=vocabulary, colors=colors,
                                 ignore_value=entry.get("ignore_value"),
                                 bounded=entry.get("labels_from") != "the class ids"),)

    def fixed_keys(self, labels, task):
        return MASK_KEYS, [None]

    def written_labels(self, features, labels, label_counts):
        """Without label names, the class ids up to the largest a written mask holds."""
        if features.labels[0].bounded:
            return labels
        found = [int(text) for counts in label_counts.values() for text in counts]
        return labels[:max(found, default=-1) + 1]

    def manifest_entry(self, features, label_counts):
        mask = features.labels[0]
        return {"segmentation": {
            "keys": f"{MASK_ENCODED} (a single-channel PNG of class ids, the image's size), "
                    f"{MASK_FORMAT}",
            "ignore_value": mask.ignore_value,
            "labels_from": "mask_colors" if mask.colors is not None else
            "mask_labels" if mask.bounded else "the class ids",
            **({"mask_colors": [{"color": list(rgb), "label": None if i is None else
                                 mask.vocabulary[i]} for rgb, i in mask.colors]}
               if mask.colors is not None else {}),
            "labelled_pixels": {split: sum(counts.values())
                                for split, counts in label_counts.items()}}}


SEGMENTATION = SegmentationRecords()
