"""The hand-written baselines the library is compared with: what a competent user would write.

Each takes the `split,image_uri,label` table and does its work in this one process.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pandas as pd
from PIL import Image

IMAGE_SIZE = (224, 224)
JPEG_QUALITY = 90


def io_floor(df: pd.DataFrame, out_dir: Path) -> None:
    """Reads every file and appends its bytes to one output file: the disk's floor."""
    out_dir.mkdir(parents=True)
    with open(out_dir / "all.bin", "wb") as out:
        for uri in df["image_uri"]:
            with open(uri, "rb") as f:
                out.write(f.read())


def durable_floor(df: pd.DataFrame, out_dir: Path) -> None:
    """`io_floor`, then the file's bytes on the disk (fsync): the floor of any writer whose
    output survives a power loss, as the library's does (the recipes' need not)."""
    out_dir.mkdir(parents=True)
    with open(out_dir / "all.bin", "wb") as out:
        for uri in df["image_uri"]:
            with open(uri, "rb") as f:
                out.write(f.read())
        out.flush()
        os.fsync(out.fileno())


def tutorial_recipe(df: pd.DataFrame, out_dir: Path) -> None:
    """The TensorFlow tutorial writer: one TFRecordWriter per split, a tf.train.Example with
    `image/encoded` and an int64 `image/class/label` (labels numbered in sorted text order)."""
    import tensorflow as tf

    label_ids = {text: i for i, text in enumerate(sorted(df["label"].unique()))}
    out_dir.mkdir(parents=True)
    writers = {split: tf.io.TFRecordWriter(str(out_dir / f"{split.lower()}.tfrecord"))
               for split in df["split"].unique()}
    try:
        for split, uri, label in df[["split", "image_uri", "label"]].itertuples(index=False):
            with open(uri, "rb") as f:
                encoded = f.read()
            example = tf.train.Example(features=tf.train.Features(feature={
                "image/encoded": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[encoded])),
                "image/class/label": tf.train.Feature(
                    int64_list=tf.train.Int64List(value=[label_ids[label]])),
            }))
            writers[split].write(example.SerializeToString())
    finally:
        for writer in writers.values():
            writer.close()


def durable_recipe(df: pd.DataFrame, out_dir: Path) -> None:
    """`tutorial_recipe`, then its files and their folder on the disk (fsync), as the
    library's output is when `to_tfrecord` returns."""
    tutorial_recipe(df, out_dir)
    for path in out_dir.iterdir():
        with open(path, "rb") as f:
            os.fsync(f.fileno())
    folder = os.open(out_dir, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def pillow_decode(df: pd.DataFrame) -> None:
    """Opens and fully decodes every image with Pillow."""
    for uri in df["image_uri"]:
        with Image.open(uri) as im:
            im.load()


def pillow_resize(df: pd.DataFrame) -> int:
    """Pillow decode, bilinear resize to 224x224, JPEG q90 to bytes; returns the bytes made."""
    total = 0
    for uri in df["image_uri"]:
        with Image.open(uri) as im:
            small = im.convert("RGB").resize(IMAGE_SIZE, Image.BILINEAR)
        buf = io.BytesIO()
        small.save(buf, format="JPEG", quality=JPEG_QUALITY)
        total += len(buf.getvalue())
    return total
