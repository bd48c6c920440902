"""Images/s of ``df.tfrecord.dataset()`` (straight from the table) beside ``load()`` (from
written shards), over the image set of ``run.py``: one epoch of TRAIN, batches of 64 resized to
64x64, median of ``--repeats`` epochs, the two alternating.

    python benchmarks/direct.py [--images 2000] [--repeats 5]
"""

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import dataset as bench  # noqa: E402  (the benchmarks' image set)


def epoch(dataset):
    start, count = time.perf_counter(), 0
    for images, _ in dataset:
        count += int(images.shape[0])
    return count / (time.perf_counter() - start)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=bench.DEFAULT_WORKDIR)
    args = parser.parse_args(argv)

    import pandas as pd
    import tfrecorder_lite

    table = pd.read_csv(bench.generate_dataset(args.images, args.workdir))
    out = args.workdir / "direct-out"
    shutil.rmtree(out, ignore_errors=True)
    table.tfrecord.to_tfrecord(out, progress=False)
    options = dict(batch_size=64, image_size=(64, 64))
    rates = {"load": [], "dataset": []}
    checks = []  # dataset() reads and checks the split's images once before it returns
    for _ in range(args.repeats):
        rates["load"].append(epoch(tfrecorder_lite.load(out, "TRAIN", **options)))
        start = time.perf_counter()
        direct = table.tfrecord.dataset("TRAIN", **options)
        checks.append(time.perf_counter() - start)
        rates["dataset"].append(epoch(direct))
    for name, values in rates.items():
        print(f"{name}: median {statistics.median(values):,.0f} images/s "
              f"({', '.join(f'{v:,.0f}' for v in values)})")
    print(f"dataset() itself (the up-front check): median {statistics.median(checks):.2f} s "
          f"({', '.join(f'{v:.2f}' for v in checks)})")


if __name__ == "__main__":
    main()
