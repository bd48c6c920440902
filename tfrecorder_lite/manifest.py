"""metadata.json and its companions: the on-disk contract between writer and loader.

``metadata.json`` is written last; its presence means the output folder is complete.
"""

import json
import re

from .errors import ManifestError, SchemaError
from .example import BYTES, FLOAT, IMAGE_KEYS, INT64, label_keys
from .storage import Store, human_size, is_dir

METADATA = "metadata.json"
LABELS = "labels.txt"
REJECTED = "rejected.csv"
FORMAT_VERSION = 1
SHARD_NAME = re.compile(r"^(train|validation|test)-\d{5}-of-\d{5}\.tfrecord(\.gz|\.zz)?$")


def label_files(labels):
    """``{file name: label texts}`` of metadata.json's ``labels``: ``labels.txt``, or with
    label levels ``labels-<level>.txt`` each (one label per line, line number = id)."""
    if isinstance(labels, dict):
        return {level_labels_name(level): texts for level, texts in labels.items()}
    return {LABELS: labels}


def level_labels_name(level):
    """The vocabulary file of a label level."""
    return f"labels-{level}.txt"


def write_metadata(store, metadata):
    """Write ``metadata.json`` atomically (call this last)."""
    store.write_atomic(METADATA, json.dumps(metadata, indent=2, sort_keys=False) + "\n")


def read_metadata(output_dir, storage_options=None):
    """Read and check ``metadata.json`` of an output folder (a path, any fsspec URL, or a Store).

    Returns:
        A Metadata: the content as a dict; ``print()`` of it shows the folder's summary, as
        ``tfrecorder-lite info`` does.

    Raises:
        ManifestError: when the folder has no (readable, well-formed) metadata.json; the
            message says why (no such folder, an unfinished conversion, ...) or names the
            malformed field.
    """
    store = output_dir if isinstance(output_dir, Store) else Store(output_dir, storage_options)
    path = store.path(METADATA)
    try:
        text = store.read_text(METADATA)
    except FileNotFoundError:
        raise ManifestError(f"{path} not found: {_why_unfinished(store)}") from None
    except (OSError, ValueError) as exc:
        raise ManifestError(f"cannot read {path}: {exc}") from None
    try:
        metadata = json.loads(text)
    except ValueError as exc:
        raise ManifestError(f"cannot read {path}: {exc}") from None
    check_metadata(metadata, path)
    return Metadata(metadata, store.url)


def summary_text(metadata, where):
    """The text summary of an output folder: what ``tfrecorder-lite info`` prints, what heads
    an ``inspect`` report, and what ``print(read_metadata(...))`` shows.

    Args:
        metadata: the folder's parsed ``metadata.json``.
        where: how to name the folder (its path or URL).
    """
    image, labels = metadata["image"], metadata["labels"]
    if isinstance(labels, dict):
        what = " and ".join(f"{len(texts)} {level} labels" for level, texts in labels.items())
    else:
        what = f"{len(labels)} labels" + (" (multi-label)" if metadata.get("task") else "")
    if image is None:
        lines = [f"{where}: {what}, no images, compression {metadata['compression'] or 'none'},"
                 f" {metadata['rejected']} rejected"]
    else:
        if image["size"]:
            size = hxw(image["size"])
        else:
            size = "various sizes" + (f", up to {hxw(image['max_size'])}"
                                      if image.get("max_size") else "")
        formats = ", ".join(f"{fmt} {n}" for fmt, n in image["formats"].items()) or "none"
        lines = [f"{where}: {what}, images {image['stored']} ({size}), "
                 f"compression {metadata['compression'] or 'none'}, "
                 f"{metadata['rejected']} rejected",
                 f"formats: {formats}"]
    for split, info in metadata["splits"].items():
        size = human_size(sum(shard["bytes"] for shard in info["shards"]))
        lines.append(f"{split}: {info['num_examples']} examples in {len(info['shards'])} "
                     f"shard(s), {size}")
        counts = info.get("label_counts", {})
        levels = counts.items() if isinstance(labels, dict) else [(None, counts)]
        for level, level_counts in levels:
            lines += [f"  {level}:"] if level else []
            indent = "    " if level else "  "
            lines += [f"{indent}{label}: {count}" for label, count in level_counts.items()]
    return "\n".join(lines)


