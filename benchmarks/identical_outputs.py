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
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# Files a newer tree may write beside the base's (each named with the issue that asks for it):
# issue 33 keeps each written image's content hash and perceptual hash beside the shards (a file
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
        **detection_scenarios(paths),
        **({"direct_runner": ("to_tfrecord", dict(df=one_label, num_shards=2,
                                                  runner="DirectRunner"))}
           if _has_beam() else {}),
    }


def _has_beam():
    import importlib.util
    return importlib.util.find_spec("apache_beam") is not None


def detection_scenarios(paths):
    """Detection conversions from the files they come in: AutoML detection CSVs (two and four
    vertices), a COCO instances file and a Pascal VOC folder (written by ``write_all``)."""
    n = 12
    rows2, rows4 = [], []
    for i, path in enumerate(paths[:n]):
        split = _splits(n)[i]
        if i % 5 == 4:  # an image without objects
            rows2.append(f"{split},{path},,,,,,,,,")
            rows4.append(f"{split},{path},,,,,,,,,")
            continue
        for j in range(1 + i % 3):
            x0, y0, x1, y1 = 0.1 + 0.05 * j, 0.2, 0.5 + 0.1 * j, 0.6 + 0.05 * (i % 4)
            label = ["car", "bike", "person"][(i + j) % 3]
            rows2.append(f"{split},{path},{label},{x0:.3f},{y0:.3f},,,{x1:.3f},{y1:.3f},,")
            rows4.append(f"{split},{path},{label},{x0:.3f},{y0:.3f},{x1:.3f},{y0:.3f},"
                         f"{x1:.3f},{y1:.3f},{x0:.3f},{y1:.3f}")
    return {
        "detection_automl_two_vertices": ("convert_text", dict(name="boxes2.csv",
                                                                text="\n".join(rows2) + "\n")),
        "detection_automl_four_vertices": ("convert_text", dict(name="boxes4.csv",
                                                                 text="\n".join(rows4) + "\n",
                                                                 check="header")),
        "detection_coco": ("convert_coco", dict(paths=paths[:n], num_shards=2)),
        "detection_voc": ("convert_voc", dict(paths=paths[:n])),
        **vertex_yolo_scenarios(paths[:n]),
    }


def vertex_yolo_scenarios(paths):
    """Vertex AI JSON Lines (boxes) and CSV (labels, no ML_USE field), and a YOLO folder (boxes;
    written by ``write_all``)."""
    ml_use = {"TRAIN": "training", "VALIDATION": "validation", "TEST": "test"}
    lines, rows = [], []
    for i, path in enumerate(paths):
        split = _splits(len(paths))[i]
        boxes = [{"displayName": ["car", "bike", "person"][(i + j) % 3], "xMin": 0.1 + 0.05 * j,
                  "yMin": "0.2", "xMax": 0.5 + 0.1 * j, "yMax": 0.6 + 0.05 * (i % 4)}
                 for j in range(i % 3)]
        lines.append(json.dumps({"imageGcsUri": path, "boundingBoxAnnotations": boxes,
                                 "dataItemResourceLabels": {
                                     "aiplatform.googleapis.com/ml_use": ml_use[split]}}))
        rows.append(f"{path},{['cat', 'dog'][i % 2]}")
    return {
        "detection_vertex_jsonl": ("convert_text", dict(
            name="vertex.jsonl", text="\n".join(lines) + "\n", allow_outside_paths=True)),
        "classification_vertex_csv": ("convert_text", dict(
            name="vertex.csv", text="\n".join(rows) + "\n", allow_outside_paths=True,
            unassigned="assign", seed=3)),
        "detection_yolo": ("convert_yolo", dict(paths=paths)),
    }


def _write_yolo(root, paths):
    for i, path in enumerate(paths):
        split = ["train", "train", "val"][i % 3]
        (root / "images" / split).mkdir(parents=True, exist_ok=True)
        (root / "labels" / split).mkdir(parents=True, exist_ok=True)
        (root / "images" / split / Path(path).name).write_bytes(Path(path).read_bytes())
        if i % 4 == 3:
            continue  # no label file: no objects
        (root / "labels" / split / f"{Path(path).stem}.txt").write_text("".join(
            f"{(i + j) % 3} {0.3 + 0.05 * j} 0.4 {0.2 + 0.1 * j} 0.3\n" for j in range(i % 3)))
    (root / "data.yaml").write_text("train: images/train\nval: images/val\n"
                                    "names: [car, bike, person]\n")


def _coco_document(paths):
    from PIL import Image

    images, annotations = [], []
    for i, path in enumerate(paths):
        width, height = Image.open(path).size
        images.append({"id": 100 + i, "file_name": Path(path).name, "width": width,
                       "height": height})
        for j in range(i % 3):
            annotations.append({"id": len(annotations) + 1, "image_id": 100 + i,
                                "category_id": [3, 7, 9][(i + j) % 3],
                                "bbox": [1.0 + j, 2.0, 10.0 + 2 * j, 8.0 + i % 4],
                                "area": 80.0, "iscrowd": int(i == 5 and j == 0)})
    categories = [{"id": k, "name": name, "supercategory": "thing"}
                  for k, name in ((3, "car"), (7, "bike"), (9, "person"))]
    return {"images": images, "annotations": annotations, "categories": categories}


