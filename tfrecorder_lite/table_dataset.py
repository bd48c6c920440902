"""``df.tfrecord.dataset()``: a ``tf.data`` pipeline straight from the table, no shards written.

The rows go through the same plan as a conversion (checks, label ids, seeded order, rejections),
their images are read and prepared by the same code, in threads, and the records they would
have been are decoded by the same map function as :func:`~tfrecorder_lite.load`: switching to
written shards changes one line, and gives the same elements.
"""

import dataclasses

import joblib

from .errors import InvalidRowError
from .options import LoadOptions, TableOptions, WriteOptions, image_options, one_of
from .read import keras_layout, loader
from .record.tensorflow import import_tensorflow
from .table import schema
from .table.kinds import prepare
from .output.splits import pick
from .write.plan import build_plan
from .write.task import prepared_chunks


def dataset(df, split="TRAIN", *, split_col="split", image_col="image_uri", label_col="label",
            batch_size=None, image_size=None, shuffle=False, seed=0, as_supervised=True,
            shuffle_buffer=1000, drop_remainder=False, channels=3, dct_method="INTEGER_ACCURATE",
            label_map=None, check="header", on_error="skip", base_dir=None, n_jobs=-1,
            storage_options=None, unassigned="reject", split_ratios=None, label_sep=None,
            features=None, label=None, multi_hot=False, box_format="rel_yxyx",
            box_units="relative", box_columns=None, with_info=False, mask_col=None,
            mask_labels=None, mask_colors=None, ignore_value=255, allow_lossy_masks=False):
    """A ``tf.data.Dataset`` of one split of the table, read and decoded as ``load()`` would.

    Args:
        df: the table (columns as for ``to_tfrecord``).
        split: "TRAIN", "VALIDATION" or "TEST".
        check: image checks, as for ``to_tfrecord`` ("header" by default: decoding happens in
            the pipeline anyway).
        on_error: "skip" bad rows (listed in ``rejected``), or "raise" an InvalidRowError
            at the first.
        n_jobs: threads that read and prepare images.
        with_info: also return a :class:`TableDatasetInfo` (as ``tfds.load`` does).
        Other arguments: as for ``to_tfrecord`` (table options) and ``load`` (pipeline
        options). ``shuffle=False`` keeps the plan's seeded row order (``seed``).

    Every image of the split is read and checked once before this returns, so the dataset's
    length is known (``len()`` works, as on ``load()``'s) and the bad rows are all known; the
    dataset reads the images again each time it is iterated.

    Returns:
        A dataset yielding what ``load(output_dir, split, ...)`` yields for the same options,
        or ``(dataset, info)`` with ``with_info``. The dataset also has ``labels`` and
        ``rejected`` attributes (as the info has), which ``.map()`` and the like do not keep.

    Raises:
        InvalidRowError: the first bad row, with ``on_error="raise"``; while iterating, an image
            that no longer passes its check (it changed since it was checked).
    """
    options = LoadOptions.of(locals())
    one_of("shuffle", shuffle, (False, True))  # "global" reads written records by index
    table = TableOptions.of(locals())
    write = WriteOptions(num_shards=1, shuffle=True, seed=seed, on_error=on_error)
    image = None if image_col is None else image_options(check)
    prepared = prepare(df, table)
    tf = import_tensorflow()
    rows_of = _table_rows(prepared, df.index)
    df = prepared.frame  # one element per record (e.g. per image of a table of boxes)
    plan = build_plan(prepared, write, image, storage_options)
    keras_layout.check(plan.features, options, "this table")
    wanted = pick(split, plan.splits, "this table")
    shards = [s for s in plan.shards if s.split == wanted]
    splits = schema.table_splits(df, split_col, image_col, plan.assignment).tolist()
    refused = [(p, reason) for p, reason in plan.rejected if splits[p] == wanted]
    if write.raises and refused:
        position, reason = refused[0]
        raise InvalidRowError(df.index[position], plan.paths[position], reason)
    rejected = [(row, plan.paths[p], reason) for p, reason in refused
                for row in rows_of(df.index[p])]
    task = plan.task(shards[0], df.index, joblib.effective_n_jobs(n_jobs))
    kept = []
    for chunk, prepared in prepared_chunks(task, storage_options):  # the check, in threads
        for row, (record, reason) in zip(chunk, prepared):
            _, row_label, path, *_ = row
            if record is not None:
                kept.append(row)
            elif write.raises:
                raise InvalidRowError(row_label, path, reason)
            else:
                rejected += [(row, path, reason) for row in rows_of(row_label)]
    task = dataclasses.replace(task, rows=tuple(kept))

    def records():
        for chunk, prepared in prepared_chunks(task, storage_options):
            for (_, row, path, *_), (record, reason) in zip(chunk, prepared):
                if record is None:
                    raise InvalidRowError(row, path, f"{reason} (it passed its check when the "
                                                     "dataset was made: the image changed)")
                yield b"".join(record)

    decode = loader.decoder(tf, plan.features, options)
    serialized = tf.data.Dataset.from_generator(
        records, output_signature=tf.TensorSpec((), tf.string),
    ).apply(tf.data.experimental.assert_cardinality(len(kept)))
    out = keras_layout.apply(plan.features, options, loader.decoded_pipeline(
        tf, serialized, decode, options, True, plan.features))
    info = TableDatasetInfo(wanted, len(kept), plan.labels, tuple(rejected))
    out.rejected = rejected
    out.labels = plan.labels
    return (out, info) if with_info else out


def _table_rows(prepared, index):
    """A function of a record's label (its first row's) to the labels of every table row it
    stands for (a refused image of a table of boxes is each of its rows' reason, as
    ``to_tfrecord`` and ``validate`` report it)."""
    if prepared.members is None:
        return lambda label: [label]
    rows = {index[members[0]]: [index[m] for m in members] for members in prepared.members}
    return lambda label: rows.get(label, [label])


@dataclasses.dataclass(frozen=True)
class TableDatasetInfo:
    """What ``df.tfrecord.dataset(..., with_info=True)`` says of its dataset.

    Attributes:
        split: the split's name ("TRAIN", "VALIDATION" or "TEST").
        num_examples: the examples the dataset yields (before any batching).
        labels: label id -> text (a list), or with label levels a dict level -> list.
        rejected: ``(row, path, reason)`` of the split's rows it leaves out.
    """

    split: str
    num_examples: int
    labels: object
    rejected: tuple
