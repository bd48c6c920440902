"""Near-duplicates across splits: what hashing costs a conversion, how the search scales, and
what it finds on the 3,000-image set and on a set of crops of a few photographs.

Five parts (all by default; ``photos`` only with a folder):

- ``convert``: the 3,000 set (or, with ``--camera``, 12 MP phone-camera JPEGs; with
  ``--photos FOLDER``, every photo under the folder) converted with ``leakage="warn"`` (every
  image hashed) and with ``leakage="ignore"``, for ``check="decode"`` and ``check="header"``;
  interleaved rounds, wall seconds, medians and the per-round ratio.
- ``search``: ``near_duplicates.search.near_pairs`` over 100,000 and 1,000,000 images (random
  hashes of 63 bits as ``perceptual_hashes`` gives them, or 64 with ``--bits 64``; six per image as the
  writer keeps them: the whole image and five crops; splits 80/10/10), wall and CPU seconds,
  and the memory the search allocates at its peak beside the hashes (tracemalloc, a second
  untimed call).
- ``photos`` (with ``--photos FOLDER``): real photos (every JPEG and PNG under the folder),
  against each other (the pairs within the distance a conversion reports, and how close the
  others come), and every ``--every``-th one against its copies made each way (as
  ``quality`` makes them).
- ``quality``: the 3,000 distinct images hashed as a conversion hashes them: the pairs found
  among them (none should be), and for every 10th image, made into a copy each way (50%
  resize, JPEG q50, PNG, 5% crop at a corner, 2.5% crop all round, 5% crop on each side,
  +10% brightness), whether the copy is found and at what distance.
- ``crops``: a stand-in for issue 47's "photos3k" (3,000 crops of 11 photographs): 3,000
  crops of 11 rendered 12 MP photographs (15-45% of each side, anywhere, resized to a longer
  side of 214-640 px, JPEG q90 or 10% PNG, splits 80/10/10, label the photograph), overlapping
  crops of one photograph being true pairs, then 50 planted copies of 10 TRAIN crops (resized
  to 50%, JPEG q50, PNG, 5% crop on each side, +10% brightness) in VALIDATION and TEST. The
  default write with ``leakage="warn"`` and ``"ignore"`` in interleaved rounds, as
  ``convert``; then once, untimed: the pairs reported (and how long ``confirmed()`` took),
  each planted copy reported with its original or not, whether ``leakage="reject"`` cuts
  the rows ``pairs.later_rows`` gives of those pairs, and whether an append refuses each copy.

Usage:
    python benchmarks/near_duplicates.py                   # every part
    python benchmarks/near_duplicates.py --part search --sizes 100000 1000000
    python benchmarks/near_duplicates.py --part convert --cpu --repeats 5
    python benchmarks/near_duplicates.py --part convert --camera --images 200  # 12 MP photos
    python benchmarks/near_duplicates.py --part photos --photos FOLDER  # real photos
    python benchmarks/near_duplicates.py --part convert --photos FOLDER --repeats 5
    python benchmarks/near_duplicates.py --part crops            # the crops set (issue 47)
    python benchmarks/near_duplicates.py --part crops --fresh --repeats 5  # a process a write
    python benchmarks/near_duplicates.py --part crops --crops 300 --repeats 1  # a quick look
"""

import argparse
import io
import logging
import multiprocessing
import os
import shutil
import statistics
import sys
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageEnhance

import dataset

sys.path.insert(0, str(dataset.REPO_ROOT))

from tfrecorder_lite.near_duplicates import confirmation as confirm  # noqa: E402
from tfrecorder_lite.near_duplicates import perceptual_hash as phash  # noqa: E402
from tfrecorder_lite.near_duplicates import search as pair_search  # noqa: E402


def convert(args):
    csv = dataset.folder_table(args.photos, Path(args.workdir)) if args.photos else \
        dataset.generate_dataset(args.images, Path(args.workdir), photos=args.camera)
    df = pd.read_csv(csv)
    rows = [(check, leakage) for check in ("decode", "header") for leakage in ("ignore", "warn")]
    times = _timed_writes(df, Path(args.workdir) / "near_duplicates_out", rows, args)
    kind = f"{len(df)}-image" + (f" {args.photos}" if args.photos else
                                 " 12 MP camera-size" if args.camera else "")
    print(f"\n{dataset.describe_dataset(df)}")
    _print_times(df, times, f"Conversion of the {kind} set", args)