def hxw(size):
    """``[224, 224]`` -> ``"224x224"``."""
    return "x".join(map(str, size))


class Metadata(dict):
    """The content of metadata.json, a dict; ``str()`` of it (``print``) is its summary."""

    def __init__(self, content, where):
        super().__init__(content)
        self.where = where

    def __str__(self):
        return summary_text(self, self.where)


def _why_unfinished(store):
    """Why a folder without metadata.json is no finished output, for the error message."""
    from .output_dir import STATE_DIR  # output_dir imports this module

    names = store.list()
    if STATE_DIR in names:
        return (f"{store.url} is not a finished tfrecorder_lite output (the conversion may "
                "still be running, or was interrupted: re-run it to finish)")
    if names:
        return (f"{store.url} is not a tfrecorder_lite output (it holds "
                f"{', '.join(names[:5])}{', ...' if len(names) > 5 else ''})")
    if is_dir(store.url, store.storage_options):
        return f"{store.url} is an empty folder, not a tfrecorder_lite output"
    return f"{store.url} does not exist, so it is not a finished tfrecorder_lite output"


def check_metadata(metadata, path):
    """Check the fields of a parsed ``metadata.json`` that readers use.

    Shard names must be plain file names of their split (never ``../``, absolute paths or
    URLs), so readers never open a file outside the output folder.

    Args:
        metadata: the parsed JSON.
        path: the file's path or URL, for messages.

    Raises:
        ManifestError: naming the first missing or malformed field, e.g.
            ``.../metadata.json: splits.TRAIN.shards[0].name: '../x.tfrecord' is not a shard
            file name of split TRAIN``.
    """
    check = _Fields(path)
    check.value(metadata, "metadata.json", _is_object, "a JSON object")
    if metadata.get("format_version") != FORMAT_VERSION:
        raise ManifestError(f"{path}: unsupported format_version {metadata.get('format_version')!r}"
                            f" (this reader knows {FORMAT_VERSION})")
    labels = check.field(metadata, "", "labels", lambda v: _is_texts(v) or (
        _is_object(v) and v and all(_LEVEL.match(k) and _is_texts(t) for k, t in v.items())),
        "a list of label texts, or an object level -> list of label texts")
    multi = check.field(metadata, "", "task", lambda v: v == "multi-label", "'multi-label'") \
        == "multi-label" if "task" in metadata else False
    if multi and isinstance(labels, dict):
        raise ManifestError(f"{path}: task: a multi-label output has one list of labels")
    check.field(metadata, "", "compression", lambda v: v in (None, "GZIP", "ZLIB"),
                "null, 'GZIP' or 'ZLIB'")
    image = check.field(metadata, "", "image", lambda v: v is None or _is_object(v),
                        "null (no images) or an object")
    if image is not None:
        check.field(image, "image", "stored", lambda v: v in ("encoded", "resized"),
                    "'encoded' or 'resized'")
        check.field(image, "image", "size", lambda v: v is None or _is_size(v),
                    "null or [height, width]")
        check.field(image, "image", "formats", _is_object, "an object")
        if "max_size" in image:
            check.field(image, "image", "max_size", _is_size, "[height, width]")
    features = check.field(metadata, "", "features", _is_object, "an object")
    fixed = dict(IMAGE_KEYS) if image is not None else {}
    for level in labels if isinstance(labels, dict) else [None]:
        id_key, text_key = label_keys(level)
        fixed.update({id_key: INT64, text_key: BYTES})
    label_shape = [None] if multi else []
    for key in [*fixed, *features]:  # the image and label features must be there
        spec = check.field(features, "features", key, _is_object, "an object")
        dtypes = [fixed[key]] if key in fixed else [BYTES, INT64, FLOAT]
        check.field(spec, f"features.{key}", "dtype", lambda v: v in dtypes,
                    " or ".join(map(repr, dtypes)))
        if key in fixed:
            shape = [] if key in IMAGE_KEYS else label_shape
            check.field(spec, f"features.{key}", "shape", lambda v: v == shape,
                        json.dumps(shape))
        else:
            check.field(spec, f"features.{key}", "shape", _is_shape,
                        "a shape: [], [n], [null], [n, k] or [null, k]")
    check.field(metadata, "", "rejected", _is_count, "a count")
    splits = check.field(metadata, "", "splits", lambda v: _is_object(v) and v,
                         "an object of splits")
    for split in splits:
        info = check.field(splits, "splits", split, _is_object, "an object")
        where = f"splits.{split}"
        num_examples = check.field(info, where, "num_examples", _is_count, "a count")
        shards = check.field(info, where, "shards", lambda v: isinstance(v, list), "a list")
        for i, shard in enumerate(shards):
            _check_shard_entry(check, shard, split, f"{where}.shards[{i}]")
        listed = sum(shard["num_examples"] for shard in shards)
        if listed != num_examples:
            raise ManifestError(f"{path}: {where}.num_examples: {num_examples} is not the sum of "
                                f"its shards' num_examples ({listed})")


