"""Turn one split of a tfrecorder_lite output into a Hugging Face ``datasets.Dataset``.

Run: python samples/huggingface_datasets.py OUTPUT_DIR [--split TRAIN] [--save DIR]
Needs ``pip install datasets``. Records are read in Python (no TensorFlow); the output may be
local or remote (any fsspec URL), compressed or not.
"""

import argparse

import datasets
import fsspec

import tfrecorder_lite
from tfrecorder_lite.record.encoding import decode_example
from tfrecorder_lite.record.framing import iter_records

VALUES = {"string": "string", "int64": "int64", "float32": "float32"}


def _rows(output_dir, shards, compression):
    """Each record as a row: ``image`` (bytes for datasets.Image), ``label`` and the rest."""
    for name in shards:
        with fsspec.open(f"{output_dir.rstrip('/')}/{name}", "rb") as f:
            for data in iter_records(f, compression):
                row = {}
                for key, (_, [value]) in decode_example(data).items():
                    text = isinstance(value, bytes) and key != "image/encoded"
                    row[key] = value.decode() if text else value
                row["image"] = {"bytes": row.pop("image/encoded")}
                row["label"] = row.pop("image/class/label")
                yield row


def to_hf_dataset(output_dir, split="TRAIN", cache_dir=None):
    """One split as a ``datasets.Dataset``: ``image`` (decoded to a PIL image on access),
    ``label`` (a ClassLabel with the output's label names) and every other record feature
    under its record key (``image/filename``, ``image/class/text``, your columns)."""
    output_dir = str(output_dir)
    metadata = tfrecorder_lite.read_metadata(output_dir)
    lists = [key for key, spec in metadata["features"].items() if spec["shape"]]
    if metadata["image"] is None or isinstance(metadata["labels"], dict) or lists:
        raise ValueError(f"{output_dir}: this sample reads outputs of images with one label and "
                         f"one value per column; this one has no images, label levels or list "
                         f"features ({', '.join(lists) or 'labels'})")
    features = {key: datasets.Value(VALUES[spec["dtype"]])
                for key, spec in metadata["features"].items()}
    del features["image/encoded"], features["image/class/label"]
    features.update(image=datasets.Image(), label=datasets.ClassLabel(names=metadata["labels"]))
    shards = [s["name"] for s in metadata["splits"][split.upper()]["shards"]]
    return datasets.Dataset.from_generator(
        _rows, features=datasets.Features(features), cache_dir=cache_dir,
        gen_kwargs={"output_dir": output_dir, "shards": shards,
                    "compression": metadata["compression"]},
        # the conversion's fingerprint, not the folder's name: a folder written again with
        # another table gets a new cache entry
        fingerprint=f"tfrecorder_lite-{metadata['fingerprint']}-{split.upper()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output_dir", help="a tfrecorder_lite output folder")
    parser.add_argument("--split", default="TRAIN")
    parser.add_argument("--save", help="save the dataset here (Dataset.save_to_disk)")
    args = parser.parse_args()
    dataset = to_hf_dataset(args.output_dir, args.split)
    print(dataset)
    print(dataset.features["label"].names, dataset[0]["image"])
    if args.save:
        dataset.save_to_disk(args.save)


if __name__ == "__main__":
    main()
