"""Segmentation: a table of images and single-channel PNG masks -> records, tfrecorder_lite
against the recipe a careful user writes.

The recipe, in one process: for each row, Pillow reads the image's header (its size) and
decodes the mask, checks that the sizes match and that every class id is a label or the ignore
value, builds a ``tf.train.Example`` with the TF Model Garden's keys and writes it with
``tf.io.TFRecordWriter`` (one file per split). The library converts the same table with
``check="header"`` (headers checked, as the recipe does) and with its default
``check="decode"`` (every image decoded too). Rounds are interleaved and medians reported,
since the machine is shared.

Usage:
    python benchmarks/segmentation.py --images 2000 --rounds 3
"""

import argparse
import io
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import pandas as pd
from PIL import Image

from detection import photo_pixels  # noqa: E402  (beside this script)

LABELS = ("background", "road", "car", "person")
IGNORE = 255


def make_set(folder, count, seed=0):
    """``count`` photo-like 640x480 JPEGs, each with a 640x480 single-channel PNG mask of class
    ids (regions of the four labels and a few ignored pixels); returns the CSV's path."""
    rng = np.random.default_rng(seed)
    for sub in ("images", "masks"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    rows = []
    for i in range(count):
        pixels = photo_pixels(i, rng)  # the detection benchmark's images
        Image.fromarray(pixels).save(os.path.join(folder, "images", f"img{i:05d}.jpg"),
                                     quality=90)
        ids = np.zeros((480, 640), np.uint8)
        ids[240 + int(rng.integers(-40, 40)):] = 1  # road below a horizon
        for _ in range(int(rng.integers(1, 5))):
            x0, y0 = int(rng.integers(0, 560)), int(rng.integers(100, 400))
            ids[y0:y0 + int(rng.integers(20, 80)), x0:x0 + int(rng.integers(20, 80))] = \
                int(rng.integers(2, 4))
        ids[:4, :4] = IGNORE
        Image.fromarray(ids, "L").save(os.path.join(folder, "masks", f"img{i:05d}.png"))
        split = "TRAIN" if i % 10 < 8 else "VALIDATION" if i % 10 == 8 else "TEST"
        rows.append((split, f"images/img{i:05d}.jpg", f"masks/img{i:05d}.png"))
    csv = os.path.join(folder, "masks.csv")
    pd.DataFrame(rows, columns=["split", "image_uri", "mask_uri"]).to_csv(csv, index=False)
    return csv


def recipe(csv, out):
    """One process: header, mask decode and checks, tf.train.Example, TFRecordWriter."""
    import tensorflow as tf

    def feature(value):
        if isinstance(value, int):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    df = pd.read_csv(csv)
    folder = os.path.dirname(csv)
    known = np.zeros(256, bool)
    known[:len(LABELS)] = known[IGNORE] = True
    os.makedirs(out, exist_ok=True)
    for split, rows in df.groupby("split"):
        with tf.io.TFRecordWriter(os.path.join(out, f"{split.lower()}.tfrecord")) as writer:
            for image_uri, mask_uri in zip(rows.image_uri, rows.mask_uri):
                with open(os.path.join(folder, image_uri), "rb") as f:
                    encoded = f.read()
                with open(os.path.join(folder, mask_uri), "rb") as f:
                    mask = f.read()
                width, height = Image.open(io.BytesIO(encoded)).size
                ids = np.asarray(Image.open(io.BytesIO(mask)))
                if ids.shape != (height, width):
                    raise ValueError(f"{mask_uri}: {ids.shape}, its image {height}x{width}")
                if not known[np.bincount(ids.ravel(), minlength=256) > 0].all():
                    raise ValueError(f"{mask_uri}: a class id that is no label")
                example = tf.train.Example(features=tf.train.Features(feature={
                    "image/encoded": feature(encoded), "image/format": feature(b"jpeg"),
                    "image/height": feature(height), "image/width": feature(width),
                    "image/filename": feature(os.path.basename(image_uri).encode()),
                    "image/source_id": feature(image_uri.encode()),
                    "image/segmentation/class/encoded": feature(mask),
                    "image/segmentation/class/format": feature(b"png")}))
                writer.write(example.SerializeToString())


def library(csv, out, check):
    import tfrecorder_lite

    tfrecorder_lite.convert(csv, out, progress=False, check=check, mask_labels=list(LABELS))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "tfrl_seg"))
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import tensorflow  # noqa: F401  (imported once, outside the timings, for both)
    import tfrecorder_lite  # noqa: F401

    csv = os.path.join(args.workdir, "masks.csv")
    if not os.path.exists(csv) or len(pd.read_csv(csv)) != args.images:
        shutil.rmtree(args.workdir, ignore_errors=True)
        make_set(args.workdir, args.images)
    runs = {"recipe": recipe,
            "library header": lambda c, o: library(c, o, "header"),
            "library decode": lambda c, o: library(c, o, "decode")}
    times = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, run in runs.items():
            out = os.path.join(args.workdir, f"out-{name.replace(' ', '-')}")
            shutil.rmtree(out, ignore_errors=True)
            started = time.perf_counter()
            run(csv, out)
            times[name].append(time.perf_counter() - started)
    print(f"{args.images} images with PNG masks, {args.rounds} interleaved rounds, "
          f"{os.cpu_count()} cores")
    for name, values in times.items():
        print(f"  {name}: median {statistics.median(values):.2f} s "
              f"({', '.join(f'{v:.2f}' for v in values)})")
    recipe_median = statistics.median(times["recipe"])
    for name in ("library header", "library decode"):
        print(f"  {name} vs recipe: {recipe_median / statistics.median(times[name]):.2f}x")


if __name__ == "__main__":
    main()
