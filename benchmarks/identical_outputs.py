"""Check that this tree writes every output byte for byte as a base commit does.

Generates a small set of images once, then runs the same conversions twice, in two fresh
interpreters: once with the package of the base commit (``git archive``), once with this tree's.
Shards, index files, ``labels*.txt``, tfds files and ``rejected.csv`` must be identical, and every
field of the base's ``metadata.json`` must be kept with its value (fields may be added). Files
the base did not write are allowed only when named in ``ADDED_FILES`` (new files an issue asks
for, beside the ones kept).

Usage:
    python benchmarks/identical_outputs.py                 # against HEAD
    python benchmarks/identical_outputs.py --base 7add78e  # against any commit

Exits 1 and lists the differences when there are any.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# Files a newer tree may write beside the base's (each named with the issue that asks for it):
# issue 33 keeps each written image's sha256 and perceptual hash beside the shards (one file
# per generation), and the near-duplicate pairs it finds across splits.
ADDED_FILES = re.compile(r"^(hashes-g\d{4}\.csv|near-duplicates\.csv)\Z")


# ----------------------------------------------------------------------------- the inputs

def make_images(folder):
    """Seeded photo-like JPEGs and PNGs of a few sizes, one truncated JPEG; returns their paths."""
    import numpy as np
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(40):
        rng = np.random.default_rng(i)
        height, width = 24 + (i % 5) * 6, 32 + (i % 7) * 4
        y, x = np.mgrid[0:height, 0:width]
        pixels = np.stack([x * 255 // width, y * 255 // height, (x + y) % 256], axis=-1)
        pixels = np.clip(pixels + rng.integers(-20, 21, pixels.shape), 0, 255).astype(np.uint8)
        image = Image.fromarray(pixels, "RGB")
        if i % 4 == 3:
            image = image.convert("L")
        path = folder / (f"img{i:02d}.png" if i % 3 == 0 else f"img{i:02d}.jpg")
        image.save(path)
        paths.append(str(path))
    truncated = folder / "truncated.jpg"
    truncated.write_bytes(Path(paths[1]).read_bytes()[:200])
    return paths, str(truncated)


def _splits(n):
    return ["TRAIN" if i % 5 < 3 else "VALIDATION" if i % 5 == 3 else "TEST" for i in range(n)]


def scenarios(images):
    """``{name: (call, kwargs)}``: the conversions compared; ``call`` names the entry point."""
    import pandas as pd

    paths, truncated = images
    n = len(paths)
    labels = [["cat", "dog", "bird"][i % 3] for i in range(n)]
    one_label = pd.DataFrame({"split": _splits(n), "image_uri": paths, "label": labels})
    multi = one_label.assign(label=[labels[i:i + 1 + i % 2] + (["cat"] if i % 4 == 0 else [])
                                    for i in range(n)])
    levels = one_label.assign(coarse=["animal" if i % 3 else "plant" for i in range(n)],
                              fine=labels).drop(columns="label")
    imageless = pd.DataFrame({
        "split": _splits(12), "label": [i % 4 for i in range(12)],
        "count": list(range(12)), "score": [i / 3 for i in range(12)],
        "name": [f"item {i}" for i in range(12)],
        "flag": [bool(i % 2) for i in range(12)],
        "tags": [["a", "b"][: i % 3] for i in range(12)],
        "boxes": [[[0.1 * j, 0.2, 0.3, 0.4] for j in range(i % 3)] for i in range(12)],
        "vector": [[i, i + 1, i + 2] for i in range(12)],
    })
    unassigned = one_label.assign(split=["UNASSIGNED" if i % 2 else s
                                         for i, s in enumerate(_splits(n))])
    bad = one_label.copy()
    bad.loc[2, "image_uri"] = truncated
    bad.loc[5, "image_uri"] = str(Path(paths[0]).parent / "missing.jpg")
    bad.loc[7, "split"] = "HOLDOUT"
    bad.loc[9, "label"] = ""
    return {
        "several_shards_decode": ("to_tfrecord", dict(df=one_label, num_shards=3)),
        "several_shards_header": ("to_tfrecord", dict(df=one_label, num_shards=3,
                                                      check="header")),
        "resized_gzip": ("to_tfrecord", dict(df=one_label, image_size=(16, 20),
                                             compression="GZIP", num_shards=2)),
        "resized_png_zlib_sha256": ("to_tfrecord", dict(df=one_label, image_size=12,
                                                        image_format="png", compression="ZLIB",
                                                        sha256=True)),
        "multi_label": ("to_tfrecord", dict(df=multi, num_shards=2)),
        "label_sep": ("to_tfrecord", dict(df=one_label.assign(
            label=[f"{a}|{b}" for a, b in zip(labels, labels[1:] + labels[:1])]),
            label_sep="|")),
        "label_levels": ("to_tfrecord", dict(df=levels, label_col=["coarse", "fine"])),
        "imageless_typed_lists": ("to_tfrecord", dict(df=imageless, image_col=None,
                                                      features={"boxes": "float32[None,4]"})),
        "unassigned_label_map": ("to_tfrecord", dict(df=unassigned, unassigned="assign",
                                                     label_map=["bird", "cat", "dog", "fish"])),
        "integer_labels_no_shuffle": ("to_tfrecord", dict(df=one_label.assign(
            label=[i % 4 for i in range(n)]), shuffle=False, seed=3)),
        "skip_rejected": ("to_tfrecord", dict(df=bad, on_error="skip", num_shards=2)),
        "headerless_csv": ("convert_csv", dict(df=one_label)),
    }


def write_all(images_dir, out_dir):
    """Run every scenario with whatever ``tfrecorder_lite`` is importable; outputs in out_dir."""
    import tfrecorder_lite

    images = (sorted(str(p) for p in Path(images_dir).glob("img*")),
              str(Path(images_dir) / "truncated.jpg"))
    for name, (call, options) in scenarios(images).items():
        options = dict(options, progress=False)
        df = options.pop("df")
        target = os.path.join(out_dir, name)
        if call == "convert_csv":
            csv = os.path.join(out_dir, f"{name}.csv")
            df.to_csv(csv, header=False, index=False)
            tfrecorder_lite.convert(csv, target, **options)
        else:
            tfrecorder_lite.to_tfrecord(df, target, **options)
    print(f"wrote {len(scenarios(images))} outputs with {tfrecorder_lite.__file__}")


# ----------------------------------------------------------------------------- the comparison

def _kept(base, new, where):
    """Where ``new`` (a JSON value) loses or changes something of ``base``; fields may be added."""
    if isinstance(base, dict) and isinstance(new, dict):
        problems = []
        for key, value in base.items():
            if key not in new:
                problems.append(f"{where}.{key}: missing")
            else:
                problems += _kept(value, new[key], f"{where}.{key}")
        return problems
    return [] if base == new and type(base) is type(new) else \
        [f"{where}: {json.dumps(base)[:80]} became {json.dumps(new)[:80]}"]


def compare(base_dir, new_dir):
    """Differences between two folders of outputs (empty: identical)."""
    problems = []
    for name in sorted(os.listdir(base_dir)):
        a, b = Path(base_dir, name), Path(new_dir, name)
        if a.is_file():
            continue
        files_a = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
        files_b = sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
        files_b = [f for f in files_b if f in files_a or not ADDED_FILES.match(f)]
        if files_a != files_b:
            problems.append(f"{name}: files {files_a} became {files_b}")
        for rel in set(files_a) & set(files_b):
            if rel == "metadata.json":
                problems += [f"{name}/{p}" for p in _kept(
                    json.loads((a / rel).read_text()), json.loads((b / rel).read_text()),
                    "metadata.json")]
            elif (a / rel).read_bytes() != (b / rel).read_bytes():
                problems.append(f"{name}/{rel}: bytes differ")
    return problems


def _run_with(package_root, images_dir, out_dir):
    env = dict(os.environ, PYTHONPATH=str(package_root), TF_CPP_MIN_LOG_LEVEL="2")
    subprocess.run([sys.executable, __file__, "--write", str(out_dir), "--images",
                    str(images_dir)], check=True, env=env, cwd=package_root)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD", help="the commit to compare with")
    parser.add_argument("--write", help=argparse.SUPPRESS)
    parser.add_argument("--images", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        write_all(args.images, args.write)
        return 0
    with tempfile.TemporaryDirectory(prefix="tfrl-identical-") as work:
        work = Path(work)
        base_tree = work / "base"
        base_tree.mkdir()
        archive = subprocess.run(["git", "archive", args.base, "tfrecorder_lite"],
                                 cwd=REPO_ROOT, check=True, capture_output=True).stdout
        archive_path = work / "base.tar"
        archive_path.write_bytes(archive)
        with tarfile.open(archive_path) as tar:
            tar.extractall(base_tree, filter="data")
        make_images(work / "images")
        _run_with(base_tree, work / "images", work / "out-base")
        _run_with(REPO_ROOT, work / "images", work / "out-new")
        problems = compare(work / "out-base", work / "out-new")
    count = len(scenarios(([str(i) for i in range(40)], "t")))
    if problems:
        print(f"{len(problems)} difference(s) against {args.base}:")
        print("\n".join(f"  {p}" for p in problems))
        return 1
    print(f"identical: {count} outputs, every file byte for byte, metadata.json fields kept "
          f"(against {args.base})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
