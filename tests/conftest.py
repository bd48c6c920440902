"""Shared fixtures: small, real images made by Pillow, tables pointing at them, and real object
stores (GCS and S3 emulators, an HTTP server) on 127.0.0.1, started once per test session."""

import itertools
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Subprocesses of the tests (crash helpers, killed conversions, clusters' workers) import the
# package of this checkout, like the tests themselves, not whichever copy is installed.
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [_CHECKOUT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
# Object-store clients, before any of them is imported: the tests talk only to servers on
# 127.0.0.1 (never a cloud metadata service or a real bucket), and recent gcsfs asks a gRPC API
# for the bucket type on every open, which stalls 60 s against the emulator.
os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
os.environ["NO_GCE_CHECK"] = "True"
os.environ["GCE_METADATA_HOST"] = os.environ["GCE_METADATA_IP"] = "127.0.0.1:9"
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
os.environ["AWS_ACCESS_KEY_ID"] = os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ.pop("AWS_PROFILE", None)

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

import tfrecorder_lite  # noqa: E402,F401  (registers DataFrame.tfrecord)
from object_stores import Server  # noqa: E402

GCS_OPTIONS = {"token": "anon"}  # the emulator takes any request; this skips credential lookup


def photo(height, width, seed=0, mode="RGB"):
    """A smooth, photo-like image (gradients plus mild noise) of the given size and mode."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([(x * 255 // max(width - 1, 1)), (y * 255 // max(height - 1, 1)),
                     ((x + y) * 127 // max(height + width - 2, 1))], axis=-1)
    noisy = np.clip(base + rng.integers(-12, 13, base.shape), 0, 255).astype(np.uint8)
    image = Image.fromarray(noisy, "RGB")
    return image if mode == "RGB" else image.convert(mode)


def save(image, path, fmt=None, **params):
    """Save ``image`` at ``path`` (folders made as needed) and return the path as text."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    image.save(path, fmt, **params)
    return str(path)


@pytest.fixture
def image_table(tmp_path):
    """A clean table of 24 images (JPEG and PNG, several sizes) in three splits, two labels."""
    rows = []
    for i in range(24):
        split = "TRAIN" if i < 16 else "VALIDATION" if i < 20 else "TEST"
        fmt, ext = ("JPEG", "jpg") if i % 2 else ("PNG", "png")
        path = save(photo(20 + i, 30 + 2 * i, seed=i), tmp_path / "images" / f"img{i}.{ext}", fmt)
        rows.append((split, path, "cat" if i % 3 else "dog"))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"])


@pytest.fixture(scope="session")
def outputs_of_every_kind(tmp_path_factory):
    """Real outputs of small tables, written once, by kind: ``plain`` (two splits, two TRAIN
    shards, a missing file rejected), ``gzip`` (resized to 16x16, GZIP), ``multi``
    (multi-label), ``levels`` (two label levels), ``columns`` (no images: an int, a float and
    a list column of boxes). Each is ``(output folder, the table written)``."""
    root = tmp_path_factory.mktemp("every-kind")
    options = dict(progress=False, n_jobs=1, on_error="skip")
    rows = [("TRAIN" if i < 9 else "TEST", save(photo(12 + i, 16, seed=i), root / f"{i}.png",
                                                "PNG"), ["cat", "dog", "owl"][i % 3])
            for i in range(12)]
    rows.append(("TRAIN", str(root / "missing.png"), "cat"))
    plain = pd.DataFrame(rows, columns=["split", "image_uri", "label"])
    multi = plain.assign(label=[["cat", "dog"][: 1 + i % 2] for i in range(len(plain))])
    levels = plain.assign(coarse=["animal" if i % 2 else "bird" for i in range(len(plain))])
    columns = pd.DataFrame({
        "split": ["TRAIN"] * 6 + ["TEST"] * 2, "label": list("abababab"),
        "count": list(range(8)), "score": [i / 8 for i in range(8)],
        "boxes": [[[0.1 * i, 0.1, 0.5, 0.5]] * (i % 3) for i in range(8)]})
    written = {
        "plain": (plain, dict(num_shards={"TRAIN": 2, "TEST": 1})),
        "gzip": (plain, dict(image_size=(16, 16), compression="GZIP")),
        "multi": (multi, {}),
        "levels": (levels, dict(label_col=["coarse", "label"])),
        "columns": (columns, dict(image_col=None, features={"boxes": "float32[None,4]"})),
    }
    return {name: (table.tfrecord.to_tfrecord(root / name, **options, **extra).output_dir, table)
            for name, (table, extra) in written.items()}


@pytest.fixture(autouse=True, scope="session")
def _shard_cache(tmp_path_factory):
    """Remote shards that load() copies go to a folder of this session, not ~/.cache."""
    os.environ["TFRECORDER_LITE_CACHE"] = str(tmp_path_factory.mktemp("shard-cache"))


class ObjectStore:
    """A running emulator: ``new_bucket()`` gives a fresh, empty bucket URL for each test."""

    _numbers = itertools.count()

    def __init__(self, protocol, server, options):
        import fsspec

        self.protocol, self.server, self.options = protocol, server, options
        self.fs = fsspec.filesystem(protocol, **options)

    def new_bucket(self):
        name = f"bucket{next(self._numbers)}"
        self.fs.mkdir(name)
        return f"{self.protocol}://{name}"

    def upload(self, local_folder, url):
        """Copy a local folder's files below ``url``; returns ``url``."""
        for dirpath, _, names in os.walk(local_folder):
            for name in names:
                rel = os.path.relpath(os.path.join(dirpath, name), local_folder)
                self.fs.put_file(os.path.join(dirpath, name), f"{url}/{rel.replace(os.sep, '/')}")
        return url


def _fresh_workers():
    """Stop joblib's worker processes kept from earlier tests: started before an emulator's
    endpoint was in the environment, they would look for the real service."""
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=True)


@pytest.fixture(scope="session")
def gcs():
    """gcp-storage-emulator (the GCS JSON API) in a child process; gcsfs finds it through
    STORAGE_EMULATOR_HOST (worker processes too: they are started after it is set)."""
    server = Server("gcs")
    os.environ["STORAGE_EMULATOR_HOST"] = server.url
    _fresh_workers()
    yield ObjectStore("gs", server, GCS_OPTIONS)
    server.stop()
    os.environ.pop("STORAGE_EMULATOR_HOST", None)


@pytest.fixture(scope="session")
def s3():
    """moto's S3 server in a child process; s3fs finds it through AWS_ENDPOINT_URL (worker
    processes too: they are started after it is set)."""
    server = Server("s3")
    os.environ["AWS_ENDPOINT_URL"] = server.url
    _fresh_workers()
    yield ObjectStore("s3", server, {})
    server.stop()
    os.environ.pop("AWS_ENDPOINT_URL", None)


# Tests that start emulators, clusters or browsers, run other readers, or wait out real
# timeouts (those are marked where they are written) are marked slow, so that
# `pytest -m "not slow"` is a quick loop; the README's test command runs them all.
_SLOW_FIXTURES = {"gcs", "s3"}
_SLOW_MODULES = {"test_cluster", "test_other_readers", "test_readers",
                 "test_model_garden_decoder"}


def _uses_an_emulator(item):
    """The emulator fixtures it names, or takes by name as a parameter (``store_name``)."""
    names = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        names.update(v for v in callspec.params.values() if isinstance(v, str))
    return bool(_SLOW_FIXTURES & names)


def pytest_collection_modifyitems(items):
    for item in items:
        if _uses_an_emulator(item) or item.module.__name__ in _SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
