"""Other readers open a tfrecorder_lite folder with the calls they already know: PyTorch through
the PyPI ``tfrecord`` package (with our index files), NVIDIA DALI, Ray Data and Hugging Face
``datasets`` (samples/huggingface_datasets.py). Each skips when its package is absent."""

import collections
import gzip
import importlib.util
import json
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import tfrecorder_lite
from conftest import photo, save

TESTS = Path(__file__).resolve().parent
SAMPLES = TESTS.parent / "samples"
LABELS = ["bird", "cat", "dog"]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The same table converted uncompressed and with GZIP ({compression: folder}), and its
    records by file name: {name: (split, label id, (height, width))}."""
    root = tmp_path_factory.mktemp("other_readers")
    rows, records = [], {}
    for i in range(30):
        split = "TRAIN" if i < 20 else "VALIDATION" if i < 25 else "TEST"
        fmt, ext = ("JPEG", "jpg") if i % 2 else ("PNG", "png")
        image = photo(16 + i, 20 + i, seed=i, mode="L" if i == 4 else "RGB")
        rows.append((split, save(image, root / "images" / f"{i}.{ext}", fmt), LABELS[i % 3]))
        records[f"{i}.{ext}"] = (split, i % 3, (16 + i, 20 + i))
    df = pd.DataFrame(rows, columns=["split", "image_uri", "label"])
    outputs = {compression: df.tfrecord.to_tfrecord(
        root / str(compression), compression=compression, num_shards={"TRAIN": 3},
        progress=False).output_dir for compression in (None, "GZIP")}
    return outputs, records


def _shards(out, splits=("TRAIN",)):
    """(shard path, index path) of every shard of ``splits``, from metadata.json."""
    metadata = tfrecorder_lite.read_metadata(out)
    return [(Path(out, s["name"]), Path(out, s["index"]["name"]))
            for split in splits for s in metadata["splits"][split]["shards"]]


def _check_once(names_and_labels, records, split="TRAIN"):
    """Every record of ``split`` (None: all) came exactly once, with its label."""
    expected = {name: label for name, (s, label, _) in records.items() if split in (None, s)}
    assert collections.Counter(name for name, _ in names_and_labels) == \
        collections.Counter(expected.keys())
    assert dict(names_and_labels) == expected


def _installed(*names):
    """Skip unless these packages are installed (found, not imported: see _apart)."""
    missing = [name for name in names if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")


def _apart(function, *args):
    """``function(*args)``, a function of this module, run in a fresh Python; returns its result
    through JSON. The PyPI ``tfrecord`` package and TensorFlow cannot share a process (both
    register ``tensorflow.BytesList`` with protobuf: vahidk/tfrecord#103), and other tests of
    this session import TensorFlow."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import test_other_readers as t; "
            "print(json.dumps(getattr(t, sys.argv[2])(*json.loads(sys.argv[3]))))")
    run = subprocess.run([sys.executable, "-c", code, str(TESTS), function.__name__,
                          json.dumps(args, default=str)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.splitlines()[-1])


def _tfrecord2idx(folders):
    """tfrecord2idx over each folder: ``<name>.tfindex`` beside each ``<name>.tfrecord``."""
    from tfrecord.tools.tfrecord2idx import create_indices

    for folder in folders:
        create_indices(folder)


def test_index_files_are_named_and_written_as_tfrecord2idx_does(written, tmp_path):
    _installed("tfrecord")
    outputs, _ = written
    ours, copies = {}, {}
    for compression, out in outputs.items():
        copies[compression] = tmp_path / str(compression)
        copies[compression].mkdir()
        for shard, index in _shards(out, ("TRAIN", "VALIDATION", "TEST")):
            ours[compression, index.name] = index.read_bytes()
            # tfrecord2idx reads only uncompressed files: give it GZIP shards decompressed
            with (gzip.open if compression else open)(shard, "rb") as f, \
                    open(copies[compression] / f"{index.stem}.tfrecord", "wb") as copy:
                shutil.copyfileobj(f, copy)
    _apart(_tfrecord2idx, list(copies.values()))
    theirs = {(compression, index.name): index.read_bytes()
              for compression, folder in copies.items() for index in folder.glob("*.tfindex")}
    assert theirs == ours


def _name_and_label(record):
    return record["image/filename"].decode(), int(record["image/class/label"][0])


def _torch_read(cases):
    """For each (output folder, compression, with index files): the (file name, label) of every
    TRAIN record a DataLoader with 2 workers yields. Run it _apart."""
    import torch
    from tfrecord.torch.dataset import MultiTFRecordDataset

    reads = []
    for out, compression, with_index in cases:
        suffix = ".tfrecord.gz" if compression else ".tfrecord"
        dataset = MultiTFRecordDataset(
            out + "/{}" + suffix, out + "/{}.tfindex" if with_index else None,
            {shard.name[:-len(suffix)]: 1 for shard, _ in _shards(out)},
            {"image/filename": "byte", "image/class/label": "int"},
            transform=_name_and_label, compression_type="gzip" if compression else None,
            infinite=False)
        reads.append(list(torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)))
    return reads


