"""Semantic segmentation tables: ``split, image_uri, mask_uri``, one row per image.

The mask is a file the size of its image: a single-channel PNG of class ids, a palette PNG
(the index is the class) or a colour PNG mapped through ``mask_colors``. Label names come from
``mask_labels`` (id = position), from the colour table (ids in its order), or are the class ids
themselves. Each row is a record; its mask is read beside its image when the record is written
(``images/mask_pixels.py`` checks it). pandas only, no I/O.
"""

import re

import pandas as pd

from . import schema
from .kind_base import TableKind
from ..errors import SchemaError
from ..record.segmentation_kind import SEGMENTATION, SegmentationMask

MASK_COLUMN = "mask_uri"  # the mask column a table is recognized by


def mask_column(df, options):
    """The table's mask column: ``mask_col``, or ``mask_uri`` when the table has it (None:
    not a segmentation table)."""
    if options.mask_col is not None:
        return options.mask_col
    return MASK_COLUMN if MASK_COLUMN in df.columns else None


class SegmentationTable(TableKind):
    """The table kind of tables with a mask per image: one record per row."""

    record = SEGMENTATION

    @staticmethod
    def recognizes(df, options):
        return options.image_col is not None and mask_column(df, options) is not None

    @staticmethod
    def table_label_col(options):
        return None  # the labels are in the masks

    @staticmethod
    def prepare(df, options):
        """``(records frame, members, refused, used columns, mask column)``: rows without a
        mask are refused."""
        column = mask_column(df, options)
        if column not in df.columns:
            raise SchemaError(f"mask_col {column!r} is not a column of the table: found "
                              f"{list(df.columns)}")
        if column in (options.split_col, options.image_col):
            raise SchemaError(f"mask_col {column!r} is also the split or image column")
        cells = df[column].tolist()
        refused = {p: f"no mask ({column} is empty)" for p, cell in enumerate(cells)
                   if not isinstance(cell, str) or not cell.strip()}
        return df, None, refused, {column}, column

    @staticmethod
    def file_columns(options):
        """The columns of each record's other files, beside its image: the mask."""
        return (options.mask_col or MASK_COLUMN,)

    @staticmethod
    def check_labels(df, options):
        """The labels are the masks' class ids, checked as each mask is read."""

    @staticmethod
    def label_column(options):
        return None

    @staticmethod
    def problems(df, prepared):
        """validate()'s problems of this kind by the table alone: rows without a mask."""
        column = prepared.details
        return [(df.index[row], column, df[column].iloc[row], reason)
                for row, reason in sorted(prepared.refused.items())]

    @staticmethod
    def label_fields(prepared, options, refused):
        """``(label fields, per row: ((ids, texts, source id),))``: ids and texts are empty
        (the mask's, known once it is read, are the record's); its bytes come with the row."""
        field = mask_field(options)
        frame = prepared.frame
        source_ids = frame["image_id"].astype(str).tolist() if "image_id" in frame.columns \
            else [str(p) for p in range(len(frame))]
        return (field,), tuple((((), (), s),) for s in source_ids)

    @staticmethod
    def fingerprint(prepared, options):
        field = mask_field(options)
        return {"segmentation": {"mask_col": prepared.details, "labels": field.vocabulary,
                                 "colors": field.colors, "ignore": field.ignore_value,
                                 "lossy": field.allow_lossy}}


KIND = SegmentationTable()


def mask_field(options):
    """The SegmentationMask of a table read with the TableOptions ``options``.

    Raises:
        SchemaError: a colour maps to a label ``mask_labels`` lacks, or the ignore value is
            the id of a label.
    """
    field = _mask_field(options)
    if field.bounded and field.ignore_value is not None and \
            field.ignore_value < len(field.vocabulary):
        raise SchemaError(f"ignore_value {field.ignore_value} is the class id of label "
                          f"{field.vocabulary[field.ignore_value]!r}: give another "
                          "ignore_value, or None")
    return field


def _mask_field(options):
    colors = options.mask_colors
    if colors is not None:
        names = list(options.mask_labels) if options.mask_labels is not None else \
            list(dict.fromkeys(label for label in colors.values() if label is not None))
        index = {name: i for i, name in enumerate(names)}
        missing = [label for label in colors.values() if label is not None and label not in index]
        if missing:
            raise SchemaError(f"mask_colors maps to {missing[:3]}, which mask_labels lacks")
        table = tuple((rgb, None if label is None else index[label])
                      for rgb, label in colors.items())
        return SegmentationMask(vocabulary=tuple(names), colors=table,
                                ignore_value=options.ignore_value,
                                allow_lossy=options.allow_lossy_masks)
    if options.mask_labels is not None:
        return SegmentationMask(vocabulary=tuple(options.mask_labels),
                                ignore_value=options.ignore_value,
                                allow_lossy=options.allow_lossy_masks)
    return SegmentationMask(vocabulary=tuple("" if i == options.ignore_value else str(i)
                                             for i in range(256)),
                            ignore_value=options.ignore_value,
                            allow_lossy=options.allow_lossy_masks, bounded=False)


_HEX = re.compile(r"#?([0-9a-fA-F]{6})")


def mask_colors(value):
    """A ``mask_colors`` option as ``{(r, g, b): label or None}`` (keys ``(r, g, b)`` of 0-255
    or ``"#rrggbb"``; a label None marks the ignore value).

    Raises:
        SchemaError: naming the entry that is no colour or no label.
    """
    if value is None:
        return None
    if not isinstance(value, dict) or not value:
        raise SchemaError(f"mask_colors must be a dict (r, g, b) -> label, not {value!r}")
    table = {}
    for key, label in value.items():
        match = _HEX.fullmatch(key) if isinstance(key, str) else None
        rgb = tuple(bytes.fromhex(match.group(1))) if match else key
        if not (isinstance(rgb, (tuple, list)) and len(rgb) == 3 and
                all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255
                    for c in rgb)):
            raise SchemaError(f"mask_colors: {key!r} is no colour: (r, g, b) of 0 to 255, or "
                              "'#rrggbb'")
        if label is not None and (not isinstance(label, str) or not label.strip()):
            raise SchemaError(f"mask_colors: the label of {key!r} is {label!r}: a label is "
                              "text, or None for the ignore value")
        if tuple(rgb) in table:
            raise SchemaError(f"mask_colors lists the colour {tuple(rgb)} twice")
        table[tuple(rgb)] = label
    return table


def mask_labels(value):
    """A ``mask_labels`` option as a tuple of label texts (class id = position).

    Raises:
        SchemaError: not a list of distinct, non-empty texts.
    """
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple, pd.Index)) or \
            not all(isinstance(v, str) and v.strip() for v in value) or not len(value):
        raise SchemaError(f"mask_labels must be a list of label texts (class id = position), "
                          f"not {value!r}")
    if len(set(value)) != len(value):
        twice = sorted({v for v in value if list(value).count(v) > 1})
        raise SchemaError(f"mask_labels lists {twice} twice")
    if len(value) > 255:
        raise SchemaError(f"mask_labels lists {len(value)} labels: a mask of 8-bit class ids "
                          "holds at most 255 beside the ignore value")
    return tuple(schema.label_text(v) for v in value)


def ignore_value(value):
    """An ``ignore_value`` option: a class id of 0 to 255, or None."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or
                              not 0 <= value <= 255):
        raise SchemaError(f"ignore_value must be a class id of 0 to 255, or None, not {value!r}")
    return value
