"""Checks of the table itself (columns, splits, labels, paths as text); pandas only, no I/O."""

import functools
import hashlib
import re

import numpy as np
import pandas as pd

from . import labels
from .cells import blank_cells, text_series
from ..errors import SchemaError, row_repr
from ..redaction import redact
from ..output.splits import ALIASES, SPLITS, UNASSIGNED, canonical

PROBLEM_COLUMNS = ["row", "column", "value", "problem"]
# ``df.attrs[SOURCE_PROBLEMS]``: ``{row label: reason}`` of rows their source refused (an
# annotation naming a file outside its image folder, a value of the wrong type): each kind of
# table refuses their records with that reason (every row of a record carries it).
SOURCE_PROBLEMS = "source_problems"
DEFAULT_RATIOS = {"TRAIN": 0.8, "VALIDATION": 0.1, "TEST": 0.1}


def check_columns(df, split_col, image_col, label_col):
    """Raise SchemaError naming expected and found columns when one is missing (``split_col``
    and ``image_col`` may be None: a table without splits, or without images; ``label_col`` may
    list one column per label level)."""
    if not isinstance(df, pd.DataFrame):
        raise SchemaError(f"expected a pandas DataFrame, got {type(df).__name__}")
    label_cols = [c for c, _ in labels.label_columns(label_col)]
    expected = [c for c in (split_col, image_col, *label_cols) if c is not None]
    missing = [c for c in expected if c not in df.columns]
    if missing:
        raise SchemaError(
            f"missing column(s) {missing}: expected {expected}, found {list(df.columns)}"
        )
    if len(set(expected)) != len(expected):
        raise SchemaError(f"one column has two roles: split, image and label columns {expected}")
    if df.columns.duplicated().any():
        raise SchemaError(f"duplicate column names: {list(df.columns[df.columns.duplicated()])}")


def source_problems(df):
    """``{table position: reason}`` of the rows ``df.attrs[SOURCE_PROBLEMS]`` names."""
    problems = df.attrs.get(SOURCE_PROBLEMS) or {}
    if not problems:
        return {}
    position_of = {row: p for p, row in enumerate(df.index)}
    return {position_of[row]: reason for row, reason in problems.items() if row in position_of}


def used_columns(split_col, image_col, label_col):
    """The split, image and label columns (the others are extra columns)."""
    return {c for c in (split_col, image_col) if c is not None} | \
        {c for c, _ in labels.label_columns(label_col)}


def canonical_splits(values):
    """Map split values to TRAIN / VALIDATION / TEST (case-insensitive); unknown -> None."""
    try:
        codes, distinct = pd.factorize(values)  # each value mapped once; rows share its result
    except TypeError:  # unhashable cells (lists): each row's text mapped
        codes, distinct = np.arange(len(values)), values.to_numpy()
        codes[values.isna().to_numpy()] = -1
    upper = text_series(pd.Series(distinct)).str.strip().str.upper()
    mapped = np.append(upper.map(ALIASES).astype(object).to_numpy(), None)
    return pd.Series(mapped[codes], index=values.index, dtype=object)  # code -1: missing


def split_assignment(unassigned="reject", split_ratios=None, split_col="split"):
    """The split shares rows without a split get, or None when such rows are rejected.

    Args:
        unassigned: "reject" rows whose split is UNASSIGNED or empty, or "assign" them one.
        split_ratios: ``{split: share}`` (or three shares in TRAIN, VALIDATION, TEST order);
            default 80/10/10. Shares are normalized to sum to 1.
        split_col: None when the table has no split column: every row is assigned.

    Returns:
        None, or ``((split, share), ...)`` in TRAIN, VALIDATION, TEST order.
    """
    if unassigned not in ("reject", "assign"):
        raise SchemaError(f"unassigned must be 'reject' or 'assign', not {unassigned!r}")
    if unassigned == "reject" and split_col is not None:
        if split_ratios is not None:
            raise SchemaError("split_ratios is for rows given a split: pass unassigned='assign' "
                              "(or split_col=None)")
        return None
    ratios = DEFAULT_RATIOS if split_ratios is None else split_ratios
    if not isinstance(ratios, dict):
        ratios = dict(zip(SPLITS, ratios)) if len(ratios) == len(SPLITS) else None
    shares = None if ratios is None else \
        {canonical(k): v for k, v in ratios.items()}
    if not shares or None in shares or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
            for v in shares.values()) or sum(shares.values()) <= 0:
        raise SchemaError(f"split_ratios must map TRAIN, VALIDATION, TEST to shares >= 0 (or "
                          f"give three shares), not {split_ratios!r}")
    total = sum(shares.values())
    return tuple((split, shares[split] / total) for split in SPLITS if shares.get(split))


