"""The files a table names: resolved against their folder and stat'ed, each unusable one
refused with its reason, before any is read (the plan, for images and a row's other files, and
``validate()`` alike)."""

import os

import numpy as np
import pandas as pd

from .. import storage
from ..errors import UnsupportedURLError
from ..images.normalize import unreadable_reason
from .row_columns import TextColumn

_CHUNK = 1 << 16  # local files stat'ed at a time: per-row results are kept only that long


def stat_files(uris, reasons, base_dir, max_bytes, storage_options=None, fingerprint=None,
               column=None):
    """Resolve and stat the file of every row not in ``reasons``, which takes the refused ones
    with their reason: a URL this library cannot open, a missing file (with a hint when a
    relative path may resolve against the wrong folder), a file over ``max_bytes``.

    Local files are taken a chunk at a time; when any row names a remote file, all at once
    (so that each folder holding many of them is listed once).

    Args:
        uris: the column (a Series) of one cell per row (a path or URL, as the table has it).
        base_dir: the folder relative paths resolve against.
        fingerprint: a hashlib object that takes each found file's path, size and time.
        column: for a row's other files, the column a refused row's reason names.

    Returns:
        ``(paths, sizes)``: each row's path or URL (a TextColumn: None for an empty cell) and
        file size (an int64 array).
    """
    n = len(uris)
    remote = (base_dir is not None and storage.is_remote(base_dir)) or \
        bool(uris.astype("string").str.contains("://", regex=False).fillna(False).any())
    step = max(1, n if remote else _CHUNK)
    sizes, chunks, flags = np.zeros(n, dtype=np.int64), [], None
    refused_before = set(reasons)
    for start in range(0, n, step):
        part = uris.iloc[start:start + step]
        chunk = part.tolist()
        settled = [] if remote else _plain_absolute(part).tolist()
        paths, to_stat = [], []
        for offset, uri in enumerate(chunk):
            if start + offset in reasons:
                paths.append(None if pd.isna(uri) else str(uri))  # reported as is
                continue
            if settled and settled[offset] and type(uri) is str:  # resolves to itself
                path = uri
            else:
                try:
                    path = storage.resolve(uri, base_dir)
                except UnsupportedURLError as exc:
                    reasons[start + offset] = str(exc)
                    paths.append(None if pd.isna(uri) else str(uri))
                    continue
            to_stat.append(offset)
            paths.append(path)
        found = storage.stat_many([paths[i] for i in to_stat], storage_options)
        identities = []
        for offset, stat in zip(to_stat, found):
            position = start + offset
            if isinstance(stat, Exception):
                reasons[position] = unreadable_reason(stat)
                if isinstance(stat, FileNotFoundError):
                    reasons[position] += storage.relative_path_hint(chunk[offset], paths[offset],
                                                                    base_dir)
            elif stat[0] > max_bytes:
                reasons[position] = unreadable_reason(
                    storage.too_large(paths[offset], stat[0], max_bytes))
            else:
                sizes[position] = stat[0]
                identities.append(f"{paths[offset]}\0{stat[0]}\0{stat[1]}\n")
        if fingerprint is not None:
            fingerprint.update("".join(identities).encode())
        if remote:
            flags = [p is not None and storage.is_remote(p) for p in paths]
        chunks.append(TextColumn.compact(paths))  # the chunk's strings are freed here
    if column is not None:  # say which of the row's files it is
        for position in set(reasons) - refused_before:
            reasons[position] = f"{column}: {reasons[position]}"
    return TextColumn(chunks, flags), sizes


def _plain_absolute(uris):
    """Whether each cell is a local absolute path already in normal form (no ``//``, ``.``
    or ``..`` part, no trailing ``/``), which ``storage.resolve`` gives back as it is: a
    bool array, found for the whole column at once."""
    text = uris.astype("string")
    plain = text.str.startswith("/") & ~text.str.contains(r"//|/\.\.?(?:/|$)|/$|\x00",
                                                           regex=True)
    return plain.fillna(False).to_numpy(dtype=bool) if os.sep == "/" else \
        np.zeros(len(uris), dtype=bool)
