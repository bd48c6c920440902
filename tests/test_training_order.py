"""load() by index: shuffle="global" (every record once per epoch, a new seeded permutation
each epoch, labels mixed from the first batch), several hosts sharing one global order (and
changing their number mid-way), and exact resume after a kill -9, through
tf.train.Checkpoint and through Keras with tfrecorder_lite.BackupAndRestore."""

import collections
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfrecorder_lite
from tfrecorder_lite import SchemaError
from tfrecorder_lite.read.order import GlobalOrder, permute
from conftest import photo, save

LABELS = 10


@pytest.fixture(scope="session")
def sorted_output(tmp_path_factory):
    """100 images, 10 of each of 10 labels, written in label order into 3 TRAIN shards."""
    root = tmp_path_factory.mktemp("sorted")
    rows = [("TRAIN", save(photo(12, 12, seed=i), root / "images" / f"{i}.jpg"),
             f"label{i // 10}") for i in range(100)]
    table = pd.DataFrame(rows, columns=["split", "image_uri", "label"])
    return table.tfrecord.to_tfrecord(root / "out", num_shards=3, shuffle=False,
                                      progress=False).output_dir


def _names(dataset):
    return [name.decode() for r in dataset for name in np.atleast_1d(r["image/filename"].numpy())]


def _labels(dataset):
    return [int(label) for _, labels in dataset for label in np.atleast_1d(labels.numpy())]


