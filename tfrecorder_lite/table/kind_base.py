"""What a kind of table is: the base of the table kinds (``table/kinds.py`` registers them).

A kind of table says which tables it recognizes, how it groups their rows into records, the
label features it gives them, its own problems for ``validate()``, and its RecordKind
(``record/kinds.py``). The defaults here are those of a table whose rows are its records, with
no other files and nothing declared beside them; a kind overrides what differs.
"""

from ..record.features import ImageFeature


class TableKind:
    """The base of the table kinds; one instance of each (its module's ``KIND``)."""

    #: the RecordKind of the records it writes
    record = None

    @staticmethod
    def recognizes(df, options):
        """Whether ``df`` (read with the TableOptions ``options``) is a table of this kind."""
        raise NotImplementedError

    @staticmethod
    def table_label_col(options):
        """The label column(s) the table must have (None: none)."""
        return options.label_col

    @staticmethod
    def prepare(df, options):
        """``(records frame, members, refused, used columns, details)``: the records, the table
        positions each stands for (None: each row is one), ``{record: reason}`` refused by the
        table alone, the columns the kind consumes, and what it keeps for itself."""
        raise NotImplementedError

    @staticmethod
    def file_columns(options):
        """The columns of each record's other files, read beside its image (none)."""
        return ()

    @staticmethod
    def check_labels(df, options):
        """SchemaError for labels no record can hold, before any file is read (none here)."""

    @staticmethod
    def label_column(options):
        """The label column(s) the table's row checks look at (None: the kind checks them)."""
        return options.label_col

    @staticmethod
    def problems(df, prepared):
        """``validate()``'s problems of this kind: ``(row, column, value, problem)`` tuples."""
        return []

    @staticmethod
    def label_fields(prepared, options, refused):
        """``(label features, per record: one value per feature)``; records that cannot be
        written are added to ``refused``."""
        raise NotImplementedError

    @staticmethod
    def image_feature():
        """The ImageFeature of its records."""
        return ImageFeature()

    @staticmethod
    def fingerprint(prepared, options):
        """What of the kind decides the output's bytes, beside the plan's own (for its
        fingerprint)."""
        return {}

    @staticmethod
    def declared_sizes(prepared):
        """Per record, the image size its source declares, or None when none does."""
        return None

    @staticmethod
    def written_values(prepared, label_values):
        """The label values as the records take them (default: as planned)."""
        return label_values
