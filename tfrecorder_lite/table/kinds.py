"""The kinds of table, decided once: which kind a table is, and the table as that kind plans it.

A kind of table is one module (``table/classification.py``, ``table/detection.py``,
``table/segmentation.py``) whose ``KIND`` is a :class:`~tfrecorder_lite.table.kind_base.TableKind`
(which names what a kind has).

Every door (``to_tfrecord``, ``df.tfrecord.dataset``, ``validate``) goes through
:func:`prepare`, so the same table and options give the same records and the same problems
everywhere.
"""

from dataclasses import dataclass

import pandas as pd

from . import classification, detection, schema, segmentation
from ..errors import SchemaError

#: the table kinds, the first that recognizes a table wins (classification takes any table)
KINDS = (detection.KIND, segmentation.KIND, classification.KIND)


@dataclass(frozen=True, eq=False)
class PreparedTable:
    """A table as its kind plans it.

    Attributes:
        kind: the table kind (``kind.record`` its RecordKind).
        options: the TableOptions it was read with (``label_map`` from ``df.attrs`` included).
        frame: one row per record.
        members: per record, the table positions it stands for (None: each row is a record).
        refused: ``{record position: reason}`` of records the kind refuses by the table alone.
        used: the columns the kind consumes beside split, image and label (no extra columns).
        files: the columns of each record's other files (e.g. a mask), read beside its image.
        details: what the kind keeps of the table for itself (e.g. a detection ImageTable).
    """

    kind: object
    options: object
    frame: pd.DataFrame
    members: tuple
    refused: dict
    used: set
    files: tuple = ()
    details: object = None

    def rows_of(self, rejected):
        """``(table position, reason)`` of every table row of the records in ``rejected``
        (``(record position, reason)`` pairs), in table order."""
        if self.members is None:
            return sorted(rejected)
        return sorted((row, reason) for record, reason in rejected
                      for row in self.members[record])


def kind_options(options):
    """The table options kinds own, checked and normalised, as ``{name: value}`` to set on
    ``options`` (a TableOptions being built): the masks' colours and labels.

    Raises:
        SchemaError: naming the option and what it takes.
    """
    normalized = {"mask_colors": segmentation.mask_colors(options.mask_colors),
                  "mask_labels": segmentation.mask_labels(options.mask_labels)}
    segmentation.ignore_value(options.ignore_value)
    return normalized


def check_kind_options(options):
    """SchemaError unless the table options a kind owns agree with each other (the masks'
    labels, colours and ignore value)."""
    segmentation.mask_field(options)


def kind_of(df, options):
    """The kind of table ``df`` is."""
    return next(kind for kind in KINDS if kind.recognizes(df, options))


def prepare(df, options, check_labels=True):
    """The PreparedTable of ``df`` read with the TableOptions ``options`` (with
    ``check_labels``, labels no record can hold raise; ``validate()`` lists them instead).

    Raises:
        SchemaError: missing columns, bad per-kind columns or labels no record can hold, before
            any file is read.
    """
    if not isinstance(df, pd.DataFrame):
        schema.check_columns(df, options.split_col, options.image_col, options.label_col)
    options = options.of_frame(df)
    kind = kind_of(df, options)
    schema.check_columns(df, options.split_col, options.image_col, kind.table_label_col(options))
    frame, members, refused, used, details = kind.prepare(df, options)
    files = tuple(kind.file_columns(options))
    missing = [column for column in files if column not in frame.columns]
    if missing:
        raise SchemaError(f"missing file column(s) {missing}: found {list(df.columns)}")
    if check_labels:
        kind.check_labels(df, options)
    return PreparedTable(kind, options, frame, members, refused, set(used) | set(files), files,
                         details)
