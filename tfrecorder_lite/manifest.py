"""metadata.json and its companions: the on-disk contract between writer and loader.

``metadata.json`` is written last; its presence means the output folder is complete.
"""

import json
import os
import re

from . import files
from .errors import ManifestError, SchemaError

METADATA = "metadata.json"
LABELS = "labels.txt"
REJECTED = "rejected.csv"
FORMAT_VERSION = 1
SHARD_NAME = re.compile(r"^(train|validation|test)-\d{5}-of-\d{5}\.tfrecord(\.gz|\.zz)?$")


def write_labels(output_dir, labels):
    """Write ``labels.txt``: one label per line, line number = id."""
    files.write_atomic(os.path.join(output_dir, LABELS), "".join(f"{t}\n" for t in labels))


def write_metadata(output_dir, metadata):
    """Write ``metadata.json`` atomically (call this last)."""
    text = json.dumps(metadata, indent=2, sort_keys=False) + "\n"
    files.write_atomic(os.path.join(output_dir, METADATA), text)


def read_metadata(output_dir):
    """Read ``metadata.json``.

    Raises:
        ManifestError: when the folder has no (readable) metadata.json.
    """
    path = os.path.join(str(output_dir), METADATA)
    if not files.is_file(path):
        raise ManifestError(
            f"{path} not found: {output_dir} is not a finished tfrecorder_lite output "
            "(the conversion may still be running, or was interrupted: re-run it to finish)"
        )
    try:
        metadata = json.loads(files.read_text(path))
    except (OSError, ValueError) as exc:
        raise ManifestError(f"cannot read {path}: {exc}") from None
    if metadata.get("format_version") != FORMAT_VERSION:
        raise ManifestError(f"{path}: unsupported format_version "
                            f"{metadata.get('format_version')!r} (this reader knows {FORMAT_VERSION})")
    return metadata


def shard_paths(output_dir, metadata, split):
    """Absolute paths of the shards of ``split``, in order."""
    return [os.path.join(os.path.abspath(output_dir), shard["name"])
            for shard in metadata["splits"][split]["shards"]]


def normalize_split(metadata, split):
    """Return the manifest's spelling of ``split`` (case-insensitive; VAL means VALIDATION)."""
    wanted = str(split).strip().upper()
    wanted = {"VAL": "VALIDATION", "VALID": "VALIDATION"}.get(wanted, wanted)
    if wanted not in metadata["splits"]:
        raise SchemaError(f"split {split!r} not in this output; it has {list(metadata['splits'])}")
    return wanted