def test_the_table_is_sorted_by_label_in_manifest_order(sorted_output):
    src = tfrecorder_lite.data_source(sorted_output, "TRAIN")
    assert [int(src[i]["image/class/label"]) for i in range(100)] == \
        [i // 10 for i in range(100)]


def test_global_shuffle_visits_every_record_once_per_epoch_in_a_new_order(sorted_output):
    ds = tfrecorder_lite.load(sorted_output, "TRAIN", shuffle="global", seed=3,
                              as_supervised=False, epochs=3)
    assert len(ds) == 300
    names = _names(ds)
    epochs = [names[i * 100:(i + 1) * 100] for i in range(3)]
    everything = sorted(f"{i}.jpg" for i in range(100))
    assert all(sorted(epoch) == everything for epoch in epochs)
    assert len({tuple(epoch) for epoch in epochs}) == 3  # each epoch its own permutation
    again = tfrecorder_lite.load(sorted_output, "TRAIN", shuffle="global", seed=3,
                                 as_supervised=False)
    assert _names(again) == epochs[0]  # the same seed, the same order
    other = tfrecorder_lite.load(sorted_output, "TRAIN", shuffle="global", seed=4,
                                 as_supervised=False)
    assert _names(other) != epochs[0]
    unseeded = [_names(tfrecorder_lite.load(sorted_output, "TRAIN", shuffle="global",
                                            as_supervised=False)) for _ in range(2)]
    assert unseeded[0] != unseeded[1] and sorted(unseeded[0]) == everything


def test_global_shuffle_mixes_the_labels_of_a_sorted_table(sorted_output):
    for seed in range(5):
        ds = tfrecorder_lite.load(sorted_output, "TRAIN", shuffle="global", seed=seed,
                                  batch_size=64, epochs=2)
        batches = [labels.numpy() for _, labels in ds]
        assert len(set(batches[0].tolist())) >= 5  # first 64 positions of epoch 0
        second = np.concatenate(batches)[100:164]  # ... and of epoch 1
        assert len(set(second.tolist())) >= 5
    buffered = tfrecorder_lite.load(sorted_output, "TRAIN", shuffle=True, seed=0,
                                    shuffle_buffer=8, batch_size=64)
    assert len(set(next(iter(buffered))[1].numpy().tolist())) < 10  # what it fixes


def test_without_shuffle_the_index_pipeline_reads_in_manifest_order(sorted_output):
    ds = tfrecorder_lite.load(sorted_output, "TRAIN", epochs=2, batch_size=7)
    assert _labels(ds) == [i // 10 for i in range(100)] * 2
    assert _labels(tfrecorder_lite.load(sorted_output, "TRAIN", start=95, epochs=1)) == [9] * 5


def test_a_start_position_continues_the_same_order(sorted_output):
    whole = _names(tfrecorder_lite.load(sorted_output, "TRAIN", shuffle="global", seed=5,
                                        as_supervised=False, epochs=2))
    for start in (0, 1, 63, 100, 137):
        rest = _names(tfrecorder_lite.load(sorted_output, "TRAIN", shuffle="global", seed=5,
                                           as_supervised=False, start=start,
                                           epochs=2 - start // 100))
        assert rest == whole[start:]


@pytest.mark.parametrize("hosts", [1, 2, 3])
def test_hosts_read_disjoint_complete_epochs(sorted_output, hosts):
    shares = [_names(tfrecorder_lite.load(sorted_output, "TRAIN", shuffle="global", seed=9,
                                          as_supervised=False, num_hosts=hosts,
                                          host_index=h)) for h in range(hosts)]
    everything = [f"{i}.jpg" for i in range(100)]
    assert sorted(n for share in shares for n in share) == sorted(everything)  # once each
    whole = _names(tfrecorder_lite.load(sorted_output, "TRAIN", shuffle="global", seed=9,
                                        as_supervised=False))
    for h, share in enumerate(shares):  # each host's share of one global order
        assert share == whole[h::hosts]


def test_two_hosts_resume_as_three_from_a_global_position(sorted_output):
    """2 hosts read 10 batches of 4 (global position 80), then 3 hosts go on from there."""
    def host(num_hosts, index, start, epochs):
        return tfrecorder_lite.load(sorted_output, "TRAIN", shuffle="global", seed=11,
                                    as_supervised=False, batch_size=4, start=start,
                                    epochs=epochs, num_hosts=num_hosts, host_index=index)

    whole = _names(tfrecorder_lite.load(sorted_output, "TRAIN", shuffle="global", seed=11,
                                        as_supervised=False, epochs=2))
    before = [[name for batch in host(2, h, 0, 2).take(10) for name in names_of(batch)]
              for h in range(2)]
    seen = sorted(n for share in before for n in share)
    assert seen == sorted(whole[:80])
    after = [_names(host(3, h, 80, 2)) for h in range(3)]  # the rest of epochs 0 and 1
    assert sorted(seen + [n for share in after for n in share]) == sorted(whole)
    for h in range(3):
        assert after[h] == whole[80 + h::3]


def names_of(batch):
    return [n.decode() for n in batch["image/filename"].numpy()]


def test_an_input_context_picks_the_host(sorted_output):
    context = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=2)
    by_context = _names(tfrecorder_lite.load(sorted_output, "TRAIN", shuffle="global", seed=2,
                                             as_supervised=False, input_context=context))
    by_index = _names(tfrecorder_lite.load(sorted_output, "TRAIN", shuffle="global", seed=2,
                                           as_supervised=False, num_hosts=3, host_index=2))
    assert by_context == by_index and len(by_context) == 33

    strategy = tf.distribute.get_strategy()
    per_replica = strategy.distribute_datasets_from_function(
        lambda ctx: tfrecorder_lite.load(sorted_output, "TRAIN", shuffle="global", seed=2,
                                         batch_size=10, input_context=ctx))
    assert sum(int(tf.size(labels)) for _, labels in per_replica) == 100


@pytest.mark.parametrize("arguments, message", [
    (dict(shuffle="globl"), "shuffle must be True, False or 'global', not 'globl'"),
    (dict(start=-1), "start must be a global position"),
    (dict(start=1.5), "start must be a global position"),
    (dict(epochs=0), "epochs must be an int >= 1, or None"),
    (dict(num_hosts=2, host_index=2), "host_index must be in \\[0, num_hosts\\)"),
    (dict(num_hosts=0), "num_hosts at least 1"),
    (dict(shuffle="global", num_hosts=2), "needs a seed .*the same on every host"),
    (dict(num_hosts=2, input_context=tf.distribute.InputContext(2, 1)),
     "input_context or num_hosts and host_index, not both"),
])
def test_bad_order_arguments_are_refused(sorted_output, arguments, message):
    with pytest.raises(SchemaError, match=message):
        tfrecorder_lite.load(sorted_output, "TRAIN", **arguments)


def test_a_compressed_output_has_no_global_shuffle(outputs_of_every_kind):
    out, _ = outputs_of_every_kind["gzip"]
    with pytest.raises(SchemaError, match="compression='GZIP'.*cannot be read by offset"):
        tfrecorder_lite.load(out, "TRAIN", shuffle="global")
    assert len(list(tfrecorder_lite.load(out, "TRAIN", shuffle=True))) > 0


def test_permutations_are_bijections_and_differ_by_epoch_and_seed():
    for n in (1, 2, 3, 5, 16, 17, 1000, 4097):
        for seed, epoch in ((0, 0), (1, 0), (1, 1)):
            assert sorted(permute(np.arange(n), n, seed, epoch)) == list(range(n))
    n = 1000
    orders = {tuple(permute(np.arange(n), n, s, e)) for s in range(3) for e in range(3)}
    assert len(orders) == 9
    order = GlobalOrder(n, shuffle=True, seed=4)
    positions = np.array([5, 1999, 1000, 3])  # across epochs 0 and 1
    assert order.records(positions).tolist() == [
        permute([5], n, 4, 0)[0], permute([999], n, 4, 1)[0], permute([0], n, 4, 1)[0],
        permute([3], n, 4, 0)[0]]
    # spread: a label-sorted table of 10 labels shows all of them in 64 positions
    assert len({int(i) // 100 for i in permute(np.arange(64), n, 0, 0)}) >= 9


# ------------------------------------------------------------------ resume after kill -9

_JOB = os.path.join(os.path.dirname(__file__), "resume_jobs.py")


def _run(mode, out, work, shuffle, steps, kill_after):
    done = subprocess.run([sys.executable, _JOB, mode, str(out), str(work), shuffle,
                           str(steps), str(kill_after)], capture_output=True, text=True,
                          timeout=600)
    batches = [json.loads(line[6:]) for line in done.stdout.splitlines()
               if line.startswith("BATCH ")]
    state = [int(line[6:]) for line in done.stdout.splitlines() if line.startswith("STATE ")]
    return done, batches, state


@pytest.fixture(scope="module")
def uninterrupted(sorted_output, tmp_path_factory):
    """The batches of each (mode, shuffle) run without interruption, cached."""
    runs = {}

    def get(mode, shuffle, steps):
        if (mode, shuffle) not in runs:
            work = tmp_path_factory.mktemp(f"whole-{mode}-{shuffle}")
            done, batches, state = _run(mode, sorted_output, work, shuffle, steps, 0)
            assert done.returncode == 0, done.stderr[-3000:]
            assert len(batches) == steps
            runs[(mode, shuffle)] = batches, state
        return runs[(mode, shuffle)]

    return get


@pytest.mark.slow  # a dozen training jobs in subprocesses
@pytest.mark.parametrize("shuffle", ["global", "none"])
@pytest.mark.parametrize("kill_after", [1, 9, 26])
def test_a_job_killed_after_k_batches_resumes_exactly_from_its_checkpoint(
        sorted_output, tmp_path, uninterrupted, shuffle, kill_after):
    steps = 30  # 4 records a batch: epoch 0 ends in batch 25
    expected, state = uninterrupted("checkpoint", shuffle, steps)
    assert state and state[0] < 16 << 10  # the iterator's saved state
    done, first, _ = _run("checkpoint", sorted_output, tmp_path, shuffle, steps, kill_after)
    assert done.returncode == -9 and len(first) == kill_after
    done, rest, state = _run("checkpoint", sorted_output, tmp_path, shuffle, steps, 0)
    assert done.returncode == 0, done.stderr[-3000:]
    assert first + rest == expected  # nothing twice, nothing skipped
    assert state[0] < 16 << 10
    if shuffle == "global":
        assert [n for batch in expected[:25] for n in batch] != \
            [f"{i}.jpg" for i in range(100)]


@pytest.mark.slow  # training jobs in subprocesses
@pytest.mark.parametrize("shuffle", ["default", "buffer"])
def test_load_s_own_pipelines_resume_exactly_after_a_kill(sorted_output, tmp_path,
                                                          uninterrupted, shuffle):
    """load() without shuffle, and with shuffle=True (its buffer saved), from local shards."""
    steps = 20  # of the 25 batches of one epoch
    expected, _ = uninterrupted("checkpoint", shuffle, steps)
    done, first, _ = _run("checkpoint", sorted_output, tmp_path, shuffle, steps, 7)
    assert done.returncode == -9 and len(first) == 7
    done, rest, _ = _run("checkpoint", sorted_output, tmp_path, shuffle, steps, 0)
    assert done.returncode == 0, done.stderr[-3000:]
    assert first + rest == expected  # nothing twice, nothing skipped
    if shuffle == "buffer":
        assert sorted(n for batch in expected for n in batch) != \
            [n for batch in expected for n in batch]


@pytest.mark.slow  # training jobs in subprocesses
@pytest.mark.parametrize("mode, kill_after", [("keras", 4), ("keras", 17), ("keras-map", 17)])
def test_keras_resumes_its_input_with_backup_and_restore(sorted_output, tmp_path,
                                                         uninterrupted, mode, kill_after):
    steps = 30  # 2 epochs of 15 steps
    expected, _ = uninterrupted("keras", "global", steps)  # keras-map: the same batches
    done, first, _ = _run(mode, sorted_output, tmp_path, "global", steps, kill_after)
    assert done.returncode == -9 and len(first) == kill_after
    metadata = json.load(open(tmp_path / "backup" / "training_metadata.json"))
    assert metadata["steps"] == kill_after
    done, rest, _ = _run(mode, sorted_output, tmp_path, "global", steps, 0)
    assert done.returncode == 0, done.stderr[-3000:]
    assert first + rest == expected  # the same batches; the run ends where it would have
    counts = collections.Counter(n for batch in expected[:25] for n in batch)
    assert set(counts.values()) == {1}  # epoch 0: each record once


def test_backup_and_restore_needs_an_endless_dataset_read_by_index(sorted_output, tmp_path):
    for dataset in (tfrecorder_lite.load(sorted_output, "TRAIN", shuffle=True),
                    tfrecorder_lite.load(sorted_output, "TRAIN", shuffle="global", seed=1),
                    tfrecorder_lite.load(sorted_output, "TRAIN", shuffle=True).map(
                        lambda image, label: (image, label))):
        with pytest.raises(SchemaError, match="epochs=None"):
            tfrecorder_lite.BackupAndRestore(str(tmp_path), dataset, save_freq=1)


def test_backup_and_restore_counts_batches_through_maps_only(sorted_output, tmp_path):
    endless = tfrecorder_lite.load(sorted_output, "TRAIN", shuffle="global", seed=1,
                                   batch_size=4, epochs=None)
    mapped = endless.map(lambda image, label: (tf.cast(image, tf.float32) / 255, label),
                         num_parallel_calls=2).prefetch(1)
    backup = tfrecorder_lite.BackupAndRestore(str(tmp_path), mapped, save_freq=1)
    assert backup._position is endless._tfrecorder_lite_position
    for changed, name in ((endless.unbatch(), "UnbatchDataset"),
                          (endless.map(lambda i, l: (i, l)).filter(lambda i, l: True),
                           "FilterDataset")):
        with pytest.raises(SchemaError, match=f"the dataset has a {name}"):
            tfrecorder_lite.BackupAndRestore(str(tmp_path), changed, save_freq=1)


def test_the_table_pipeline_has_no_global_shuffle(tmp_path):
    table = pd.DataFrame([("TRAIN", save(photo(8, 8, seed=i), tmp_path / f"{i}.png", "PNG"),
                           "a") for i in range(2)], columns=["split", "image_uri", "label"])
    with pytest.raises(SchemaError, match="shuffle must be one of \\(False, True\\), not "
                                          "'global'"):
        table.tfrecord.dataset("TRAIN", shuffle="global")
