"""The scale curve: time per row and peak memory from 10,000 to 1,000,000 rows.

Small distinct images (32x32 JPEGs, smooth colour fields with noise: about 1 KB each, one
4 KiB disk block) are generated once, seeded, in folders of 1,000, and cached in ``--workdir``
(a million take about 4 GB and a minute or two on 2 cores); the table of n rows is the first n
of them, with a seeded split (80/10/10) and one of 10 labels.

``--images copies`` runs the paths on the worst case of near-duplicate search instead: n copies
of one picture (a 32x32 JPEG made as the distinct ones are), each file the picture's bytes with
a comment segment (COM) naming its index after the JFIF header, so that every file decodes to
the same pixels while its bytes (and its content hash) differ: placeholders, blank frames, one
product photo reused. Every VALIDATION and TEST row has copies in TRAIN. They are cached in
``--workdir``/copies (written as bytes, not encoded: far quicker to make), in the
same folders of 1,000 with the same splits and labels as the distinct table; generating them
checks that Pillow decodes the first and last of each folder to the picture's pixels and that
no two files made have one XXH3-128 digest. ``--images distinct,copies`` runs both at each size
and compares them (time and driver peak of copies over distinct pictures, per path and size).

At each size, every path runs in a fresh interpreter that imports the library, reads the CSV
with pandas, and then times:

- ``header``: ``df.tfrecord.to_tfrecord(out, check="header")``;
- ``decode``: ``df.tfrecord.to_tfrecord(out)`` (the default check; its output is kept for
  the reads below);
- ``validate``: ``df.tfrecord.validate()`` (header check, duplicate bytes);
- ``load``: one epoch of ``load(out, "TRAIN", batch_size=256, image_size=(32, 32))``
  (per TRAIN row);
- ``load_global``: the same with ``shuffle="global"``, a seed and ``epochs=1``, where the
  library has it (a tree whose ``load()`` has no ``epochs`` reports that it has not);
- ``append_all``: the whole table again with 1,000 new images (the table the driver reads),
  appended to a copy of the decode path's output (copied untimed): the next day when the
  week's whole table is appended (its us/row are per row of that table);
- ``append``: the 1,000 new images (a folder beyond every table's) alone, appended to the
  decode path's output as a generation (``append=True``): what the next day costs as the
  output grows (its us/row are per appended row; it runs last, after the reads). With
  ``--images copies`` the new images are 1,000 more copies.

A write's check gives its records and, when there are any, its rejected rows, its problems
(near-duplicates across splits) and the rows they name, and the rows neither written nor
rejected (there should be none).

Each reports its seconds, the driver's resident memory after reading the table (VmRSS) and
its high-water mark at the end (VmHWM of /proc/self/status, as the tests take it), and the
largest VmHWM of its worker processes (every descendant of the driver, read from /proc every
0.2 s and at the end). Before each run the disk is synced (``os.sync()``) and the machine's
load average is taken. A model of the driver's peak, ``a + b * rows`` through the two largest
sizes, extrapolates it to 10,000,000 rows.

``--profile PATH --sizes 100000`` runs one path under tracemalloc instead and prints what is
alive when the traced memory peaks (the allocation sites, grouped by line), to find what
each row keeps.

Usage:
    python benchmarks/scale.py                                   # 10k, 100k, 1M: every path
    python benchmarks/scale.py --sizes 10000,100000 --paths header,validate
    python benchmarks/scale.py --profile header --sizes 100000
    python benchmarks/scale.py --sizes 100000,1000000 --paths header,decode,validate \
        --images copies                                          # one picture, a million files
    python benchmarks/scale.py --sizes 10000,100000 --paths decode --images distinct,copies
    python benchmarks/scale.py --profile decode --sizes 100000 --images copies
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WORKDIR = Path("/tmp/tfrl_scale")
SEED = 35
PER_FOLDER = 1000
SIDE = 32
CLASSES = ("airplane", "bicycle", "bird", "boat", "cat", "dog", "flower", "horse", "tree",
           "truck")
PATHS = ("header", "decode", "load", "load_global", "validate", "append_all", "append")
APPENDED = 1000  # the append path's new images: folder MAX_ROWS // PER_FOLDER
MAX_ROWS = 1_000_000
IMAGE_SETS = ("distinct", "copies")
COPIES_SEED = 10_000_000  # the copies set's picture: a seed no distinct folder has


# ----------------------------------------------------------------------------- the images

def _root(workdir, images):
    """The folder of an image set: its images/ and its tables."""
    return Path(workdir) / "copies" if images == "copies" else Path(workdir)


def _folder(root, number):
    return root / "images" / f"{number:04d}"


def _render(rng, count):
    """``count`` pictures of SIDE x SIDE pixels: smooth colour fields with noise."""
    from PIL import Image

    fields = rng.uniform(0, 255, (count, 4, 4, 3)).astype(np.uint8)
    noise = rng.normal(0, 12, (count, SIDE, SIDE, 3))
    for i in range(count):
        smooth = np.asarray(Image.fromarray(fields[i]).resize((SIDE, SIDE), Image.BICUBIC))
        yield np.clip(smooth + noise[i], 0, 255).astype(np.uint8)


def the_picture():
    """The copies set's one picture: a JPEG (q90) of a picture like the distinct set's."""
    from PIL import Image

    pixels = next(_render(np.random.default_rng([SEED, COPIES_SEED]), 1))
    encoded = io.BytesIO()
    Image.fromarray(pixels).save(encoded, format="JPEG", quality=90)
    return encoded.getvalue()


def copy_bytes(picture, index):
    """``picture`` (a JPEG) with a comment segment (COM) naming ``index`` after its JFIF
    header: the same pixels, other bytes."""
    at = 2  # after the start of image, and the JFIF segment (APP0) if there is one
    if picture[at:at + 2] == b"\xff\xe0":
        at += 2 + struct.unpack(">H", picture[at + 2:at + 4])[0]
    text = f"tfrecorder_lite scale copy {index:07d}".encode()
    return picture[:at] + b"\xff\xfe" + struct.pack(">H", len(text) + 2) + text + picture[at:]


def _pixels(data):
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"))


def _write_folder(job):
    """Writes the 1,000 images of folder ``number`` (a pool task): renders distinct pictures,
    or writes copies of ``picture`` (bytes given: the copies set); returns their bytes and
    the XXH3-128 digests of their files (the library's content hash), 16 bytes each."""
    from PIL import Image
    import xxhash

    root, number, picture = job
    folder = _folder(Path(root), number)
    folder.mkdir(parents=True, exist_ok=True)
    first = number * PER_FOLDER
    if picture is None:
        datas = []
        for pixels in _render(np.random.default_rng([SEED, number]), PER_FOLDER):
            encoded = io.BytesIO()
            Image.fromarray(pixels).save(encoded, format="JPEG", quality=90)
            datas.append(encoded.getvalue())
    else:
        datas = [copy_bytes(picture, first + i) for i in range(PER_FOLDER)]
        reference = _pixels(picture)
        for i in (0, PER_FOLDER - 1):  # Pillow reads the copies' pixels as the picture's
            if not np.array_equal(_pixels(datas[i]), reference):
                raise AssertionError(f"copy {first + i} decodes to other pixels")
    for i, data in enumerate(datas):
        with open(folder / f"{first + i:07d}.jpg", "wb") as f:
            f.write(data)
    (folder / ".done").write_text(str(sum(map(len, datas))))
    return sum(map(len, datas)), b"".join(xxhash.xxh3_128_digest(d) for d in datas)


def _make_folders(root, numbers, images):
    """Makes the folders ``numbers`` of an image set not made yet; for copies, checks that
    every file made has other bytes."""
    todo = [n for n in numbers if not (_folder(root, n) / ".done").exists()]
    if not todo:
        return
    start = time.perf_counter()
    picture = the_picture() if images == "copies" else None
    with multiprocessing.get_context("fork").Pool(os.cpu_count() or 1) as pool:
        digests = [d for _, d in pool.imap_unordered(
            _write_folder, [(str(root), n, picture) for n in todo])]
    made = len(todo) * PER_FOLDER
    if images == "copies":
        distinct = len(np.unique(np.frombuffer(b"".join(digests), dtype="V16")))
        if distinct != made:
            raise AssertionError(f"{made - distinct:,} copies repeat another's bytes")
    print(f"generated {made:,} {images} images in {time.perf_counter() - start:.0f} s"
          + (f" ({made:,} content hashes, all different)" if images == "copies" else ""),
          file=sys.stderr)


def generate(rows, workdir, images="distinct"):
    """Makes (or reuses) the first ``rows`` images of a set and their table; returns the
    CSV's path."""
    import pandas as pd

    root = _root(workdir, images)
    _make_folders(root, range(-(-rows // PER_FOLDER)), images)
    csv = root / f"table-{rows}.csv"
    if not csv.exists():
        rng = np.random.default_rng(SEED)  # the same draws for every size: n rows are a prefix
        splits = np.array(["TRAIN", "VALIDATION", "TEST"])[
            rng.choice(3, MAX_ROWS, p=[0.8, 0.1, 0.1])][:rows]
        labels = np.array(CLASSES)[rng.integers(0, len(CLASSES), MAX_ROWS)][:rows]
        uris = [str(_folder(root, i // PER_FOLDER) / f"{i:07d}.jpg") for i in range(rows)]
        pd.DataFrame({"split": splits, "image_uri": uris, "label": labels}).to_csv(
            csv.with_suffix(".tmp"), index=False)
        os.replace(csv.with_suffix(".tmp"), csv)
    return csv


def appended_table(workdir, images="distinct"):
    """The append path's table: ``APPENDED`` images of the set no table of ``generate`` holds
    (made once), with seeded splits and labels."""
    import pandas as pd

    root = _root(workdir, images)
    number = MAX_ROWS // PER_FOLDER
    _make_folders(root, [number], images)
    rng = np.random.default_rng([SEED, number])
    first = number * PER_FOLDER
    return pd.DataFrame({
        "split": np.array(["TRAIN", "VALIDATION", "TEST"])[rng.choice(3, APPENDED,
                                                                      p=[0.8, 0.1, 0.1])],
        "image_uri": [str(_folder(root, number) / f"{i:07d}.jpg")
                      for i in range(first, first + APPENDED)],
        "label": np.array(CLASSES)[rng.integers(0, len(CLASSES), APPENDED)]})


def image_bytes(rows, workdir, images="distinct"):
    """Bytes of the first ``rows`` images (from the folders' markers)."""
    root = _root(workdir, images)
    folders = -(-rows // PER_FOLDER)
    return sum(int((_folder(root, n) / ".done").read_text()) for n in range(folders)) \
        * rows / (folders * PER_FOLDER)


def warm(rows, workdir, images="distinct"):
    """Reads the first ``rows`` images once (untimed), so that every run finds them cached."""
    root = _root(workdir, images)

    def read(number):
        folder = _folder(root, number)
        for i in range(number * PER_FOLDER, min(rows, (number + 1) * PER_FOLDER)):
            with open(folder / f"{i:07d}.jpg", "rb") as f:
                f.read()

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(read, range(-(-rows // PER_FOLDER))))


# ----------------------------------------------------------------------------- memory

def _status(pid, field):
    """A field of /proc/PID/status in bytes, or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def _descendants(root):
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


class WorkerPeaks:
    """The largest VmHWM of each descendant process, sampled every 0.2 s and at ``stop()``."""

    def __init__(self):
        self.peaks, self._stop = {}, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self):
        for pid in _descendants(os.getpid()):
            peak = _status(pid, "VmHWM")
            if peak is not None:
                self.peaks[pid] = max(peak, self.peaks.get(pid, 0))

    def _run(self):
        while not self._stop.wait(0.2):
            self._sample()

    def stop(self):
        self._stop.set()
        self._thread.join()
        self._sample()
        return self.peaks


# ----------------------------------------------------------------------------- one run

def _reported(result, rows):
    """What a write reported beside its records: rejected rows, problems (and the rows they
    name), and rows neither written nor rejected (none, if the library holds its promise)."""
    written = sum(result.counts.values()) + result.skipped
    notes = []
    if len(result.rejected):
        notes.append(f"{len(result.rejected):,} rejected")
    if len(result.problems):
        notes.append(f"{len(result.problems):,} problems on "
                     f"{result.problems['row'].nunique():,} rows")
    if written + len(result.rejected) != rows:
        notes.append(f"**{rows - written - len(result.rejected):,} rows neither written nor "
                     "rejected**")
    return "".join(", " + note for note in notes)


def _run_path(path, table, out, workdir, images):
    """Runs ``path``; returns (rows it counts, what to check it by)."""
    import tfrecorder_lite

    if path in ("header", "decode"):
        result = table.tfrecord.to_tfrecord(
            str(out), progress=False, **({"check": "header"} if path == "header" else {}))
        return len(table), (f"{sum(result.counts.values()):,} records"
                            + _reported(result, len(table)))
    if path == "validate":
        problems = table.tfrecord.validate()
        return len(table), f"{len(problems)} problems" + (
            f" on {problems['row'].nunique():,} rows" if len(problems) else "")
    if path in ("append", "append_all"):
        new = table if path == "append_all" else appended_table(workdir, images)
        result = new.tfrecord.to_tfrecord(str(out), progress=False, append=True)
        return len(new), (f"{sum(result.counts.values()):,} records appended, "
                          f"{result.skipped:,} skipped" + _reported(result, len(new)))
    options = {}
    if path == "load_global":
        import inspect

        if "epochs" not in inspect.signature(tfrecorder_lite.load).parameters:
            raise NotImplementedError("this tree's load() has no shuffle='global' (a truthy "
                                      "shuffle would run the buffer shuffle instead)")
        options = {"shuffle": "global", "seed": 1, "epochs": 1}
    dataset = tfrecorder_lite.load(str(out), "TRAIN", batch_size=256, image_size=(SIDE, SIDE),
                                   **options)
    images = sum(int(batch[0].shape[0]) for batch in dataset)
    return images, f"{images:,} TRAIN images"


def child(job):
    """One timed run (in its own interpreter)."""
    sys.path.insert(0, str(REPO_ROOT))
    import pandas as pd

    import tfrecorder_lite
    import tfrecorder_lite.conversion  # noqa: F401  (what a conversion imports: not timed)
    try:
        import tfrecorder_lite.validation  # noqa: F401
    except ImportError:  # a tree of the layout of 3bb8eda to issue 46: it was in table/
        import tfrecorder_lite.table.validation  # noqa: F401
    if job["path"].startswith("load"):
        import tensorflow  # noqa: F401

    table = pd.read_csv(job["csv"])
    if job["path"] == "append_all":  # the week's whole table: the rows there and the new
        table = pd.concat([table, appended_table(job["workdir"], job["images"])],
                          ignore_index=True)
    with_table = _status("self", "VmRSS")
    load = os.getloadavg()
    if job.get("profile"):
        return profile(job, table)
    workers = WorkerPeaks()
    start = time.perf_counter()
    try:
        rows, check = _run_path(job["path"], table, Path(job["out"]), job["workdir"],
                                job["images"])
    except Exception as exc:  # e.g. shuffle="global" on a tree without it
        workers.stop()
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}", "load": load}
    seconds = time.perf_counter() - start
    peaks = workers.stop()
    return {"seconds": seconds, "rows": rows, "check": check, "rss_table": with_table,
            "peak": _status("self", "VmHWM"), "workers": len(peaks),
            "worker_peak": max(peaks.values(), default=0), "load": load}


def profile(job, table, top=12):
    """The job's path under tracemalloc: what is alive near the traced peak, by allocation
    site (the last three frames)."""
    import tracemalloc

    tracemalloc.start(3)
    best = {"size": 0, "snapshot": None}
    done = threading.Event()

    def watch():  # a snapshot each time the traced memory grew 10%, at most two a second
        last = 0.0
        while not done.wait(0.02):
            current, _ = tracemalloc.get_traced_memory()
            if current > best["size"] * 1.1 and time.monotonic() - last > 0.5:
                best.update(size=current, snapshot=tracemalloc.take_snapshot())
                last = time.monotonic()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    start = time.perf_counter()
    path = job["path"]
    _run_path(path, table, Path(job["out"]), job["workdir"], job["images"])
    seconds = time.perf_counter() - start
    done.set()
    watcher.join()
    _, peak = tracemalloc.get_traced_memory()
    lines = [f"{path}, {len(table):,} rows of {job['images']} images: {seconds:.1f} s under tracemalloc; traced peak "
             f"{peak / 2**20:.0f} MB; the snapshot nearest it holds {best['size'] / 2**20:.0f}"
             f" MB ({best['size'] / len(table):.0f} bytes a row), largest sites:"]
    snapshot = best["snapshot"].filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    for stat in snapshot.statistics("traceback")[:top]:
        lines.append(f"  {stat.size / 2**20:7.1f} MB {stat.count:>9,} blocks")
        lines += [f"      {frame.filename.replace(str(REPO_ROOT) + '/', '')}:{frame.lineno}"
                  for frame in stat.traceback]
    return {"profile": "\n".join(lines)}


def run_child(job):
    os.sync()  # what the run before left to write back is on the disk
    started = os.getloadavg()
    done = subprocess.run([sys.executable, __file__, "--child", json.dumps(job)],
                          capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1][:300], "load": started}
    return json.loads(done.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- the report

def _mb(value):
    return f"{value / 2**20:,.0f}" if value else "-"


def report(results, sizes, bytes_of):
    """The tables: a row per run (image set, path, rows), the model of each path's growth,
    and with both image sets the copies' time and peak against the distinct pictures'."""
    lines = ["| path | images | rows | seconds | us/row | rows/s | driver RSS with the table MB"
             " | driver peak MB | driver peak - table MB | workers (peak MB) | load avg | check |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for (images, path, rows), r in results.items():
        if "error" in r:
            lines.append(f"| {path} | {images} | {rows:,} | - | - | - | - | - | - | - | "
                         f"{r['load'][0]:.2f} | {r['error']} |")
            continue
        workers = f"{r['workers']} ({_mb(r['worker_peak'])})" if r["workers"] else "none"
        lines.append(
            f"| {path} | {images} | {rows:,} | {r['seconds']:.1f} | "
            f"{r['seconds'] / r['rows'] * 1e6:.0f} | "
            f"{r['rows'] / r['seconds']:,.0f} | {_mb(r['rss_table'])} | {_mb(r['peak'])} | "
            f"{_mb(r['peak'] - r['rss_table'])} | {workers} | {r['load'][0]:.2f} | "
            f"{r['check']} |")
    if len(sizes) >= 2:
        small, large = sizes[-2], sizes[-1]
        lines += ["", f"| path | images | us/row {large:,} / {small:,} | driver peak model "
                  "(MB + KB/row) | driver peak at 10,000,000 rows (model) |",
                  "|---|---|---:|---|---:|"]
        for images, path in dict.fromkeys((i, p) for i, p, _ in results):
            a = results.get((images, path, small), {})
            b = results.get((images, path, large), {})
            if "seconds" not in a or "seconds" not in b:
                continue
            ratio = (b["seconds"] / b["rows"]) / (a["seconds"] / a["rows"])
            slope = (b["peak"] - a["peak"]) / (large - small)
            base = a["peak"] - slope * small
            lines.append(f"| {path} | {images} | {ratio:.2f} | {base / 2**20:,.0f} MB + "
                         f"{slope / 1024:.2f} KB/row | {(base + slope * 1e7) / 2**30:.1f} GB |")
    pairs = [(path, rows, r, results[("distinct", path, rows)])
             for (images, path, rows), r in results.items()
             if images == "copies" and "seconds" in r
             and "seconds" in results.get(("distinct", path, rows), {})]
    if pairs:
        lines += ["", "| path | rows | seconds copies / distinct | driver peak copies / "
                  "distinct MB |", "|---|---:|---:|---:|"]
        for path, rows, copies, distinct in pairs:
            lines.append(f"| {path} | {rows:,} | {copies['seconds'] / distinct['seconds']:.2f} |"
                         f" {_mb(copies['peak'])} / {_mb(distinct['peak'])} |")
    lines.append("")
    for images in dict.fromkeys(i for i, _ in bytes_of):
        lines.append(f"Images ({images}): " + ", ".join(
            f"{rows:,} rows {bytes_of[(images, rows)] / 1e6:,.0f} MB" for rows in sizes
            if (images, rows) in bytes_of))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--images", default="distinct",
                        help="the image sets, comma-separated: distinct (a picture a row) "
                             "and copies (one picture, its bytes different in every file)")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--profile", choices=("header", "decode", "validate"),
                        help="run this path under tracemalloc at each size instead")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    if max(sizes) > MAX_ROWS:
        parser.error(f"at most {MAX_ROWS:,} rows")
    paths = [p for p in args.paths.split(",")]
    image_sets = args.images.split(",")
    if set(image_sets) - set(IMAGE_SETS):
        parser.error(f"--images: one or more of {', '.join(IMAGE_SETS)}")
    results, bytes_of = {}, {}
    if {"append", "append_all"} & set(paths):
        for images in image_sets:
            appended_table(args.workdir, images)  # its images made before any run is timed
    print(f"`python benchmarks/scale.py {' '.join(argv if argv is not None else sys.argv[1:])}`"
          f", {os.cpu_count()} cores, load average before: "
          + ", ".join(f"{v:.2f}" for v in os.getloadavg()), flush=True)
    for rows in sizes:
        for images in image_sets:
            csv = generate(rows, args.workdir, images)
            bytes_of[(images, rows)] = image_bytes(rows, args.workdir, images)
            warm(rows, args.workdir, images)
            out = args.workdir / "out"
            shutil.rmtree(out, ignore_errors=True)
            for path in ([args.profile] if args.profile else paths):
                job = {"path": path, "csv": str(csv), "out": str(out), "profile": args.profile,
                       "workdir": str(args.workdir), "images": images}
                scratch = args.workdir / "scratch"
                if path in ("header", "validate", "decode") and not args.profile:
                    job["out"] = str(out if path == "decode" else scratch)  # decode's is kept
                if path == "append_all":  # for the reads and the append
                    shutil.copytree(out, scratch)
                    job["out"] = str(scratch)
                result = run_child(job)
                shutil.rmtree(args.workdir / "scratch", ignore_errors=True)
                if "profile" in result:
                    print(result["profile"], flush=True)
                    shutil.rmtree(out, ignore_errors=True)
                    continue
                results[(images, path, rows)] = result
                print(f"{rows:,} {images} {path}: " + json.dumps(result), file=sys.stderr,
                      flush=True)
            shutil.rmtree(out, ignore_errors=True)
    if results:
        print(report(results, sizes, bytes_of))
    print("load average after: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))

if __name__ == "__main__":
    main()
