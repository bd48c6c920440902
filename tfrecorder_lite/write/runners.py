"""Runners: what runs the shard tasks of a plan and hands their receipts back to the driver.

A runner takes the tasks (each a picklable ShardTask), the output Store and ``on_error``, calls
:func:`~tfrecorder_lite.write.task.write_shard` on each wherever it runs them, and yields the
receipts as they come. It does nothing else: the lock, the folder's preparation, resuming and
the manifest stay with the driver (``writer.write_plan``), so every runner writes the same
bytes. :class:`JoblibRunner` runs them through joblib (threads, processes, or the dask, Ray or
Spark backend the caller configured with ``joblib.parallel_config``).
"""

import math
import time
from dataclasses import dataclass

import joblib

from .. import redaction
from .task import write_shard
from .worker_errors import guarded, unwrapped

logger = redaction.logger(__name__)  # every record redacted

_FETCHING_THREADS_PER_WORKER = 4
_GIL_BOUND_SHARDS = 2  # shard tasks at once in threads when preparing rows is Python-bound

# The cost model of `parallelism`, measured on a 2-core x86-64 VM shared with other work
# (Python 3.11, joblib 1.6, 2026-11), with benchmarks/policy.py and the scripts named in
# benchmarks/README.md ("The writer's policy"), which also has the rows, the crossover and what
# the model predicts on 8, 16 and 64 cores.
#
# CPU seconds a row costs, summed over a worker's threads and the kernel's work for them: a
# fixed part, plus a part per byte of its image (reading, checking, framing with CRCs, writing
# and syncing it; decoding it, JPEGs at 1/8 scale, for "decode"). Fitted to warm process
# pools writing the 3,000-image set of benchmarks/ (74 KB an image) listed 10 times and its
# 12 MP photos (3.6 MB) listed twice (medians of 5 interleaved rounds): 175 and 7,175 us a row
# with header checks, 1,211 and 51,450 with decode checks. Rows without images: 24-28 us a row
# for 300,000 rows of 5 scalar columns.
_ROW_SECONDS = {"header": 30e-6, "decode": 160e-6, None: 25e-6}
_BYTE_SECONDS = {"header": 2.0e-9, "decode": 14e-9, None: 0.0}
# Rows a second one process writes at most, however many cores it has: each row's Python runs
# under its one GIL. Header checks: threads on 2 cores (7,800-8,400 rows a second at 30,000 and
# 90,000 rows, where they were GIL-bound). Decode checks: 1 / the CPU to prepare a 64x48 JPEG
# in one thread (160-170 us, nearly all Python around Pillow's decoder). Rows without images:
# 1 / their CPU, all of it Python.
_ONE_PROCESS_ROWS_PER_SECOND = {"header": 8000.0, "decode": 6000.0, None: 40000.0}
# Wall seconds from asking for worker processes to their first results: each starts a fresh
# interpreter and imports joblib and tfrecorder_lite.write.task, without pandas or TensorFlow. For 2
# workers (benchmarks/worker_start.py): 0.67-1.53 s, median 1.02 s, while other work kept the
# machine busy; 0.34-0.52 s, median 0.40 s, when it was quiet (0.69-1.29 s, median 0.70 s,
# when workers imported pandas). The busy figure: cold runs of benchmarks/policy.py, busy too,
# found threads and processes level at 30,000 header rows and processes ahead at 90,000.
_WORKER_START_SECONDS = 1.0
# joblib keeps a process pool it started for 300 s after its last task (idle_worker_timeout);
# a pool started by this process within that time is taken to be still running (no start cost).
_POOL_KEPT_SECONDS = 240.0
_pool = {"workers": 0, "last_used": -math.inf}


class JoblibRunner:
    """Runs shard tasks through ``joblib.Parallel``.

    Args:
        n_jobs: joblib workers (-1: all cores), as the caller's backend counts them.
    """

    def __init__(self, n_jobs=-1):
        self.n_jobs = n_jobs

    def run(self, plan, tasks_of, shards, store, on_error):
        """Yield the Receipt of each shard of ``shards``, in the order they finish.

        Args:
            plan: the WritePlan (for the kind of work: images, checks, remote paths).
            tasks_of: ``tasks_of(shards, threads)`` makes the ShardTasks lazily, so the driver
                never holds every shard's rows at once.
            shards: the ShardSpecs to write.
            store: the output folder.
            on_error: "raise" or "skip", passed to each task.
        """
        outer, prefer, threads = parallelism(plan, shards, self.n_jobs)
        for return_as in ("generator_unordered", "generator", "list"):
            try:  # receipts as they come, where the backend can (Ray's returns a list at the end)
                parallel = joblib.Parallel(n_jobs=outer, prefer=prefer, return_as=return_as,
                                           pre_dispatch="n_jobs")  # tasks made ahead: rows held
                break
            except ValueError:
                continue
        processes = _default_processes(prefer, outer)
        try:
            for result in parallel(joblib.delayed(guarded(write_shard))(task, store, on_error)
                                   for task in tasks_of(shards, threads)):
                yield unwrapped(result)  # a worker's exception, whole on every backend
        finally:
            if processes:
                _pool.update(workers=max(outer, _pool["workers"]), last_used=time.monotonic())