def assigned_split(key, assignment):
    """The split of a row by a stable hash of its ``key`` (its image_uri text): the same image
    lands in the same split whatever the table's order, run or machine."""
    digest = hashlib.sha256(str(key).strip().encode("utf-8")).digest()
    point, bound = int.from_bytes(digest[:8], "big") / 2**64, 0.0
    for split, share in assignment:
        bound += share
        if point < bound:
            return split
    return assignment[-1][0]


def row_keys(df, split_col, image_col):
    """What a row's split is assigned by: its image_uri text, or in a table without images
    the text of its cells (all columns but the split, in column order)."""
    if image_col is not None:
        return df[image_col].tolist()
    cells = df[[c for c in df.columns if c != split_col]].astype(str).to_numpy().tolist()
    return ["\x1f".join(row) for row in cells]


def table_splits(df, split_col, image_col, assignment=None):
    """Each row's split (TRAIN / VALIDATION / TEST), or None when it has none: rows whose split
    is UNASSIGNED or empty (every row, without a split column) are given one by
    :func:`assigned_split` when ``assignment`` is not None."""
    if split_col is None:
        splits, open_rows = pd.Series([None] * len(df), index=df.index, dtype=object), None
    else:
        splits, open_rows = canonical_splits(df[split_col]), None
    if assignment is not None:
        if split_col is not None:
            upper = text_series(df[split_col]).str.strip().str.upper()
            open_rows = blank_cells(df[split_col]) | upper.eq(UNASSIGNED).fillna(False)
        keys = row_keys(df, split_col, image_col)
        mask = [True] * len(df) if open_rows is None else open_rows.tolist()
        splits.loc[np.array(mask, dtype=bool)] = [
            assigned_split(key, assignment) for key, wanted in zip(keys, mask) if wanted]
    return splits


def is_integer_labels(labels):
    """True when the label column holds integers (possibly as floats because of blanks)."""
    if pd.api.types.is_bool_dtype(labels) or not pd.api.types.is_numeric_dtype(labels):
        return False
    present = labels.dropna()
    return bool((present == present.round()).all())


# Integer labels are class ids 0..N-1, and labels.txt gets a line for every id up to the
# largest: an id beyond both of these is refused as a likely mistake (a code, not a class id).
MAX_LABEL_ID = 100_000
_IDS_PER_ROW = 10
_INTEGRAL_TEXT = re.compile(r"^[+-]?\d+\.0*$")  # "1.0", written by tools that saw a float


_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)


def parse_number(text):
    """A number written as text in plain decimal notation (``0.5``, ``.3``, ``-2``, ``1e-3``;
    spaces around it allowed), as a float: the rule of every number a table or annotation file
    holds as text.

    Raises:
        ValueError: for anything else, which ``float()`` would take or guess at: ``0.5_0``,
            ``nan``, ``inf``, ``0x10``, digits of other scripts, an empty text.
    """
    if not isinstance(text, str) or not _DECIMAL.fullmatch(text.strip()):
        raise ValueError(f"{text!r} is not a number (plain decimal notation, e.g. 0.25)")
    return float(text)


