"""What an output folder holds before a conversion, and how a killed one is resumed.

A conversion keeps its state in ``.tfrecorder_lite/`` inside the output folder: ``job.json``
(the plan's fingerprint) and one receipt per finished shard (``<shard>.json``). The folder is
removed once ``metadata.json`` is written.
"""

import json
from dataclasses import dataclass, field

from .. import redaction
from ..errors import ManifestError, OutputExistsError
from ..record.framing import FileDigest
from ..storage import TEMP_SUFFIX
from .layout import (FIXED_FILES, JOB, LOCK, METADATA, OUR_FILE, RECEIPT_SUFFIX, STATE_DIR,
                     level_files)
from .manifest import Manifest, Receipt

logger = redaction.logger(__name__)  # every record redacted


@dataclass(frozen=True)
class FolderState:
    """What a conversion found in its output folder.

    Attributes:
        finished: the folder already holds this very conversion (same fingerprint).
        receipts: shard name -> Receipt of the shards an interrupted run of it finished.
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
    if METADATA in names:
        if _fingerprint(store, METADATA) == fingerprint and not overwrite:
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
    clashing = [n for n in names if n not in ours and (OUR_FILE.match(n) or n == STATE_DIR)]
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


def prepare_append(store, fingerprint, file_names):
    """Make the finished output in the ``store`` folder ready to take a new generation (the
    job ``fingerprint``), or resume a killed append of the same job. Files of earlier
    generations are never touched: the job writes only ``file_names``, which must be new.

    Args:
        store: the output folder (a Store), locked by the caller.
        fingerprint: the append plan's fingerprint.
        file_names: the names of the files this generation writes (shards, index files, its
            hashes and rejected rows' files).

    Returns:
        A FolderState: ``finished`` when the latest generation is this very job.

    Raises:
        OutputExistsError: the folder holds files of this generation's names that no append
            of it wrote.
    """
    names = [n for n in store.list() if n != LOCK]
    state = store.child(STATE_DIR)
    if _fingerprint(store, METADATA) == fingerprint:
        store.remove(STATE_DIR)  # a kill after metadata.json may have left it behind
        return FolderState(finished=True)
    if STATE_DIR in names:
        job = state.read_json(JOB)
        if isinstance(job, dict) and job.get("fingerprint") == fingerprint:
            return FolderState(receipts=_finished_shards(store, names, file_names, False))
        # an append of something else was killed: its files (listed in its job) go
        unfinished = {str(n) for n in (job or {}).get("files", ()) if OUR_FILE.match(str(n))}
        for name in names:
            if name in unfinished or name[:-len(TEMP_SUFFIX)] in unfinished:
                store.remove(name)
        store.remove(STATE_DIR)
        names = [n for n in store.list() if n != LOCK]
        logger.info("removed an unfinished append of other rows from %s", store.url)
    clashing = sorted(set(file_names) & set(names))
    if clashing:
        raise OutputExistsError(
            f"{store.url} holds {', '.join(clashing)}, named like the files this append "
            "writes but not written by it; nothing was changed. Move them away.")
    state.make_dirs()
    state.write_atomic(JOB, json.dumps({"fingerprint": fingerprint, "files": list(file_names)}))
    return FolderState()


def _written_files(store, names):
    """Names in the folder that this library wrote: what its metadata.json or state lists."""
    listed = set()
    if METADATA in names:
        try:
            manifest = Manifest.from_json(store.read_json(METADATA), store.path(METADATA))
        except ManifestError:  # not a finished output of ours: it lists nothing
            manifest = None
        if manifest is not None:
            listed.update(FIXED_FILES)
            listed.update(level_files(level for level in manifest.levels if level))
            listed.update((manifest.near_duplicates or {}).get("hashes", ()))
            for split in manifest.splits.values():
                for shard in split.shards:
                    listed.update([shard.name] + ([shard.index.name] if shard.index else []))
    if STATE_DIR in names:
        listed.add(STATE_DIR)
        job = store.child(STATE_DIR).read_json(JOB)
        if isinstance(job, dict):
            listed.update(FIXED_FILES)
            listed.update(str(n) for n in job.get("files", ()))
    listed = {n for n in listed if OUR_FILE.match(n) or n == STATE_DIR}  # never "../x"
    listed.update([n + TEMP_SUFFIX for n in listed])
    return listed


def _unchanged(store, entry):
    """Whether the file a ShardEntry or IndexEntry describes is there, unchanged."""
    checksums = entry.checksums
    return store.size(entry.name) == entry.bytes and \
        not store.digest(entry.name, FileDigest.like(checksums)).mismatches(checksums)


def _fingerprint(store, name):
    """The ``fingerprint`` recorded in the JSON file ``name``, or None when there is none."""
    content = store.read_json(name)
    return content.get("fingerprint") if isinstance(content, dict) else None


def _finished_shards(store, names, shard_names, fixed=True):
    """Receipts of shards a killed run of this job completed; everything else it wrote (its
    other shards, temporary files) is removed."""
    state = store.child(STATE_DIR)
    finished, kept = {}, set()
    for name in state.list():
        if not name.endswith(RECEIPT_SUFFIX) or name == JOB:
            continue
        shard = name[:-len(RECEIPT_SUFFIX)]
        content = state.read_json(name)
        try:
            receipt = Receipt.from_json(content, state.path(name))
        except ManifestError:
            continue
        if receipt.name == shard and receipt.shard.index is not None and \
                all(_unchanged(store, entry) for entry in (receipt.shard, receipt.shard.index)):
            finished[shard] = receipt
            kept.update((shard, receipt.shard.index.name))
    written = set(shard_names) | (set(FIXED_FILES) if fixed else set())
    written |= {n + TEMP_SUFFIX for n in written}
    for name in names:
        if name in written and name not in kept:
            store.remove(name)
    for name in state.list():
        if name.endswith(TEMP_SUFFIX):
            state.remove(name)
    logger.info("resuming: %d finished shard(s) kept in %s", len(finished), store.url)
    return finished
