"""What ``tfds.builder_from_directory(output_dir)`` needs beside the shards.

TensorFlow Datasets reads a folder of TFRecord shards named ``{split}-{i:05d}-of-{n:05d}.tfrecord``
(ours) when it also holds ``dataset_info.json`` (splits and shard lengths), ``features.json``
(how to decode each record key) and the label names of its class feature. They are written here
from metadata.json's content, as plain JSON: converting never imports tensorflow_datasets.
tfds cannot read compressed shards, so compressed outputs get none of these files.
"""

import json

from . import example

DATASET_INFO = "dataset_info.json"
FEATURES = "features.json"
LABEL_NAMES = "image.class.label.labels.txt"  # tfds: the feature key, "/" -> "."
FILES = (DATASET_INFO, FEATURES, LABEL_NAMES)
VERSION = "1.0.0"
_FEATURES = "tensorflow_datasets.core.features."


def _tensor(dtype):
    return {"pythonClassName": _FEATURES + "tensor_feature.Tensor",
            "tensor": {"dtype": dtype, "encoding": "none", "shape": {}}}


def _image(size):
    height, width = size or (-1, -1)
    return {"pythonClassName": _FEATURES + "image_feature.Image",
            "image": {"dtype": "uint8", "shape": {"dimensions": [str(height), str(width), "3"]}}}


def _class_label(num_classes):
    return {"pythonClassName": _FEATURES + "class_label_feature.ClassLabel",
            "classLabel": {"numClasses": str(num_classes)}}


def files(metadata):
    """``{file name: text}`` of the tfds files for an output with this metadata.json content
    (none for compressed shards, which tfds cannot read). The same for every folder, so that
    an output's bytes do not depend on where it is written."""
    if metadata["compression"]:
        return {}
    features = {key: _tensor(spec["dtype"]) for key, spec in metadata["features"].items()}
    features[example.ENCODED] = _image(metadata["image"]["size"])
    features[example.LABEL] = _class_label(len(metadata["labels"]))
    info = {
        "name": "tfrecorder_lite",
        "description": f"Written by {metadata['created_by']}; see metadata.json.",
        "version": VERSION,
        "moduleName": "tfrecorder_lite",
        "splits": [{"name": split.lower(), "filepathTemplate": "{SPLIT}-{SHARD_X_OF_Y}.tfrecord",
                    "numBytes": str(sum(s["bytes"] for s in info["shards"])),
                    "shardLengths": [str(s["num_examples"]) for s in info["shards"]]}
                   for split, info in metadata["splits"].items()],
        "supervisedKeys": {"tuple": {"items": [{"featureKey": example.ENCODED},
                                               {"featureKey": example.LABEL}]}},
    }
    return {
        DATASET_INFO: json.dumps(info, indent=2) + "\n",
        FEATURES: json.dumps({"pythonClassName": _FEATURES + "features_dict.FeaturesDict",
                              "featuresDict": {"features": features}}, indent=2) + "\n",
        LABEL_NAMES: "".join(f"{label}\n" for label in metadata["labels"]),
    }
