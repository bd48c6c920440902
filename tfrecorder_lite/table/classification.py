"""The classification kind of table: one label per row, several (multi-label), or one per
level. Its rows are its records; its labels get ids by ``label_map``, as whole numbers, or in
sorted order. pandas only, no I/O."""

from . import labels, schema
from .cells import blank_cells
from .row_columns import LabelColumns
from .kind_base import TableKind
from ..record.features import ClassLabel
from ..record.kinds import CLASSIFICATION


class ClassificationTable(TableKind):
    """The table kind of every table that no other kind recognizes."""

    record = CLASSIFICATION

    @staticmethod
    def recognizes(df, options):
        return True

    @staticmethod
    def prepare(df, options):
        """``(records frame, members, refused, used columns, details)``: the table as it is,
        the rows its source refused refused."""
        return df, None, schema.source_problems(df), set(), None

    @staticmethod
    def check_labels(df, options):
        """SchemaError for labels no record can hold (fractional numbers), before any I/O."""
        schema.check_label_values(df, options.label_col, options.label_map, options.label_sep)

    @staticmethod
    def problems(df, prepared):
        """validate()'s problems of this kind: rows their source refused, label spellings and
        fractional labels."""
        options = prepared.options
        return ([(df.index[row], None, None, reason) for row, reason in prepared.refused.items()] +
                schema.label_spellings(df, options.label_col, options.label_sep) +
                schema.fractional_labels(df, options.label_col, options.label_map,
                                         options.label_sep))

    @staticmethod
    def label_fields(prepared, options, refused):
        return label_fields(prepared.frame, options.label_col, options.label_map, options.label_sep,
                            refused)



KIND = ClassificationTable()


def _label_ids(values, label_map, skip):
    """Return (ids per label as a list, id -> text tuple).

    Blank labels and those marked in ``skip`` get id -1: a label only rejected rows carry
    takes no id (unless ``label_map`` gives it one).
    """
    skip = [a or b for a, b in zip(
        skip, blank_cells(values).tolist())]
    cells = values.tolist()  # plain Python values: iterating the Series is slower
    if label_map is not None:
        mapping = schema.label_map_ids(label_map)
        found = [None if b else schema.lookup_label(mapping, v) for v, b in zip(cells, skip)]
        ids = [-1 if i is None else i for i in found]
        texts = [""] * (max(mapping.values(), default=-1) + 1)
        for text, i in mapping.items():
            texts[i] = schema.label_text(text)
        return ids, tuple(texts)
    if schema.is_integer_labels(values):
        ids = [-1 if b or v < 0 else int(v) for v, b in zip(cells, skip)]
        return ids, tuple(str(i) for i in range(max(ids, default=-1) + 1))
    text = [None if b else schema.cached_label_text(v) for v, b in zip(cells, skip)]
    index = {t: i for i, t in enumerate(sorted({t for t in text if t is not None}))}
    return [-1 if t is None else index[t] for t in text], tuple(index)


def label_fields(df, label_col, label_map, label_sep, refused):
    """``(label fields, per row: one (id, text) per field)``; rows in ``refused`` take no id.
    The rows' values are LabelColumns, unless the field holds lists of labels (multi-label)."""
    fields, per_field = [], []
    for column, level in labels.label_columns(label_col):
        elements, positions, multi = labels.elements(df[column],
                                                     label_sep if level is None else None)
        ids, vocabulary = _label_ids(elements, schema.level_map(label_map, level),
                                     [int(p) in refused for p in positions])
        fields.append(ClassLabel(level, multi, vocabulary, column))
        per_field.append((ids, positions))
    if not any(f.multi for f in fields):
        return tuple(fields), LabelColumns([ids for ids, _ in per_field],
                                           [f.vocabulary for f in fields])
    rows = [zip(*labels.row_values(ids, [f.vocabulary[i] if i >= 0 else "" for i in ids],
                                   positions, len(df), f.multi))
            for f, (ids, positions) in zip(fields, per_field)]
    return tuple(fields), tuple(zip(*rows))
