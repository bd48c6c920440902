"""Shared fixtures: small, real images made by Pillow, and tables pointing at them."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

import tfrecorder_lite  # noqa: E402,F401  (registers DataFrame.tfrecord)


def photo(height, width, seed=0, mode="RGB"):
    """A smooth, photo-like image (gradients plus mild noise) of the given size and mode."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([(x * 255 // max(width - 1, 1)), (y * 255 // max(height - 1, 1)),
                     ((x + y) * 127 // max(height + width - 2, 1))], axis=-1)
    noisy = np.clip(base + rng.integers(-12, 13, base.shape), 0, 255).astype(np.uint8)
    image = Image.fromarray(noisy, "RGB")
    return image if mode == "RGB" else image.convert(mode)


def save(image, path, fmt=None, **params):
    """Save ``image`` at ``path`` (folders made as needed) and return the path as text."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    image.save(path, fmt, **params)
    return str(path)


@pytest.fixture
def image_table(tmp_path):
    """A clean table of 24 images (JPEG and PNG, several sizes) in three splits, two labels."""
    rows = []
    for i in range(24):
        split = "TRAIN" if i < 16 else "VALIDATION" if i < 20 else "TEST"
        fmt, ext = ("JPEG", "jpg") if i % 2 else ("PNG", "png")
        path = save(photo(20 + i, 30 + 2 * i, seed=i), tmp_path / "images" / f"img{i}.{ext}", fmt)
        rows.append((split, path, "cat" if i % 3 else "dog"))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"])