@dataclass(frozen=True)
class Work:
    """What writing some shards asks of the machine.

    Attributes:
        check: "header", "decode", "resize", or None for rows without images.
        rows: rows to write.
        source_bytes: bytes of their image files (without images: of their records).
        tasks: shard tasks.
        largest_task: rows of the largest shard task.
        remote: whether images are read from a remote store.
    """

    check: str
    rows: int
    source_bytes: int
    tasks: int
    largest_task: int = 0
    remote: bool = False

    @classmethod
    def of(cls, plan, shards):
        """The Work of writing ``shards`` of ``plan``."""
        image = plan.image
        check = None if image is None else "resize" if image.size is not None else \
            "decode" if image.phash else image.check  # the perceptual hash decodes pixels
        remote = image is not None and any(plan.paths.any_remote(s.positions) for s in shards)
        sizes = [len(s.positions) for s in shards]
        return cls(check, sum(sizes), sum(s.source_bytes for s in shards), len(shards),
                   max(sizes, default=0), remote)


def predicted_seconds(work, cores, processes, start_seconds=_WORKER_START_SECONDS):
    """Wall seconds the cost model predicts for ``work`` on ``cores`` cores, in threads of
    this process or in worker processes (started in ``start_seconds``), for header and decode
    checks and rows without images.

    The work's CPU spreads over the cores either way. In threads, all rows share one
    process's GIL; each worker process has a GIL of its own, but there are only as many busy
    ones as there are shard tasks (a task's rows all go through one), and they must start first.
    """
    cpu = work.rows * _ROW_SECONDS[work.check] + work.source_bytes * _BYTE_SECONDS[work.check]
    one_process = _ONE_PROCESS_ROWS_PER_SECOND[work.check]
    if processes:
        spread = work.rows / max(1, min(cores, work.tasks))
        return start_seconds + max(cpu / cores, max(spread, work.largest_task) / one_process)
    return max(cpu / cores, work.rows / one_process)


def _start_seconds(workers):
    """Seconds to get ``workers`` worker processes ready: none when this process ran a pool
    that large lately (joblib keeps it), else a cold start."""
    warm = _pool["workers"] >= workers and \
        time.monotonic() - _pool["last_used"] < _POOL_KEPT_SECONDS
    return 0.0 if warm else _WORKER_START_SECONDS


def _callers_backend():
    """``(backend, prefer)`` that a caller set with ``joblib.parallel_config``: the backend
    object when they named one (else None), and their "threads"/"processes" hint (else None)."""
    as_threads, _ = joblib.parallel.get_active_backend(prefer="threads")
    as_processes, _ = joblib.parallel.get_active_backend(prefer="processes")
    if type(as_threads) is type(as_processes):  # a named backend ignores the hint
        return as_threads, None
    config = getattr(joblib.parallel._backend, "config", {})  # joblib has no public getter
    prefer = config.get("prefer") if isinstance(config, dict) else None
    return None, prefer if prefer in ("threads", "processes") else None


def _default_processes(prefer, outer):
    """Whether joblib will start (or reuse) its default process pool for this call."""
    backend, _ = _callers_backend()
    return backend is None and prefer == "processes" and outer > 1


def parallelism(plan, shards, n_jobs):
    """``(outer n_jobs, prefer, threads per task)`` for writing ``shards`` of ``plan``.

    Shards are the unit joblib distributes, and inside each task threads prepare its images,
    so one large shard still uses every core. Where the caller chose a backend or a
    preference with ``joblib.parallel_config``, it is used. Otherwise: resizing is enough
    Python to prefer processes; images behind URLs are mostly a wait for the store, so threads
    keep many chunks of requests in flight; header and decode checks and rows without images
    go to threads or to processes, whichever the cost model predicts to finish first, worker
    start-up included (:func:`predicted_seconds`).

    In threads, Python-bound work (header checks, rows without images) runs two shard tasks at
    once, each preparing in one thread: more would only contend for the GIL, while each
    shard's writing thread (CRCs, writes) releases it. In processes it runs one thread per
    task, on as many tasks as cores.
    """
    work = Work.of(plan, shards)
    workers = joblib.effective_n_jobs(n_jobs)
    outer = max(1, min(workers, len(shards)))
    cores = joblib.cpu_count() if n_jobs in (None, -1) else max(1, n_jobs)
    backend, prefer = _callers_backend()
    if backend is not None:
        processes = not getattr(backend, "supports_sharedmem", False)
    elif prefer is not None:
        processes = prefer == "processes"
    elif work.check == "resize":
        processes = True
    elif work.remote or outer < 2:
        processes = False
    else:
        start = _start_seconds(outer)
        in_threads = predicted_seconds(work, cores, False)
        in_processes = predicted_seconds(work, cores, True, start)
        processes = in_processes < in_threads
        logger.debug("%d rows, %d bytes, check %s, %d tasks on %d cores: threads %.2f s, "
                     "processes %.2f s (start %.2f s) predicted", work.rows, work.source_bytes,
                     work.check, work.tasks, cores, in_threads, in_processes, start)
    prefer = "processes" if processes else "threads"
    if work.remote:
        threads = cores * _FETCHING_THREADS_PER_WORKER
    elif work.check in ("header", None):
        threads = 1
        if not processes:
            outer = min(_GIL_BOUND_SHARDS, outer)
    else:
        threads = cores
    logger.debug("writing %d shard(s): %d task(s) at once in %s, %d thread(s) each",
                 len(shards), outer, prefer, threads)
    return outer, prefer, threads
