"""Run the shard tasks as an Apache Beam pipeline (Dataflow, Flink, Spark runners, DirectRunner).

The driver plans, locks, prepares the folder and writes ``metadata.json`` as with any runner
(``writer.write_plan``); :class:`BeamRunner` only runs the tasks. Each task is staged as a
file in the output folder's state (``.tfrecorder_lite/<shard>.task``, with its sha256 in the
pipeline), so the pipeline itself carries one short line per shard, whatever the table's size.
A worker reads its task, writes the shard and leaves the receipt in the state folder, where
the driver reads it back once the pipeline is done: no result has to travel back through the
runner. A row that stops a task (``on_error="raise"``) is left there too
(``<shard>.failed``), so the driver raises it as an InvalidRowError whatever the runner did
with the worker's exception.
"""

import copy
import hashlib
import json
import pickle
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from .. import redaction
from ..errors import ManifestError, MissingDependencyError, SchemaError
from ..output.layout import STATE_DIR, failure_name, receipt_name, task_name
from ..output.manifest import Receipt, ShardEntry
from .runners import parallelism
from .task import write_shard

logger = redaction.logger(__name__)  # every record redacted

_INSTALL = "pip install 'tfrecorder_lite[beam]'"
_STAGING_THREADS = 16  # task files uploaded at once into an object store


def beam_modules():
    """``(apache_beam, PipelineOptions)``; MissingDependencyError when Beam is not installed."""
    try:
        import apache_beam
        from apache_beam.options.pipeline_options import PipelineOptions
    except ImportError as exc:
        raise MissingDependencyError(
            f"runner= runs the conversion as an Apache Beam pipeline, and apache-beam is not "
            f"installed ({exc}); install it with: {_INSTALL}") from None
    return apache_beam, PipelineOptions


def runner_for(runner, pipeline_options=None):
    """The runner of ``to_tfrecord(runner=..., pipeline_options=...)``.

    Args:
        runner: None (the default joblib runner), or the name of a Beam runner
            (``"DirectRunner"``, ``"DataflowRunner"``, ``"FlinkRunner"``, ...).
        pipeline_options: a dict of Beam pipeline options or a ``PipelineOptions``; only with
            a Beam runner.

    Returns:
        None for the default runner, else a BeamRunner.

    Raises:
        SchemaError: a runner that is not a name, or pipeline options without a runner.
        MissingDependencyError: Beam (or the runner's own extra) is not installed.
    """
    if runner is None:
        if pipeline_options is not None:
            raise SchemaError("pipeline_options are options of a Beam pipeline: pass runner= "
                              "too, e.g. runner=\"DataflowRunner\"")
        return None
    if not isinstance(runner, str) or not runner.strip():
        raise SchemaError(f"runner must be the name of an Apache Beam runner, e.g. "
                          f"\"DirectRunner\" or \"DataflowRunner\", not {runner!r}")
    return BeamRunner(runner.strip(), pipeline_options)


class BeamRunner:
    """Runs shard tasks as the Beam pipeline ``Create(staged tasks) | Reshuffle() |
    Map(write_staged_shard)``, and waits for it.

    Args:
        runner_name: a Beam runner's name, e.g. ``"DataflowRunner"``.
        pipeline_options: a dict of pipeline options (``{"project": ..., "region": ...,
            "temp_location": ...}``) or a ``PipelineOptions``; ``runner_name`` wins over a
            runner it names.

    Raises:
        SchemaError: an unknown runner name, or options that are not a dict or
            PipelineOptions.
        MissingDependencyError: apache-beam, or the runner's own extra, is not installed.
    """

    def __init__(self, runner_name, pipeline_options=None):
        self.runner_name = runner_name
        self.options = _pipeline_options(runner_name, pipeline_options)

    def __repr__(self):
        return f"BeamRunner({self.runner_name!r})"

    def run(self, plan, tasks_of, shards, store, on_error):
        """Yield the Receipt of each shard of ``shards`` once the pipeline is done.

        Takes the arguments of ``runners.JoblibRunner.run``. A task stopped by a bad row gives
        a Receipt whose ``failed`` names it (the first by table position when several were).
        """
        beam, _ = beam_modules()
        state = store.child(STATE_DIR)
        _, _, threads = parallelism(plan, shards, -1)
        for name in state.list():  # rows that stopped an earlier run's tasks
            if name.endswith(failure_name("")):
                state.remove(name)
        staged = stage_tasks(state, tasks_of(shards, threads))
        if not staged:
            return
        logger.info("running %d shard task(s) on Beam's %s", len(staged), self.runner_name)
        try:
            with beam.Pipeline(options=self.options) as pipeline:
                _ = (pipeline | "Tasks" >> beam.Create(staged)
                     | "Spread" >> beam.Reshuffle()
                     | "WriteShards" >> beam.Map(write_staged_shard, store, on_error))
        except Exception:
            failed = _failures(state, [name for name, _ in staged])
            if failed:  # the row, whole, whatever the runner made of the worker's exception
                yield Receipt(ShardEntry(failed[1], 0, 0), failed=failed[0])
                return
            raise
        for name, _ in staged:
            yield _receipt(state, name)


