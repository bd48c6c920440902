"""RecordSampler: PyTorch reads a split in load(shuffle="global")'s global order (the same
permutation per seed and epoch, the same share per host), and a job stopped mid-epoch goes on in
a new process with exactly the records the uninterrupted job read, through torchdata's
StatefulDataLoader (state_dict) and through torch's own DataLoader (start), with 2 workers."""

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import tfrecorder_lite
from tfrecorder_lite import RecordSampler, SchemaError
from conftest import photo, save

N = 30


@pytest.fixture(scope="module")
def output(tmp_path_factory):
    """30 small JPEGs of 3 labels in 3 TRAIN shards, in table order."""
    root = tmp_path_factory.mktemp("sampler")
    rows = [("TRAIN", save(photo(8, 8, seed=i), root / "images" / f"{i}.jpg"), f"l{i % 3}")
            for i in range(N)]
    table = pd.DataFrame(rows, columns=["split", "image_uri", "label"])
    return table.tfrecord.to_tfrecord(root / "out", num_shards=3, shuffle=False,
                                      progress=False).output_dir


def _names_of(src, indexes):
    return [src[int(i)]["image/filename"].decode() for i in indexes]


def _loaded(output, **kwargs):
    ds = tfrecorder_lite.load(output, "TRAIN", as_supervised=False, **kwargs)
    return [r["image/filename"].numpy().decode() for r in ds]


@pytest.mark.parametrize("hosts", [1, 3])
def test_the_order_is_load_global_shuffles_on_every_host(output, hosts):
    src = tfrecorder_lite.data_source(output, "TRAIN")
    for host in range(hosts):
        sampler = RecordSampler(src, seed=4, epochs=2, num_hosts=hosts, host_index=host)
        expected = _loaded(output, shuffle="global", seed=4, epochs=2, num_hosts=hosts,
                           host_index=host)
        assert len(sampler) == len(expected)
        assert _names_of(src, sampler) == expected
    assert _names_of(src, RecordSampler(src, shuffle=False, epochs=2)) == \
        _loaded(output, epochs=2)  # by index, in manifest order


def test_each_iteration_is_the_next_epoch_and_set_epoch_picks_one():
    sampler = RecordSampler(N, seed=2)
    first, second = list(sampler), list(sampler)
    assert sorted(first) == sorted(second) == list(range(N)) and first != second
    sampler.set_epoch(0)
    assert list(sampler) == first
    sampler.set_epoch(1)
    assert list(sampler) == second
    assert list(RecordSampler(N, seed=2, epochs=2)) == first + second


def test_a_state_resumes_mid_epoch_and_set_epoch_keeps_it():
    sampler = RecordSampler(N, seed=2, num_hosts=2, host_index=1)
    whole = list(sampler) + list(sampler)
    sampler.set_epoch(0)
    it = iter(sampler)
    head = [next(it) for _ in range(4)]
    state = json.loads(json.dumps(sampler.state_dict()))  # plain, JSON-ready
    assert state["position"] == 8  # 4 records on each of 2 hosts
    again = RecordSampler(N, seed=2, num_hosts=2, host_index=1)
    again.load_state_dict(state)
    again.set_epoch(0)  # a DistributedSampler-style loop calls it: the position stays
    assert len(again) == N // 2 - 4
    assert head + list(again) + list(again) == whole


@pytest.mark.parametrize("other, named", [
    (dict(source=N + 1), "num_records 30 (this sampler's: 31)"),
    (dict(seed=3), "seed 2 (this sampler's: 3)"),
    (dict(num_hosts=3, host_index=0), "num_hosts 2 (this sampler's: 3)"),
    (dict(host_index=0), "host_index 1 (this sampler's: 0)"),
    (dict(shuffle=False), "shuffle True (this sampler's: False)"),
])
def test_a_state_of_another_order_is_refused_naming_the_difference(other, named):
    state = RecordSampler(N, seed=2, num_hosts=2, host_index=1).state_dict()
    arguments = {**dict(source=N, seed=2, num_hosts=2, host_index=1), **other}
    with pytest.raises(SchemaError, match="start=0") as raised:
        RecordSampler(arguments.pop("source"), **arguments).load_state_dict(state)
    assert named in str(raised.value)


@pytest.mark.parametrize("arguments, message", [
    (dict(num_hosts=2, host_index=2), "host_index must be in"),
    (dict(num_hosts=2), "needs a seed"),
    (dict(start=-1), "start must be an int >= 0"),
    (dict(epochs=0), "epochs must be an int >= 1"),
    (dict(seed=1.5), "seed must be an int"),
])
def test_bad_arguments_are_refused(arguments, message):
    with pytest.raises(SchemaError, match=message):
        RecordSampler(N, **arguments)


def test_importing_the_package_imports_no_torch():
    done = subprocess.run([sys.executable, "-c", "import sys, tfrecorder_lite; "
                           "tfrecorder_lite.RecordSampler(3); assert 'torch' not in sys.modules"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


_JOB = os.path.join(os.path.dirname(__file__), "torch_resume.py")
EPOCHS = 2


def _run(kind, out, work, stop_after):
    done = subprocess.run([sys.executable, _JOB, kind, str(out), str(work), str(EPOCHS),
                           str(stop_after)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line[6:]) for line in done.stdout.splitlines()
            if line.startswith("BATCH ")]


@pytest.mark.slow  # PyTorch jobs with worker processes
@pytest.mark.parametrize("kind", ["stateful", "torch"])
@pytest.mark.parametrize("stop_after", [3, 10])  # 8 batches an epoch: in epoch 0, in epoch 1
def test_a_job_stopped_mid_epoch_resumes_in_a_new_process_exactly(output, tmp_path, kind,
                                                                  stop_after):
    whole = _run(kind, output, tmp_path / "whole", 0)
    records = [name for batch in whole for name in batch]
    assert records == _loaded(output, shuffle="global", seed=5, epochs=EPOCHS)
    (tmp_path / "job").mkdir()
    first = _run(kind, output, tmp_path / "job", stop_after)
    assert len(first) == stop_after
    rest = _run(kind, output, tmp_path / "job", 0)
    assert first + rest == whole  # nothing twice, nothing skipped
