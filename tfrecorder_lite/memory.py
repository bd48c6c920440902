"""Memory the process no longer uses, handed back to the system."""

import ctypes
import functools

import numpy as np


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


class JoinedTexts:
    """Many texts kept as one joined text and each one's end: a few bytes a text where a list
    of str costs about fifty more (each str is an object of its own).

    ``len()``; an index gives one text, a slice (of step 1) a list of them.

    Args:
        texts: the texts (str).
    """

    def __init__(self, texts=()):
        texts = list(texts)
        self._text = "".join(texts)
        self._ends = np.cumsum([len(text) for text in texts], dtype=np.int64)

    @classmethod
    def joined(cls, parts):
        """One JoinedTexts of the texts of several, one after another."""
        out = cls()
        out._text = "".join(part._text for part in parts)
        offsets = np.cumsum([0] + [len(part._text) for part in parts[:-1]], dtype=np.int64)
        out._ends = np.concatenate([out._ends] + [part._ends + offset
                                                 for part, offset in zip(parts, offsets)])
        return out

    def __len__(self):
        return len(self._ends)

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise TypeError("JoinedTexts are sliced with a step of 1")
            stop = max(start, stop)
            begin = int(self._ends[start - 1]) if start else 0
            texts = []
            for end in self._ends[start:stop].tolist():
                texts.append(self._text[begin:end])
                begin = end
            return texts
        # an IndexError out of range; a negative index counts from the end
        index = range(len(self))[index]
        begin = int(self._ends[index - 1]) if index else 0
        return self._text[begin:int(self._ends[index])]
