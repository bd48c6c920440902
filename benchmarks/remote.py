"""Benchmark conversions whose images live in an object store with injected latency.

Starts a local emulator (gcp-storage-emulator by default, or moto's S3 server) in a child
process on 127.0.0.1, with a delay added to every request, uploads the benchmark's image set
to it, then times in interleaved rounds (medians reported, ratios from the same run):

- ``sequential_get``: a loop that GETs every object, one request at a time;
- ``concurrent_get``: ``storage.read_many`` of every object (the library's fetch, alone);
- ``write_{remote,local}_{decode,header}``: ``to_tfrecord`` of the same table with images read
  from the store or from the local disk, local output, ``check="decode"`` / ``"header"``.

Usage:
    python benchmarks/remote.py --images 2000 --latency 0.02 --repeats 3
    python benchmarks/remote.py --store s3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # the emulator launcher the tests use

# object-store clients, before they are imported: only the local emulator is ever contacted
os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
os.environ["NO_GCE_CHECK"] = "True"
os.environ["GCE_METADATA_HOST"] = os.environ["GCE_METADATA_IP"] = "127.0.0.1:9"
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
os.environ["AWS_ACCESS_KEY_ID"] = os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"

import pandas as pd  # noqa: E402

import dataset as bench  # noqa: E402  (the benchmarks' image set)
from object_stores import Server  # noqa: E402

STORES = {"gcs": ("gs", "STORAGE_EMULATOR_HOST", {"token": "anon"}),
          "s3": ("s3", "AWS_ENDPOINT_URL", {}),
          "http": ("http", None, {})}  # the image folder served as static files


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds per request")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--store", choices=sorted(STORES), default="gcs")
    parser.add_argument("--workdir", type=Path, default=bench.DEFAULT_WORKDIR)
    return parser.parse_args(argv)


class ImageStore:
    """The table's images uploaded to a local emulator that answers every request late.

    Attributes:
        server: the emulator (a tests/object_stores.py Server; ``stop()`` ends it).
        fs: an fsspec filesystem on it.
        urls: the URL of each image, in table order.
        options: the ``storage_options`` a conversion needs.
    """

    def __init__(self, table, latency, store="gcs"):
        protocol, variable, self.options = STORES[store]
        self.server = Server(store, latency=latency, root=os.path.dirname(table.image_uri[0]))
        try:
            if variable:
                os.environ[variable] = self.server.url
            import fsspec

            self.fs = fsspec.filesystem(protocol, **self.options)
            names = [os.path.basename(p) for p in table.image_uri]
            if protocol == "http":
                self.urls = [f"{self.server.url}/{name}" for name in names]
                return
            self.fs.mkdir("bench-images")
            start = time.perf_counter()
            for path, name in zip(table.image_uri, names):
                self.fs.pipe_file(f"bench-images/{name}", Path(path).read_bytes())
            print(f"uploaded {len(table)} images in {time.perf_counter() - start:.1f} s",
                  file=sys.stderr)
            self.urls = [f"{protocol}://bench-images/{name}" for name in names]
        except BaseException:
            self.server.stop()
            raise

    def sequential_get(self, urls=None):
        """GET every image (or ``urls``), one request at a time."""
        for url in self.urls if urls is None else urls:
            self.fs.cat_file(url)


def main(argv=None):
    args = parse_args(argv)
    table = pd.read_csv(bench.generate_dataset(args.images, args.workdir))
    images = ImageStore(table, args.latency, args.store)
    server, urls, options = images.server, images.urls, images.options
    try:
        import tfrecorder_lite
        from tfrecorder_lite import storage

        remote = table.assign(image_uri=urls)
        out = Path(tempfile.mkdtemp(prefix="tfrl-remote-"))

        def convert(frame, check):
            shutil.rmtree(out, ignore_errors=True)
            frame.tfrecord.to_tfrecord(str(out), check=check, progress=False,
                                       storage_options=options)

        rows = {
            "sequential_get": images.sequential_get,
            "concurrent_get": lambda: storage.read_many(urls, options),
            "write_remote_decode": lambda: convert(remote, "decode"),
            "write_local_decode": lambda: convert(table, "decode"),
            "write_remote_header": lambda: convert(remote, "header"),
            "write_local_header": lambda: convert(table, "header"),
        }
        times = {name: [] for name in rows}
        server_cpu = {name: [] for name in rows}
        for round_number in range(args.repeats):
            for name, run in rows.items():
                cpu, start = server.cpu_seconds(), time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
                server_cpu[name].append(server.cpu_seconds() - cpu)
                print(f"round {round_number + 1} {name}: {times[name][-1]:.3f} s "
                      f"(server CPU {server_cpu[name][-1]:.2f} s)", file=sys.stderr)
        shutil.rmtree(out, ignore_errors=True)
    finally:
        server.stop()
    print(report(times, server_cpu, args, tfrecorder_lite.__version__))


def report(times, server_cpu, args, version):
    """A markdown table of medians, and the ratios the goals are about."""
    median = {name: statistics.median(values) for name, values in times.items()}
    lines = [f"{args.images} images on {args.store} ({args.latency * 1000:.0f} ms per request), "
             f"{args.repeats} interleaved rounds, tfrecorder_lite {version}, "
             f"{os.cpu_count()} cores", "",
             "| row | median s | all rounds s | server CPU s (median) |", "|---|---|---|---|"]
    for name, values in times.items():
        rounds = ", ".join(f"{v:.2f}" for v in values)
        lines.append(f"| {name} | {median[name]:.3f} | {rounds} | "
                     f"{statistics.median(server_cpu[name]):.2f} |")
    lines += ["",
              "| ratio (of medians) | value |", "|---|---|"]
    for check in ("decode", "header"):
        remote = median[f"write_remote_{check}"]
        lines.append(f"| sequential_get / write_remote_{check} | "
                     f"{median['sequential_get'] / remote:.1f}x |")
        lines.append(f"| write_remote_{check} / write_local_{check} | "
                     f"{remote / median[f'write_local_{check}']:.2f}x |")
    lines.append(f"| sequential_get / concurrent_get | "
                 f"{median['sequential_get'] / median['concurrent_get']:.1f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