@pytest.fixture(scope="module")
def torch_reads(written):
    """What the DataLoader yields from the uncompressed and GZIP outputs, and from the
    uncompressed one without index files ("no index")."""
    _installed("torch", "tfrecord")
    outputs, _ = written
    cases = {None: (outputs[None], None, True), "GZIP": (outputs["GZIP"], "GZIP", True),
             "no index": (outputs[None], None, False)}
    return dict(zip(cases, _apart(_torch_read, list(cases.values()))))


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_pytorch_dataloader_with_two_workers_reads_every_record_once(written, torch_reads,
                                                                     compression):
    _check_once(torch_reads[compression], written[1])


def test_without_index_files_each_pytorch_worker_reads_every_record(written, torch_reads):
    names = collections.Counter(name for name, _ in torch_reads["no index"])
    assert names == {name: 2 for name, (split, _, _) in written[1].items() if split == "TRAIN"}


def _run_sample(*args, hide_torch=False):
    """Run samples/pytorch_dataloader.py (with ``import torch`` failing if ``hide_torch``)."""
    hide = "sys.modules['torch'] = None; " if hide_torch else ""
    code = f"import runpy, sys; sys.argv = sys.argv[1:]; {hide}" \
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    return subprocess.run([sys.executable, "-c", code, str(SAMPLES / "pytorch_dataloader.py"),
                           *map(str, args)], capture_output=True, text=True, timeout=300)


def test_pytorch_sample_prints_a_batch(written):
    _installed("torch", "tfrecord")
    outputs, _ = written
    run = _run_sample(outputs["GZIP"])
    assert run.returncode == 0, run.stderr[-2000:]
    assert "first batch: images (8, 64, 64, 3) torch.uint8, labels [" in run.stdout
    assert f"read 20 records of TRAIN from {outputs['GZIP']}" in run.stdout


def test_pytorch_sample_without_torch_says_so_and_exits_0():
    run = _run_sample(hide_torch=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "PyTorch is not installed (pip install torch tfrecord); " \
        "nothing to show"


def test_dali_reads_every_record_once_on_cpu(written):
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn, pipeline_def, tfrecord, types

    outputs, records = written
    shards = _shards(outputs[None])

    @pipeline_def(batch_size=8, num_threads=2, device_id=None)  # CPU only
    def pipeline():
        record = fn.readers.tfrecord(
            path=[str(s) for s, _ in shards], index_path=[str(i) for _, i in shards],
            features={"image/encoded": tfrecord.FixedLenFeature((), tfrecord.string, ""),
                      "image/filename": tfrecord.FixedLenFeature((), tfrecord.string, ""),
                      "image/class/label": tfrecord.FixedLenFeature([1], tfrecord.int64, -1)},
            name="reader")
        image = fn.decoders.image(record["image/encoded"], device="cpu", output_type=types.RGB)
        return image, record["image/filename"], record["image/class/label"]

    pipe = pipeline()
    pipe.build()
    size = pipe.epoch_size("reader")
    seen = []
    while len(seen) < size:  # the last batch wraps around to the first records: cut it
        images, names, labels = pipe.run()
        seen += [(bytes(names.at(i)).decode(), int(labels.at(i)[0]), images.at(i).shape)
                 for i in range(len(names))]
    seen = seen[:size]
    _check_once([(name, label) for name, label, _ in seen], records)
    assert all(shape == (*records[name][2], 3) for name, _, shape in seen)


def test_ray_data_reads_every_record_once(written):
    ray = pytest.importorskip("ray")
    outputs, records = written
    # one worker: each one imports TensorFlow to parse records (9 s less than with two)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        for compression, out in outputs.items():
            options = {"file_extensions": ["gz"],
                       "arrow_open_stream_args": {"compression": "gzip"}} if compression else \
                {"file_extensions": ["tfrecord"]}
            rows = ray.data.read_tfrecords(str(out), **options).take_all()
            _check_once([(r["image/filename"].decode(), r["image/class/label"]) for r in rows],
                        records, split=None)
    finally:
        ray.shutdown()


def test_huggingface_datasets_recipe(written, tmp_path):
    pytest.importorskip("datasets")
    to_hf_dataset = runpy.run_path(str(SAMPLES / "huggingface_datasets.py"))["to_hf_dataset"]
    outputs, records = written
    for compression, out in outputs.items():
        dataset = to_hf_dataset(out, "train", cache_dir=tmp_path / str(compression))
        assert dataset.features["label"].names == LABELS
        _check_once([(r["image/filename"], r["label"]) for r in dataset], records)
        for row in dataset:
            assert row["image"].size[::-1] == records[row["image/filename"]][2]
            assert row["image/class/text"] == LABELS[row["label"]]
