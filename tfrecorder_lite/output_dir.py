"""What an output folder holds before a conversion, and how a killed one is resumed.

A conversion keeps its state in ``.tfrecorder_lite/`` inside the output folder: ``job.json``
(the plan's fingerprint) and one receipt per finished shard (``<shard>.json``). The folder is
removed once ``metadata.json`` is written.
"""

import json
import logging
import re
from dataclasses import dataclass, field

from . import example, manifest, tfds_info
from .errors import OutputExistsError
from .folder_lock import LOCK
from .storage import TEMP_SUFFIX
from .tfrecord import FileDigest

logger = logging.getLogger(__name__)

STATE_DIR = ".tfrecorder_lite"
JOB = "job.json"
_RECEIPT_SUFFIX = ".json"
_FIXED_FILES = (manifest.METADATA, manifest.LABELS, manifest.REJECTED, *tfds_info.FILES)
# the names this library gives its files: a file so named that it did not write is never removed
_LEVEL = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"  # a label level's name: its label files' names
_OUR_FILE = re.compile(
    r"^((train|validation|test)-\d{5}-of-\d{5}(\.tfrecord(\.gz|\.zz)?|\.tfindex)|"
    rf"labels-{_LEVEL}\.txt|image\.label\.{_LEVEL}\.labels\.txt|"
    + "|".join(re.escape(name) for name in _FIXED_FILES) + r")(\.tmp)?$"
)


def level_files(levels):
    """The files of label levels: each level's ``labels-<level>.txt`` and tfds names file."""
    return [name for level in levels for name in (
        manifest.level_labels_name(level),
        tfds_info.label_names_file(example.label_keys(level)[0]))]


def receipt_name(shard_name):
    """The file name, inside the state folder, of a finished shard's receipt."""
    return shard_name + _RECEIPT_SUFFIX


@dataclass(frozen=True)
class FolderState:
    """What a conversion found in its output folder.

    Attributes:
        finished: the folder already holds this very conversion (same fingerprint).
        receipts: shard name -> receipt of the shards an interrupted run of it finished.
    """

    finished: bool = False
    receipts: dict = field(default_factory=dict)


def prepare(store, fingerprint, shard_names, overwrite):
    """Check what the ``store`` folder holds and make it ready for the job ``fingerprint``.

    Only files this library wrote there (listed in the folder's ``metadata.json``, or in the
    state of an unfinished run) are ever removed; a file it did not write is never touched.

    Args:
        store: the output folder (a Store), locked by the caller.
        fingerprint: the plan's fingerprint.
        shard_names: the names of the shards this job writes.
        overwrite: replace an earlier conversion (of anything) in the folder.

    Returns:
        A FolderState.

    Raises:
        OutputExistsError: the folder holds something else and ``overwrite`` is False, or it
            holds files named like this library's that it did not write.
    """
    names = [n for n in store.list() if n != LOCK]
    state = store.child(STATE_DIR)
    ours = _written_files(store, names)
    if manifest.METADATA in names:
        if _fingerprint(store, manifest.METADATA) == fingerprint and not overwrite:
            store.remove(STATE_DIR)  # a kill may have left it behind
            return FolderState(finished=True)
        what = "a finished conversion of a different table or options"
    elif STATE_DIR in names:
        previous = _fingerprint(state, JOB)
        if previous == fingerprint and not overwrite:
            return FolderState(receipts=_finished_shards(store, names, shard_names))
        if previous is None:  # killed before job.json: that run wrote nothing else
            overwrite = overwrite or names == [STATE_DIR]
        what = "an unfinished conversion of a different table or options"
    else:
        what = f"other files ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''})"
    if names and not overwrite:
        raise OutputExistsError(f"{store.url} holds {what}; nothing was changed. "
                                "Pass overwrite=True to replace it, or choose an empty folder.")
    clashing = [n for n in names if n not in ours and (_OUR_FILE.match(n) or n == STATE_DIR)]
    clashing += [n for n in names if n in ours and n != STATE_DIR and store.size(n) is None]
    if clashing:
        raise OutputExistsError(
            f"{store.url} holds {', '.join(sorted(clashing))}, named like tfrecorder_lite's "
            "files but not written by it (not listed in the folder's metadata.json or state); "
            "overwrite never removes those, so nothing was changed. Move them away, or choose "
            "another folder.")
    for name in names:
        if name in ours:
            store.remove(name)
    state.make_dirs()
    state.write_atomic(JOB, json.dumps({"fingerprint": fingerprint, "files": list(shard_names)}))
    return FolderState()


def _written_files(store, names):
    """Names in the folder that this library wrote: what its metadata.json or state lists."""
    listed = set()
    if manifest.METADATA in names:
        metadata = _read_json(store, manifest.METADATA)
        splits = metadata.get("splits") if isinstance(metadata, dict) else None
        if isinstance(splits, dict):
            listed.update(_FIXED_FILES)
            levels = metadata.get("labels")
            listed.update(level_files(levels if isinstance(levels, dict) else ()))
            for split in splits.values():
                for shard in split.get("shards", ()):
                    if isinstance(shard, dict):
                        listed.add(str(shard.get("name")))
                        listed.add(str((shard.get("index") or {}).get("name")))
    if STATE_DIR in names:
        listed.add(STATE_DIR)
        job = _read_json(store.child(STATE_DIR), JOB)
        if isinstance(job, dict):
            listed.update(_FIXED_FILES)
            listed.update(str(n) for n in job.get("files", ()))
    listed = {n for n in listed if _OUR_FILE.match(n) or n == STATE_DIR}  # never "../x"
    listed.update([n + TEMP_SUFFIX for n in listed])
    return listed


def _unchanged(store, entry):
    """Whether the file an ``entry`` (name, bytes, checksums) describes is there, unchanged."""
    return isinstance(entry, dict) and store.size(entry["name"]) == entry["bytes"] and \
        not store.digest(entry["name"], FileDigest.like(entry)).mismatches(entry)


def _read_json(store, name):
    """The JSON content of the file ``name``, or None when it is missing or not JSON."""
    try:
        return json.loads(store.read_text(name))
    except (OSError, ValueError):
        return None


def _fingerprint(store, name):
    """The ``fingerprint`` recorded in the JSON file ``name``, or None when there is none."""
    content = _read_json(store, name)
    return content.get("fingerprint") if isinstance(content, dict) else None


def _finished_shards(store, names, shard_names):
    """Receipts of shards a killed run of this job completed; everything else it wrote (its
    other shards, temporary files) is removed."""
    state = store.child(STATE_DIR)
    finished, kept = {}, set()
    for name in state.list():
        if not name.endswith(_RECEIPT_SUFFIX) or name == JOB:
            continue
        shard = name[:-len(_RECEIPT_SUFFIX)]
        try:
            receipt = json.loads(state.read_text(name))
        except (OSError, ValueError):
            continue
        if all(_unchanged(store, entry) for entry in (receipt, receipt.get("index"))):
            finished[shard] = receipt
            kept.update((shard, receipt["index"]["name"]))
    written = set(shard_names) | set(_FIXED_FILES)
    written |= {n + TEMP_SUFFIX for n in written}
    for name in names:
        if name in written and name not in kept:
            store.remove(name)
    for name in state.list():
        if name.endswith(TEMP_SUFFIX):
            state.remove(name)
    logger.info("resuming: %d finished shard(s) kept in %s", len(finished), store.url)
    return finished
