"""The benchmarks' image set: seeded, photo-like images and their `split,image_uri,label` CSV.

Image `i` depends only on the seed and `i`, so the images are cached in the work folder and a
set of n images is a prefix of any larger one. Every benchmark script takes its images from here.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw, ImageFilter

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WORKDIR = Path("/tmp/tfrl_bench")
GENERATOR_VERSION = 1
SEED = 20240
CLASSES = (
    "airplane", "bicycle", "bird", "boat", "cat",
    "dog", "flower", "horse", "tree", "truck",
)
SPLITS = ("TRAIN", "VALIDATION", "TEST")
SPLIT_PROBS = (0.8, 0.1, 0.1)
PNG_FRACTION = 0.1
MIN_SIDE, MAX_SIDE = 160, 640
JPEG_QUALITY = 90
NOISE_SIGMA = 7.0
PHOTO_SIZE = (4032, 3024)  # a 12 MP phone camera
PHOTO_JPEG_QUALITY = 92


@dataclass(frozen=True)
class ImageSpec:
    """Metadata of one generated image (derived from the seed and its index)."""

    index: int
    split: str
    label: str
    ext: str
    width: int
    height: int


def image_spec(index: int, seed: int, photos: bool = False) -> ImageSpec:
    """Draws split, label, format and size for image `index`.

    Each index has its own random stream, so a dataset of n images is a
    prefix of any larger dataset with the same seed. With `photos`, every image
    is a phone-camera JPEG: 4032x3024 (12 MP), landscape or portrait.
    """
    rng = np.random.default_rng([seed, index, 0])
    split = SPLITS[int(rng.choice(len(SPLITS), p=SPLIT_PROBS))]
    label = CLASSES[int(rng.integers(len(CLASSES)))]
    if photos:
        width, height = PHOTO_SIZE if rng.random() < 0.7 else PHOTO_SIZE[::-1]
        return ImageSpec(index, split, label, "jpg", width, height)
    ext = "png" if rng.random() < PNG_FRACTION else "jpg"
    width, height = (int(v) for v in rng.integers(MIN_SIDE, MAX_SIDE + 1, size=2))
    return ImageSpec(index, split, label, ext, width, height)


def render_image(spec: ImageSpec, seed: int) -> Image.Image:
    """Renders a photo-like RGB image: smooth colour field, blurred shapes,
    mid-frequency texture and mild sensor-like noise. Images above 4 MP get
    their shapes drawn at a quarter of the size and scaled up (as soft as a
    phone photo's large features), then texture and noise at full size."""
    rng = np.random.default_rng([seed, spec.index, 1])
    w, h = spec.width, spec.height
    if w * h > 4_000_000:
        w, h = w // 4, h // 4
    grid_w, grid_h = (int(v) for v in rng.integers(2, 6, size=2))
    field_ = rng.uniform(0, 255, (grid_h, grid_w, 3)).astype(np.uint8)
    img = Image.fromarray(field_).resize((w, h), Image.BICUBIC)

    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(3, 12))):
        x0, x1 = sorted(int(v) for v in rng.integers(-w // 4, w + w // 4, size=2))
        y0, y1 = sorted(int(v) for v in rng.integers(-h // 4, h + h // 4, size=2))
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        kind = int(rng.integers(3))
        if kind == 0:
            draw.ellipse((x0, y0, x1, y1), fill=colour)
        elif kind == 1:
            draw.rectangle((x0, y0, x1, y1), fill=colour)
        else:
            points = [(int(rng.integers(0, w)), int(rng.integers(0, h)))
                      for _ in range(int(rng.integers(3, 7)))]
            draw.polygon(points, fill=colour)
    img = img.filter(ImageFilter.GaussianBlur(float(rng.uniform(1.0, 3.0))))
    w, h = spec.width, spec.height
    if img.size != (w, h):
        img = img.resize((w, h), Image.BICUBIC)

    pixels = np.asarray(img, dtype=np.float32)
    texture = rng.standard_normal((max(2, h // 12), max(2, w // 12)), dtype=np.float32)
    texture = np.asarray(Image.fromarray(texture, mode="F").resize((w, h), Image.BICUBIC))
    pixels += texture[..., None] * 12.0
    pixels += rng.standard_normal((h, w, 3), dtype=np.float32) * NOISE_SIGMA
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def _write_image(job: tuple[ImageSpec, int, str]) -> int:
    """Renders and atomically writes one image; returns its size in bytes."""
    spec, seed, path = job
    img = render_image(spec, seed)
    tmp = f"{path}.tmp{os.getpid()}"
    if spec.ext == "png":
        img.save(tmp, format="PNG")
    else:
        quality = PHOTO_JPEG_QUALITY if spec.width * spec.height > 4_000_000 else JPEG_QUALITY
        img.save(tmp, format="JPEG", quality=quality)
    os.replace(tmp, path)
    return os.path.getsize(path)


def generate_dataset(n: int, workdir: Path, seed: int = SEED, photos: bool = False) -> Path:
    """Creates (or reuses) n images plus a `split,image_uri,label` CSV.

    Args:
        n: Number of images.
        workdir: Cache directory; images are shared between dataset sizes.
        seed: Generator seed.
        photos: 12 MP phone-camera JPEGs instead of the 160-640 px set.

    Returns:
        Path of the CSV (absolute image paths).
    """
    kind = "photos_" if photos else ""
    image_dir = workdir / f"{kind}images_v{GENERATOR_VERSION}_s{seed}"
    image_dir.mkdir(parents=True, exist_ok=True)
    csv_path = workdir / f"{kind}dataset_v{GENERATOR_VERSION}_s{seed}_n{n}.csv"
    specs = [image_spec(i, seed, photos) for i in range(n)]
    paths = [str(image_dir / f"img_{s.index:06d}.{s.ext}") for s in specs]
    todo = [(s, seed, p) for s, p in zip(specs, paths) if not os.path.exists(p)]
    if todo:
        start = time.perf_counter()
        # Fork is safe here: TensorFlow is not imported yet at this point.
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(os.cpu_count() or 1) as pool:
            for _ in pool.imap_unordered(_write_image, todo, chunksize=16):
                pass
        print(f"generated {len(todo)} images in {time.perf_counter() - start:.1f}s",
              file=sys.stderr)
    if not csv_path.exists() or todo:
        frame = pd.DataFrame({
            "split": [s.split for s in specs],
            "image_uri": paths,
            "label": [s.label for s in specs],
        })
        frame.to_csv(csv_path, index=False)
    return csv_path


def folder_table(folder: Path, workdir: Path, seed: int = SEED) -> Path:
    """A `split,image_uri,label` CSV of every JPEG and PNG under `folder` (real photos).

    The photos are taken in path order; each one's split is drawn 80/10/10 from the seed and
    its position, and its label is the name of the folder holding it.

    Returns:
        Path of the CSV (absolute image paths), written in `workdir`.
    """
    folder = Path(folder).resolve()
    paths = sorted(p for p in folder.rglob("*") if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
    if not paths:
        raise SystemExit(f"no JPEG or PNG under {folder}")
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "split": np.array(SPLITS)[rng.choice(len(SPLITS), len(paths), p=SPLIT_PROBS)],
        "image_uri": [str(p) for p in paths],
        "label": [p.parent.name for p in paths],
    })
    workdir.mkdir(parents=True, exist_ok=True)
    csv_path = workdir / f"folder_{folder.name}_s{seed}_n{len(paths)}.csv"
    frame.to_csv(csv_path, index=False)
    return csv_path


def describe_dataset(df: pd.DataFrame) -> str:
    """Returns a one-paragraph summary (counts, formats, sizes) of a dataset."""
    sizes = np.array([os.path.getsize(p) for p in df["image_uri"]])
    is_png = df["image_uri"].str.lower().str.endswith(".png").to_numpy()
    splits = ", ".join(f"{k}={v}" for k, v in df["split"].value_counts().items())
    jpg_kb = sizes[~is_png].mean() / 1e3 if (~is_png).any() else 0.0
    png_kb = sizes[is_png].mean() / 1e3 if is_png.any() else 0.0
    return (f"dataset: {len(df)} images ({splits}); {int((~is_png).sum())} JPEG "
            f"avg {jpg_kb:.1f} KB, {int(is_png.sum())} PNG avg {png_kb:.1f} KB; "
            f"total {sizes.sum() / 1e6:.1f} MB, avg {sizes.mean() / 1e3:.1f} KB/image")


def listed(df: pd.DataFrame, times: int) -> pd.DataFrame:
    """The table with its rows listed `times` times over (same images, `times` x the rows)."""
    return df if times == 1 else pd.concat([df] * times, ignore_index=True)


def warm_page_cache(df: pd.DataFrame) -> int:
    """Reads every image of the table once (untimed); returns their total bytes."""
    total = 0
    for uri in dict.fromkeys(df["image_uri"]):
        with open(uri, "rb") as f:
            total += len(f.read())
    return total
