"""The malformed lines or files of an annotation source, raised together as one error."""

from ..errors import SchemaError
from ..redaction import redact

SHOWN = 10  # problems an error lists


def refuse(name, what, problems):
    """Raise a SchemaError listing ``problems`` (texts naming their line or file and field),
    the first ``SHOWN`` in full, URLs redacted; nothing when there are none.

    Args:
        name: the file or folder read (path or URL).
        what: what it was read as, e.g. ``"an import file"``.
        problems: the texts, in the order to show them.
    """
    if not problems:
        return
    more = len(problems) - SHOWN
    raise SchemaError(redact(f"{name}: {len(problems)} problem(s) reading it as {what}: "
                             + "; ".join(problems[:SHOWN])
                             + (f"; and {more} more" if more > 0 else "")))
