"""Runners: what runs the shard tasks of a plan and hands their receipts back to the driver.

A runner takes the tasks (each a picklable ShardTask), the output Store and ``on_error``, calls
:func:`~tfrecorder_lite.shard.write_shard` on each wherever it runs them, and yields the
receipts as they come. It does nothing else: the lock, the folder's preparation, resuming and
the manifest stay with the driver (``writer.write_plan``), so every runner writes the same
bytes. :class:`JoblibRunner` runs them through joblib (threads, processes, or the dask, Ray or
Spark backend the caller configured with ``joblib.parallel_config``).
"""

import joblib

from . import storage
from .shard import write_shard
from .worker_errors import guarded, unwrapped

_FETCHING_THREADS_PER_WORKER = 4
_GIL_BOUND_SHARDS = 2  # shard tasks at once in threads when preparing rows is Python-bound


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
                parallel = joblib.Parallel(n_jobs=outer, prefer=prefer, return_as=return_as)
                break
            except ValueError:
                continue
        for result in parallel(joblib.delayed(guarded(write_shard))(task, store, on_error)
                               for task in tasks_of(shards, threads)):
            yield unwrapped(result)  # a worker's exception, whole on every backend


def parallelism(plan, shards, n_jobs):
    """``(outer n_jobs, prefer, threads per task)`` for this kind of image work.

    Shards are the unit joblib distributes (whatever backend ``joblib.parallel_config`` chose),
    and inside each task threads prepare its images, so one large shard still uses every core.
    Pillow decodes with the GIL released, so threads pay for decode checks; resizing is enough
    Python to prefer processes. A header check is short Python under the GIL, and each shard's
    writing thread (CRCs, writes) releases it: in threads, two shard tasks at once, each
    preparing in its own thread, keep two cores busy (more would only contend for the GIL;
    see benchmarks/README.md). So do records without images. Images behind URLs are mostly a
    wait for the store: more threads keep more chunks of requests in flight.
    """
    image = plan.image
    prefer = "processes" if image is not None and image.size is not None else "threads"
    workers = joblib.effective_n_jobs(n_jobs)
    outer = max(1, min(workers, len(shards)))
    threads = joblib.cpu_count() if n_jobs in (None, -1) else max(1, n_jobs)
    if image is not None and any(storage.is_remote(plan.paths[p]) for shard in shards
                                 for p in shard.positions):
        return outer, prefer, threads * _FETCHING_THREADS_PER_WORKER
    if image is None or (image.check == "header" and image.size is None):  # Python under the GIL
        backend, _ = joblib.parallel.get_active_backend(prefer=prefer)
        shared = getattr(backend, "supports_sharedmem", False)
        return (min(_GIL_BOUND_SHARDS, outer) if shared else outer), prefer, 1
    return outer, prefer, threads
