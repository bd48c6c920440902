"""COCO instances JSON from the records of a detection output, for pycocotools' COCOeval.

Reads the manifest and the records only (plain Python: no TensorFlow). Each record is one COCO
image: ``id`` (the record's ``image/source_id`` when every record's is a distinct whole number
from 1, as outputs converted from a COCO file keep COCO's image ids; else the records numbered
from 1 in the shards' order), ``file_name`` (``image/filename``), ``width`` and ``height``
of the stored image. Each box is one annotation: ``bbox`` ``[x, y, width, height]`` in pixels
of the stored image, ``category_id`` (the record's class id: COCO's category ids when
converted from COCO), ``iscrowd`` (``image/object/is_crowd``, else 0) and ``area``
(``image/object/area`` when the record holds it and the images were stored as they came, else
the box's area). Categories are the output's labels (id -> name), the background id 0 left
out. A box with an instance mask (``image/object/mask``) carries it as ``segmentation``, an
uncompressed RLE of the stored image's size, as pycocotools reads it.
"""

import io
import json
import math
import re

import numpy as np
from PIL import Image

from .. import storage
from ..errors import SchemaError, VerifyError
from ..output.manifest import read_manifest
from ..redaction import redact
from ..record.encoding import decode_example
from ..record.framing import RecordError, iter_records
from ..record.boxes import BBOX_KEYS, OBJECT_LABEL, OBJECT_MASK, object_key
from ..record.keys import FILENAME, HEIGHT, SOURCE_ID, WIDTH
from ..storage import Store
from ..output.splits import pick

_WHOLE = re.compile(r"^-?\d+$")
# what ``tfrecorder-lite export-coco`` does, as its help says it
COMMAND_HELP = ("write COCO instances JSON of one split of a detection output (for "
                "pycocotools' COCOeval)")


def to_coco(output_dir, split, path, *, storage_options=None):
    """Write the COCO instances JSON of one split of a detection output.

    Args:
        output_dir: the output folder (path or URL).
        split: ``"TRAIN"``, ``"VALIDATION"``, ``"TEST"`` (any spelling ``load()`` takes).
        path: the JSON file to write (path or URL); its folder must exist.
        storage_options: fsspec options for remote folders and files.

    Returns:
        The COCO document written (a dict with ``images``, ``annotations``, ``categories``).

    Raises:
        ManifestError: the folder holds no finished output.
        SchemaError: the output is not a detection output, or has no such split; ``path``
            is a folder.
        VerifyError: a shard is missing or damaged (the message names it).
    """
    store = Store(output_dir, storage_options)
    manifest, _ = read_manifest(store)
    if manifest.task != "detection":
        raise SchemaError(f"{redact(store.url)} is a {manifest.task or 'classification'} "
                          "output; COCO instances are exported from a detection output (boxes)")
    name = pick(split, manifest.splits, store.url)
    target = storage.resolve(path)
    if not storage.is_remote(target) and storage.is_dir(target):
        raise SchemaError(f"to_coco's path {target} is a folder: give the JSON file to write")
    images, annotations = [], []
    for shard in manifest.splits[name].shards:
        where = store.path(shard.name)
        try:
            with store.open_read(shard.name) as f:
                for index, data in enumerate(iter_records(f, manifest.compression)):
                    try:
                        record = {key: values
                                  for key, (_, values) in decode_example(data).items()}
                        image = _image(record, len(images) + 1)
                        annotations += _annotations(record, image, len(images),
                                                    manifest.image.stored, len(annotations) + 1)
                    except (ValueError, KeyError, IndexError, OSError) as exc:
                        raise RecordError(index, f"not a record of a detection output "
                                                 f"({type(exc).__name__}: {exc})") from None
                    images.append(image)
        except FileNotFoundError:
            raise VerifyError(f"{where}: missing (metadata.json lists it in {name}); run "
                              f"tfrecorder-lite verify {store.url}") from None
        except RecordError as exc:
            raise VerifyError(f"{where}: {exc}; run tfrecorder-lite verify {store.url}") \
                from None
    ids = [int(i["source_id"]) if _WHOLE.match(i["source_id"]) else 0 for i in images]
    if min(ids, default=1) < 1 or len(set(ids)) < len(ids):
        for number, image in enumerate(images, 1):  # renumber: ids must be unique ints
            image["id"] = number
    for image in images:
        image.pop("source_id")
    image_ids = [image["id"] for image in images]
    for annotation in annotations:
        annotation["image_id"] = image_ids[annotation["image_id"]]
    coco = {"info": {"description": f"{name} of {redact(store.url)}"},
            "images": images, "annotations": annotations,
            "categories": [{"id": i, "name": text, "supercategory": ""}
                           for i, text in enumerate(manifest.labels) if i and text]}
    storage.write_file(path, json.dumps(coco) + "\n", storage_options)
    return coco


def _image(record, number):
    source_id = _text(record.get(SOURCE_ID)) or str(number)
    return {"id": int(source_id) if _WHOLE.match(source_id) else number,
            "file_name": _text(record.get(FILENAME)), "width": record[WIDTH][0],
            "height": record[HEIGHT][0], "source_id": source_id}


def _annotations(record, image, position, stored, first_id):
    """The COCO annotations of one record's boxes (``image_id``: the image's ``position``,
    replaced by its id once every id is known)."""
    width, height = image["width"], image["height"]
    crowd = record.get(object_key("is_crowd"), [])
    areas = record.get(object_key("area"), []) if stored == "encoded" else []
    masks = record.get(OBJECT_MASK, [])
    annotations = []
    for i, (xmin, ymin, xmax, ymax) in enumerate(zip(*(record.get(key, []) for key in BBOX_KEYS))):
        box = [xmin * width, ymin * height, (xmax - xmin) * width, (ymax - ymin) * height]
        area = areas[i] if i < len(areas) and math.isfinite(areas[i]) else box[2] * box[3]
        annotations.append({"id": first_id + i, "image_id": position,
                            "category_id": record[OBJECT_LABEL][i],
                            "bbox": [round(v, 4) for v in box], "area": round(area, 4),
                            "iscrowd": int(crowd[i]) if i < len(crowd) else 0})
        if i < len(masks):
            annotations[-1]["segmentation"] = _rle(masks[i])
    return annotations


def _rle(png):
    """COCO's uncompressed RLE of an instance mask (a PNG of 0/1): the lengths of alternate
    runs of 0 and 1, column by column, starting with 0."""
    with Image.open(io.BytesIO(png)) as image:
        mask = np.asarray(image) != 0
    flat = mask.flatten(order="F")
    ends = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    counts = np.diff(np.concatenate([[0], ends, [flat.size]])).tolist()
    if flat.size and flat[0]:
        counts = [0] + counts
    return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": counts}


def _text(values):
    return values[0].decode("utf-8") if values else ""
