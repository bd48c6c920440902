"""The exception family: catch ``TFRecorderError`` for all of them, or the builtin base."""

from .redaction import redact


class TFRecorderError(Exception):
    """Base class of every error raised on purpose by tfrecorder_lite.

    Its message shows URLs without their user info or signed query (see ``redaction``):
    whatever prints the error prints no credential.
    """

    def __init__(self, *args):
        super().__init__(*(redact(arg) for arg in args))


class SchemaError(TFRecorderError, ValueError):
    """The table or an option is unusable as a whole (missing column, bad option value)."""


class InvalidRowError(TFRecorderError, ValueError):
    """One input row cannot be written; names the row, its path and the reason.

    The attributes hold the row's values as the table does; the message and the reason are
    redacted.

    Attributes:
        row: the input row label (DataFrame index value).
        path: the image path of that row, or None.
        reason: a short human reason, e.g. "file not found" (URLs in it redacted).
        line: the row's line in the CSV file it was read from, or None; or a text that says
            where the row comes from in another file (``"JSON line 3 of export.jsonl"``).
    """

    def __init__(self, row, path, reason, line=None):
        self.row = row
        self.path = path
        self.reason = redact(reason)
        self.line = line
        where = f"row {row_repr(row)}" + (f" ({line})" if isinstance(line, str) else
                                  f" (CSV line {line})" if line else "") + \
            (f" ({path})" if path else "")
        super().__init__(f"{where}: {reason}")

    def __reduce__(self):  # raised in workers: it must cross processes whole
        return type(self), (self.row, self.path, self.reason, self.line)


def row_repr(row):
    """The ``repr`` of a table's row label as its table shows it: ``10``, not ``np.int64(10)``
    (numpy's scalars say their type since numpy 2)."""
    if type(row).__module__ == "numpy" and hasattr(row, "item"):
        row = row.item()
    return repr(row)


class OutputExistsError(TFRecorderError, FileExistsError):
    """The output folder holds files that are not an earlier run of the same job."""


class OutputLockedError(OutputExistsError):
    """Another conversion is writing the output folder right now; nothing was changed.

    Also raised when a conversion finds, while writing, that another one took its folder over
    (or that its lock file is no lease), with a ``message`` saying so.

    Attributes:
        output_dir: the folder.
        holder: who holds it (pid, host, since when), or what is wrong with its lock file.
    """

    def __init__(self, output_dir, holder, message=None):
        self.output_dir = output_dir
        self.holder = holder
        self._message = message
        super().__init__(message or (
            f"{output_dir} is being written by another conversion ({holder}); nothing was "
            "changed. Wait for it to finish, or write elsewhere."))

    def __reduce__(self):
        return type(self), (self.output_dir, self.holder, self._message)


class ManifestError(TFRecorderError, OSError):
    """The folder is not a usable finished output: metadata.json is missing, unreadable or
    malformed (the message names the field), or a shard it lists is missing or resized."""


class VerifyError(TFRecorderError, OSError):
    """A shard does not match metadata.json or holds a damaged record.

    Attributes:
        problems: one line per problem found (when ``verify`` found several).
    """

    def __init__(self, message, problems=()):
        super().__init__(message)
        self.problems = list(problems)

    def __reduce__(self):
        return type(self), (str(self), self.problems)


class UnsupportedURLError(TFRecorderError, ValueError):
    """A URL names a scheme that no installed fsspec filesystem knows."""


class MissingDependencyError(TFRecorderError, ImportError):
    """A URL needs a package that is not installed; the message names the extra to install."""
