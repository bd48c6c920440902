"""A small labelled image set: the quickstart's, and the folder every documentation example
runs in.

Run: python samples/sample_images.py FOLDER
writes FOLDER/images.csv (``split,image_uri,label``, image paths relative to FOLDER) and the
images under FOLDER/images/: 80 small JPEGs of two easy classes, dark and bright.
"""

import argparse
import os

import numpy as np
import pandas as pd
from PIL import Image


def make_sample(folder, per_class=40):
    """Write ``images/*.jpg`` and ``images.csv`` into ``folder``; return the path of the CSV.

    Args:
        folder: where to write (made if missing).
        per_class: images of each of the two labels; 80% of them go to TRAIN, the rest
            alternate between VALIDATION and TEST.
    """
    os.makedirs(os.path.join(folder, "images"), exist_ok=True)
    rng = np.random.default_rng(0)
    rows = []
    for label, level in (("dark", 60), ("bright", 190)):
        for i in range(per_class):
            pixels = np.clip(rng.normal(level, 25, (48, 64, 3)), 0, 255).astype(np.uint8)
            name = f"images/{label}_{i}.jpg"
            Image.fromarray(pixels).save(os.path.join(folder, name), quality=90)
            split = "TRAIN" if i < per_class * 0.8 else "VALIDATION" if i % 2 else "TEST"
            rows.append((split, name, label))
    path = os.path.join(folder, "images.csv")
    pd.DataFrame(rows, columns=["split", "image_uri", "label"]).to_csv(path, index=False)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="where to write images.csv and images/")
    args = parser.parse_args()
    print(f"wrote {make_sample(args.folder)} and its images")


if __name__ == "__main__":
    main()
