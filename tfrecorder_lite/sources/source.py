"""A conversion source named by a path or URL: what its formats ask of it, read at most once."""

import functools

from . import annotation_files
from .. import storage
from ..errors import SchemaError
from ..option_declarations import BY_NAME


class Source:
    """A path or URL to convert, with the options it is read with.

    Attributes:
        given: the source as the caller named it (messages name it so).
        path: its resolved path or URL.
        options: ``read_source``'s keyword options (columns, ``encoding``, ``task``, ...).
        memo: what a format learned of it while recognizing it, for its reader.
    """

    def __init__(self, given, path, options):
        self.given, self.path, self.options, self.memo = given, path, options, {}

    @property
    def storage_options(self):
        return self.options["storage_options"]

    @property
    def columns(self):
        """``(split_col, image_col, label_col)``."""
        return tuple(self.options[k] for k in ("split_col", "image_col", "label_col"))

    def named(self, *suffixes):
        """Whether its name ends with one of ``suffixes`` (any case)."""
        return self.path.lower().endswith(suffixes)

    @functools.cached_property
    def is_dir(self):
        return storage.is_dir(self.path, self.storage_options)

    @functools.cached_property
    def data(self):
        """Its bytes (an annotation file named so, ``.json`` or ``.jsonl``, within
        ``max_annotation_bytes``).

        Raises:
            SchemaError: a file not named ``.json`` that does not exist.
        """
        if self.named(".json"):
            return annotation_files.read_annotation_bytes(
                self.path, self.storage_options, self.options["max_annotation_bytes"])
        try:
            if self.named(".jsonl"):  # refused before it is read when too large
                return annotation_files.read_annotation_bytes(
                    self.path, self.storage_options, self.options["max_annotation_bytes"])
            return storage.read_bytes(self.path, self.storage_options)
        except FileNotFoundError:
            raise SchemaError(f"source {self.given!r} is neither a DataFrame, a file nor a "
                              "folder") from None


def refuse_options(source, **options):
    """Raise SchemaError when an option is given (not None) that ``source`` does not use."""
    given = {k: v for k, v in options.items() if v is not None}
    if given:
        raise SchemaError(f"{', '.join(f'{k}={v!r}' for k, v in given.items())} does not "
                          f"apply to {source}: "
                          + "; ".join(f"{k}= is {BY_NAME[k].help}" for k in given))
