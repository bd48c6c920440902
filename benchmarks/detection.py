"""Detection: a per-box CSV -> records, tfrecorder_lite against the tutorial-style recipe.

The recipe is what the TF Object Detection API tutorial's ``generate_tfrecord.py`` does, in one
process: group the rows by file, read each image, take its size from Pillow, build a
``tf.train.Example`` of ``tf.train.Feature`` lists and write it with ``tf.io.TFRecordWriter``.
The library converts the same CSV with its defaults (decode check, parallel shards, fsync'd
files, a manifest). Rounds are interleaved and medians reported, since the machine is shared.

Usage:
    python benchmarks/detection.py --images 1000 --rounds 5
    python benchmarks/detection.py --images 1000 --rounds 5 --check header
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

LABELS = ("car", "person", "bicycle", "dog")


_Y, _X = np.mgrid[0:480, 0:640]
_BASE = np.stack([_X * 255 // 640, _Y * 255 // 480, (_X + _Y) * 255 // 1120], axis=-1)


def photo_pixels(i, rng):
    """The uint8 pixels of photo-like 640x480 frame ``i`` (a shifted gradient, ``rng``'s noise)."""
    noise = rng.integers(-25, 26, _BASE.shape)
    return np.clip(np.roll(_BASE, i * 13, axis=1) + noise, 0, 255).astype(np.uint8)


def make_set(folder, count, seed=0):
    """``count`` photo-like 640x480 JPEGs with 1 to 5 boxes each; returns the per-box CSV path."""
    rng = np.random.default_rng(seed)
    images = os.path.join(folder, "images")
    os.makedirs(images, exist_ok=True)
    rows = []
    for i in range(count):
        pixels = photo_pixels(i, rng)
        name = f"img{i:05d}.jpg"
        Image.fromarray(pixels).save(os.path.join(images, name), quality=90)
        split = "TRAIN" if i % 10 < 8 else "VALIDATION" if i % 10 == 8 else "TEST"
        for _ in range(rng.integers(1, 6)):
            x0, y0 = rng.uniform(0, 0.7, 2)
            w, h = rng.uniform(0.05, 0.3, 2)
            rows.append((split, f"images/{name}", LABELS[rng.integers(len(LABELS))],
                         round(x0, 4), round(y0, 4), round(x0 + w, 4), round(y0 + h, 4)))
    csv = os.path.join(folder, "boxes.csv")
    pd.DataFrame(rows, columns=["split", "image_uri", "label", "xmin", "ymin", "xmax",
                                "ymax"]).to_csv(csv, index=False)
    return csv, len(rows)


def recipe(csv, out):
    """The tutorial's generate_tfrecord.py, one process, one file per split."""
    import tensorflow as tf

    df = pd.read_csv(csv)
    folder = os.path.dirname(csv)
    ids = {label: i + 1 for i, label in enumerate(sorted(df.label.unique()))}
    os.makedirs(out, exist_ok=True)
    for split, rows in df.groupby("split"):
        with tf.io.TFRecordWriter(os.path.join(out, f"{split.lower()}.tfrecord")) as writer:
            for filename, group in rows.groupby("image_uri", sort=False):
                with tf.io.gfile.GFile(os.path.join(folder, filename), "rb") as fid:
                    encoded = fid.read()
                width, height = Image.open(io.BytesIO(encoded)).size
                feature = {
                    "image/height": tf.train.Feature(int64_list=tf.train.Int64List(value=[height])),
                    "image/width": tf.train.Feature(int64_list=tf.train.Int64List(value=[width])),
                    "image/filename": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[filename.encode()])),
                    "image/source_id": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[filename.encode()])),
                    "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded])),
                    "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"jpeg"])),
                    "image/object/class/text": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[t.encode() for t in group.label])),
                    "image/object/class/label": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=[ids[t] for t in group.label])),
                }
                for key in ("xmin", "ymin", "xmax", "ymax"):
                    feature[f"image/object/bbox/{key}"] = tf.train.Feature(
                        float_list=tf.train.FloatList(value=group[key].tolist()))
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())


def library(csv, out, check="decode"):
    import tfrecorder_lite

    tfrecorder_lite.convert(csv, out, progress=False, check=check)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--check", default="decode", choices=["decode", "header"],
                        help="the library's image check (default: its default, decode)")
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "tfrl_det"))
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import tensorflow  # noqa: F401  (imported once, outside the timings, for both)
    import tfrecorder_lite  # noqa: F401

    csv = os.path.join(args.workdir, "boxes.csv")
    if not os.path.exists(csv):
        shutil.rmtree(args.workdir, ignore_errors=True)
        make_set(args.workdir, args.images)
    boxes = len(pd.read_csv(csv))
    times = {"recipe": [], "library": []}
    for _ in range(args.rounds):
        for name, run in (("recipe", recipe),
                          ("library", lambda c, o: library(c, o, args.check))):
            out = os.path.join(args.workdir, f"out-{name}")
            shutil.rmtree(out, ignore_errors=True)
            started = time.perf_counter()
            run(csv, out)
            times[name].append(time.perf_counter() - started)
    per_round = [r / lib for r, lib in zip(times["recipe"], times["library"])]
    print(f"{args.images} images, {boxes} boxes, {args.rounds} interleaved rounds, "
          f"library check={args.check}")
    for name, values in times.items():
        print(f"  {name}: median {statistics.median(values):.2f} s "
              f"({', '.join(f'{v:.2f}' for v in values)})")
    print(f"  library vs recipe: {statistics.median(times['recipe']) / statistics.median(times['library']):.2f}x "
          f"(per round median {statistics.median(per_round):.2f}x)")


if __name__ == "__main__":
    main()
