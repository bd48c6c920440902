"""Records/s of each reader over one tfrecorder_lite output: tf.data (``tfrecorder_lite.load``),
PyTorch (the ``tfrecord`` package, a DataLoader with 2 workers), NVIDIA DALI (CPU), Ray Data and
Hugging Face ``datasets`` (samples/huggingface_datasets.py).

Run: python benchmarks/readers.py [--images 2000] [--repeats 3] [--only pytorch,dali]

The images (128x128 JPEGs, 10 labels, all TRAIN) are generated and converted once, into
--workdir. One pass reads every record and decodes its image to a uint8 array (what a training
epoch starts with), in batches of 64. Each reader's setup (Ray's start, DALI's pipeline, the
Hugging Face conversion) is timed apart; the table shows the median pass of --repeats.
Each reader runs in a process of its own; one whose package is missing says so.
"""

import argparse
import atexit
import io
import json
import os
import runpy
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

import tfrecorder_lite

ROOT = Path(__file__).resolve().parent.parent
BATCH = 64


def make_output(workdir, count):
    """Convert ``count`` generated 128x128 JPEGs into ``workdir/records`` (once)."""
    out = workdir / f"records-{count}"
    if (out / "metadata.json").exists():
        return out
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:128, 0:128]
    rows = []
    for i in range(count):
        base = np.stack([x * 2, y * 2, (x + y) * (i % 10) // 10], axis=-1)
        pixels = np.clip(base + rng.integers(-20, 21, base.shape), 0, 255).astype(np.uint8)
        path = workdir / "images" / f"{i}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(path, quality=90)
        rows.append(("TRAIN", str(path), f"class{i % 10}"))
    table = pd.DataFrame(rows, columns=["split", "image_uri", "label"])
    table.tfrecord.to_tfrecord(out, num_shards={"TRAIN": 4}, progress=False, overwrite=True)
    return out


def pixels(data):
    """Encoded image bytes -> uint8 array."""
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def shards(out):
    """(shard path, index path) of TRAIN's shards."""
    metadata = tfrecorder_lite.read_metadata(out)
    return [(str(out / s["name"]), str(out / s["index"]["name"]))
            for s in metadata["splits"]["TRAIN"]["shards"]]


def tfdata(out):
    dataset = tfrecorder_lite.load(out, "TRAIN", batch_size=BATCH)
    return lambda: sum(len(labels) for _, labels in dataset)


def _torch_decode(record):
    return pixels(record["image/encoded"]), record["image/class/label"][0]


def pytorch(out):
    import torch
    from tfrecord.torch.dataset import MultiTFRecordDataset

    dataset = MultiTFRecordDataset(
        str(out / "{}.tfrecord"), str(out / "{}.tfindex"),
        {Path(s).name[:-len(".tfrecord")]: 1 for s, _ in shards(out)},
        {"image/encoded": "byte", "image/class/label": "int"}, transform=_torch_decode,
        infinite=False)
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=2)
    return lambda: sum(len(labels) for _, labels in loader)


def dali(out):
    from nvidia.dali import fn, pipeline_def, tfrecord, types

    paths, indexes = zip(*shards(out))

    @pipeline_def(batch_size=BATCH, num_threads=2, device_id=None)
    def pipeline():
        record = fn.readers.tfrecord(
            path=list(paths), index_path=list(indexes),
            features={"image/encoded": tfrecord.FixedLenFeature((), tfrecord.string, ""),
                      "image/class/label": tfrecord.FixedLenFeature([1], tfrecord.int64, -1)},
            pad_last_batch=True, name="reader")
        return fn.decoders.image(record["image/encoded"], output_type=types.RGB), \
            record["image/class/label"]

    pipe = pipeline()
    pipe.build()
    size = pipe.epoch_size("reader")

    def one_pass():
        for _ in range(-(-size // BATCH)):
            pipe.run()
        return size
    return one_pass


def _ray_decode(batch):
    return {"image": [pixels(data) for data in batch["image/encoded"]],
            "label": batch["image/class/label"]}


def ray_data(out):
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    return lambda: sum(len(batch["label"]) for batch in ray.data.read_tfrecords(
        str(out), file_extensions=["tfrecord"]).map_batches(
            _ray_decode, batch_size=BATCH).iter_batches(batch_size=BATCH))


def huggingface(out):
    sample = runpy.run_path(str(ROOT / "samples" / "huggingface_datasets.py"))
    cache = tempfile.mkdtemp(dir=out.parent)  # a fresh cache: setup is the whole conversion
    atexit.register(shutil.rmtree, cache)
    dataset = sample["to_hf_dataset"](out, "TRAIN", cache_dir=cache)
    return lambda: sum(len([np.asarray(image) for image in batch["image"]])
                       for batch in dataset.iter(batch_size=BATCH))


READERS = {"tfdata": tfdata, "pytorch": pytorch, "dali": dali, "ray": ray_data,
           "huggingface": huggingface}


def run_reader(name, out, repeats):
    """Time one reader in this process: (setup seconds, records/s of each pass)."""
    started = time.perf_counter()
    one_pass = READERS[name](out)
    setup = time.perf_counter() - started
    rates = []
    for _ in range(repeats):
        started = time.perf_counter()
        count = one_pass()
        rates.append(count / (time.perf_counter() - started))
    return setup, rates, count


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", help="comma-separated readers: " + ",".join(READERS))
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/tfrl_readers"))
    parser.add_argument("--reader", help=argparse.SUPPRESS)  # one reader, in a child process
    args = parser.parse_args()
    out = make_output(args.workdir, args.images)
    if args.reader:
        print(json.dumps(run_reader(args.reader, out, args.repeats)))
        return
    print(f"{args.images} records, {os.cpu_count()} cores; median of {args.repeats} passes")
    print(f"{'reader':12} {'setup s':>8} {'records/s':>10}  (min-max)")
    for name in args.only.split(",") if args.only else READERS:
        # each reader in a fresh process: the tfrecord package and TensorFlow cannot share one
        run = subprocess.run([sys.executable, __file__, "--reader", name, "--images",
                              str(args.images), "--repeats", str(args.repeats), "--workdir",
                              str(args.workdir)], capture_output=True, text=True)
        if run.returncode:
            print(f"{name:12} failed: {run.stderr.strip().splitlines()[-1]}")
            continue
        setup, rates, count = json.loads(run.stdout.splitlines()[-1])
        assert count == args.images, (name, count)
        print(f"{name:12} {setup:8.1f} {statistics.median(rates):10.0f}  "
              f"({min(rates):.0f}-{max(rates):.0f})")


if __name__ == "__main__":
    main()
