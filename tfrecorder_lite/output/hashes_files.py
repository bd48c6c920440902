"""The hashes files beside the shards (``hashes-g0000.csv``, one per generation): what they
hold, and reading one back checked against what ``metadata.json`` records of it.

A hashes file lists each image a generation wrote: its table row, split, URI, the sha256 of
its file, its label and its perceptual hashes. An append knows the images already written
from these files alone, so one that is missing, edited or damaged is refused with the reason,
never read as if it were whole.
"""

import io

import pandas as pd

from ..errors import ManifestError
from ..record.framing import file_digest
from .layout import hashes_generation

HASH_COLUMNS = ["row", "split", "image_uri", "sha256", "label", "phash", "crops"]
_RESTORE = ("restore it from a copy of the output, or convert the whole table again "
            "(overwrite=True)")


def checksums(size, crc32c):
    """What ``metadata.json`` records of a hashes file: its size and CRC32C (hex)."""
    return {"bytes": size, "crc32c": crc32c}


def _missing(store, name):
    return ManifestError(
        f"{store.path(name)}: missing. metadata.json lists it: the images generation "
        f"{hashes_generation(name)} wrote, which an append compares its rows with; {_RESTORE}")


def _differs(found, recorded):
    return (f"not the file this output wrote ({found}; metadata.json records "
            f"{recorded}): edited or damaged; {_RESTORE}")


def check_present(store, near):
    """Refuse an output whose hashes files are missing or not the size metadata.json records,
    without reading them (an append's check before it writes anything; reading one checks
    its bytes).

    Args:
        store: the output's Store.
        near: metadata.json's ``near_duplicates`` entry.

    Raises:
        ManifestError: naming the file, what is wrong and what to do.
    """
    recorded = near.get("checksums", {})
    for name in near.get("hashes", ()):
        size = store.size(name)
        if size is None:
            raise _missing(store, name)
        expected = recorded.get(name, {}).get("bytes")
        if expected is not None and size != expected:
            raise ManifestError(f"{store.path(name)}: " + _differs(f"{size} bytes",
                                                                   f"{expected} bytes"))


def read_hashes_file(store, name, recorded=None, columns=HASH_COLUMNS):
    """The hashes file ``name`` of the output in ``store``, as text columns.

    Args:
        store: the output's Store.
        name: the file name, as metadata.json lists it.
        recorded: its ``{"bytes", "crc32c"}`` in metadata.json, or None (outputs written
            before they were recorded): the file's bytes must match them.
        columns: the columns to read (of HASH_COLUMNS; the file must have them all).

    Raises:
        ManifestError: the file is missing, cannot be read, differs from what metadata.json
            records, or is not a hashes file; the message says which, and what to do.
    """
    where = store.path(name)
    try:
        data = store.read_bytes(name)
    except FileNotFoundError:
        raise _missing(store, name) from None
    except OSError as exc:
        raise ManifestError(f"{where}: could not be read ({exc})") from exc
    if recorded is not None:
        found = checksums(len(data), file_digest(data)["crc32c"])
        if found != checksums(recorded.get("bytes"), recorded.get("crc32c")):
            raise ManifestError(f"{where}: " + _differs(
                f"{found['bytes']} bytes, CRC32C {found['crc32c']}",
                f"{recorded.get('bytes')} bytes, CRC32C {recorded.get('crc32c')}"))
    try:
        header = list(pd.read_csv(io.BytesIO(data), nrows=0).columns)
        if header == HASH_COLUMNS:
            return pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False,
                               usecols=list(columns))[list(columns)]
    except (ValueError, UnicodeDecodeError) as exc:  # pandas' ParserError is a ValueError
        raise ManifestError(f"{where}: not a hashes file ({exc}); {_RESTORE}") from None
    raise ManifestError(f"{where}: not a hashes file (its columns are "
                        f"{', '.join(map(str, header))}, not {', '.join(HASH_COLUMNS)}); "
                        f"{_RESTORE}")
