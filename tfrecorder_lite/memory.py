"""Memory the process no longer uses, handed back to the system."""

import ctypes
import functools


@functools.lru_cache(maxsize=None)
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (or cannot be loaded)."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError, TypeError):  # not glibc (Windows: no CDLL(None))
        return None


def give_back_freed_memory():
    """Return the heap memory freed so far to the system where the C library can (glibc's
    ``malloc_trim``; elsewhere nothing happens): else many small arrays just let go stay
    part of the process, and what is allocated next grows it further."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
