"""Read a tfrecorder_lite output with PyTorch: a DataLoader with 2 workers over the shards.

Run: python samples/pytorch_dataloader.py [OUTPUT_DIR] [--split TRAIN]
(without OUTPUT_DIR it converts a few generated images first). Needs
``pip install torch tfrecord``: the PyPI ``tfrecord`` package reads the shards, and the index
files beside them (``*.tfindex``) let each worker read its own part of every shard, so every
record comes once per epoch.
"""

import argparse
import io
import os
import sys
import tempfile

import numpy as np
import pandas as pd
from PIL import Image

import tfrecorder_lite

SUFFIX = {None: ".tfrecord", "GZIP": ".tfrecord.gz"}  # the tfrecord package reads no ZLIB


def make_output(folder):
    """Convert 24 generated images (dark and bright) into ``folder/records``; returns its path."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(24):
        label, level = ("dark", 60) if i % 2 else ("bright", 190)
        pixels = np.clip(rng.normal(level, 25, (48 + i, 64, 3)), 0, 255).astype(np.uint8)
        path = os.path.join(folder, f"{label}_{i}.jpg")
        Image.fromarray(pixels).save(path, quality=90)
        rows.append(("TRAIN" if i < 20 else "TEST", path, label))
    table = pd.DataFrame(rows, columns=["split", "image_uri", "label"])
    return table.tfrecord.to_tfrecord(os.path.join(folder, "records"), progress=False).output_dir


def decode(record):
    """In a worker: the image bytes -> uint8 ``[64, 64, 3]`` tensor (resized so batches stack),
    and the label."""
    import torch

    image = Image.open(io.BytesIO(record["image/encoded"])).convert("RGB").resize((64, 64))
    return torch.from_numpy(np.array(image)), int(record["image/class/label"][0])


def torch_dataset(output_dir, split):
    """The records of one split of a local output folder, as a PyTorch IterableDataset."""
    from tfrecord.torch.dataset import MultiTFRecordDataset

    metadata = tfrecorder_lite.read_metadata(output_dir)
    suffix = SUFFIX[metadata["compression"]]
    shards = metadata["splits"][split.upper()]["shards"]
    return MultiTFRecordDataset(
        data_pattern=os.path.join(output_dir, "{}" + suffix),
        index_pattern=os.path.join(output_dir, "{}.tfindex"),
        splits={s["name"][:-len(suffix)]: s["num_examples"] for s in shards},
        description={"image/encoded": "byte", "image/class/label": "int"},
        transform=decode,
        compression_type="gzip" if metadata["compression"] else None,
        infinite=False)  # one epoch, then stop


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output_dir", nargs="?", help="a tfrecorder_lite output folder")
    parser.add_argument("--split", default="TRAIN")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed (pip install torch tfrecord); nothing to show")
        return
    output_dir = args.output_dir or make_output(tempfile.mkdtemp(prefix="tfrecorder_lite_pt_"))
    loader = torch.utils.data.DataLoader(torch_dataset(output_dir, args.split), batch_size=8,
                                         num_workers=2)
    count = 0
    for images, labels in loader:
        if not count:
            print(f"first batch: images {tuple(images.shape)} {images.dtype}, "
                  f"labels {labels.tolist()}")
        count += len(labels)
    labels = tfrecorder_lite.read_metadata(output_dir)["labels"]
    print(f"read {count} records of {args.split.upper()} from {output_dir} (labels {labels})")


if __name__ == "__main__":
    sys.exit(main())