def label_text(value):
    """The text a (non-blank) label cell stands for: stripped, and a whole number written
    once ("1" for 1, 1.0, "1.0")."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        if float(value).is_integer():
            return str(int(value))
        return str(value)
    text = str(value).strip()
    return text.split(".")[0].lstrip("+") or "0" if _INTEGRAL_TEXT.match(text) else text


@functools.lru_cache(maxsize=4096)
def _cached_label_text(kind, value):
    return label_text(value)


def cached_label_text(value):
    """``label_text``, made once per label (labels repeat from row to row)."""
    try:
        return _cached_label_text(type(value), value)  # the type keeps True apart from 1
    except TypeError:  # an unhashable cell
        return label_text(value)


def max_label_id(n_rows):
    """The largest integer label accepted in a table of ``n_rows`` rows."""
    return max(MAX_LABEL_ID, _IDS_PER_ROW * n_rows)


def row_problems(df, split_col, image_col, label_col, label_map=None, assignment=None,
                 label_sep=None, splits=None):
    """Problems found in the cells alone (no file is opened); ``assignment``: see
    :func:`split_assignment`; ``label_sep``: see :func:`labels.elements`; ``splits``: the
    :func:`table_splits` of ``df`` when the caller has them already.

    Returns:
        A DataFrame with columns row, column, value, problem; one row per problem.
    """
    check_columns(df, split_col, image_col, label_col)
    found = []

    def report(mask, column, problem_of):
        for row, value in df.loc[mask, column].items():
            found.append((row, column, value, problem_of(value)))

    if split_col is not None:
        if splits is None:
            splits = table_splits(df, split_col, image_col, assignment)
        allowed = ", ".join(SPLITS[:-1]) + " or " + SPLITS[-1]
        blank, missing = blank_cells(df[split_col]), splits.isna()
        report(missing & ~blank, split_col, lambda v: f"unknown split '{v}' (expected {allowed})")
        report(missing & blank, split_col, lambda v: "empty split")
    if image_col is not None:
        report(blank_cells(df[image_col]), image_col, lambda v: "empty image_uri")
    if label_sep is not None and isinstance(label_col, (list, tuple)):
        raise SchemaError("label_sep splits one label column into several labels (multi-label);"
                          " a label level takes one label per row")
    for column, level in labels.label_columns(label_col) if label_col is not None else ():
        found += _label_problems(df, column, level, level_map(label_map, level), label_sep)
    return problems_frame(found)


def level_map(label_map, level):
    """The label_map of one label level (``label_map`` is a dict per level with levels)."""
    if level is None or label_map is None:
        return label_map
    if not isinstance(label_map, dict) or not all(isinstance(v, (dict, list, tuple))
                                                  for v in label_map.values()):
        raise SchemaError("with label levels, label_map is a dict level -> that level's map, "
                          "e.g. {'coarse': ['animal', 'plant'], 'fine': {...}}")
    return label_map.get(level)


def _label_problems(df, column, level, label_map, label_sep):
    """(row, column, value, problem) of the label cells of one label column."""
    values = df[column]
    if level is not None and labels.is_multi(values):
        raise SchemaError(f"label level '{level}' holds lists: a label level takes one label "
                          "per row (multi-label takes one label column)")
    elements, positions, multi = labels.elements(values, label_sep if level is None else None)
    found = []

    def report(mask, problem_of):
        for row, value in elements[mask].items():
            found.append((row, column, value, problem_of(value)))

    if multi:
        has_label = np.zeros(len(df), dtype=bool)
        has_label[positions] = True
        for row, value in values[~has_label].items():
            found.append((row, column, value, "empty label"))
        blank = pd.Series(False, index=elements.index)
    else:
        blank = blank_cells(elements)
        report(blank, lambda v: "empty label")
    control = ~blank & labels.unstorable(elements)
    report(control, labels.label_problem)
    usable = ~blank & ~control
    if label_map is not None:
        known = label_map_ids(label_map)
        report(usable & ~elements.map(lambda v: lookup_label(known, v) is not None),
               lambda v: f"label '{v}' not in label_map")
    elif is_integer_labels(elements):
        report(usable & (elements < 0), lambda v: f"negative label {v}")
        limit = max_label_id(len(df))
        report(usable & (elements > limit), lambda v: (
            f"label {int(v)} is far beyond the table's {len(df)} rows: integer labels are class "
            f"ids 0..N-1 (at most {limit} here), and labels.txt gets a line for every id; to "
            "use the numbers as names, make the column text (df[col].astype(str))"))
    return found


def label_spellings(df, label_col, label_sep=None):
    """Labels that differ only in case or surrounding spaces, as problems (one per spelling
    after the first): the first kind are two classes, the second one class."""
    found = []
    for column, level in labels.label_columns(label_col):
        elements, _, _ = labels.elements(df[column], label_sep if level is None else None)
        found += _spellings(elements, column)
    return found


def _spellings(values, label_col):
    """:func:`label_spellings` of one column's label elements."""
    present = values[~blank_cells(values)]
    first_of, seen, found = {}, set(), []
    for row, value in present.items():
        if not isinstance(value, str) or value in seen:
            continue
        seen.add(value)
        key = value.strip().casefold()
        if key not in first_of:
            first_of[key] = (row, value)
            continue
        first_row, first = first_of[key]
        count = int((present == value).sum())
        if value.strip() == first.strip():
            problem = (f"label {value!r} differs from {first!r} (row {row_repr(first_row)}) only "
                       f"in surrounding spaces: both are stored as {value.strip()!r}")
        else:
            problem = (f"label {value!r} differs from {first!r} (row {row_repr(first_row)}) only "
                       f"in case (or spaces): they are two classes ({count} row(s) spell it so)")
        found.append((row, label_col, value, problem))
    return found


