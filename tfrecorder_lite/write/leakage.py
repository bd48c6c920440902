"""Near-duplicate images across splits, found from the hashes the shard tasks took.

Each shard task hashes the images it reads anyway (``images.prepare_image`` with
``ImageOptions.phash``) and returns the hashes in its receipt. Once every shard is written,
the driver finds the pairs of near-identical images in different splits here, and either
reports them (``leakage="warn"``), rejects the later row of each (``"reject"``: its shard is
written again without it, from the shard's own records, never from the source images), or
skips all of it (``"ignore"``).
"""

import pandas as pd

from ..output.layout import STATE_DIR
from .task import ShardSink

PAIR_COLUMNS = ["row", "split", "image_uri", "other_row", "other_split", "other_image_uri",
                "distance"]
HASH_COLUMNS = ["row", "split", "image_uri", "sha256", "label", "phash", "crops"]


def later_rows(pairs):
    """The later row of each pair to reject, ``{later key: (earlier key, distance)}``: a row
    whose every partner was itself rejected stays."""
    rejected = {}
    for later, earlier, distance in pairs:  # in order of the later row
        if earlier not in rejected and later not in rejected:
            rejected[later] = (earlier, distance)
    return rejected


def without_rows(store, receipt, plan, drop):
    """Write the shard of ``receipt`` again without the records of the positions in ``drop``.

    The records kept are copied from the shard as written (its receipt lists each record's
    position, in order); the dropped rows join the receipt's rejected rows with their reasons.

    Args:
        store: the output folder (a Store).
        receipt: the shard's Receipt, with ``hashes`` for every record.
        plan: the WritePlan (label ids of the rows).
        drop: ``{position: reason}``.

    Returns:
        The new Receipt (also left in the state folder, replacing the old one).
    """
    label_count = len(plan.features.labels)
    sink = ShardSink(store, receipt.name, plan.compression, plan.sha256, label_count,
                     plan.file_format)
    for position, reason in receipt.rejected:
        sink.add(position, None, reason)
    values = label_values(plan, [entry[0] for entry in receipt.hashes])
    with store.open_read(receipt.name) as f:
        records = plan.file_format.records(f, plan.compression)
        for entry, record, labels in zip(receipt.hashes, records, values):
            position, digest, value, fmt, height, width, channels = entry
            if position in drop:
                sink.add(position, None, drop[position])
                continue
            label_ids = tuple(v[0] for v in labels[:label_count])
            sink.add(position, record,
                     (fmt, height, width, channels, label_ids, (digest, value)))
        sink.flush()  # the records go to the sink's thread before the file is closed
    return sink.finish(store.child(STATE_DIR))


def label_values(plan, positions):
    """Each planned row's ``(id, text)`` per label field, for many rows at once."""
    if hasattr(plan.label_values, "take"):
        return plan.label_values.take(positions)
    return [plan.label_values[p] for p in positions]


def pairs_frame(pairs, describe_row):
    """A DataFrame of pairs (PAIR_COLUMNS); ``describe_row(key)`` gives (row, split, uri)."""
    rows = [(*describe_row(later), *describe_row(earlier), distance)
            for later, earlier, distance in pairs]
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)
