"""metadata.json and its companions: the on-disk contract between writer and loader.

``metadata.json`` is written last; its presence means the output folder is complete.
"""

import json
import re

from .errors import ManifestError, SchemaError
from .storage import Store

METADATA = "metadata.json"
LABELS = "labels.txt"
REJECTED = "rejected.csv"
FORMAT_VERSION = 1
SHARD_NAME = re.compile(r"^(train|validation|test)-\d{5}-of-\d{5}\.tfrecord(\.gz|\.zz)?$")


def write_labels(store, labels):
    """Write ``labels.txt``: one label per line, line number = id."""
    store.write_atomic(LABELS, "".join(f"{t}\n" for t in labels))


def write_metadata(store, metadata):
    """Write ``metadata.json`` atomically (call this last)."""
    store.write_atomic(METADATA, json.dumps(metadata, indent=2, sort_keys=False) + "\n")


def read_metadata(output_dir, storage_options=None):
    """Read ``metadata.json`` of an output folder (a path, any fsspec URL, or a Store).

    Raises:
        ManifestError: when the folder has no (readable) metadata.json.
    """
    store = output_dir if isinstance(output_dir, Store) else Store(output_dir, storage_options)
    path = store.path(METADATA)
    try:
        text = store.read_text(METADATA)
    except FileNotFoundError:
        raise ManifestError(
            f"{path} not found: {store.url} is not a finished tfrecorder_lite output "
            "(the conversion may still be running, or was interrupted: re-run it to finish)"
        ) from None
    except (OSError, ValueError) as exc:
        raise ManifestError(f"cannot read {path}: {exc}") from None
    try:
        metadata = json.loads(text)
    except ValueError as exc:
        raise ManifestError(f"cannot read {path}: {exc}") from None
    if metadata.get("format_version") != FORMAT_VERSION:
        raise ManifestError(f"{path}: unsupported format_version "
                            f"{metadata.get('format_version')!r} (this reader knows {FORMAT_VERSION})")
    return metadata


def normalize_split(metadata, split):
    """Return the manifest's spelling of ``split`` (case-insensitive; VAL means VALIDATION)."""
    wanted = str(split).strip().upper()
    wanted = {"VAL": "VALIDATION", "VALID": "VALIDATION"}.get(wanted, wanted)
    if wanted not in metadata["splits"]:
        raise SchemaError(f"split {split!r} not in this output; it has {list(metadata['splits'])}")
    return wanted
