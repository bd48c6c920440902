"""``load(..., as_supervised="keras")``: elements in the form Keras 3's image preprocessing and
augmentation layers take (``keras.layers.RandomFlip``, ``RandomCrop``, ``RandomRotation``,
...): a dict with ``"images"`` and, by the output's kind, ``"bounding_boxes"`` (``{"boxes",
"labels"}``, boxes in ``load()``'s ``box_format``, the layers' ``bounding_box_format``),
``"segmentation_masks"`` or ``"labels"``. Those layers transform the images and their targets
together.
"""

from ..errors import SchemaError
from ..record.boxes import Boxes
from ..record.segmentation_kind import SegmentationMask

KERAS = "keras"


def check(features, options, where):
    """Raise SchemaError when ``as_supervised="keras"`` cannot apply to an output of
    ``features`` (at ``where``, for the message), before any pipeline is made."""
    if options.as_supervised != KERAS:
        return
    target = next((f for f in features.labels if f.whole_target), None)
    if features.image is None:
        raise SchemaError(f"{where} holds no images: as_supervised='keras' gives Keras' "
                          "image layers their input, so it does not apply")
    if isinstance(target, Boxes) and target.masks:
        raise SchemaError(f"{where} holds instance masks, which Keras' augmentation layers do "
                          "not transform (they would stay as they were while the images and "
                          "boxes move): use as_supervised=True and transform them yourself")
    levels = [f.level for f in features.labels if f.level is not None]
    if target is None and levels and not isinstance(options.label, str):
        raise SchemaError(f"{where} has label levels {levels}: as_supervised='keras' gives "
                          "one label under 'labels', so pick one with label='LEVEL'")


def apply(features, options, dataset):
    """``dataset`` (``load()``'s ``(image, target)`` elements, checked by :func:`check`) in
    Keras' layout when ``options.as_supervised`` is ``"keras"``; else ``dataset`` as it is."""
    if options.as_supervised != KERAS:
        return dataset
    target = next((f for f in features.labels if f.whole_target), None)
    if isinstance(target, Boxes):
        return dataset.map(lambda image, boxes: {"images": image, "bounding_boxes": boxes})
    if isinstance(target, SegmentationMask):
        return dataset.map(lambda image, mask: {"images": image, "segmentation_masks": mask})
    return dataset.map(lambda image, label: {"images": image, "labels": label})
