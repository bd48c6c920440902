"""Reliability of the output folder: crash-safe resume (real SIGKILL, and a kill after every
single file operation), refusal to clobber, verify() and its CLI, leakage/duplicate reports and
byte-identical output whatever the parallelism.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import google_crc32c
import numpy as np
import pandas as pd
import pytest

import imagegen as ig
from processes import TESTS, kill_when
import tfrecorder_lite
from tfrecorder_lite import OutputExistsError, VerifyError

SHARD = re.compile(r"^(train|validation|test)-\d{5}-of-\d{5}\.tfrecord(\.gz|\.zz)?$")
STATE = ".tfrecorder_lite"


def convert(df, out, **options):
    options = {"n_jobs": 1, "progress": False, "on_error": "skip", **options}
    return df.tfrecord.to_tfrecord(out, **options)


def leftovers(out):
    """Temporary files and the state folder that a finished run must not leave behind."""
    found = [n for n in os.listdir(out) if n.endswith(".tmp")]
    return found + ([STATE] if os.path.exists(os.path.join(out, STATE)) else [])


def cli(*args, timeout=120):
    """Run the installed ``tfrecorder-lite`` command (or the module when it is not installed)."""
    script = os.path.join(os.path.dirname(sys.executable), "tfrecorder-lite")
    command = [script] if os.path.exists(script) else [sys.executable, "-m", "tfrecorder_lite.cli"]
    return subprocess.run(command + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A small table of good images over three splits with five bad rows interleaved."""
    root = tmp_path_factory.mktemp("mixed")
    df, bad = ig.mixed_table(root / "images", n_good=24)
    return df, bad


# ============================================================== crash-safe resume: real SIGKILL

CONVERT_SCRIPT = textwrap.dedent("""
    # A real conversion that stops for good before committing the shard that follows its
    # first argv[4] shard commits, once it has written the file argv[3] (then it is killed).
    import sys
    sys.path.insert(0, sys.argv[5])
    from processes import stop_before_shard_commit
    import tfrecorder_lite
    stop_before_shard_commit(sys.argv[3], after=int(sys.argv[4]))
    tfrecorder_lite.convert(sys.argv[1], sys.argv[2], num_shards=8, n_jobs=1, on_error="skip",
                            progress=False)
""")


