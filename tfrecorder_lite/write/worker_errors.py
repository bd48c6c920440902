"""A worker's exception carried back to the driver as a value, so every engine delivers it whole.

Some joblib backends mangle an exception raised in a task: joblibspark (Spark) turns every one
into ``TypeError: '_ExceptionWithTraceback' object is not iterable``. A task run through
:class:`guarded` returns its exception instead of raising it, and :func:`unwrapped` raises it
on the driver with the worker's traceback as its cause.
"""

import pickle
import traceback


class WorkerTraceback(Exception):
    """The traceback of an exception raised in a worker (shown as the cause of the exception)."""

    def __str__(self):
        return "\n" + self.args[0]


class TaskFailed:
    """A task's exception and its traceback text, as the task's result.

    Attributes:
        exception: the exception (a RuntimeError naming it when it does not pickle).
        trace: the worker's traceback, as text.
    """

    def __init__(self, exception, trace):
        try:
            pickle.loads(pickle.dumps(exception))
        except Exception:  # noqa: BLE001 (whatever made it unpicklable: its text still crosses)
            exception = RuntimeError(f"{type(exception).__name__}: {exception}")
        self.exception = exception
        self.trace = trace


class guarded:  # noqa: N801 (used as a function: guarded(write_shard)(task, ...))
    """``function``, made to return its exception as a TaskFailed instead of raising it.

    Keeps the function's ``__name__``, so that engines show the task by its own name.
    """

    def __init__(self, function):
        self.function = function
        self.__name__ = getattr(function, "__name__", type(function).__name__)

    def __call__(self, *args):
        try:
            return self.function(*args)
        except Exception as exc:  # noqa: BLE001 (MemoryError too: it goes back whole)
            return TaskFailed(exc, traceback.format_exc())


def unwrapped(result):
    """``result``; raises the worker's exception when it is a TaskFailed."""
    if isinstance(result, TaskFailed):
        raise result.exception from WorkerTraceback(result.trace)
    return result