def problems_frame(rows):
    """Build the problems DataFrame from (row, column, value, problem) tuples, in row order;
    URLs in values and problems redacted (:func:`problems_frame_of` its columns)."""
    rows = list(rows)
    if not rows:
        return pd.DataFrame(rows, columns=PROBLEM_COLUMNS)
    return problems_frame_of(*zip(*rows))


def problems_frame_of(row, column, value, problem):
    """The problems DataFrame of its four columns, sequences (or arrays) of one length
    (``value`` may be a pandas array of text, as ``TextColumn.texts`` gives); URLs in values
    and problems redacted.

    The problem column keeps its cells as the Python strings given (pandas' ``str`` dtype,
    stored as Python objects where pandas has one): rows that share a problem, such as a
    million copies of one picture each reported with one, share its one text.
    """
    if isinstance(value, pd.api.extensions.ExtensionArray):
        value = _redacted_texts(value)
    else:
        value = [redact(cell) for cell in value]
    problem = [redact(text) for text in problem]
    columns = dict(zip(PROBLEM_COLUMNS, (row, column, value, problem)))
    try:
        return pd.DataFrame({name: _problem_column(values, shared=name == "problem")
                             for name, values in columns.items()})
    except UnicodeEncodeError:  # a value that is no valid Unicode (a lone surrogate): kept as is
        return pd.DataFrame({name: pd.Series(list(values), dtype=object) if name == "value"
                             else _problem_column(values, shared=name == "problem")
                             for name, values in columns.items()})


def _redacted_texts(texts):
    """A pandas array of text in pandas' text dtype (object: missing ones None), the cells
    holding a URL redacted."""
    texts = pd.Series(texts)
    urls = np.flatnonzero(texts.str.contains("://", regex=False, na=False).to_numpy(bool))
    if isinstance(_text(), pd.StringDtype):
        texts = texts.astype(_text())
    else:
        texts = pd.Series(texts.to_numpy(dtype=object, na_value=None), dtype=object)
    if len(urls):
        texts.iloc[urls] = [redact(texts.iloc[i]) for i in urls.tolist()]
    return texts.array


def _problem_column(values, shared=False):
    """A column of the problems frame: text as Python strings (:func:`_shared_text`) when
    ``shared``, anything else as pandas infers it."""
    text = _shared_text() if shared else None
    if text is not None and pd.api.types.infer_dtype(values, skipna=True) == "string":
        return pd.Series(values, dtype=text)
    arrays = (np.ndarray, pd.api.extensions.ExtensionArray)
    return pd.Series(values if isinstance(values, arrays) else list(values))


@functools.cache
def _text():
    """The dtype pandas gives a column of text (``str``, or object)."""
    return pd.Series(["text"]).dtype


@functools.cache
def _shared_text():
    """pandas' dtype of text (``str``) stored as Python strings, or None where pandas infers
    no text dtype (object columns already hold the strings given)."""
    inferred = _text()
    if not isinstance(inferred, pd.StringDtype):
        return None
    try:
        return pd.StringDtype("python", na_value=inferred.na_value)
    except TypeError:  # a pandas whose text dtype takes no na_value
        return None


def label_map_ids(label_map):
    """Normalize ``label_map`` (dict text -> id, or a sequence of texts) to a dict.

    Raises:
        SchemaError: for a map that would lose labels: a list naming a label twice, two
            labels given one id, or two labels written alike in labels.txt (1 and "1").
    """
    if isinstance(label_map, dict):
        mapping = dict(label_map)
    elif isinstance(label_map, (list, tuple)):
        _refuse_repeats(label_map)
        mapping = {text: i for i, text in enumerate(label_map)}
    else:
        raise SchemaError("label_map must be a dict {label: id} or a list of labels")
    bad = {k: v for k, v in mapping.items()
           if isinstance(v, bool) or not isinstance(v, int) or v < 0}
    if bad:
        raise SchemaError(f"label_map ids must be non-negative integers, got {bad}")
    too_far = max(mapping.values(), default=0) > max_label_id(len(mapping))
    if too_far:
        raise SchemaError(f"label_map ids are class ids 0..N-1; {max(mapping.values())} for "
                          f"{len(mapping)} labels would give labels.txt a line for every id")
    unstorable = [problem for problem in map(labels.label_problem, mapping) if problem]
    if unstorable:
        raise SchemaError("label_map labels hold control characters or invalid text: "
                          f"{unstorable[0]}" + (
            f" (and {len(unstorable) - 1} more such labels)" if len(unstorable) > 1 else ""))
    _refuse_shared(mapping)
    return mapping


