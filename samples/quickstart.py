"""Quickstart: make a small labelled image set, convert it, load TRAIN, train a tiny model.

Run: python samples/quickstart.py [--workdir DIR]
"""

import argparse
import os
import tempfile

import numpy as np
import pandas as pd
from PIL import Image

import tfrecorder_lite


def make_images(folder, per_class=40):
    """Write bright and dark images (two easy classes) and return their table."""
    rng = np.random.default_rng(0)
    rows = []
    for label, level in (("dark", 60), ("bright", 190)):
        for i in range(per_class):
            pixels = np.clip(rng.normal(level, 25, (48, 64, 3)), 0, 255).astype(np.uint8)
            path = os.path.join(folder, f"{label}_{i}.jpg")
            Image.fromarray(pixels).save(path, quality=90)
            split = "TRAIN" if i < per_class * 0.8 else "VALIDATION" if i % 2 else "TEST"
            rows.append((split, path, label))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=None, help="where to put images and records")
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="tfrecorder_lite_quickstart_")
    os.makedirs(os.path.join(workdir, "images"), exist_ok=True)

    df = make_images(os.path.join(workdir, "images"))
    problems = df.tfrecord.validate()
    print(f"{len(df)} images, {len(problems)} problem(s)")

    result = df.tfrecord.to_tfrecord(os.path.join(workdir, "records"), overwrite=True)
    print(f"wrote {result.counts} to {result.output_dir}, labels {result.labels}")

    import tensorflow as tf

    train = tfrecorder_lite.load(result.output_dir, "TRAIN", batch_size=16, image_size=(32, 32),
                                 shuffle=True, seed=0)
    validation = tfrecorder_lite.load(result.output_dir, "VALIDATION", batch_size=16,
                                      image_size=(32, 32))
    model = tf.keras.Sequential([
        tf.keras.Input((32, 32, 3)),
        tf.keras.layers.Rescaling(1 / 255),
        tf.keras.layers.Conv2D(8, 3, activation="relu"),
        tf.keras.layers.GlobalAveragePooling2D(),
        tf.keras.layers.Dense(len(result.labels)),
    ])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    history = model.fit(train, validation_data=validation, epochs=1, verbose=2)
    print(f"trained one epoch: loss {history.history['loss'][-1]:.3f}")


if __name__ == "__main__":
    main()
