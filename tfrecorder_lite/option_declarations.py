"""Every option of the doors, declared once: name, type, default, allowed values, help, doors.

The doors (``to_tfrecord`` and ``convert``, ``df.tfrecord.dataset``, ``validate``, ``load``,
``data_source``) keep explicit keyword signatures (IDEs and ``help()`` show them), the CLI its
flags, ``docs/options.md`` its table; ``tests/test_option_declarations.py`` fails when any of
them departs from what is declared here. Plain data: nothing here imports pandas.
"""

from dataclasses import dataclass, field

from .images.normalize import DEFAULT_MAX_BYTES
from .record.boxes import BOX_FORMATS

CHECKS = ("decode", "header")
ON_ERROR = ("raise", "skip")
IMAGE_FORMATS = ("jpeg", "png")
LEAKAGE = ("warn", "reject", "ignore")
UNASSIGNED = ("reject", "assign")
BOX_UNITS = ("relative", "pixels")
COMPRESSIONS = ("GZIP", "ZLIB")
CHANNELS = (1, 3)

#: the doors an option may be taken by
DOORS = ("to_tfrecord", "convert", "dataset", "validate", "load", "data_source")

_WRITE = ("to_tfrecord", "convert")  # to_tfrecord's options are convert's too
_TABLE = (*_WRITE, "dataset", "validate")  # the table options: a TableOptions field each
_PIPELINE = ("dataset", "load")  # how a tf.data pipeline is shaped: a LoadOptions field each

#: the options objects, and the door whose defaults their fields' defaults are
OWNERS = {"TableOptions": "to_tfrecord", "WriteOptions": "to_tfrecord",
          "LoadOptions": "load"}


@dataclass(frozen=True)
class Option:
    """One option as the doors take it.

    Attributes:
        name: its keyword, the same at every door.
        type: what it takes, in words.
        default: its default.
        help: what it does, in one line (the CLI's help text where it has a flag).
        doors: the doors that take it (names of ``DOORS``).
        allowed: the values it takes when they are few (a bad one: ``options.one_of``'s
            SchemaError), or None.
        flag: the ``tfrecorder-lite convert`` flag that sets it, or None.
        defaults: ``{door: default}`` where a door's default differs from ``default``.
        allowed_at: ``{door: allowed}`` where a door takes other values than ``allowed``.
        owners: the options objects (names of ``OWNERS``) that hold it, a field each.
    """

    name: str
    type: str
    default: object
    help: str
    doors: tuple
    allowed: tuple = None
    flag: str = None
    defaults: dict = field(default_factory=dict)
    allowed_at: dict = field(default_factory=dict)
    owners: tuple = ()

    def default_at(self, door):
        """The option's default at ``door``."""
        return self.defaults.get(door, self.default)

    def allowed_by(self, door):
        """The values ``door`` takes (None: not a choice among a few)."""
        return self.allowed_at.get(door, self.allowed)


