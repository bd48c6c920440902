"""Memory the process no longer uses, handed back to the system."""

import ctypes


def give_back_freed_memory():
    """Return the heap memory freed so far to the system where the C library can (glibc's
    ``malloc_trim``; elsewhere nothing happens): else many small arrays just let go stay
    part of the process, and what is allocated next grows it further."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError, TypeError):  # not glibc (Windows: no CDLL(None))
        pass
