"""A shard written again without some of its rows: the later rows of near-duplicate pairs
(``leakage="reject"``), copied from the shard's own records, never from the source images.
"""

from ..near_duplicates.hashes_file import label_values
from ..output.layout import STATE_DIR
from .task import ShardSink


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
    values = label_values(plan, receipt.hashes.positions.tolist())
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