OPTIONS = (
    # ------------------------------------------------------------- the table (TableOptions)
    Option("split_col", "str or None", "split", "the split column (None: no splits, every "
           "row is assigned one)", _TABLE, flag="--split-col",
           owners=("TableOptions",)),
    Option("image_col", "str or None", "image_uri", "the image column; '' for a table "
           "without images", _TABLE, flag="--image-col",
           owners=("TableOptions",)),
    Option("label_col", "str or list of str", "label", "the label column, or one column per "
           "label level: coarse,fine", _TABLE, flag="--label-col",
           owners=("TableOptions",)),
    Option("label_map", "dict or list", None, "{label: id}, or a list of labels (id = "
           "position)", _TABLE,
           owners=("TableOptions",)),
    Option("label_sep", "str", None, "labels are split by SEP in the label column "
           "(multi-label), e.g. '|'; a CSV whose rows hold more fields than columns is read as "
           "multi-label without it", _TABLE, flag="--label-sep",
           owners=("TableOptions",)),
    Option("features", "dict", None, "{column: type} of extra columns instead of inferred "
           "types", _TABLE,
           owners=("TableOptions",)),
    Option("unassigned", "str", "reject", "rows whose split is UNASSIGNED or empty: reject "
           "them, or assign a split by a stable hash of the image URI", _TABLE, UNASSIGNED,
           flag="--unassigned",
           owners=("TableOptions",)),
    Option("split_ratios", "dict or 3 floats", None, "shares of TRAIN, VALIDATION, TEST for "
           "assigned rows (default 0.8,0.1,0.1)", _TABLE, flag="--split-ratios",
           owners=("TableOptions",)),
    Option("box_units", "str", "relative", "a detection table's coordinates: fractions of "
           "the image, or pixels", _TABLE, BOX_UNITS, flag="--box-units",
           owners=("TableOptions",)),
    Option("box_columns", "list of str", None, "a detection table's per-box columns (default: "
           "those named is_crowd, iscrowd, difficult, ... where present)", _TABLE,
           owners=("TableOptions",)),
    Option("base_dir", "str", None, "folder (path or URL) that relative image paths resolve "
           "against (default: the CSV's folder)", _TABLE, flag="--base-dir",
           owners=("TableOptions",)),
    Option("mask_col", "str", None, "a table of masks' mask column (default: mask_uri when "
           "present)", _TABLE, flag="--mask-col",
           owners=("TableOptions",)),
    Option("mask_colors", "dict", None, "colour masks' colour table: '#rrggbb' -> label "
           "(null: ignored)", _TABLE, flag="--mask-colors",
           owners=("TableOptions",)),
    Option("mask_labels", "list of str", None, "the label of each class id of the masks "
           "(id = position)", _TABLE, flag="--mask-labels",
           owners=("TableOptions",)),
    Option("ignore_value", "int or None", 255, "class id of ignored mask pixels (default 255; "
           "'none': no such id)", _TABLE, flag="--ignore-value",
           owners=("TableOptions",)),
    Option("allow_lossy_masks", "bool", False, "take JPEG and WebP masks (refused by "
           "default)", _TABLE, flag="--allow-lossy-masks",
           owners=("TableOptions",)),
    # ------------------------------------------------------------------ writing and images
    Option("num_shards", "int or dict", None, "shards per split (default: ~128 MiB each)",
           _WRITE, flag="--num-shards",
           owners=("WriteOptions",)),
    Option("compression", "str", None, "None, GZIP or ZLIB", _WRITE, COMPRESSIONS,
           flag="--compression",
           owners=("WriteOptions",)),
    Option("shuffle", "bool", True, "to_tfrecord: shuffle rows within each split (seeded); "
           "dataset, load: shuffle the examples (load: or 'global')",
           (*_WRITE, *_PIPELINE), (False, True), flag="--no-shuffle",
           defaults={"dataset": False, "load": False},
           allowed_at={"load": (False, True, "global")},
           owners=("WriteOptions", "LoadOptions")),
    Option("seed", "int", 0, "the shuffle's seed",
           (*_WRITE, *_PIPELINE), flag="--seed", defaults={"load": None},
           owners=("WriteOptions", "LoadOptions")),
    Option("sha256", "bool", False, "also record each shard's sha256 (CRC32C is always "
           "recorded)", _WRITE, flag="--sha256",
           owners=("WriteOptions",)),
    Option("on_error", "str", "raise", "stop at the first bad row, or skip it into "
           "rejected.csv", (*_WRITE, "dataset"), ON_ERROR, flag="--on-error",
           defaults={"dataset": "skip"},
           owners=("WriteOptions",)),
    Option("overwrite", "bool", False, "replace what OUTPUT_DIR holds", _WRITE,
           flag="--overwrite",
           owners=("WriteOptions",)),
    Option("n_jobs", "int", -1, "parallel workers (default: all cores)",
           (*_WRITE, "dataset", "validate"), flag="--jobs",
           owners=("WriteOptions",)),
    Option("progress", "bool", True, "show a progress bar", _WRITE, flag="--no-progress",
           owners=("WriteOptions",)),
    Option("leakage", "str", None, "near-duplicate images across splits: list them (beside "
           "the manifest, in near-duplicates.csv), reject the later row of each pair, or do "
           "not look for them (default: warn, or ignore with --check header, which decodes no "
           "image)", (*_WRITE, "validate"), LEAKAGE, flag="--leakage",
           defaults={"validate": "warn"},
           owners=("WriteOptions",)),
    Option("append", "bool", False, "add the rows to the finished output in OUTPUT_DIR as a "
           "new generation", _WRITE, flag="--append"),
    Option("runner", "str", None, "run the shard tasks as an Apache Beam pipeline on this "
           "runner, e.g. DirectRunner, DataflowRunner, FlinkRunner (needs "
           "tfrecorder_lite[beam]; default: joblib on this machine)", _WRITE,
           flag="--runner"),
    Option("pipeline_options", "dict", None, "the Beam pipeline's options, as a JSON object, "
           "e.g. '{\"project\": \"my-project\", \"region\": \"us-central1\"}'", _WRITE,
           flag="--pipeline-options"),
    Option("check", "str", "decode", "decode every image, or read headers only",
           (*_WRITE, "dataset", "validate"), CHECKS, flag="--check",
           defaults={"dataset": "header", "validate": "header"},
           allowed_at={"validate": (*CHECKS, None)}),
    Option("image_size", "(height, width) or int", None, "the size images are resized to "
           "(at write time for to_tfrecord)",
           (*_WRITE, *_PIPELINE, "data_source"), flag="--image-size",
           owners=("LoadOptions",)),
    Option("image_format", "str", "jpeg", "encoding of resized images", _WRITE,
           IMAGE_FORMATS, flag="--image-format"),
    Option("max_image_bytes", "int", DEFAULT_MAX_BYTES, "reject larger image files unread, "
           "e.g. 512M (default: 256M)", (*_WRITE, "validate"), flag="--max-image-bytes"),
    Option("storage_options", "dict", None, "fsspec options for remote URLs, as a JSON object "
           "(one for every protocol, or keyed by protocol: '{\"s3\": {...}, \"gs\": {...}}')",
           (*_TABLE, "load", "data_source"), flag="--storage-options"),
    # ------------------------------------------------------- reading a source (convert only)
    Option("encoding", "str", "utf-8", "text encoding of the CSV or Vertex AI file, e.g. "
           "latin-1 (default: utf-8, with or without a byte order mark)", ("convert",),
           flag="--encoding"),
    Option("task", "str", None, "read the CSV as an AutoML detection CSV or as a "
           "classification CSV (default: told by its shape)", ("convert",),
           flag="--task", allowed_at={"convert": ("detection", "classification", None)}),
    Option("split", "str", None, "the split of a COCO .json file: train, validation or test "
           "(default: from its name, e.g. instances_val2017.json)", ("convert",),
           flag="--split"),
    Option("image_dir", "str", None, "the images of a COCO .json file, a path or a URL "
           "(default: the file's folder)", ("convert",), flag="--image-dir"),
    Option("include_masks", "bool", False, "a COCO .json file's instance masks too "
           "(image/object/mask)", ("convert",), flag="--include-masks"),
    Option("allow_outside_paths", "bool", False, "read images an annotation file (COCO, VOC, "
           "Vertex AI, YOLO) names outside the folder given (../, absolute paths, URLs, "
           "symbolic links out of it), and an image folder's links out of it; by default they "
           "are refused", ("convert",), flag="--allow-outside-paths"),
    Option("max_annotation_bytes", "int", 1 << 30, "the largest annotation file "
           "read (COCO, Vertex AI, YOLO, Pascal VOC, AutoML detection CSV)", ("convert",)),
    # ----------------------------------------------------------- the pipeline (LoadOptions)
    Option("batch_size", "int", None, "batch the examples; None: single examples",
           _PIPELINE,
           owners=("LoadOptions",)),
    Option("as_supervised", "bool or 'keras'", True, "(image, label); False: a dict of every "
           "feature; 'keras': Keras 3's augmentation layers' dict", _PIPELINE,
           (True, False, "keras"),
           owners=("LoadOptions",)),
    Option("shuffle_buffer", "int", 1000, "examples held by the shuffle buffer", _PIPELINE,
           owners=("LoadOptions",)),
    Option("drop_remainder", "bool", False, "drop the last, smaller batch", _PIPELINE,
           owners=("LoadOptions",)),
    Option("channels", "int", 3, "channels of the decoded image (1: grayscale)",
           (*_PIPELINE, "data_source"), CHANNELS,
           owners=("LoadOptions",)),
    Option("dct_method", "str", "INTEGER_ACCURATE", "JPEG inverse DCT", _PIPELINE,
           owners=("LoadOptions",)),
    Option("label", "str or list", None, "with label levels: the level(s) the label is",
           _PIPELINE,
           owners=("LoadOptions",)),
    Option("multi_hot", "bool", False, "multi-label outputs: k-hot vectors", _PIPELINE,
           owners=("LoadOptions",)),
    Option("box_format", "str", "rel_yxyx", "detection outputs: the boxes' format, as "
           "keras.utils.bounding_boxes names it", _PIPELINE, BOX_FORMATS,
           owners=("LoadOptions",)),
    Option("with_info", "bool", False, "also return a TableDatasetInfo", ("dataset",)),
    # ------------------------------------------------------------- reading written outputs
    Option("cache_dir", "str", None, "a local folder where the remote shards read are also "
           "kept", ("load", "data_source")),
    Option("cache_limit", "int or str", None, "the most bytes cache_dir holds",
           ("load", "data_source")),
    Option("generation", "int", None, "the output as it was after this generation",
           ("load", "data_source")),
    Option("start", "int", 0, "the global position to start at", ("load",)),
    Option("epochs", "int or None", 1, "epochs the dataset holds; None: endless", ("load",)),
    Option("num_hosts", "int", 1, "hosts reading the global order", ("load",)),
    Option("host_index", "int", 0, "this host, of num_hosts", ("load",)),
    Option("input_context", "tf.distribute.InputContext", None, "num_hosts and host_index "
           "from it", ("load",)),
    Option("decode_image", "bool", False, "add the decoded image", ("data_source",)),
    Option("block_size", "int", 1 << 20, "bytes of each ranged read of a remote shard",
           ("data_source",)),
    Option("cache_bytes", "int", 256 << 20, "remote blocks kept in memory per process",
           ("data_source",)),
)

BY_NAME = {option.name: option for option in OPTIONS}


def at(door):
    """The options ``door`` takes (``convert`` takes ``to_tfrecord``'s too)."""
    return [option for option in OPTIONS if door in option.doors]


def names(door):
    """The names of the options ``door`` takes."""
    return [option.name for option in at(door)]


def owned_by(owner):
    """The names of the options the options object ``owner`` (a name of ``OWNERS``) holds."""
    return [option.name for option in OPTIONS if owner in option.owners]


def source_option_names():
    """The names of the options that say how ``convert`` reads its source."""
    return [option.name for option in OPTIONS if option.doors == ("convert",)]