def _timed_writes(df, out, rows, args):
    """Each ``(check, leakage)`` of ``rows`` written to ``out`` (a fresh folder each time),
    ``args.repeats`` interleaved rounds (the start rotated each round), after the page cache is
    warmed and one untimed write: ``{(check, leakage): [seconds per round]}``, wall seconds of
    the default parallelism, or with ``args.cpu`` the CPU seconds of one process. With
    ``args.fresh`` each write runs in a fresh interpreter (see ``_FRESH_WRITE``)."""
    import tfrecorder_lite

    dataset.warm_page_cache(df)
    times = {row: [] for row in rows}
    clock = time.process_time if args.cpu else time.perf_counter
    options = {"n_jobs": 1} if args.cpu else {}
    tfrecorder_lite.to_tfrecord(df, out, progress=False, overwrite=True)  # warm the workers
    table = Path(str(out) + ".csv")
    if args.fresh:
        df.to_csv(table, index=False)
    for round_ in range(args.repeats):
        for check, leakage in rows[round_ % len(rows):] + rows[:round_ % len(rows)]:
            shutil.rmtree(out, ignore_errors=True)
            os.sync()
            if args.fresh:
                times[(check, leakage)].append(_fresh_write(table, out, check, leakage, args))
                continue
            start = clock()
            tfrecorder_lite.to_tfrecord(df, out, check=check, leakage=leakage, progress=False,
                                        **options)
            times[(check, leakage)].append(clock() - start)
    shutil.rmtree(out, ignore_errors=True)
    table.unlink(missing_ok=True)
    return times


# One write timed in a fresh interpreter: the library imported and its threads started by a
# write of the table's first 200 rows (untimed, to another folder), then the whole table.
_FRESH_WRITE = """
import os, shutil, sys, time
import pandas as pd
import tfrecorder_lite
table, out, check, leakage, cpu = sys.argv[1:]
df = pd.read_csv(table)
options = {"n_jobs": 1} if cpu == "1" else {}
tfrecorder_lite.to_tfrecord(df.head(200), out + ".warm", check=check, leakage=leakage,
                            progress=False, overwrite=True, **options)
shutil.rmtree(out + ".warm")
os.sync()
clock = time.process_time if cpu == "1" else time.perf_counter
start = clock()
tfrecorder_lite.to_tfrecord(df, out, check=check, leakage=leakage, progress=False, **options)
print(clock() - start)
"""


