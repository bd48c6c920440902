"""Options that several doors share, parsed and checked once into frozen objects.

``to_tfrecord``, ``convert``, ``df.tfrecord.dataset``, ``load`` and the CLI take the same
spellings of the same options (declared once, in ``option_declarations.py``); each door turns
them into these objects, by keyword, before anything is read, so an option means the same
everywhere and a bad value gets the same message.
"""

import dataclasses
import os
from dataclasses import dataclass

from .errors import SchemaError
from .images.normalize import DEFAULT_MAX_BYTES, ImageOptions
from .option_declarations import (
    BOX_FORMATS, BOX_UNITS, BY_NAME, CHANNELS, CHECKS, IMAGE_FORMATS, LEAKAGE, ON_ERROR,
    UNASSIGNED)
from .record.framing import normalize_compression
from .table import kinds
from .table.schema import split_assignment
from .output.splits import canonical



def one_of(name, value, allowed):
    """``value``, or SchemaError naming the option and what it allows."""
    if value not in allowed:
        raise SchemaError(f"{name} must be one of {allowed}, not {value!r}")
    return value


def image_size(value, name="image_size"):
    """``(height, width)`` of an ``image_size`` option (an int means a square), or None."""
    if value is None:
        return None
    size = (value, value) if isinstance(value, int) else tuple(value)
    if len(size) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                 for v in size):
        raise SchemaError(f"{name} must be (height, width) in pixels, not {value!r}")
    return size


def leakage_for(leakage, check="decode", size=None, append=False):
    """The near-duplicate mode a conversion runs with: ``leakage`` when given (one of
    LEAKAGE); else "warn" when the images' pixels are decoded anyway (``check="decode"``, a
    resize) or an append needs their hashes, and "ignore" for a ``check="header"`` write,
    whose images are never decoded (hashing would decode every one).

    Raises:
        SchemaError: a mode not in LEAKAGE; "ignore" for an append, whose images must be
            hashed (the next append knows them only by their hashes).
    """
    if leakage is not None:
        one_of("leakage", leakage, LEAKAGE)
        if append and leakage == "ignore":
            raise SchemaError("leakage='ignore' cannot append: an append keeps the hashes of "
                              "the images it writes, as the output does, or a later append "
                              "would not know them and write them again; use 'warn' (the "
                              "default) or 'reject'")
        return leakage
    return "warn" if check == "decode" or size is not None or append else "ignore"


def image_options(check="decode", size=None, image_format="jpeg",
                  max_image_bytes=DEFAULT_MAX_BYTES, leakage="ignore"):
    """The ImageOptions of a conversion's image options, checked (images are hashed unless
    ``leakage`` is "ignore")."""
    one_of("check", check, CHECKS)
    one_of("leakage", leakage, LEAKAGE)
    one_of("image_format", image_format, IMAGE_FORMATS)
    if isinstance(max_image_bytes, bool) or not isinstance(max_image_bytes, int) or \
            max_image_bytes <= 0:
        raise SchemaError(f"max_image_bytes must be a positive number of bytes, not "
                          f"{max_image_bytes!r}")
    return ImageOptions(check=check, size=image_size(size), format=image_format,
                        max_bytes=max_image_bytes, phash=leakage != "ignore")


class _ByName:
    """The ``of`` constructor of the options objects (which take keywords only)."""

    @classmethod
    def of(cls, values):
        """The options object of the ``values`` (a dict, e.g. a door's ``locals()``) named as
        its fields."""
        return cls(**{f.name: values[f.name] for f in dataclasses.fields(cls)
                      if f.init and f.name in values})


@dataclass(frozen=True, eq=False, kw_only=True)
class TableOptions(_ByName):
    """How to read a table: its columns, labels, splits and extra columns.

    Attributes: as the arguments of :func:`tfrecorder_lite.to_tfrecord` of the same names;
    ``assignment`` is what ``unassigned`` and ``split_ratios`` make of rows without a split
    (``schema.split_assignment``).
    """

    split_col: str = "split"
    image_col: str = "image_uri"
    label_col: object = "label"
    label_map: object = None
    label_sep: str = None
    features: dict = None
    unassigned: str = "reject"
    split_ratios: object = None
    box_units: str = "relative"
    box_columns: object = None
    base_dir: str = None
    mask_col: str = None
    mask_colors: dict = None
    mask_labels: object = None
    ignore_value: int = 255
    allow_lossy_masks: bool = False
    assignment: tuple = dataclasses.field(init=False, default=None)

    def __post_init__(self):
        one_of("unassigned", self.unassigned, UNASSIGNED)
        one_of("box_units", self.box_units, BOX_UNITS)
        for name, value in kinds.kind_options(self).items():
            object.__setattr__(self, name, value)
        if not isinstance(self.allow_lossy_masks, bool):
            raise SchemaError(f"allow_lossy_masks must be True or False, not "
                              f"{self.allow_lossy_masks!r}")
        if self.label_sep is not None and (not isinstance(self.label_sep, str) or
                                           not self.label_sep):
            raise SchemaError(f"label_sep must be a separator (text, e.g. '|') or None, not "
                              f"{self.label_sep!r}")
        if self.base_dir is not None and not isinstance(self.base_dir, (str, os.PathLike)):
            raise SchemaError(f"base_dir must be a folder (a path or a URL) or None, not "
                              f"{self.base_dir!r}")
        if self.box_columns is not None and (
                isinstance(self.box_columns, str) or not isinstance(self.box_columns, (
                    list, tuple)) or not all(isinstance(c, str) for c in self.box_columns)):
            raise SchemaError(f"box_columns must be a list of column names, not "
                              f"{self.box_columns!r}")
        if self.mask_col is not None and not isinstance(self.mask_col, str):
            raise SchemaError(f"mask_col must be a column name, not {self.mask_col!r}")
        kinds.check_kind_options(self)  # e.g. the masks' labels, colours and ignore value
        object.__setattr__(self, "assignment", split_assignment(
            self.unassigned, self.split_ratios, self.split_col))

    def of_frame(self, df):
        """These options for ``df``: a ``label_map`` or ``mask_colors`` it carries in
        ``df.attrs`` (a source's reader keeps its category ids or the colours of its masks
        there) when none is given."""
        given = {name: df.attrs[name] for name in ("label_map", "mask_colors")
                 if getattr(self, name) is None and df.attrs.get(name) is not None}
        return dataclasses.replace(self, **given) if given else self