def _write_voc(root, paths):
    from PIL import Image

    (root / "Annotations").mkdir(parents=True)
    (root / "JPEGImages").mkdir()
    (root / "ImageSets" / "Main").mkdir(parents=True)
    ids = {"train": [], "val": [], "test": []}
    for i, path in enumerate(paths):
        image_id = Path(path).stem
        (root / "JPEGImages" / Path(path).name).write_bytes(Path(path).read_bytes())
        width, height = Image.open(path).size
        objects = "".join(
            f"<object><name>{['car', 'bike', 'person'][(i + j) % 3]}</name><pose>Left</pose>"
            f"<truncated>{j % 2}</truncated><difficult>{int(i == 3)}</difficult><bndbox>"
            f"<xmin>{2 + j}</xmin><ymin>3</ymin><xmax>{12 + j}</xmax><ymax>{15 + i % 4}</ymax>"
            "</bndbox></object>" for j in range(1 + i % 2))
        (root / "Annotations" / f"{image_id}.xml").write_text(
            f"<annotation><filename>{Path(path).name}</filename><size><width>{width}</width>"
            f"<height>{height}</height><depth>3</depth></size>{objects}</annotation>")
        ids[["train", "train", "val", "test"][i % 4]].append(image_id)
    for name, members in ids.items():
        (root / "ImageSets" / "Main" / f"{name}.txt").write_text("\n".join(members) + "\n")


def write_all(images_dir, out_dir, base=False):
    """Run every scenario with whatever ``tfrecorder_lite`` is importable; outputs in out_dir.
    A ``base`` tree leaves out the scenarios it cannot run (an option or a reader it does not
    have yet: whatever it raises), listed in ``skipped.txt``; this tree must run them all."""
    import tfrecorder_lite

    images = (sorted(str(p) for p in Path(images_dir).glob("img*")),
              str(Path(images_dir) / "truncated.jpg"))
    skipped = []
    for name, scenario in scenarios(images).items():
        try:
            _write_one(tfrecorder_lite, images_dir, out_dir, name, *scenario)
        except Exception as exc:
            if not base:
                raise
            skipped.append(f"{name}: {type(exc).__name__}: {exc}")
            shutil.rmtree(os.path.join(out_dir, name), ignore_errors=True)
    Path(out_dir, "skipped.txt").write_text("".join(f"{line}\n" for line in skipped))
    print(f"wrote {len(scenarios(images)) - len(skipped)} outputs with {tfrecorder_lite.__file__}")


def _write_one(tfrecorder_lite, images_dir, out_dir, name, call, options):
    """Run one scenario into ``out_dir/name``."""
    options = dict(options, progress=False)
    df = options.pop("df", None)
    target = os.path.join(out_dir, name)
    if call == "convert_csv":
        csv = os.path.join(out_dir, f"{name}.csv")
        df.to_csv(csv, header=False, index=False)
        tfrecorder_lite.convert(csv, target, **options)
    elif call == "convert_text":
        source = Path(out_dir, options.pop("name"))
        source.write_text(options.pop("text"))
        tfrecorder_lite.convert(str(source), target, **options)
    elif call == "convert_coco":
        source = Path(out_dir, f"{name}.json")
        document = _coco_document(options.pop("paths"))
        source.write_text(json.dumps(document))
        tfrecorder_lite.convert(str(source), target, split="TRAIN", image_dir=images_dir,
                                **options)
    elif call in ("convert_yolo", "convert_voc"):  # a folder of files, one for both trees
        folder = call[len("convert_"):]
        root = Path(images_dir).parent / folder / name
        paths = options.pop("paths")
        if not root.exists():
            {"yolo": _write_yolo, "voc": _write_voc}[folder](root, paths)
        tfrecorder_lite.convert(str(root), target, **options)
    else:
        tfrecorder_lite.to_tfrecord(df, target, **options)


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


def _run_with(package_root, images_dir, out_dir, python=sys.executable, base=False):
    env = dict(os.environ, PYTHONPATH=str(package_root), TF_CPP_MIN_LOG_LEVEL="2")
    subprocess.run([python, __file__, "--write", str(out_dir), "--images",
                    str(images_dir)] + (["--base-tree"] if base else []), check=True, env=env,
                   cwd=package_root)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD", help="the commit to compare with")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter that runs both trees (e.g. a virtual environment "
                        "with apache-beam, which adds a runner='DirectRunner' case)")
    parser.add_argument("--write", help=argparse.SUPPRESS)
    parser.add_argument("--images", help=argparse.SUPPRESS)
    parser.add_argument("--base-tree", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        write_all(args.images, args.write, args.base_tree)
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
        _run_with(base_tree, work / "images", work / "out-base", args.python, base=True)
        skipped = (work / "out-base" / "skipped.txt").read_text().splitlines()
        _run_with(REPO_ROOT, work / "images", work / "out-new", args.python)
        problems = compare(work / "out-base", work / "out-new")
        count = len(os.listdir(work / "out-base")) - sum(
            p.is_file() for p in (work / "out-base").iterdir())
    if skipped:
        print(f"not compared: {len(skipped)} scenario(s) the base cannot run:")
        print("\n".join(f"  {line}" for line in skipped))
    if problems:
        print(f"{len(problems)} difference(s) against {args.base}:")
        print("\n".join(f"  {p}" for p in problems))
        return 1
    print(f"identical: {count} outputs, every file byte for byte, metadata.json fields kept "
          f"(against {args.base})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
