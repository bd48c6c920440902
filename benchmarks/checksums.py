"""CPU seconds of a shard's checksums over the 3,000-image set: CRC32C (every shard) and sha256
(``sha256=True``), the images held in memory, medians of interleaved rounds.

Usage:
    python benchmarks/checksums.py --repeats 7
"""

import argparse
import hashlib
import os
import statistics
import time

import google_crc32c
import pandas as pd

import dataset


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--workdir", default=dataset.DEFAULT_WORKDIR)
    args = parser.parse_args(argv)
    csv = dataset.generate_dataset(args.images, args.workdir)
    folder = os.path.dirname(csv)
    blobs = []
    for path in pd.read_csv(csv)["image_uri"]:
        with open(os.path.join(folder, path), "rb") as f:  # joins keep absolute paths
            blobs.append(f.read())

    def sha256():
        digest = hashlib.sha256()
        for blob in blobs:
            digest.update(blob)

    def crc32c():
        crc = 0
        for blob in blobs:
            crc = google_crc32c.extend(crc, blob)

    seconds = {"crc32c": [], "sha256": []}
    for _ in range(args.repeats):
        for name, checksum in (("crc32c", crc32c), ("sha256", sha256)):
            start = time.process_time()
            checksum()
            seconds[name].append(time.process_time() - start)
    size = sum(map(len, blobs)) / 1e6
    for name, values in seconds.items():
        print(f"{name}: median {statistics.median(values):.3f} s of CPU for {size:.1f} MB "
              f"({', '.join(f'{v:.3f}' for v in values)})")


if __name__ == "__main__":
    main()
