"""Other readers open a tfrecorder_lite folder with the calls they already know: PyTorch through
the PyPI ``tfrecord`` package (with our index files), NVIDIA DALI, Ray Data and Hugging Face
``datasets`` (samples/huggingface_datasets.py). Each skips when its package is absent."""

import collections
import gzip
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import tfrecorder_lite
from conftest import photo, save

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
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


def test_index_files_hold_the_bytes_tfrecord2idx_writes(written, tmp_path):
    create_index = pytest.importorskip("tfrecord.tools.tfrecord2idx").create_index
    outputs, _ = written
    for compression, out in outputs.items():
        for shard, index in _shards(out, ("TRAIN", "VALIDATION", "TEST")):
            if compression:  # tfrecord2idx reads only uncompressed files
                with gzip.open(shard) as f, open(tmp_path / "plain.tfrecord", "wb") as plain:
                    shutil.copyfileobj(f, plain)
                shard = tmp_path / "plain.tfrecord"
            create_index(str(shard), str(tmp_path / "theirs.index"))
            assert index.read_bytes() == (tmp_path / "theirs.index").read_bytes(), index


def _name_and_label(record):
    return record["image/filename"].decode(), int(record["image/class/label"][0])


def _torch_loader(out, compression, with_index=True):
    """A DataLoader with 2 workers over TRAIN's shards, one record (file name, label) a step."""
    torch = pytest.importorskip("torch")
    from tfrecord.torch.dataset import MultiTFRecordDataset

    suffix = ".tfrecord.gz" if compression else ".tfrecord"
    dataset = MultiTFRecordDataset(
        str(out) + "/{}" + suffix, str(out) + "/{}.tfindex" if with_index else None,
        {shard.name[:-len(suffix)]: 1 for shard, _ in _shards(out)},
        {"image/filename": "byte", "image/class/label": "int"},
        transform=_name_and_label, compression_type="gzip" if compression else None,
        infinite=False)
    return torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_pytorch_dataloader_with_two_workers_reads_every_record_once(written, compression):
    outputs, records = written
    _check_once(list(_torch_loader(outputs[compression], compression)), records)


def test_without_index_files_each_pytorch_worker_reads_every_record(written):
    outputs, records = written
    names = collections.Counter(
        name for name, _ in _torch_loader(outputs[None], None, with_index=False))
    assert names == {name: 2 for name, (split, _, _) in records.items() if split == "TRAIN"}


def _run_sample(*args, hide_torch=False):
    """Run samples/pytorch_dataloader.py (with ``import torch`` failing if ``hide_torch``)."""
    hide = "sys.modules['torch'] = None; " if hide_torch else ""
    code = f"import runpy, sys; sys.argv = sys.argv[1:]; {hide}" \
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    return subprocess.run([sys.executable, "-c", code, str(SAMPLES / "pytorch_dataloader.py"),
                           *map(str, args)], capture_output=True, text=True, timeout=300)


def test_pytorch_sample_prints_a_batch(written):
    pytest.importorskip("torch")
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
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
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
