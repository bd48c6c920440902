"""Checks of the table itself (columns, splits, labels, paths as text); pandas only, no I/O."""

import pandas as pd

from .errors import SchemaError

SPLITS = ("TRAIN", "VALIDATION", "TEST")
_SPLIT_ALIASES = {
    "TRAIN": "TRAIN", "TRAINING": "TRAIN",
    "VALIDATION": "VALIDATION", "VALID": "VALIDATION", "VAL": "VALIDATION",
    "TEST": "TEST", "TESTING": "TEST",
}
PROBLEM_COLUMNS = ["row", "column", "value", "problem"]


def check_columns(df, split_col, image_col, label_col):
    """Raise SchemaError naming expected and found columns when one is missing."""
    if not isinstance(df, pd.DataFrame):
        raise SchemaError(f"expected a pandas DataFrame, got {type(df).__name__}")
    expected = [split_col, image_col, label_col]
    missing = [c for c in expected if c not in df.columns]
    if missing:
        raise SchemaError(
            f"missing column(s) {missing}: expected {expected}, found {list(df.columns)}"
        )
    if df.columns.duplicated().any():
        raise SchemaError(f"duplicate column names: {list(df.columns[df.columns.duplicated()])}")


def canonical_splits(values):
    """Map split values to TRAIN / VALIDATION / TEST (case-insensitive); unknown -> None."""
    upper = values.astype("string").str.strip().str.upper()
    return upper.map(_SPLIT_ALIASES).astype(object).where(upper.notna(), None)


def is_integer_labels(labels):
    """True when the label column holds integers (possibly as floats because of blanks)."""
    if pd.api.types.is_bool_dtype(labels) or not pd.api.types.is_numeric_dtype(labels):
        return False
    present = labels.dropna()
    return bool((present == present.round()).all())


def _blank(values):
    """Mask of missing or whitespace-only cells."""
    return values.isna() | values.astype("string").str.strip().eq("").fillna(True)


def row_problems(df, split_col, image_col, label_col, label_map=None):
    """Problems found in the cells alone (no file is opened).

    Returns:
        A DataFrame with columns row, column, value, problem; one row per problem.
    """
    check_columns(df, split_col, image_col, label_col)
    found = []

    def report(mask, column, problem_of):
        for row, value in df.loc[mask, column].items():
            found.append((row, column, value, problem_of(value)))

    splits = canonical_splits(df[split_col])
    allowed = ", ".join(SPLITS[:-1]) + " or " + SPLITS[-1]
    report(splits.isna() & ~_blank(df[split_col]), split_col,
           lambda v: f"unknown split '{v}' (expected {allowed})")
    report(_blank(df[split_col]), split_col, lambda v: "empty split")
    report(_blank(df[image_col]), image_col, lambda v: "empty image_uri")

    labels = df[label_col]
    blank_labels = _blank(labels)
    report(blank_labels, label_col, lambda v: "empty label")
    if label_map is not None:
        known = label_map_ids(label_map)
        unknown = ~blank_labels & ~labels.map(lambda v: lookup_label(known, v) is not None)
        report(unknown, label_col, lambda v: f"label '{v}' not in label_map")
    elif is_integer_labels(labels):
        report(~blank_labels & (labels < 0), label_col, lambda v: f"negative label {v}")
    return problems_frame(found)


def problems_frame(rows):
    """Build the problems DataFrame from (row, column, value, problem) tuples, in row order."""
    return pd.DataFrame(rows, columns=PROBLEM_COLUMNS)


def label_map_ids(label_map):
    """Normalize ``label_map`` (dict text -> id, or a sequence of texts) to a dict."""
    if isinstance(label_map, dict):
        mapping = dict(label_map)
    elif isinstance(label_map, (list, tuple)):
        mapping = {text: i for i, text in enumerate(label_map)}
    else:
        raise SchemaError("label_map must be a dict {label: id} or a list of labels")
    bad = {k: v for k, v in mapping.items()
           if isinstance(v, bool) or not isinstance(v, int) or v < 0}
    if bad:
        raise SchemaError(f"label_map ids must be non-negative integers, got {bad}")
    return mapping


def lookup_label(mapping, value):
    """The id of ``value`` in a normalized label map, tried as is, then as text (or None)."""
    if value in mapping:
        return mapping[value]
    if isinstance(value, float) and value.is_integer() and int(value) in mapping:
        return mapping[int(value)]
    return mapping.get(str(value))
