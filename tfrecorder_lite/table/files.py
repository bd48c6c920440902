"""The files a table names: resolved against their folder and stat'ed, each unusable one
refused with its reason, before any is read (the plan, for images and a row's other files, and
``validate()`` alike)."""

import pandas as pd

from .. import storage
from ..errors import UnsupportedURLError
from ..images.normalize import unreadable_reason


def stat_files(uris, reasons, base_dir, max_bytes, storage_options=None, fingerprint=None,
               column=None):
    """Resolve and stat the file of every row not in ``reasons``, which takes the refused ones
    with their reason: a URL this library cannot open, a missing file (with a hint when a
    relative path may resolve against the wrong folder), a file over ``max_bytes``.

    Args:
        uris: one cell per row (a path or URL, as the table has it).
        base_dir: the folder relative paths resolve against.
        fingerprint: a hashlib object that takes each found file's path, size and time.
        column: for a row's other files, the column a refused row's reason names.

    Returns:
        ``(paths, sizes)`` per row.
    """
    paths, sizes, to_stat = [], [0] * len(uris), []
    refused_before = set(reasons)
    for position, uri in enumerate(uris):
        path = None if pd.isna(uri) else str(uri)  # reported as is if refused
        if position not in reasons:
            try:
                path = storage.resolve(uri, base_dir)
            except UnsupportedURLError as exc:
                reasons[position] = str(exc)
            else:
                to_stat.append(position)
        paths.append(path)
    found = storage.stat_many([paths[p] for p in to_stat], storage_options)
    identities = []
    for position, stat in zip(to_stat, found):
        if isinstance(stat, Exception):
            reasons[position] = unreadable_reason(stat)
            if isinstance(stat, FileNotFoundError):
                reasons[position] += storage.relative_path_hint(uris[position], paths[position],
                                                                base_dir)
        elif stat[0] > max_bytes:
            reasons[position] = unreadable_reason(
                storage.too_large(paths[position], stat[0], max_bytes))
        else:
            sizes[position] = stat[0]
            identities.append(f"{paths[position]}\0{stat[0]}\0{stat[1]}\n")
    if fingerprint is not None:
        fingerprint.update("".join(identities).encode())
    if column is not None:  # say which of the row's files it is
        for position in set(reasons) - refused_before:
            reasons[position] = f"{column}: {reasons[position]}"
    return paths, sizes
