"""The split names and the spellings every door accepts for them: one table."""

from ..errors import SchemaError

SPLITS = ("TRAIN", "VALIDATION", "TEST")
UNASSIGNED = "UNASSIGNED"  # ML_USE's "let the service choose"
ALIASES = {
    "TRAIN": "TRAIN", "TRAINING": "TRAIN",
    "VALIDATION": "VALIDATION", "VALID": "VALIDATION", "VAL": "VALIDATION",
    "VALIDATE": "VALIDATION",  # as ML_USE spells it
    "TEST": "TEST", "TESTING": "TEST",
}


def canonical(value):
    """TRAIN, VALIDATION or TEST for a spelling of it (case-insensitive), else None."""
    return ALIASES.get(str(value).strip().upper())


def pick(split, available, where="this output"):
    """The canonical name of ``split``, which must be one of ``available``.

    Raises:
        SchemaError: naming the split asked for and the ones there are.
    """
    name = canonical(split)
    if name not in available:
        raise SchemaError(f"split {split!r} not in {where}; it has {list(available)}")
    return name
