"""Pillow's warnings about the images being checked, kept from the user's process.

``warnings.catch_warnings`` swaps the process's warning filters and puts them back on exit:
two threads inside at once put back each other's filters, and a filter of the library (one
ignoring every warning) could outlive the conversion. So every block of the library that
silences Pillow goes through :func:`silenced`, one at a time.
"""

import contextlib
import os
import threading
import warnings

_ONE_AT_A_TIME = threading.RLock()  # (a block inside another of the same thread goes on)


def _new_lock_after_fork():
    """A forked child gets a lock of its own (the parent's may have been held by a thread
    that the child does not have)."""
    global _ONE_AT_A_TIME
    _ONE_AT_A_TIME = threading.RLock()


if hasattr(os, "register_at_fork"):  # (not on Windows, which does not fork)
    os.register_at_fork(after_in_child=_new_lock_after_fork)


@contextlib.contextmanager
def silenced(*categories):
    """Ignore the warnings of ``categories`` (every warning when none is given) inside the
    block, leaving the process's warning filters as they were on exit."""
    with _ONE_AT_A_TIME, warnings.catch_warnings():
        for category in categories or (Warning,):
            warnings.simplefilter("ignore", category)
        yield