def stage_tasks(state, tasks):
    """Stage every task of the iterable ``tasks``; returns their ``(shard name, sha256)``.

    Into an object store, ``_STAGING_THREADS`` uploads are in flight at once; only a bounded
    number of tasks are held in memory.
    """
    if state.is_local:
        return [stage_task(state, task) for task in tasks]
    staged, pending = [], deque()
    with ThreadPoolExecutor(_STAGING_THREADS, thread_name_prefix="tfrecorder_lite-stage") as pool:
        for task in tasks:
            pending.append(pool.submit(stage_task, state, task))
            if len(pending) >= 2 * _STAGING_THREADS:
                staged.append(pending.popleft().result())
        staged.extend(future.result() for future in pending)
    return staged


def stage_task(state, task):
    """Write ``task`` into the ``state`` folder; returns ``(shard name, sha256 of the file)``."""
    data = pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL)
    state.write_atomic(task_name(task.name), data)
    return task.name, hashlib.sha256(data).hexdigest()


def staged_task(state, name, digest):
    """The ShardTask staged under ``name``, once its bytes match ``digest``."""
    data = state.read_bytes(task_name(name))
    if hashlib.sha256(data).hexdigest() != digest:
        raise ManifestError(f"{state.path(task_name(name))} changed after it was staged "
                            "(another conversion of this folder?); it was not run")
    return pickle.loads(data)  # noqa: S301 (bytes this run wrote: their sha256 is checked)


class ShardStopped(Exception):
    """A row stopped a shard's task (``on_error="raise"``); the row is in the state folder."""


def write_staged_shard(staged, store, on_error):
    """Write the shard staged as ``staged``: ``(shard name, sha256)`` (a worker's whole job).

    Its receipt is left in the state folder by ``write_shard``, a row that stopped it in
    ``<shard>.failed``. Returns the shard's name.

    Raises:
        ShardStopped: with ``on_error="raise"``, a row could not be written (the pipeline
            stops; the driver raises the row as InvalidRowError).
    """
    name, digest = staged
    state = store.child(STATE_DIR)
    receipt = write_shard(staged_task(state, name, digest), store, on_error)
    if receipt.failed is not None:
        position, reason = receipt.failed
        state.write_atomic(failure_name(name), json.dumps({"position": position,
                                                           "reason": reason}))
        raise ShardStopped(f"{name}: the row at table position {position} cannot be written: "
                           f"{reason}")
    return name


def _failures(state, names):
    """``((position, reason), shard name)`` of the first row (by table position) that stopped
    a task of ``names``, or None."""
    found = []
    for name in names:
        content = state.read_json(failure_name(name))
        if isinstance(content, dict) and {"position", "reason"} <= content.keys():
            found.append(((int(content["position"]), str(content["reason"])), name))
    return min(found) if found else None


def _receipt(state, name):
    """The receipt a worker left for the shard ``name``."""
    content = state.read_json(receipt_name(name))
    if content is None:
        raise ManifestError(f"the Beam pipeline finished, but the shard {name} left no receipt "
                            f"in {state.url}: its task did not run, or wrote elsewhere (the "
                            "workers must write the same output folder as the driver)")
    return Receipt.from_json(content, state.path(receipt_name(name)))


def _pipeline_options(runner_name, options):
    """A PipelineOptions for ``runner_name`` from a dict or a PipelineOptions (copied)."""
    _, PipelineOptions = beam_modules()
    if options is None:
        options = PipelineOptions(flags=[])
    elif isinstance(options, dict):
        bad = [key for key in options if not isinstance(key, str)]
        if bad:
            raise SchemaError(f"pipeline_options keys must be option names, not {bad[0]!r}")
        options = PipelineOptions(flags=[], **options)
    elif isinstance(options, PipelineOptions):
        options = copy.deepcopy(options)
    else:
        raise SchemaError(f"pipeline_options must be a dict or a Beam PipelineOptions, not "
                          f"{type(options).__name__}")
    from apache_beam.options.pipeline_options import SetupOptions, StandardOptions
    options.view_as(StandardOptions).runner = runner_name
    setup = options.view_as(SetupOptions)
    if setup.save_main_session is None:  # the tasks need nothing of __main__ (the table!)
        setup.save_main_session = False
    _check_runner(runner_name)
    return options


def _check_runner(runner_name):
    """SchemaError for a name Beam does not know; MissingDependencyError for a runner whose
    own extra is missing (``apache-beam[gcp]`` for Dataflow)."""
    from apache_beam.runners.runner import create_runner
    try:
        create_runner(runner_name)
        if runner_name.endswith("DataflowRunner"):  # it imports its client only when it runs
            from apache_beam.runners.dataflow.internal import apiclient  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            f"the Beam runner {runner_name!r} needs a package that is not installed ({exc}); "
            "for Dataflow: pip install 'apache-beam[gcp]'") from None
    except ValueError as exc:
        raise SchemaError(f"runner={runner_name!r} is not a Beam runner: {exc}") from None
