"""What ``tfds.builder_from_directory(output_dir)`` needs beside the shards.

TensorFlow Datasets reads a folder of TFRecord shards named ``{split}-{i:05d}-of-{n:05d}.tfrecord``
(ours) when it also holds ``dataset_info.json`` (splits and shard lengths), ``features.json``
(how to decode each record key, which the feature set says) and the label names of its class
features. They are written as plain JSON: converting never imports tensorflow_datasets. tfds
cannot read compressed shards, so compressed outputs get none of these files.
"""

import json

from ..record.kinds import features_of
from ..record.keys import ENCODED, LABEL
from .layout import DATASET_INFO, SPLIT_FILE_TEMPLATE, TFDS_FEATURES, tfds_label_names, tfds_split

VERSION = "1.0.0"
_FEATURES_DICT = "tensorflow_datasets.core.features.features_dict.FeaturesDict"


def _splits(manifest):
    """dataset_info.json's splits: one per split (``train``, its files named by
    ``{SPLIT}-{SHARD_X_OF_Y}``); in an appended output one per split and generation
    (``train-g0000``, ``train-g0001``, ...: one name template cannot cover shards numbered
    per generation), so that ``split="train"`` is refused rather than read in part."""
    def entry(name, template, shards):
        return {"name": name, "filepathTemplate": template,
                "numBytes": str(sum(s.bytes for s in shards)),
                "shardLengths": [str(s.num_examples) for s in shards]}

    if not manifest.generations:
        return [entry(split.lower(), SPLIT_FILE_TEMPLATE, info.shards)
                for split, info in manifest.splits.items()]
    return [entry(*tfds_split(split, generation),
                  [s for s in info.shards if s.generation == generation])
            for split, info in manifest.splits.items()
            for generation in sorted({s.generation for s in info.shards})]


def files(manifest):
    """``{file name: text}`` of the tfds files for an output with this Manifest (none for
    compressed shards, which tfds cannot read). The same for every folder, so that an output's
    bytes do not depend on where it is written."""
    if manifest.compression:
        return {}
    features = features_of(manifest)
    names = {tfds_label_names(label.keys[0]): "".join(f"{text}\n" for text in label.vocabulary)
             for label in features.labels}
    supervised = {}
    if features.image is not None and len(features.labels) == 1 and \
            features.labels[0].keys[0] == LABEL:  # one label: as_supervised: (image, label)
        supervised = {"supervisedKeys": {"tuple": {"items": [
            {"featureKey": ENCODED}, {"featureKey": LABEL}]}}}
    info = {
        "name": "tfrecorder_lite",
        "description": f"Written by {manifest.created_by}; see metadata.json.",
        "version": VERSION,
        "moduleName": "tfrecorder_lite",
        "splits": _splits(manifest),
        **supervised,
    }
    size = manifest.image.size if manifest.image is not None else None
    return {
        DATASET_INFO: json.dumps(info, indent=2) + "\n",
        TFDS_FEATURES: json.dumps({"pythonClassName": _FEATURES_DICT, "featuresDict": {
            "features": features.tfds(size)}}, indent=2) + "\n",
        **names,
    }