@dataclass(frozen=True, eq=False, kw_only=True)
class WriteOptions(_ByName):
    """How to write shards. Attributes: as the arguments of
    :func:`tfrecorder_lite.to_tfrecord` of the same names (``compression`` upper case)."""

    num_shards: object = None
    compression: str = None
    shuffle: bool = True
    seed: int = 0
    sha256: bool = False
    on_error: str = "raise"
    overwrite: bool = False
    n_jobs: int = -1
    progress: bool = True
    leakage: str = None  # chosen by the check: leakage_for

    def __post_init__(self):
        one_of("on_error", self.on_error, ON_ERROR)
        one_of("shuffle", self.shuffle, (False, True))
        if self.leakage is not None:  # None: chosen by the check (leakage_for)
            one_of("leakage", self.leakage, LEAKAGE)
        try:
            object.__setattr__(self, "compression", normalize_compression(self.compression))
        except ValueError as exc:
            raise SchemaError(str(exc)) from None
        shards = self.num_shards
        counts = shards.values() if isinstance(shards, dict) else [shards]
        if not all(c is None or (isinstance(c, int) and not isinstance(c, bool) and c > 0)
                   for c in counts) or (isinstance(shards, dict) and
                                        None in [canonical(k) for k in shards]):
            raise SchemaError(f"num_shards must be a positive integer, a dict split -> positive "
                              f"integer or None, not {shards!r}")

    @property
    def raises(self):
        """Whether the first row that cannot be written stops the run (``on_error="raise"``)."""
        return self.on_error == "raise"


@dataclass(frozen=True, kw_only=True)
class LoadOptions(_ByName):
    """How ``load()`` and ``df.tfrecord.dataset()`` shape their ``tf.data`` pipeline.

    Attributes: as the arguments of :func:`tfrecorder_lite.load` of the same names
    (``image_size`` as ``(height, width)``).
    """

    batch_size: int = None
    image_size: tuple = None
    shuffle: bool = False
    seed: int = None
    as_supervised: bool = True
    shuffle_buffer: int = 1000
    drop_remainder: bool = False
    channels: int = 3
    dct_method: str = "INTEGER_ACCURATE"
    label: object = None
    multi_hot: bool = False
    box_format: str = "rel_yxyx"

    def __post_init__(self):
        object.__setattr__(self, "image_size", image_size(self.image_size))
        one_of("box_format", self.box_format, BOX_FORMATS)
        one_of("channels", self.channels, CHANNELS)
        one_of("as_supervised", self.as_supervised, (True, False, "keras"))
        if self.batch_size is not None and (isinstance(self.batch_size, bool) or
                                            not isinstance(self.batch_size, int) or
                                            self.batch_size <= 0):
            raise SchemaError(f"batch_size must be a positive number or None, not "
                              f"{self.batch_size!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or
                                      not hasattr(self.seed, "__index__") or
                                      not -2**63 <= self.seed.__index__() < 2**63):
            raise SchemaError(f"seed must be an int (a 64-bit one) or None, not {self.seed!r}")


def table_and_write(strict=True, **options):
    """``(TableOptions, WriteOptions)`` of keyword options named as ``to_tfrecord`` names them
    (without ``strict``, the options neither takes are left to their owners).

    Raises:
        TypeError: with ``strict``, an option neither takes.
    """
    table_names = {f.name for f in dataclasses.fields(TableOptions) if f.init}
    write_names = {f.name for f in dataclasses.fields(WriteOptions)}
    unknown = set(options) - table_names - write_names
    if unknown and strict:
        raise TypeError(f"unknown option(s) {sorted(unknown)}")
    return (TableOptions(**{k: v for k, v in options.items() if k in table_names}),
            WriteOptions(**{k: v for k, v in options.items() if k in write_names}))


def check_conversion(**options):
    """Check the table, write and image options among ``to_tfrecord``'s keyword ``options``
    (the others are left to their owners): SchemaError before anything is read."""
    table_and_write(strict=False, **options)
    check, size = options.get("check", "decode"), options.get("image_size")
    image_options(check, size, options.get("image_format", "jpeg"),
                  options.get("max_image_bytes", DEFAULT_MAX_BYTES),
                  leakage_for(options.get("leakage"), check, size, options.get("append")))


def check_source_options(task=None, **_):
    """Check ``convert``'s options of how its source is read (``task``) before it is read."""
    one_of("task", task, BY_NAME["task"].allowed_by("convert"))
