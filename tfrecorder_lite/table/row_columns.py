"""Per-row values kept as columns (compact arrays), not as Python objects a row.

A write plan lives for the whole run in the driver. Kept as one tuple and one string per row,
a million-row table's paths and labels cost hundreds of bytes a row; kept as columns, a few
dozen. The Python values of a shard's rows are made only when its task is made.
"""

import numpy as np
import pandas as pd


class TextColumn:
    """A text (or None) per row, in one compact string array (Arrow's where pandas has it),
    with a flag per row saying whether it is a URL of a remote store.

    Args:
        chunks: lists of texts or None (or ``TextColumn.compact`` of them), one after another.
        remote: a bool per row, or None when no row is remote.
    """

    def __init__(self, chunks, remote=None):
        arrays = [c if isinstance(c, pd.api.extensions.ExtensionArray) else self.compact(c)
                  for c in chunks]
        self._values = pd.array([], dtype="string") if not arrays else _one_chunk(
            arrays[0] if len(arrays) == 1 else
            pd.concat([pd.Series(a) for a in arrays], ignore_index=True).array)
        self._remote = None if remote is None or not np.any(remote) else \
            np.asarray(remote, dtype=bool)

    @staticmethod
    def compact(texts):
        """A list of texts (or None) as one compact array (a chunk of a TextColumn)."""
        return pd.array(texts, dtype="string")

    def __len__(self):
        return len(self._values)

    def __getitem__(self, position):
        """The text (None for a missing one) at ``position``: found in its chunk, where a
        ``take`` of one would cost time in proportion to the whole column."""
        value = self._values[int(position)]
        return None if value is None or pd.isna(value) else value

    def take(self, positions):
        """The texts (None for a missing one) at ``positions``, as a list."""
        picked = self._values.take(np.asarray(positions, dtype=np.intp))
        return picked.to_numpy(dtype=object, na_value=None).tolist()

    def texts(self, positions):
        """The texts at ``positions`` as a pandas array of text (missing ones NA), kept as the
        column keeps them: no Python string a row."""
        return self._values.take(np.asarray(positions, dtype=np.intp))

    def any_remote(self, positions):
        """Whether a row at ``positions`` holds a remote URL."""
        return self._remote is not None and bool(
            self._remote[np.asarray(positions, dtype=np.intp)].any())


def _one_chunk(values):
    """``values`` in one piece: a ``take`` from an Arrow array of many chunks joins them all
    first, a copy of the whole column for every take (and two threads taking at once held
    two such copies)."""
    if isinstance(values, pd.arrays.ArrowStringArray):
        chunked = values.__arrow_array__()
        if chunked.num_chunks > 1:
            import pyarrow  # there when pandas keeps its strings in Arrow

            return pd.arrays.ArrowStringArray(pyarrow.chunked_array([chunked.combine_chunks()]))
    return values


class LabelColumns:
    """Per row, one ``(id, text)`` per label field (id -1, text "": none), from each field's
    column of ids and its vocabulary.

    Args:
        ids: per field, the label id of every row.
        vocabularies: per field, id -> text.
    """

    def __init__(self, ids, vocabularies):
        self.ids = tuple(np.asarray(i, dtype=np.int64) for i in ids)
        self._vocabularies = tuple(tuple(v) for v in vocabularies)

    def __len__(self):
        return len(self.ids[0]) if self.ids else 0

    def __getitem__(self, position):
        return self.take([position])[0]

    def __iter__(self):
        return iter(self.take(np.arange(len(self))))

    def take(self, positions):
        """The rows' values at ``positions``, as a list of tuples of ``(id, text)`` (rows of
        the same labels share one tuple)."""
        positions = np.asarray(positions, dtype=np.intp)
        if len(self.ids) == 1:
            values = {-1: ((-1, ""),), **{i: ((i, text),)
                                          for i, text in enumerate(self._vocabularies[0])}}
            return [values[i] for i in self.ids[0][positions].tolist()]
        fields = []
        for ids, vocabulary in zip(self.ids, self._vocabularies):
            pairs = {-1: (-1, ""), **{i: (i, text) for i, text in enumerate(vocabulary)}}
            fields.append([pairs[i] for i in ids[positions].tolist()])
        return list(zip(*fields)) if fields else [() for _ in positions]
