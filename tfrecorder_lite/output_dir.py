"""What an output folder holds before a conversion, and how a killed one is resumed.

A conversion keeps its state in ``.tfrecorder_lite/`` inside the output folder: ``job.json``
(the plan's fingerprint) and one receipt per finished shard (``<shard>.json``). The folder is
removed once ``metadata.json`` is written.
"""

import json
import logging
import re
from dataclasses import dataclass, field

from . import manifest
from .errors import OutputExistsError
from .storage import TEMP_SUFFIX
from .tfrecord import FileDigest

logger = logging.getLogger(__name__)

STATE_DIR = ".tfrecorder_lite"
JOB = "job.json"
_RECEIPT_SUFFIX = ".json"
_OUR_FILE = re.compile(
    r"^((train|validation|test)-\d{5}-of-\d{5}\.tfrecord(\.gz|\.zz)?|metadata\.json|labels\.txt"
    r"|rejected\.csv)(\.tmp)?$"
)


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


def prepare(store, fingerprint, overwrite):
    """Check what the ``store`` folder holds and make it ready for the job ``fingerprint``.

    Returns:
        A FolderState.

    Raises:
        OutputExistsError: the folder holds something else and ``overwrite`` is False.
    """
    names = store.list()
    state = store.child(STATE_DIR)
    if manifest.METADATA in names:
        if _fingerprint(store, manifest.METADATA) == fingerprint and not overwrite:
            store.remove(STATE_DIR)  # a kill may have left it behind
            return FolderState(finished=True)
        what = "a finished conversion of a different table or options"
    elif STATE_DIR in names:
        previous = _fingerprint(state, JOB)
        if previous == fingerprint and not overwrite:
            return FolderState(receipts=_finished_shards(store, names))
        if previous is None:  # killed before job.json: nothing of value is there
            overwrite = all(_OUR_FILE.match(n) or n == STATE_DIR for n in names)
        what = "an unfinished conversion of a different table or options"
    else:
        what = f"other files ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''})"
    if names and not overwrite:
        raise OutputExistsError(f"{store.url} holds {what}; nothing was changed. "
                                "Pass overwrite=True to replace it, or choose an empty folder.")
    for name in names:
        if _OUR_FILE.match(name) or name == STATE_DIR:
            store.remove(name)
    state.make_dirs()
    state.write_atomic(JOB, json.dumps({"fingerprint": fingerprint}))
    return FolderState()


def _fingerprint(store, name):
    """The ``fingerprint`` recorded in the JSON file ``name``, or None when there is none."""
    try:
        return json.loads(store.read_text(name)).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        return None


def _finished_shards(store, names):
    """Receipts of shards a killed run completed; everything else it left is removed."""
    state = store.child(STATE_DIR)
    finished = {}
    for name in state.list():
        if not name.endswith(_RECEIPT_SUFFIX) or name == JOB:
            continue
        shard = name[:-len(_RECEIPT_SUFFIX)]
        try:
            receipt = json.loads(state.read_text(name))
        except (OSError, ValueError):
            continue
        if store.size(shard) == receipt["bytes"] and \
                not store.digest(shard, FileDigest.like(receipt)).mismatches(receipt):
            finished[shard] = receipt
    for name in names:
        if name.endswith(TEMP_SUFFIX) or (_OUR_FILE.match(name) and name not in finished):
            store.remove(name)
    for name in state.list():
        if name.endswith(TEMP_SUFFIX):
            state.remove(name)
    logger.info("resuming: %d finished shard(s) kept in %s", len(finished), store.url)
    return finished