_SHOWN = 5  # labels or ids named in one message


def _shared(pairs):
    """``{key: [items]}`` of the keys of ``(key, item)`` pairs that more than one item has."""
    groups = {}
    for key, item in pairs:
        groups.setdefault(key, []).append(item)
    return {key: items for key, items in groups.items() if len(items) > 1}


def _refuse_repeats(texts):
    """Raise SchemaError naming the labels a label_map list holds more than once."""
    try:
        repeated = _shared((text, i) for i, text in enumerate(texts))
    except TypeError:  # an unhashable label: refused as a label later
        return
    if repeated:
        listed = "; ".join(f"{text!r} at positions {at}" for text, at in
                           list(repeated.items())[:_SHOWN])
        raise SchemaError(
            f"label_map lists {len(repeated)} label(s) more than once: {listed}. A list "
            "gives each label the id of its position, so each label must appear once "
            "(e.g. label_map=sorted(set(labels)))")


def _refuse_shared(mapping):
    """Raise SchemaError when two labels of a normalized map share an id, or a text."""
    shared = sorted(_shared((i, label) for label, i in mapping.items()).items())
    if shared:
        listed = "; ".join(f"id {i}: {labels[:_SHOWN]}" for i, labels in shared[:_SHOWN])
        raise SchemaError(
            f"label_map gives one id to several labels ({listed}): each id has one label "
            "text in labels.txt and in the records. To merge labels, rewrite them in the "
            "table first, e.g. df['label'].replace({'kitty': 'cat'})")
    alike = list(_shared((label_text(label), label) for label in mapping).values())
    if alike:
        listed = "; ".join(" and ".join(repr(x) for x in labels) for labels in alike[:_SHOWN])
        raise SchemaError(f"label_map labels written alike in labels.txt: {listed}; keep one "
                          "of each")


def _is_fractional(value):
    """True for a number with a fractional part (2.73, 0.5, inf), never for 1.0 or text."""
    if isinstance(value, bool) or not isinstance(value, (float, np.floating)):
        return False
    return not np.isnan(value) and not float(value).is_integer()


def fractional_labels(df, label_col, label_map=None, label_sep=None):
    """(row, column, value, problem) of each label that is a number with a fractional part.

    Labels are classes: a column of values like 2.73 (a regression target) would become one
    class per value. Whole numbers (1.0) are class ids as 1 is; with a ``label_map`` the map
    decides, and nothing is reported.
    """
    found = []
    for column, level in labels.label_columns(label_col):
        if level_map(label_map, level) is not None:
            continue
        elements, _, _ = labels.elements(df[column], label_sep if level is None else None)
        if pd.api.types.is_float_dtype(elements):
            present = elements.dropna()
            mask = present.ne(present.round())
        elif elements.dtype == object:
            mask = elements.map(_is_fractional).astype(bool)
        else:
            continue
        for row, value in elements[mask.reindex(elements.index, fill_value=False)].items():
            found.append((row, column, value, (
                f"fractional label {value!r}: labels are classes, and each such number would "
                "be a class of its own. For a regression target, keep the number in another "
                f"column (stored as a float feature); to use the numbers as class names, make "
                f"the column text (df['{column}'] = df['{column}'].astype(str))")))
    return found


def check_label_values(df, label_col, label_map=None, label_sep=None):
    """Raise SchemaError when a label column holds fractional numbers (see
    :func:`fractional_labels`), naming a few of them and the fix."""
    found = fractional_labels(df, label_col, label_map, label_sep)
    if found:
        column = found[0][1]
        values = sorted({value for _, c, value, _ in found if c == column})[:_SHOWN]
        raise SchemaError(
            f"label column '{column}' holds {len(found)} fractional number(s), e.g. "
            f"{', '.join(repr(v) for v in values)}: labels are classes, not quantities. For a "
            "regression target, keep the number in another column (stored as a float "
            f"feature); to use the numbers as class names, make the column text "
            f"(df['{column}'] = df['{column}'].astype(str)). validate() lists every row")


def lookup_label(mapping, value):
    """The id of ``value`` in a normalized label map: tried as is, then as a whole number,
    then as its label text (or None)."""
    try:
        if value in mapping:
            return mapping[value]
    except TypeError:  # unhashable
        return None
    if isinstance(value, float) and value.is_integer() and int(value) in mapping:
        return mapping[int(value)]
    text = label_text(value)
    if text in mapping:
        return mapping[text]
    return mapping.get(str(value))