@pytest.fixture(scope="module")
def big_job(tmp_path_factory):
    """A CSV of 160 160x160 JPEGs (relative paths) and one missing file, and the script that
    converts it into 8 shards, stopping at a chosen shard commit."""
    root = tmp_path_factory.mktemp("big")
    images = root / "images"
    size = 160
    y, x = np.mgrid[0:size, 0:size]
    base = np.stack([x * 255 // size, y * 255 // size, (x + y) * 127 // size], -1)
    noise = np.random.default_rng(0).integers(0, 24, (size, size, 3))
    lines = ["split,image_uri,label"]
    for i in range(160):
        pixels = (base + np.roll(noise, i * 7, axis=0)).clip(0, 255).astype(np.uint8)
        ig.save(images / f"img_{i:04d}.jpg", pixels, "JPEG", quality=80)
        lines.append(f"{'test' if i % 4 == 0 else 'train'},img_{i:04d}.jpg,class{i % 5}")
    lines.append("train,img_missing.jpg,class0")  # a bad row: resume must keep it rejected
    (images / "table.csv").write_text("\n".join(lines) + "\n")
    script = root / "convert.py"
    script.write_text(CONVERT_SCRIPT)
    return str(images / "table.csv"), str(script)


def _finished_shards(out):
    try:
        return [n for n in os.listdir(out) if SHARD.match(n)]
    except FileNotFoundError:
        return []


def _partial_shards(out):
    try:
        return [n for n in os.listdir(out) if n.endswith(".tmp") and SHARD.match(n[:-4])]
    except FileNotFoundError:
        return []


def _kill_before_shard_commit(script, csv, out, after, gate):
    """Run the conversion and SIGKILL it while it holds, written but not committed, the shard
    that follows its first ``after`` shard commits; fails unless it was killed there."""
    killed = kill_when([sys.executable, script, csv, out, str(gate), str(after), TESTS],
                       lambda: os.path.exists(gate))
    assert killed, "the conversion ended before it reached the gate"
    assert not os.path.exists(os.path.join(out, "metadata.json"))


def _receipted(out):
    """{shard name: os.stat} of the finished shards that have a receipt in the state folder."""
    state = os.path.join(out, STATE)
    names = [n[:-5] for n in os.listdir(state) if n.endswith(".json") and SHARD.match(n[:-5])]
    return {n: os.stat(os.path.join(out, n)) for n in names
            if os.path.exists(os.path.join(out, n))}


def test_resume_after_sigkill_gives_the_same_bytes_as_an_uninterrupted_run(big_job, tmp_path):
    csv, script = big_job
    out = str(tmp_path / "out")
    reference = str(tmp_path / "reference")

    _kill_before_shard_commit(script, csv, out, after=1, gate=tmp_path / "first")
    assert "metadata.json" not in os.listdir(out) and os.path.isdir(os.path.join(out, STATE))
    assert len(_partial_shards(out)) == 1, "killed while a shard was being written"
    kept = _receipted(out)
    assert len(kept) == len(_finished_shards(out)) == 1, "a finished shard has its receipt"

    # resume, and kill the resumed run too, four shards further on
    _kill_before_shard_commit(script, csv, out, after=4, gate=tmp_path / "second")
    later = _receipted(out)
    assert set(kept) < set(later) and len(later) == len(_finished_shards(out)) == 5
    kept = later

    result = tfrecorder_lite.convert(csv, out, num_shards=8, n_jobs=1, on_error="skip",
                                     progress=False)
    expected = tfrecorder_lite.convert(csv, reference, num_shards=8, n_jobs=2, on_error="skip",
                                       progress=False)

    assert result.counts == expected.counts == {"TRAIN": 120, "TEST": 40}
    assert list(result.rejected.index) == list(expected.rejected.index) == [160]
    assert ig.tree_digest(out) == ig.tree_digest(reference)  # every shard, metadata.json, ...
    assert leftovers(out) == []
    for name, st in kept.items():  # shards finished before a kill were kept, not rewritten
        now = os.stat(os.path.join(out, name))
        assert (now.st_ino, now.st_mtime_ns) == (st.st_ino, st.st_mtime_ns), name
    assert tfrecorder_lite.verify(out).startswith("OK")


# ============================================================== crash after every file operation

CRASH_HELPER = textwrap.dedent(r'''
    """Kill a conversion (SIGKILL, in a forked child) right after its k-th file operation, for
    every k; resume each time in this process and compare with an uninterrupted run."""
    import hashlib, json, os, shutil, signal, sys
    import tfrecorder_lite
    from tfrecorder_lite.storage import Store
    from tfrecorder_lite.storage.local import LocalPendingFile

    csv, work = sys.argv[1], sys.argv[2]
    OPTIONS = dict(num_shards=2, n_jobs=1, on_error="skip", progress=False)
    OPERATIONS = ((Store, "make_dirs"), (Store, "open_for_commit"), (LocalPendingFile, "commit"),
                  (Store, "remove"), (Store, "write_atomic"))

    def digest(folder):
        out = {}
        for dirpath, _, names in os.walk(folder):
            for name in names:
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    out[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
        return out

    def killed_after(k, out):
        marker = out + ".op"
        pid = os.fork()
        if pid == 0:
            try:
                count = [0]
                def wrap(name, function):
                    def wrapper(self, *args, **kwargs):
                        value = function(self, *args, **kwargs)
                        count[0] += 1  # nested ones too (write_atomic = open, write, commit)
                        if count[0] == k:
                            what = args[0] if args else getattr(self, "name", None)
                            what = what or os.path.basename(self.url)
                            with open(marker, "w") as f:
                                f.write(f"{name} {what}")
                            os.kill(os.getpid(), signal.SIGKILL)
                        return value
                    return wrapper
                for owner, name in OPERATIONS:
                    setattr(owner, name, wrap(name, getattr(owner, name)))
                tfrecorder_lite.convert(csv, out, **OPTIONS)
                os._exit(0)
            except BaseException:
                os._exit(3)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            with open(marker) as f:
                return f.read()
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            return None
        raise SystemExit(f"child ended with status {status}")

    reference = os.path.join(work, "reference")
    tfrecorder_lite.convert(csv, reference, **OPTIONS)
    expected = digest(reference)
    outcomes = []
    for k in range(1, 500):
        out = os.path.join(work, f"crash{k:03d}")
        operation = killed_after(k, out)
        if operation is None:
            break
        entry = {"k": k, "op": operation, "left": sorted(digest(out))}
        try:
            tfrecorder_lite.convert(csv, out, **OPTIONS)
        except Exception as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
        else:
            got = digest(out)
            entry["extra"] = sorted(set(got) - set(expected))
            entry["differ"] = sorted(n for n in expected if got.get(n) != expected[n])
        outcomes.append(entry)
        shutil.rmtree(out, ignore_errors=True)
    print(json.dumps(outcomes))
''')

# Crash points where resuming is known to fail (see the xfail tests below).
STATE_DIR_WITHOUT_JOB = {"make_dirs .tfrecorder_lite", "open_for_commit job.json"}
METADATA_WITHOUT_CLEANUP = {"commit metadata.json", "write_atomic metadata.json"}


@pytest.fixture(scope="module")
def crash_points(tmp_path_factory):
    root = tmp_path_factory.mktemp("crash")
    lines = ["split,image_uri,label"]
    for i in range(14):
        ig.save(root / f"c{i:02d}.png", ig.noise_rgb(6, 7, seed=i), "PNG")
        lines.append(f"{'test' if i % 3 == 0 else 'train'},c{i:02d}.png,{'ab'[i % 2]}")
    lines.append("train,gone.png,a")  # so that rejected.csv is written too
    (root / "table.csv").write_text("\n".join(lines) + "\n")
    (root / "helper.py").write_text(CRASH_HELPER)
    work = root / "work"
    work.mkdir()
    proc = subprocess.run([sys.executable, str(root / "helper.py"), str(root / "table.csv"),
                           str(work)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _resumed_cleanly(entry):
    return "error" not in entry and not entry["extra"] and not entry["differ"]


@pytest.mark.slow  # kills and resumes a conversion after each of its file operations
def test_resume_after_a_kill_following_any_file_operation(crash_points):
    operations = [e["op"] for e in crash_points]
    # 4 shards (2 per split) each written, committed and receipted; then the manifest files
    assert len(crash_points) >= 12
    for kind in ("open_for_commit", "commit"):
        shards = [op for op in operations if op.startswith(kind + " ")
                  and SHARD.match(op.split(" ", 1)[1])]
        assert len(shards) == 4, (kind, operations)
    failures = [e for e in crash_points
                if e["op"] not in STATE_DIR_WITHOUT_JOB | METADATA_WITHOUT_CLEANUP
                and not _resumed_cleanly(e)]
    assert failures == []


@pytest.mark.slow  # shares those kills
def test_resume_after_a_kill_before_job_json_is_written(crash_points):
    entries = [e for e in crash_points if e["op"] in STATE_DIR_WITHOUT_JOB]
    assert entries
    assert [e.get("error") for e in entries if not _resumed_cleanly(e)] == []


@pytest.mark.slow  # shares those kills
def test_resume_after_a_kill_between_metadata_and_cleanup(crash_points):
    entries = [e for e in crash_points if e["op"] in METADATA_WITHOUT_CLEANUP]
    assert entries
    assert [(e["op"], e.get("extra")) for e in entries if not _resumed_cleanly(e)] == []


# ============================================================== refusal and no-op

@pytest.mark.parametrize("check", ["header", "decode"])
def test_a_failing_disk_write_stops_the_run_and_leaves_no_partial_shard(mixed, tmp_path,
                                                                       monkeypatch, check):
    """Shards are written on a background thread; its errors (here ENOSPC on the third shard
    write) must surface in the caller, with no metadata.json and no temporary file left behind."""
    df, _ = mixed
    real_write = tfrecorder_lite.storage.PendingFile.write
    writes = []

    def write(pending, data):
        if SHARD.match(pending.name):
            writes.append(len(data))
            if len(writes) == 3:
                raise OSError(28, "No space left on device")
        return real_write(pending, data)

    monkeypatch.setattr(tfrecorder_lite.storage.PendingFile, "write", write)
    out = tmp_path / "out"
    with pytest.raises(OSError, match="No space left"):
        convert(df, out, check=check, on_error="skip")
    assert len(writes) == 3
    assert not (out / "metadata.json").exists()
    assert not list(out.glob("*.tmp"))
    monkeypatch.undo()
    result = convert(df, out, check=check, on_error="skip")  # the re-run finishes the job
    assert tfrecorder_lite.verify(out).startswith("OK") and sum(result.counts.values()) > 0


def test_refuses_a_folder_holding_an_unrelated_file(mixed, tmp_path):
    df, _ = mixed
    out = tmp_path / "out"
    out.mkdir()
    notes = out / "notes.txt"
    notes.write_text("my notes\n")
    before = os.stat(notes)
    with pytest.raises(OutputExistsError, match="notes.txt"):
        convert(df, out)
    assert os.listdir(out) == ["notes.txt"]
    assert notes.read_text() == "my notes\n"
    assert os.stat(notes).st_mtime_ns == before.st_mtime_ns

    result = convert(df, out, overwrite=True)
    assert notes.read_text() == "my notes\n" and os.stat(notes).st_ino == before.st_ino
    assert (out / "metadata.json").exists() and leftovers(out) == []
    assert sum(result.counts.values()) == 24
    assert tfrecorder_lite.verify(out).startswith("OK")


def test_second_run_of_the_same_job_is_a_no_op(mixed, tmp_path):
    df, bad = mixed
    out = tmp_path / "out"
    first = convert(df, out, num_shards=2)
    files_before = {n: os.stat(out / n) for n in os.listdir(out)}
    digest_before = ig.tree_digest(out)

    second = convert(df, out, num_shards=2)
    assert second.counts == first.counts
    assert second.labels == first.labels
    assert second.metadata == first.metadata
    assert list(second.rejected.index) == list(first.rejected.index)
    assert set(second.rejected.index) == set(bad)
    assert second.rejected["reason"].tolist() == first.rejected["reason"].tolist()
    assert ig.tree_digest(out) == digest_before
    for name, st in files_before.items():  # not even rewritten
        now = os.stat(out / name)
        assert (now.st_ino, now.st_mtime_ns) == (st.st_ino, st.st_mtime_ns), name


def test_a_different_job_is_refused_then_replaced_cleanly(mixed, tmp_path):
    df, _ = mixed
    out = tmp_path / "out"
    convert(df, out, num_shards=2)
    digest_before = ig.tree_digest(out)
    with pytest.raises(OutputExistsError):
        convert(df, out, num_shards=3)
    assert ig.tree_digest(out) == digest_before

    convert(df, out, num_shards=3, overwrite=True)
    shards = sorted(n for n in os.listdir(out) if SHARD.match(n))
    assert shards and all(n.endswith("-of-00003.tfrecord") for n in shards), shards
    assert leftovers(out) == []
    assert tfrecorder_lite.verify(out).startswith("OK")


def test_on_error_raise_never_returns_rejected_rows(mixed, tmp_path):
    df, bad = mixed
    image_level = df.drop(index=["missing", "badsplit"])  # only rows refused after reading
    out = tmp_path / "out"
    skipped = convert(image_level, out, on_error="skip")
    assert len(skipped.rejected) == len(bad) - 2
    digest = ig.tree_digest(out)
    with pytest.raises(tfrecorder_lite.InvalidRowError) as info:
        convert(image_level, out, on_error="raise")
    assert info.value.row == skipped.rejected.index[0]
    assert info.value.reason == skipped.rejected["reason"].iloc[0]
    assert ig.tree_digest(out) == digest  # the finished output is left as it was


def interrupt_before_the_manifest(monkeypatch, df, out, **options):
    """Run a conversion that is interrupted (Ctrl-C) just before metadata.json is written."""
    real_write_atomic = tfrecorder_lite.storage.Store.write_atomic

    def crash_at_the_manifest(store, name, data):
        if name == "metadata.json":
            raise KeyboardInterrupt("interrupted before the manifest")
        return real_write_atomic(store, name, data)

    with monkeypatch.context() as patch:
        patch.setattr(tfrecorder_lite.storage.Store, "write_atomic", crash_at_the_manifest)
        with pytest.raises(KeyboardInterrupt):
            convert(df, out, **options)
    assert not (out / "metadata.json").exists() and (out / ".tfrecorder_lite").is_dir()


def test_resume_rewrites_a_finished_shard_whose_bytes_changed(mixed, tmp_path, monkeypatch):
    df, _ = mixed
    expected = ig.tree_digest(convert(df, tmp_path / "reference", num_shards=2).output_dir)
    out = tmp_path / "out"
    interrupt_before_the_manifest(monkeypatch, df, out, num_shards=2)
    shard = out / sorted(n for n in os.listdir(out) if SHARD.match(n))[0]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01  # same size, different bytes: bit rot, or a stray write
    shard.write_bytes(bytes(data))
    convert(df, out, num_shards=2)
    assert ig.tree_digest(out) == expected
    assert leftovers(out) == []


def test_on_error_raise_does_not_resume_an_interrupted_skip_run_past_its_rejections(
        mixed, tmp_path, monkeypatch):
    df, bad = mixed
    image_level = df.drop(index=["missing", "badsplit"])
    out = tmp_path / "out"
    interrupt_before_the_manifest(monkeypatch, image_level, out, on_error="skip")
    with pytest.raises(tfrecorder_lite.InvalidRowError) as info:
        convert(image_level, out, on_error="raise")
    assert info.value.row in bad
    assert not (out / "metadata.json").exists()
    resumed = convert(image_level, out, on_error="skip")
    assert set(resumed.rejected.index) == set(bad) - {"missing", "badsplit"}
    assert tfrecorder_lite.verify(out).startswith("OK")


def test_rejected_csv_names_every_level_of_a_multi_index(tmp_path):
    good = ig.save(tmp_path / "good.png", ig.noise_rgb(8, 8), "PNG")
    df = pd.DataFrame({"split": ["train", "train"], "image_uri": [good, str(tmp_path / "gone.png")],
                       "label": ["a", "b"]},
                      index=pd.MultiIndex.from_tuples([("x", 1), ("y", 2)]))
    first = convert(df, tmp_path / "out")
    table = pd.read_csv(tmp_path / "out" / "rejected.csv", index_col=[0, 1])
    assert list(table.index) == [("y", 2)]
    assert list(table.columns) == ["split", "image_uri", "label", "reason"]
    assert table["reason"].tolist() == ["file not found"]
    second = convert(df, tmp_path / "out")
    pd.testing.assert_frame_equal(second.rejected, first.rejected)


def test_no_op_run_returns_the_same_rejected_rows(tmp_path):
    good = ig.save(tmp_path / "good.png", ig.noise_rgb(8, 8), "PNG")
    df = pd.DataFrame({"split": ["train", "train", "test"], "image_uri": [good, good, ""],
                       "label": ["a", "", "b"], "note": ["x", "", "z"]})
    first = convert(df, tmp_path / "out")
    second = convert(df, tmp_path / "out")
    assert len(first.rejected) == 2
    pd.testing.assert_frame_equal(second.rejected, first.rejected, check_dtype=False)


# ============================================================== verify()

@pytest.fixture(scope="module")
def finished(mixed, tmp_path_factory):
    df, _ = mixed
    out = tmp_path_factory.mktemp("finished") / "out"
    result = convert(df, out, num_shards=2, shuffle=False)
    return str(out), result


@pytest.fixture
def copy(finished, tmp_path):
    """A private copy of the finished output, and the name and bytes of its biggest shard."""
    source, result = finished
    out = str(tmp_path / "out")
    shutil.copytree(source, out)
    shards = [n for n in os.listdir(out) if SHARD.match(n)]
    name = max(shards, key=lambda n: os.path.getsize(os.path.join(out, n)))
    with open(os.path.join(out, name), "rb") as f:
        data = f.read()
    assert len(ig.record_offsets(data)) >= 3
    return out, name, data


def _verify_error(out, **options):
    with pytest.raises(VerifyError) as info:
        tfrecorder_lite.verify(out, **options)
    return info.value


def test_verify_passes_with_a_one_line_summary(finished):
    out, result = finished
    summary = tfrecorder_lite.verify(out)
    assert "\n" not in summary and summary.startswith("OK")
    assert f"{sum(result.counts.values())} records" in summary
    assert "6 shard(s)" in summary and "3 split(s)" in summary


def flip_a_bit_mid_shard(out, name, data, bit):
    """Rewrite shard ``name`` (bytes ``data``) with one bit flipped mid-file; returns the index of
    the record that holds it."""
    middle = len(data) // 2
    record = next(i for i, (a, b) in enumerate(ig.record_offsets(data)) if a <= middle < b)
    damaged = bytearray(data)
    damaged[middle] ^= bit
    with open(os.path.join(out, name), "wb") as f:
        f.write(damaged)
    return record


def test_verify_names_the_shard_and_record_of_a_flipped_byte(copy):
    out, name, data = copy
    record = flip_a_bit_mid_shard(out, name, data, 0x01)
    error = _verify_error(out)
    assert f"{name}: record {record}:" in str(error), str(error)
    assert any(p.startswith(f"{name}: record {record}:") for p in error.problems)


def test_verify_names_the_shard_and_record_of_a_truncation(copy):
    out, name, data = copy
    spans = ig.record_offsets(data)
    record = len(spans) // 2
    with open(os.path.join(out, name), "wb") as f:
        f.write(data[: spans[record][0] + 20])  # cut inside a record
    error = _verify_error(out)
    assert f"{name}: record {record}: truncated" in str(error), str(error)


def test_verify_names_a_shard_cut_between_records(copy):
    out, name, data = copy
    spans = ig.record_offsets(data)
    with open(os.path.join(out, name), "wb") as f:
        f.write(data[: spans[-1][0]])  # the last record is gone, the rest is well-formed
    error = _verify_error(out)
    assert name in str(error) and all(p.startswith(name) for p in error.problems)
    assert any("records, metadata.json says" in p for p in error.problems), error.problems


def test_verify_names_a_deleted_shard(copy):
    out, name, _ = copy
    os.remove(os.path.join(out, name))
    error = _verify_error(out)
    assert error.problems == [f"{name}: shard file is missing"]


def test_verify_detects_damage_in_a_compressed_shard(mixed, tmp_path):
    df, _ = mixed
    out = tmp_path / "out"
    convert(df, out, num_shards=1, compression="GZIP")
    name = "train-00000-of-00001.tfrecord.gz"
    path = out / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    error = _verify_error(out)
    assert name in str(error) and "record" in str(error)


def _replace_image(out, name, record, encoded):
    """Rewrite one record of a shard with other image bytes, keeping every CRC and the
    manifest's bytes and checksums consistent: only decoding the image can find the damage."""
    import tensorflow as tf

    path = os.path.join(out, name)
    raws = [r.numpy() for r in tf.data.TFRecordDataset(path)]
    example = tf.train.Example.FromString(raws[record])
    example.features.feature["image/encoded"].bytes_list.value[0] = encoded
    raws[record] = example.SerializeToString()
    with tf.io.TFRecordWriter(path) as writer:
        for raw in raws:
            writer.write(raw)
    index = os.path.join(out, tfrecorder_lite.output.layout.index_name(name))
    with open(index, "w") as f:
        f.write(tfrecorder_lite.record.framing.index_text(len(raw) for raw in raws))
    meta_path = os.path.join(out, "metadata.json")
    with open(meta_path, encoding="utf-8") as f:
        metadata = json.load(f)
    for split in metadata["splits"].values():
        for shard in split["shards"]:
            if shard["name"] == name:
                shard["bytes"] = os.path.getsize(path)
                with open(path, "rb") as f:
                    shard["crc32c"] = f"{google_crc32c.value(f.read()):08x}"
    with open(meta_path, "w", encoding="utf-8") as f:
        json.dump(metadata, f, indent=2)


def test_verify_decode_finds_an_image_that_does_not_decode(copy):
    out, name, _ = copy
    _replace_image(out, name, 2, b"\xff\xd8\xff\xe0 this is not really a JPEG")
    assert tfrecorder_lite.verify(out).startswith("OK")  # framing and manifest are consistent
    error = _verify_error(out, decode=True)
    assert error.problems[0].startswith(f"{name}: record 2:"), error.problems


def test_verify_decode_reports_only_the_real_problem(copy):
    out, name, _ = copy
    _replace_image(out, name, 2, b"\xff\xd8\xff\xe0 this is not really a JPEG")
    error = _verify_error(out, decode=True)
    assert len(error.problems) == 1, error.problems


@pytest.mark.slow  # starts the installed command four times
def test_cli_verify_exit_status_and_messages(copy):
    out, name, data = copy
    fine = cli("verify", out)
    assert fine.returncode == 0, fine.stderr
    assert len(fine.stdout.strip().splitlines()) == 1 and fine.stdout.startswith("OK")

    decoded = cli("verify", out, "--decode")
    assert decoded.returncode == 0, decoded.stderr[-2000:]
    lines = decoded.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("OK") and "decoded" in lines[0]

    record = flip_a_bit_mid_shard(out, name, data, 0x10)
    broken = cli("verify", out)
    assert broken.returncode == 1
    assert f"{name}: record {record}:" in broken.stderr and broken.stdout == ""
    assert "Traceback" not in broken.stderr

    empty = os.path.join(out, "nothing_here")
    os.mkdir(empty)
    missing = cli("verify", empty)
    assert missing.returncode == 2 and "metadata.json" in missing.stderr
    assert "Traceback" not in missing.stderr


# ============================================================== leakage and duplicates

def test_validate_reports_leakage_duplicates_and_identical_rows(tmp_path):
    one = ig.encode(ig.noise_rgb(10, 12, seed=1), "PNG")
    two = ig.encode(ig.noise_rgb(10, 12, seed=2), "PNG")
    paths = {
        "a": ig.write_bytes(tmp_path / "a.png", one),
        "b": ig.write_bytes(tmp_path / "copy_of_a.png", one),
        "c": ig.write_bytes(tmp_path / "c.png", two),
        "d": ig.write_bytes(tmp_path / "copy_of_c.png", two),
        "f": ig.save(tmp_path / "f.png", ig.noise_rgb(10, 12, seed=3), "PNG"),
        "g": ig.write_bytes(tmp_path / "val_copy_of_a.png", one),
    }
    df = pd.DataFrame(
        [("train", paths["a"], "x"), ("test", paths["b"], "x"), ("train", paths["c"], "y"),
         ("train", paths["d"], "y"), ("train", paths["c"], "y"), ("train", paths["f"], "x"),
         ("validation", paths["g"], "y")],
        columns=["split", "image_uri", "label"], index=list("abcdefg"))
    for check in ("header", "decode"):
        problems = df.tfrecord.validate(check=check, n_jobs=1)
        by_row = problems.groupby("row")["problem"].apply(list).to_dict()
        assert set(by_row) == {"b", "d", "e", "g"}, (check, by_row)

        (leak,) = by_row["b"]
        assert leak.startswith("train/test leakage") and "'a'" in leak and paths["a"] in leak
        assert problems.loc[problems.row == "b", "value"].tolist() == [paths["b"]]
        (dup,) = by_row["d"]
        assert dup.startswith("duplicate image") and "'c'" in dup and paths["c"] in dup
        assert problems.loc[problems.row == "d", "value"].tolist() == [paths["d"]]
        assert by_row["e"] == ["identical to row 'c'"]
        (val,) = by_row["g"]
        assert "leakage" in val and "'a'" in val and paths["a"] in val


def test_validate_is_empty_for_a_clean_table(mixed):
    df, bad = mixed
    clean = df.drop(index=list(bad))
    # the table's images are one gradient pattern with noise: near-duplicates of each other
    # by design (tests/test_near_duplicates.py checks those)
    assert clean.tfrecord.validate(check="decode", n_jobs=1, leakage="ignore").empty
    problems = df.tfrecord.validate(check="decode", n_jobs=1, leakage="ignore")
    assert set(problems["row"]) == set(bad)


# ============================================================== determinism

@pytest.mark.parametrize("options", [
    {"check": "decode"},
    {"check": "header", "compression": "GZIP"},
    {"check": "decode", "image_size": (16, 16), "num_shards": 3},
], ids=["decode", "header-gzip", "resized"])
def test_output_bytes_do_not_depend_on_parallelism(mixed, tmp_path, options):
    df, bad = mixed
    digests = {}
    for n_jobs in (1, 2, -1):
        out = tmp_path / f"jobs{n_jobs}"
        result = convert(df, out, n_jobs=n_jobs, **options)
        assert set(result.rejected.index) == set(bad)
        assert sum(result.counts.values()) + len(result.rejected) == len(df)
        digests[n_jobs] = ig.tree_digest(out)
    assert "rejected.csv" in digests[1] and "metadata.json" in digests[1]
    assert len([n for n in digests[1] if SHARD.match(n)]) >= 3
    assert digests[1] == digests[2] == digests[-1]


def test_seed_changes_the_order_and_only_the_order(mixed, tmp_path):
    df, _ = mixed
    a = convert(df, tmp_path / "a", num_shards=1, seed=0)
    b = convert(df, tmp_path / "b", num_shards=1, seed=1)
    c = convert(df, tmp_path / "c", num_shards=1, seed=0)
    assert ig.tree_digest(a.output_dir) == ig.tree_digest(c.output_dir)
    shard = "train-00000-of-00001.tfrecord"
    ra = [r["image/filename"] for r in ig.read_examples(a.output_dir) if r["_shard"] == shard]
    rb = [r["image/filename"] for r in ig.read_examples(b.output_dir) if r["_shard"] == shard]
    assert ra != rb and sorted(ra) == sorted(rb)


# ============================================================== shard checksums

def _shard_entries(metadata):
    return [s for info in metadata["splits"].values() for s in info["shards"]]


def _rewrite_metadata(out, change):
    path = os.path.join(out, "metadata.json")
    with open(path, encoding="utf-8") as f:
        metadata = json.load(f)
    for shard in _shard_entries(metadata):
        change(shard)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(metadata, f)


def test_each_shard_has_the_crc32c_of_its_bytes_and_sha256_on_request(mixed, tmp_path):
    df, _ = mixed
    plain = convert(df, tmp_path / "plain", num_shards=2)
    with_sha = convert(df, tmp_path / "sha", num_shards=2, sha256=True)
    for result, has_sha in ((plain, False), (with_sha, True)):
        for shard in _shard_entries(result.metadata):
            with open(os.path.join(result.output_dir, shard["name"]), "rb") as f:
                data = f.read()
            assert shard["crc32c"] == f"{google_crc32c.value(data):08x}"
            assert ("sha256" in shard) == has_sha
            if has_sha:
                assert shard["sha256"] == hashlib.sha256(data).hexdigest()
    for name in ig.tree_digest(tmp_path / "plain"):  # the records themselves are the same
        if SHARD.match(name):
            assert ig.sha256_file(tmp_path / "plain" / name) == \
                ig.sha256_file(tmp_path / "sha" / name)


@pytest.mark.parametrize("checksums", [("crc32c",), ("crc32c", "sha256"), ("sha256",)])
def test_verify_checks_every_checksum_the_manifest_has(copy, checksums):
    """("sha256",) is an output of an earlier version, which had no CRC32C: still verified."""
    out, name, _ = copy

    def keep(shard):
        with open(os.path.join(out, shard["name"]), "rb") as f:
            content = f.read()
        shard.pop("crc32c", None)
        shard.pop("sha256", None)
        if "crc32c" in checksums:
            shard["crc32c"] = f"{google_crc32c.value(content):08x}"
        if "sha256" in checksums:
            shard["sha256"] = hashlib.sha256(content).hexdigest()

    _rewrite_metadata(out, keep)
    assert tfrecorder_lite.verify(out).startswith("OK")

    def disagree(shard):  # the file no longer matches what the manifest says of it
        if shard["name"] == name:
            for kind in checksums:
                shard[kind] = "0" * len(shard[kind])

    _rewrite_metadata(out, disagree)
    with pytest.raises(VerifyError) as info:
        tfrecorder_lite.verify(out)
    assert sorted(info.value.problems) == sorted(
        f"{name}: {kind} differs from metadata.json" for kind in checksums)
