"""Quickstart: make a small labelled image set, convert it, load TRAIN, train a tiny model.

Run: python samples/quickstart.py, or python samples/quickstart.py --workdir DIR to keep
the images and records in DIR. Needs only ``pip install -e .`` (no test extras).
"""

import argparse
import os
import tempfile

import pandas as pd

import tfrecorder_lite
from sample_images import make_sample  # samples/sample_images.py, beside this file


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=None, help="where to put images and records")
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="tfrecorder_lite_quickstart_")

    df = pd.read_csv(make_sample(workdir))  # images.csv: split,image_uri,label
    problems = df.tfrecord.validate(base_dir=workdir)  # image paths are relative to workdir
    print(f"{len(df)} images, {len(problems)} problem(s)")

    result = df.tfrecord.to_tfrecord(os.path.join(workdir, "records"), base_dir=workdir,
                                     overwrite=True)
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
