"""Near-duplicates across splits: what hashing costs a conversion, how the search scales, and
what it finds on the 3,000-image set.

Four parts (all by default; ``photos`` only with a folder):

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
  resize, JPEG q50, PNG, 5% crop at a corner, 2.5% crop all round, +10% brightness), whether
  the copy is found and at what distance.

Usage:
    python benchmarks/near_duplicates.py                   # every part
    python benchmarks/near_duplicates.py --part search --sizes 100000 1000000
    python benchmarks/near_duplicates.py --part convert --cpu --repeats 5
    python benchmarks/near_duplicates.py --part convert --camera --images 200  # 12 MP photos
    python benchmarks/near_duplicates.py --part photos --photos FOLDER  # real photos
    python benchmarks/near_duplicates.py --part convert --photos FOLDER --repeats 5
"""

import argparse
import io
import os
import shutil
import statistics
import sys
import time
import tracemalloc
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
    import tfrecorder_lite

    csv = dataset.folder_table(args.photos, Path(args.workdir)) if args.photos else \
        dataset.generate_dataset(args.images, Path(args.workdir), photos=args.camera)
    df = pd.read_csv(csv)
    dataset.warm_page_cache(df)
    out = Path(args.workdir) / "near_duplicates_out"
    rows = [(check, leakage) for check in ("decode", "header") for leakage in ("ignore", "warn")]
    times = {row: [] for row in rows}
    clock = time.process_time if args.cpu else time.perf_counter
    options = {"n_jobs": 1} if args.cpu else {}
    tfrecorder_lite.to_tfrecord(df, out, progress=False, overwrite=True)  # warm the workers
    for round_ in range(args.repeats):
        for check, leakage in rows[round_ % len(rows):] + rows[:round_ % len(rows)]:
            shutil.rmtree(out, ignore_errors=True)
            os.sync()
            start = clock()
            tfrecorder_lite.to_tfrecord(df, out, check=check, leakage=leakage, progress=False,
                                        **options)
            times[(check, leakage)].append(clock() - start)
    shutil.rmtree(out, ignore_errors=True)
    what = "CPU seconds of one process (n_jobs=1)" if args.cpu else "wall seconds"
    kind = f"{len(df)}-image" + (f" {args.photos}" if args.photos else
                                 " 12 MP camera-size" if args.camera else "")
    print(f"\n{dataset.describe_dataset(df)}")
    print(f"\n## Conversion of the {kind} set, {args.repeats} rounds, {what} "
          f"(load average {os.getloadavg()[0]:.1f})\n")
    print("| check | leakage | median s | min-max s | images/s |")
    print("|---|---|---|---|---|")
    for check, leakage in rows:
        t = times[(check, leakage)]
        print(f"| {check} | {leakage} | {statistics.median(t):.2f} | {min(t):.2f}-{max(t):.2f} "
              f"| {len(df) / statistics.median(t):.0f} |")
    for check in ("decode", "header"):
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["convert", "search", "quality", "photos", "all"],
                        default="all")
    parser.add_argument("--photos", help="photos, convert: a folder of real photos (every "
                                         "JPEG and PNG under it)")
    parser.add_argument("--every", type=int, default=1,
                        help="photos: make copies of every n-th photo only")
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
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
    args = parser.parse_args(argv)
    if args.part == "photos" and not args.photos:
        parser.error("--part photos needs --photos FOLDER")
    for part, run in (("quality", quality), ("photos", photos), ("search", search),
                      ("convert", convert)):
        if args.part in (part, "all") and (part != "photos" or args.photos):
            run(args)


if __name__ == "__main__":
    main()