def _fresh_write(table, out, check, leakage, args):
    """The seconds of one write of ``table`` in a fresh interpreter (``_FRESH_WRITE``)."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _FRESH_WRITE, str(table), str(out), check,
                           leakage, "1" if args.cpu else "0"], capture_output=True, text=True,
                          cwd=str(dataset.REPO_ROOT), check=False)
    if done.returncode:
        raise RuntimeError(f"the fresh write failed: {done.stderr[-2000:]}")
    return float(done.stdout.split()[-1])


def _print_times(df, times, title, args):
    """The table of ``_timed_writes``' times, and for each check timed with and without
    hashing, the speed with hashing against without (medians, and per round)."""
    what = "CPU seconds of one process (n_jobs=1)" if args.cpu else "wall seconds"
    what += ", each write a fresh process" if args.fresh else ""
    print(f"\n## {title}, {args.repeats} rounds, {what} "
          f"(load average {os.getloadavg()[0]:.1f})\n")
    print("| check | leakage | median s | min-max s | images/s |")
    print("|---|---|---|---|---|")
    for (check, leakage), t in times.items():
        print(f"| {check} | {leakage} | {statistics.median(t):.2f} | {min(t):.2f}-{max(t):.2f} "
              f"| {len(df) / statistics.median(t):.0f} |")
    for check in dict.fromkeys(check for check, _ in times):
        if (check, "ignore") not in times or (check, "warn") not in times:
            continue
        plain, hashed = times[(check, "ignore")], times[(check, "warn")]
        per_round = statistics.median(a / b for a, b in zip(plain, hashed))
        print(f"\ncheck={check}: speed with hashing / without = "
              f"{statistics.median(plain) / statistics.median(hashed):.2f}x (medians), "
              f"{per_round:.2f}x (per round)")


def search(args):
    print("\n## near_pairs: images with 6 hashes each (whole + 5 crops), splits 80/10/10, "
          f"max distance {phash.MAX_DISTANCE}, random hashes of {args.bits} bits "
          f"(load average {os.getloadavg()[0]:.1f})\n")
    print("| images | hashes | bands: whole images' index; TRAIN crops' index | wall s | CPU s "
          "| peak MB beside the hashes | pairs |")
    print("|---|---|---|---|---|---|---|")
    for n in args.sizes:
        rng = np.random.default_rng(n)
        hashes = rng.integers(0, 2 ** args.bits - 1, (n, 1 + len(phash.CROPS)), dtype=np.uint64,
                              endpoint=True)
        groups = rng.choice(3, n, p=[0.8, 0.1, 0.1])
        asking = int((groups != 0).sum())
        crops = (n - asking) * len(phash.CROPS)  # indexed a part at a time
        bands = [_bands(n, asking * hashes.shape[1], args.bits),
                 _bands(min(crops, pair_search._INDEX_PART), asking, args.bits) +
                 (f" ({-(-crops // pair_search._INDEX_PART)} parts)"
                  if crops > pair_search._INDEX_PART else "")]
        wall, cpu = time.perf_counter(), time.process_time()
        first, _, _ = pair_search.near_pairs(hashes, groups)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        tracemalloc.start()  # again, for the memory the search holds at its peak (numpy's
        pair_search.near_pairs(hashes, groups)  # arrays are traced), untimed
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"| {n:,} | {hashes.size:,} | {'; '.join(bands)} | {wall:.2f} | {cpu:.2f} "
              f"| {peak / 2**20:.0f} | {len(first)} |")


def _bands(count, queries, bits):
    """The bands near_pairs takes for ``queries`` lookups among ``count`` hashes, as text."""
    layout = pair_search._bands(count, queries, bits, phash.MAX_DISTANCE)
    if layout is None:
        return "all pairs"
    return " + ".join(f"{w} bits within {r}" for w, r in zip(*layout))


def _encode(image, fmt="JPEG", **options):
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def _crop(image, left, top, right, bottom):
    w, h = image.size
    return image.crop((round(w * left), round(h * top), w - round(w * right),
                       h - round(h * bottom)))


COPIES = {
    "resized to 50%": lambda im: _encode(im.resize((im.width // 2, im.height // 2),
                                                   Image.LANCZOS), quality=90),
    "JPEG quality 50": lambda im: _encode(im, quality=50),
    "PNG": lambda im: _encode(im, "PNG"),
    "5% crop at a corner": lambda im: _encode(_crop(im, 0.05, 0.05, 0, 0), quality=90),
    "2.5% crop all round": lambda im: _encode(_crop(im, 0.025, 0.025, 0.025, 0.025),
                                              quality=90),
    "5% crop on each side": lambda im: _encode(_crop(im, 0.05, 0.05, 0.05, 0.05), quality=90),
    "+10% brightness": lambda im: _encode(ImageEnhance.Brightness(im).enhance(1.1),
                                          quality=90),
}


def _hashes(data):
    """The hashes a conversion with check="decode" takes of a file."""
    from tfrecorder_lite.images.normalize import ImageOptions, prepare_image

    return phash.grid_hashes(prepare_image(data, ImageOptions(phash=True)).luminance)


def quality(args):
    csv = dataset.generate_dataset(args.images, Path(args.workdir))
    df = pd.read_csv(csv)
    hashes = []
    for path in df.image_uri:
        with open(path, "rb") as f:
            hashes.append(_hashes(f.read()))
    hashes = np.array(hashes, dtype=np.uint64)
    groups = pd.factorize(df.split)[0]
    first, second, distance = pair_search.near_pairs(hashes, groups)
    everyone = pair_search.near_pairs(hashes, np.arange(len(df)))  # any two images, split or not
    print(f"\n## The {len(df)} distinct images: {len(first)} pair(s) across splits reported; "
          f"any two images: {len(everyone[0])} pair(s) within {phash.MAX_DISTANCE} bits"
          + (f" (distances {sorted(everyone[2].tolist())})" if len(everyone[0]) else ""))
    lowest = pair_search.near_pairs(hashes, np.arange(len(df)), 16)[2]
    print(f"closest two distinct images: {lowest.min() if len(lowest) else '> 16'} bits\n")
    print("| copy in another split | found | largest distance | distances |")
    print("|---|---|---|---|")
    sample = range(0, len(df), 10)
    for how, make in COPIES.items():
        found, distances = 0, []
        for i in sample:
            copy = _hashes(make(Image.open(df.image_uri[i]).convert("RGB")))
            pair = pair_search.near_pairs(np.array([hashes[i], copy], dtype=np.uint64), [0, 1], 63)
            distances.append(int(pair[2][0]))
            found += distances[-1] <= phash.MAX_DISTANCE
        counts = pd.Series(distances).value_counts().sort_index()
        print(f"| {how} | {found}/{len(sample)} | {max(distances)} | "
              f"{', '.join(f'{d}: {n}' for d, n in counts.items())} |")


def photos(args):
    """The photos under ``args.photos`` against each other, and every ``args.every``-th one
    against its copies made each way."""
    paths = sorted(p for p in Path(args.photos).rglob("*")
                   if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
    hashes = np.array([_hashes(p.read_bytes()) for p in paths], dtype=np.uint64)
    first, second, distance = pair_search.near_pairs(hashes, np.arange(len(paths)), 16)
    near = distance <= phash.MAX_DISTANCE
    same = sum(paths[a].read_bytes() == paths[b].read_bytes()
               for a, b in zip(first[near], second[near]))
    closest = np.full(len(paths), 17)  # each photo's distance to its closest other, up to 16
    np.minimum.at(closest, first, distance)
    np.minimum.at(closest, second, distance)
    print(f"\n## {len(paths)} photos under {args.photos}\n")
    print(f"- pairs within {phash.MAX_DISTANCE} bits (what a conversion would report across "
          f"splits): {int(near.sum())}, of which {same} are the same bytes; photos in them: "
          f"{len(set(first[near]) | set(second[near]))}")
    print("- photos whose closest other photo is d bits away: " + ", ".join(
        f"{d}: {int((closest == d).sum())}" for d in range(0, 17, 2)) +
        f", > 16: {int((closest > 16).sum())}")
    looks = {i: confirm.looks(paths[i].read_bytes())
             for i in set(first[near].tolist()) | set(second[near].tolist())}
    kept = [(a, b) for a, b in zip(first[near].tolist(), second[near].tolist())
            if confirm.alike(looks[a], looks[b])]
    print(f"- of them confirmed ({confirm.CONFIRMATION}; what a conversion reports): "
          f"{len(kept)}: " + "; ".join(f"{paths[a].relative_to(args.photos)} / "
                                       f"{paths[b].relative_to(args.photos)}"
                                       for a, b in kept[:10]))
    listed = sorted(zip(distance[near], first[near], second[near]))[:10]
    if listed:
        print("- the closest: " + "; ".join(
            f"{paths[a].relative_to(args.photos)} / {paths[b].relative_to(args.photos)} ({d})"
            for d, a, b in listed))
    sample = paths[::args.every]
    print(f"\n{len(sample)} photos (every {args.every}), each against its copies:\n")
    print("| copy | found | of them confirmed | largest distance | distances | missed |")
    print("|---|---|---|---|---|---|")
    for how, make in COPIES.items():
        distances, confirmed = [], 0
        for path, original in zip(sample, hashes[::args.every]):
            data = make(Image.open(path).convert("RGB"))
            pair = pair_search.near_pairs(np.array([original, _hashes(data)], dtype=np.uint64),
                                    [0, 1], 63)
            distances.append(int(pair[2][0]))
            confirmed += distances[-1] <= phash.MAX_DISTANCE and confirm.alike(
                confirm.looks(path.read_bytes()), confirm.looks(data))
        missed = [f"{p.name} ({d})" for p, d in zip(sample, distances) if d > phash.MAX_DISTANCE]
        counts = pd.Series(distances).value_counts().sort_index()
        print(f"| {how} | {len(sample) - len(missed)}/{len(sample)} | {confirmed} | "
              f"{max(distances)} | {', '.join(f'{d}: {n}' for d, n in counts.items())} | "
              f"{', '.join(missed[:5]) + (' ...' if len(missed) > 5 else '') or 'none'} |")


# ----------------------------------------------------------------- the crops set (issue 47)

CROPS_VERSION = 1
PHOTOGRAPHS = 11  # 12 MP photographs, rendered as dataset.py renders its camera-size set
CROP_COUNT = 3000
CROP_SIDE = (0.15, 0.45)  # a crop's share of each side of its photograph
CROP_LONG_SIDE = (214, 640)  # its longer side once resized (the shorter: 160 to 480)
PLANTED_ORIGINALS = 10
PLANTED = ("resized to 50%", "JPEG quality 50", "PNG", "5% crop on each side",
           "+10% brightness")  # the variants issue 47 lists, made as COPIES makes them


@dataclass(frozen=True)
class CropSpec:
    """Crop ``index`` of the crops set: its photograph, box (fractions of the photograph's
    sides), size once resized, format and split."""

    index: int
    photo: int
    left: float
    top: float
    side: float
    width: int
    height: int
    ext: str
    split: str


def crop_spec(index, seed):
    """Draws crop ``index`` from its own random stream (the set of n crops is a prefix of a
    larger one): a photograph, a box of 15-45% of each side (the photograph's shape) at a
    random place, a longer side of 214-640 px once resized, JPEG q90 or (10%) PNG, a split
    80/10/10."""
    rng = np.random.default_rng([seed, index, 47])
    photo = int(rng.integers(PHOTOGRAPHS))
    side = float(rng.uniform(*CROP_SIDE))
    left, top = (float(v) for v in rng.uniform(0, 1 - side, size=2))
    long_side = int(rng.integers(CROP_LONG_SIDE[0], CROP_LONG_SIDE[1] + 1))
    w, h = _photo_size(photo, seed)
    width, height = (long_side, round(long_side * h / w)) if w >= h else \
        (round(long_side * w / h), long_side)
    ext = "png" if rng.random() < dataset.PNG_FRACTION else "jpg"
    split = dataset.SPLITS[int(rng.choice(len(dataset.SPLITS), p=dataset.SPLIT_PROBS))]
    return CropSpec(index, photo, left, top, side, width, height, ext, split)


def _photo_size(photo, seed):
    spec = dataset.image_spec(photo, seed, photos=True)
    return spec.width, spec.height


def _write_crops(job):
    """Renders photograph ``photo`` and writes each of its crops (``[(spec, path)]``)."""
    photo, seed, todo = job
    image = dataset.render_image(dataset.image_spec(photo, seed, photos=True), seed)
    w, h = image.size
    for spec, path in todo:
        box = (round(spec.left * w), round(spec.top * h), round((spec.left + spec.side) * w),
               round((spec.top + spec.side) * h))
        crop = image.crop(box).resize((spec.width, spec.height), Image.LANCZOS)
        tmp = f"{path}.tmp{os.getpid()}"
        if spec.ext == "png":
            crop.save(tmp, format="PNG")
        else:
            crop.save(tmp, format="JPEG", quality=dataset.JPEG_QUALITY)
        os.replace(tmp, path)
    return len(todo)


def crops_set(workdir, count=CROP_COUNT, seed=dataset.SEED):
    """Creates (or reuses) the crops set: ``count`` crops of PHOTOGRAPHS photographs (label: the
    photograph), then PLANTED_ORIGINALS TRAIN crops copied each way of PLANTED, in VALIDATION
    and TEST in turn, after them in the table.

    Returns:
        ``(path of its split,image_uri,label CSV, the crops' CropSpecs, {copy's row:
        (original's row, how it was made)})``.
    """
    folder = workdir / f"crops_v{CROPS_VERSION}_s{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    specs = [crop_spec(i, seed) for i in range(count)]
    paths = [str(folder / f"crop_{s.index:05d}.{s.ext}") for s in specs]
    todo = {}
    for spec, path in zip(specs, paths):
        if not os.path.exists(path):
            todo.setdefault(spec.photo, []).append((spec, path))
    if todo:
        start = time.perf_counter()
        ctx = multiprocessing.get_context("fork")  # TensorFlow is not imported yet
        with ctx.Pool(os.cpu_count() or 1) as pool:
            made = sum(pool.imap_unordered(_write_crops, [(p, seed, jobs) for p, jobs in
                                                          sorted(todo.items())]))
        print(f"generated {made} crops in {time.perf_counter() - start:.1f}s", file=sys.stderr)
    rows = [(s.split, p, f"photo{s.photo:02d}") for s, p in zip(specs, paths)]
    train = [i for i, s in enumerate(specs) if s.split == "TRAIN"]
    originals = np.random.default_rng([seed, 47]).choice(train, PLANTED_ORIGINALS,
                                                         replace=False)
    copies = {}
    for k, original in enumerate(sorted(originals.tolist())):
        for n, how in enumerate(PLANTED):
            data = None
            path = folder / f"planted_{original:05d}_{n}.{'png' if how == 'PNG' else 'jpg'}"
            if not path.exists():
                data = COPIES[how](Image.open(paths[original]).convert("RGB"))
                path.write_bytes(data)
            copies[len(rows)] = (original, how)
            rows.append(("VALIDATION" if (k + n) % 2 == 0 else "TEST", str(path),
                         rows[original][2]))
    csv_path = workdir / f"crops_v{CROPS_VERSION}_s{seed}_n{count}.csv"
    pd.DataFrame(rows, columns=["split", "image_uri", "label"]).to_csv(csv_path, index=False)
    return csv_path, specs, copies


def _overlap(boxes, first, second):
    """The intersection over union of the boxes of crops ``first`` and ``second`` (arrays
    of rows; ``boxes``: an array of (photo, left, top, side) a crop), 0 for crops of two
    photographs."""
    (p1, l1, t1, s1), (p2, l2, t2, s2) = boxes[first].T, boxes[second].T
    wide = np.clip(np.minimum(l1 + s1, l2 + s2) - np.maximum(l1, l2), 0, None)
    high = np.clip(np.minimum(t1 + s1, t2 + s2) - np.maximum(t1, t2), 0, None)
    inter = wide * high
    return np.where(p1 == p2, inter / (s1 ** 2 + s2 ** 2 - inter), 0.0)


class _Records(logging.Handler):
    """Keeps the messages of the library's log records that start with ``prefix``."""

    def __init__(self, prefix):
        super().__init__(logging.INFO)
        self.prefix, self.messages = prefix, []

    def emit(self, record):
        if record.getMessage().startswith(self.prefix):
            self.messages.append(record.getMessage())


def _confirmation_timed(write):
    """``write()``, untimed but for the call of the driver's ``confirmed`` (wrapped here
    while it runs, when the driver has one): ``(its result, the seconds confirmed() took or
    None, the library's "near-duplicates: ..." INFO lines)``."""
    from tfrecorder_lite.write import driver

    library = logging.getLogger("tfrecorder_lite")
    handler, level = _Records("near-duplicates:"), library.level
    library.addHandler(handler)
    library.setLevel(logging.INFO)
    spent, unwrapped = [], getattr(driver, "confirmed", None)

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return unwrapped(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    if unwrapped is not None:
        driver.confirmed = timed
    try:
        result = write()
    finally:
        if unwrapped is not None:
            driver.confirmed = unwrapped
        library.removeHandler(handler)
        library.setLevel(level)
    return result, (sum(spent) if spent else None), handler.messages


def crops(args):
    """The crops set: the default write against ``leakage="ignore"`` (timed), then once,
    untimed: the pairs reported, each planted copy with its original or not, what
    ``leakage="reject"`` cuts and what an append of the copies refuses."""
    import tfrecorder_lite
    from tfrecorder_lite.near_duplicates.pairs import later_rows
    from tfrecorder_lite.output import layout

    workdir = Path(args.workdir)
    count = args.crops
    csv, specs, copies = crops_set(workdir, count)
    df = pd.read_csv(csv)
    times = _timed_writes(df, workdir / "near_duplicates_out", [("decode", "ignore"),
                                                                 ("decode", "warn")], args)
    print(f"\n{dataset.describe_dataset(df)}")
    print(f"crops set: {count} crops of {PHOTOGRAPHS} photographs of "
          f"{dataset.PHOTO_SIZE[0]}x{dataset.PHOTO_SIZE[1]} (label: the photograph), "
          f"{CROP_SIDE[0]:.0%}-"
          f"{CROP_SIDE[1]:.0%} of each side, longer side {CROP_LONG_SIDE[0]}-"
          f"{CROP_LONG_SIDE[1]} px; then {len(copies)} planted copies (rows {count}-"
          f"{count + len(copies) - 1}) of {PLANTED_ORIGINALS} TRAIN crops, in VALIDATION and "
          f"TEST: {', '.join(PLANTED)}")
    _print_times(df, times, f"Conversion of the crops set ({len(df)} rows, check=\"decode\")",
                 args)

    out = workdir / "near_duplicates_crops"
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    warned, confirming, lines = _confirmation_timed(
        lambda: tfrecorder_lite.to_tfrecord(df, out / "warn", progress=False))
    wall = time.perf_counter() - start
    pairs = pd.read_csv(out / "warn" / layout.NEAR_DUPLICATES) if \
        (out / "warn" / layout.NEAR_DUPLICATES).exists() else \
        pd.DataFrame(columns=["row", "other_row", "distance"])
    print(f"\n## What the default write reports (one more write, untimed: {wall:.2f} s, of "
          f"which confirmed() "
          f"{'(not found in the driver)' if confirming is None else f'{confirming:.3f} s'})\n")
    for line in lines:
        print(f"- library: {line}")
    found = list(zip(pairs.row.tolist(), pairs.other_row.tolist(), pairs.distance.tolist()))
    crop_pairs = [(a, b, d) for a, b, d in found if a < count and b < count]
    boxes = np.array([(s.photo, s.left, s.top, s.side) for s in specs])
    iou = _overlap(boxes, np.array([a for a, _, _ in crop_pairs], dtype=int),
                   np.array([b for _, b, _ in crop_pairs], dtype=int))
    print(f"- pairs across splits: {len(found)}; between crops: {len(crop_pairs)} "
          f"({int((iou > 0).sum())} of one photograph, {int((iou == 0).sum())} of two "
          f"photographs or not overlapping); involving a planted copy: "
          f"{len(found) - len(crop_pairs)}; distances: "
          + ", ".join(f"{d}: {n}" for d, n in
                      sorted(pd.Series(pairs.distance).value_counts().items())))
    if len(crop_pairs):
        print(f"- overlap (intersection over union) of the crops' boxes in the pairs between "
              f"crops: lowest {iou.min():.2f}, median {np.median(iou):.2f}")
    others = np.arange(count)
    splits = np.array([s.split for s in specs])
    close = {}
    for a in range(count):  # pairs of crops across splits at least as close as 5% a side
        b = others[a + 1:][splits[a + 1:] != splits[a]]
        over = _overlap(boxes, np.full(len(b), a), b)
        for threshold in (0.9, 0.81):
            close.setdefault(threshold, set()).update((int(j), a) for j in b[over >= threshold])
    reported = {(a, b) for a, b, _ in crop_pairs}
    searched = _searched_pairs(out / "warn" / layout.hashes_name(0))
    for threshold, want in close.items():
        print(f"- pairs of crops across splits whose boxes overlap by {threshold:.2f} or more "
              f"(intersection over union; a 5% crop on each side and its original: 0.81): "
              f"{len(want)}; found by the 64-bit search: {len(want & searched)}; reported: "
              f"{len(want & reported)}")
    dropped = sorted(searched - {(a, b) for a, b, _ in found})
    between = np.array([(a, b) for a, b in dropped if a < count], dtype=int).reshape(-1, 2)
    over = _overlap(boxes, between[:, 0], between[:, 1])
    print(f"- the 64-bit search's pairs (searched again here from the hashes file): "
          f"{len(searched)}; of them not confirmed: {len(dropped)}: {len(between)} between "
          f"crops ({int((over > 0).sum())} of one photograph overlapping"
          + (f" by {over[over > 0].min():.2f} to {over.max():.2f}, median "
             f"{np.median(over[over > 0]):.2f}" if (over > 0).any() else "")
          + f"; {int((over == 0).sum())} of two photographs or not overlapping), "
          f"{len(dropped) - len(between)} involving a planted copy")
    print("\n| planted copy (in VALIDATION or TEST) | reported with its original | missed |")
    print("|---|---|---|")
    with_original = {(a, b) for a, b, _ in found}
    missed = {}
    for how in PLANTED:
        mine = [row for row, (_, made) in copies.items() if made == how]
        missed[how] = [row for row in mine if (row, copies[row][0]) not in with_original]
        print(f"| {how} | {len(mine) - len(missed[how])}/{len(mine)} | "
              f"{', '.join(_missed(df, row, copies[row][0]) for row in missed[how]) or 'none'} |")

    rejected = tfrecorder_lite.to_tfrecord(df, out / "reject", progress=False,
                                           leakage="reject").rejected
    want = later_rows(found)  # the library's rule on the pairs the default write reported
    cut = set(rejected.index.tolist())
    naming = sum(rejected.reason[row].startswith(f"near-duplicate across splits: looks like "
                                                 f"row {original} ")
                 for row, (original, _) in copies.items() if row in cut)
    kept = df.drop(index=list(cut))
    left = kept.tfrecord.validate(check="decode")
    left = left[left.problem.str.startswith(phash.KIND)]
    print(f"\n## leakage=\"reject\": {len(cut)} row(s) rejected; the later row of each pair, "
          f"as the library's rule (pairs.later_rows: in order of the later row, a row is cut "
          f"unless its earlier partner was cut) gives it on the default write's pairs: "
          f"{len(want)} row(s); the same rows: {'yes' if cut == set(want) else 'NO'}"
          + (f" (cut, not expected: {sorted(cut - set(want))}; expected, not cut: "
             f"{sorted(set(want) - cut)})" if cut != set(want) else ""))
    print(f"- planted copies cut: {len(cut & set(copies))}/{len(copies)} ({naming} naming "
          f"their original); crops cut: {len(cut - set(copies))}; planted originals cut: "
          f"{len(cut & {o for o, _ in copies.values()})}")
    print(f"- validate() of the rows kept: {len(left)} near-duplicate(s) across splits left")

    shutil.rmtree(out / "append", ignore_errors=True)
    tfrecorder_lite.to_tfrecord(df.iloc[:count], out / "append", progress=False)
    appended = tfrecorder_lite.to_tfrecord(  # "skip": a copy of the very bytes of an earlier
        df.iloc[count:], out / "append", progress=False, append=True,  # image in another
        leakage="reject", on_error="skip")  # split (a PNG's PNG copy) is refused, not raised
    refused = set(appended.rejected.index.tolist())
    naming = sum(appended.rejected.reason[row].startswith(
        f"near-duplicate across splits: looks like row '{original}' (")
        for row, (original, _) in copies.items() if row in refused)
    why = appended.rejected.reason.str.split(":").str[0].value_counts()
    print(f"\n## An append of the {len(copies)} copies to the {count} crops' output "
          f"(leakage=\"reject\", on_error=\"skip\"): {len(refused & set(copies))}/"
          f"{len(copies)} refused ({naming} as a near-duplicate naming their original; "
          f"reasons: {', '.join(f'{n} {r}' for r, n in why.items())}); let in: "
          + (", ".join(f"row {row} ({copies[row][1]} of row {copies[row][0]})"
                       for row in sorted(set(copies) - refused)) or "none"))
    shutil.rmtree(out, ignore_errors=True)


def _searched_pairs(hashes_file):
    """The pairs across splits the 64-bit search finds among the images of a hashes file,
    ``{(later row, earlier row)}`` (before any confirmation)."""
    hashes = pd.read_csv(hashes_file, dtype=str, keep_default_na=False)
    first, second, _ = pair_search.near_pairs(
        phash.rows_from_hex((hashes.phash + hashes.crops).tolist()),
        pd.factorize(hashes.split)[0])
    rows = hashes.row.astype(int).to_numpy()
    return {(max(a, b), min(a, b)) for a, b in zip(rows[first].tolist(), rows[second].tolist())}


def _missed(df, row, original):
    """A missed copy, with its 64-bit distance to its original and their fine distance and
    mean chroma difference (what confirms a pair)."""
    copy_bytes, original_bytes = (Path(df.image_uri[r]).read_bytes() for r in (row, original))
    pair = pair_search.near_pairs(np.array([_hashes(original_bytes), _hashes(copy_bytes)],
                                           dtype=np.uint64), [0, 1], 63)
    found = int(pair[2][0]) <= phash.MAX_DISTANCE
    text = (f"row {row} of row {original} ({'found, not confirmed' if found else 'not found'}): "
            f"{int(pair[2][0])} bits")
    try:
        (fine, chroma), (other_fine, other_chroma) = (confirm.looks(original_bytes),
                                                      confirm.looks(copy_bytes))
        text += (f", fine {phash.fine_distance(fine, other_fine)} bits, chroma "
                 f"{max(abs(a - b) for a, b in zip(chroma, other_chroma)):.1f}")
    except (AttributeError, TypeError, ValueError) as error:  # the confirmation changed
        text += f" (fine distance not taken: {error})"
    return text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["convert", "search", "quality", "photos", "crops",
                                           "all"],
                        default="all")
    parser.add_argument("--photos", help="photos, convert: a folder of real photos (every "
                                         "JPEG and PNG under it)")
    parser.add_argument("--every", type=int, default=1,
                        help="photos: make copies of every n-th photo only")
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--crops", type=int, default=CROP_COUNT,
                        help="crops: the crops of the photographs (a prefix of the 3,000)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--bits", type=int, choices=[63, 64], default=63,
                        help="search: random hashes of 63 bits (the top bit 0, as "
                             "perceptual_hashes gives them) or of all 64")
    parser.add_argument("--workdir", default=dataset.DEFAULT_WORKDIR)
    parser.add_argument("--camera", action="store_true",
                        help="convert: the 12 MP phone-camera JPEG set instead of the 160-640 px "
                             "one (generated once, about a minute a hundred; use --images 200)")
    parser.add_argument("--cpu", action="store_true",
                        help="convert: time the CPU of one process (n_jobs=1) instead of the "
                             "wall time of the default parallelism (steadier on a busy machine)")
    parser.add_argument("--fresh", action="store_true",
                        help="convert, crops: each timed write in a fresh interpreter (the "
                             "library imported and warmed by a write of 200 rows first), as "
                             "issue 47 measures; else every write in this process")
    args = parser.parse_args(argv)
    if args.part == "photos" and not args.photos:
        parser.error("--part photos needs --photos FOLDER")
    for part, run in (("quality", quality), ("photos", photos), ("search", search),
                      ("crops", crops), ("convert", convert)):
        if args.part in (part, "all") and (part != "photos" or args.photos):
            run(args)


if __name__ == "__main__":
    main()
