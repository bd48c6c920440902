"""What ``tfds.builder_from_directory(output_dir)`` needs beside the shards.

TensorFlow Datasets reads a folder of TFRecord shards named ``{split}-{i:05d}-of-{n:05d}.tfrecord``
(ours) when it also holds ``dataset_info.json`` (splits and shard lengths), ``features.json``
(how to decode each record key) and the label names of its class feature. They are written here
from metadata.json's content, as plain JSON: converting never imports tensorflow_datasets.
tfds cannot read compressed shards, so compressed outputs get none of these files.
"""

import json

from ..record.keys import ENCODED, LABEL, label_keys
from .layout import DATASET_INFO, SPLIT_FILE_TEMPLATE, TFDS_FEATURES, tfds_label_names

VERSION = "1.0.0"
_FEATURES = "tensorflow_datasets.core.features."


def _tensor(dtype, shape=()):
    dims = {"dimensions": ["-1" if d is None else str(d) for d in shape]} if shape else {}
    return {"pythonClassName": _FEATURES + "tensor_feature.Tensor",
            "tensor": {"dtype": dtype, "encoding": "none", "shape": dims}}


def _image(size):
    height, width = size or (-1, -1)
    return {"pythonClassName": _FEATURES + "image_feature.Image",
            "image": {"dtype": "uint8", "shape": {"dimensions": [str(height), str(width), "3"]}}}


def _class_label(num_classes, multi=False):
    label = {"pythonClassName": _FEATURES + "class_label_feature.ClassLabel",
             "classLabel": {"numClasses": str(num_classes)}}
    if not multi:
        return label
    return {"pythonClassName": _FEATURES + "sequence_feature.Sequence",
            "sequence": {"feature": label, "length": "-1"}}


def files(metadata):
    """``{file name: text}`` of the tfds files for an output with this metadata.json content
    (none for compressed shards, which tfds cannot read). The same for every folder, so that
    an output's bytes do not depend on where it is written."""
    if metadata["compression"]:
        return {}
    features = {key: _tensor(spec["dtype"], spec["shape"])
                for key, spec in metadata["features"].items()}
    labels = metadata["labels"]
    levels = labels.items() if isinstance(labels, dict) else [(None, labels)]
    names = {}
    for level, texts in levels:
        key = label_keys(level)[0]
        features[key] = _class_label(len(texts), metadata.get("task") == "multi-label")
        names[tfds_label_names(key)] = "".join(f"{label}\n" for label in texts)
    supervised = {}
    if metadata["image"] is not None:
        features[ENCODED] = _image(metadata["image"]["size"])
        if not isinstance(labels, dict):  # one label: tfds's as_supervised gives (image, label)
            supervised = {"supervisedKeys": {"tuple": {"items": [
                {"featureKey": ENCODED}, {"featureKey": LABEL}]}}}
    info = {
        "name": "tfrecorder_lite",
        "description": f"Written by {metadata['created_by']}; see metadata.json.",
        "version": VERSION,
        "moduleName": "tfrecorder_lite",
        "splits": [{"name": split.lower(), "filepathTemplate": SPLIT_FILE_TEMPLATE,
                    "numBytes": str(sum(s["bytes"] for s in info["shards"])),
                    "shardLengths": [str(s["num_examples"]) for s in info["shards"]]}
                   for split, info in metadata["splits"].items()],
        **supervised,
    }
    return {
        DATASET_INFO: json.dumps(info, indent=2) + "\n",
        TFDS_FEATURES: json.dumps({"pythonClassName": _FEATURES + "features_dict.FeaturesDict",
                              "featuresDict": {"features": features}}, indent=2) + "\n",
        **names,
    }