def _check_shard_entry(check, shard, split, where):
    """Check the manifest entry of a shard of ``split``; ``where`` names it in messages."""
    check.value(shard, where, _is_object, "an object")
    check.field(shard, where, "name", lambda v: isinstance(v, str) and SHARD_NAME.match(v)
                and v.startswith(f"{split.lower()}-"), f"a shard file name of split {split}")
    check.field(shard, where, "num_examples", _is_count, "a count")
    check.field(shard, where, "bytes", _is_count, "a count")
    if "crc32c" in shard or "sha256" not in shard:  # earlier versions wrote only a sha256
        check.field(shard, where, "crc32c", lambda v: _is_hex(v, 8), "8 hex digits")
    if "sha256" in shard:
        check.field(shard, where, "sha256", lambda v: _is_hex(v, 64), "64 hex digits")


class _Fields:
    """Checks of the values in one metadata.json; errors name the file and the field."""

    def __init__(self, path):
        self.path = path

    def value(self, value, name, test, what):
        """``value``, or ManifestError when ``test(value)`` is false."""
        if not test(value):
            shown = repr(value)
            shown = shown if len(shown) <= 200 else shown[:197] + "..."
            raise ManifestError(f"{self.path}: {name}: {shown} is not {what}")
        return value

    def field(self, parent, where, key, test, what):
        """``parent[key]``, checked; ``where`` is the parent's dotted name ("" at the top)."""
        name = f"{where}.{key}" if where else key
        if key not in parent:
            raise ManifestError(f"{self.path} has no {name!r}")
        return self.value(parent[key], name, test, what)


_LEVEL = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def _is_texts(value):
    return isinstance(value, list) and all(isinstance(t, str) for t in value)


def _is_shape(value):
    return isinstance(value, list) and len(value) <= 2 and \
        all(_is_count(d) or (d is None and i == 0) for i, d in enumerate(value))


def _is_object(value):
    return isinstance(value, dict)


def _is_count(value):
    return type(value) is int and value >= 0  # noqa: E721 (bool is an int, not a count)


def _is_size(value):
    return isinstance(value, list) and len(value) == 2 and all(_is_count(v) for v in value)


def _is_hex(value, digits):
    return isinstance(value, str) and len(value) == digits and all(
        c in "0123456789abcdef" for c in value)


def normalize_split(metadata, split):
    """Return the manifest's spelling of ``split`` (case-insensitive; VAL means VALIDATION)."""
    wanted = str(split).strip().upper()
    wanted = {"VAL": "VALIDATION", "VALID": "VALIDATION"}.get(wanted, wanted)
    if wanted not in metadata["splits"]:
        raise SchemaError(f"split {split!r} not in this output; it has {list(metadata['splits'])}")
    return wanted
