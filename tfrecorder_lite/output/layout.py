"""Every file name and name pattern of an output folder, in one place.

    train-00000-of-00004.tfrecord[.gz|.zz]   a shard (one per task)
    train-00000-of-00004.tfindex             its index: "<offset> <length>" per record
    labels.txt, labels-<level>.txt           label id -> text, one per line
    rejected.csv                             the rows not written, with a reason
    train-g0001-00000-of-00002.tfrecord, ... the shards of an appended generation (1, 2, ...)
    rejected-g0001.csv                       the rows an append did not write
    hashes-g0000.csv                         each written image's content hash and perceptual hash
    near-duplicates.csv                      pairs of near-identical images across splits
    metadata.json                            the manifest, written last
    dataset_info.json, features.json,        what tensorflow-datasets reads
      image.class.label.labels.txt, ...
    .tfrecorder_lite/                        a running or interrupted conversion's state:
      job.json, <shard>.json                   its fingerprint, one receipt per finished shard
      <shard>.task, <shard>.failed             a Beam run's staged task, a task's bad row
    .tfrecorder_lite.lock                    the lock (or lease) of the running conversion
"""

import re

from ..formats import DEFAULT, FORMATS
from ..record.keys import LEVEL, label_keys
from ..record.kinds import KIND_FILES, KIND_LABEL_KEYS
from ..storage import TEMP_SUFFIX

METADATA = "metadata.json"
LABELS = "labels.txt"
REJECTED = "rejected.csv"
NEAR_DUPLICATES = "near-duplicates.csv"
HASHES_NAME = re.compile(r"^hashes-g\d{4}\.csv\Z")
NEAR_DUPLICATES_NAME = re.compile(r"^near-duplicates-g\d{4}\.csv\Z")
REJECTED_NAME = re.compile(r"^rejected-g\d{4}\.csv\Z")
DATASET_INFO = "dataset_info.json"
TFDS_FEATURES = "features.json"
STATE_DIR = ".tfrecorder_lite"
JOB = "job.json"
LOCK = ".tfrecorder_lite.lock"
INDEX_SUFFIX = ".tfindex"
RECEIPT_SUFFIX = ".json"
SPLIT_FILE_TEMPLATE = "{SPLIT}-{SHARD_X_OF_Y}" + DEFAULT.suffixes[None]  # tfds' name for ours

_SHARD = r"(train|validation|test)(-g\d{4})?-\d{5}-of-\d{5}"  # -g0001-: an appended generation
_SHARD_SUFFIXES = "(" + "|".join(sorted(
    (re.escape(s) for f in FORMATS.values() for s in f.suffixes.values()), key=len,
    reverse=True)) + ")"
SHARD_NAME = re.compile(rf"^{_SHARD}{_SHARD_SUFFIXES}\Z")
_SHARD_SUFFIX = re.compile(rf"{_SHARD_SUFFIXES}$")


def shard_name(split, index, count, compression=None, file_format=DEFAULT, generation=0):
    """``train-00000-of-00004.tfrecord``: the split, the shard's number and count, and the
    suffix of its format (``.tfrecord.gz`` / ``.tfrecord.zz`` when compressed); a shard of an
    appended generation ``k`` has ``-g000k`` after its split: ``train-g0001-00000-of-00002``."""
    appended = f"-g{generation:04d}" if generation else ""
    return (f"{split.lower()}{appended}-{index:05d}-of-{count:05d}"
            f"{file_format.suffixes[compression]}")


_GENERATION = re.compile(r"^[a-z]+-g(\d{4})-")


def generation_of(name):
    """The generation a shard file name belongs to (0: the first conversion)."""
    match = _GENERATION.match(name)
    return int(match.group(1)) if match else 0


def tfds_split(split, generation):
    """``(name, file name template)`` of a split's generation as tensorflow_datasets lists it
    in an appended output's ``dataset_info.json``: ``("train-g0000", "train-{SHARD_X_OF_Y}...")``,
    ``("train-g0001", "train-g0001-{SHARD_X_OF_Y}...")`` (a tfds split's files follow one
    template, and each generation numbers its own shards)."""
    prefix = shard_name(split, 0, 1, generation=generation).split("-00000-of-00001")[0]
    return f"{split.lower()}-g{generation:04d}", prefix + SPLIT_FILE_TEMPLATE[len("{SPLIT}"):]


def near_duplicates_name(generation):
    """The near-duplicate pairs' file of a generation: ``near-duplicates.csv``,
    ``near-duplicates-g0001.csv``."""
    return NEAR_DUPLICATES if not generation else f"near-duplicates-g{generation:04d}.csv"


def rejected_name(generation):
    """The rejected rows' file of a generation: ``rejected.csv``, ``rejected-g0001.csv``."""
    return REJECTED if not generation else f"rejected-g{generation:04d}.csv"


def is_shard_of(name, split=None):
    """Whether ``name`` is, whole, a shard file name (of ``split``; never a path or URL)."""
    return isinstance(name, str) and bool(SHARD_NAME.match(name)) and \
        (split is None or name.startswith(f"{split.lower()}-"))


def hashes_name(generation):
    """The hashes file of a generation: ``hashes-g0000.csv`` (0: the first conversion)."""
    return f"hashes-g{generation:04d}.csv"


def hashes_generation(name):
    """The generation whose hashes file is ``name`` (``hashes-g0003.csv`` -> 3)."""
    return int(name[len("hashes-g"):-len(".csv")])


def index_name(shard):
    """The index file of a shard: ``train-00000-of-00002.tfrecord`` -> ``....tfindex``."""
    return _SHARD_SUFFIX.sub("", shard) + INDEX_SUFFIX


def receipt_name(shard):
    """The file name, inside the state folder, of a finished shard's receipt."""
    return shard + RECEIPT_SUFFIX


def looks_name(shard):
    """The file name, inside the state folder, of what confirms a finished shard's
    near-duplicate pairs (``near_duplicates.looks_file``)."""
    return shard + ".looks"


def task_name(shard):
    """The file name, inside the state folder, of a shard's staged task (Beam runs)."""
    return shard + ".task"


def failure_name(shard):
    """The file name, inside the state folder, of the bad row that stopped a shard's task."""
    return shard + ".failed"


def level_labels_name(level):
    """The vocabulary file of a label level."""
    return f"labels-{level}.txt"


def label_files(labels):
    """``{file name: label texts}`` of metadata.json's ``labels``: ``labels.txt``, or with
    label levels ``labels-<level>.txt`` each (one label per line, line number = id)."""
    if isinstance(labels, dict):
        return {level_labels_name(level): texts for level, texts in labels.items()}
    return {LABELS: labels}


# What no label may hold: control characters and line breaks (a label is one line of labels.txt
# and tfds' label files, one quoted string of label_map.pbtxt), and lone surrogates (no UTF-8).
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def label_problem(value):
    """Why a label cannot be stored as it is, or None when it can.

    The rule of every label of every kind and source: its text is one line of valid Unicode
    (no control character or line break, no lone surrogate), so that ``labels.txt``, tfds'
    label files, ``label_map.pbtxt`` and the report keep one label per id.
    """
    if not isinstance(value, str):
        return None
    if CONTROL.search(value):
        return (f"label {value!r} holds a control character or line break (a label is one "
                "line of labels.txt and label_map.pbtxt)")
    if _SURROGATE.search(value):
        return (f"label {value!r} is not valid Unicode text: it holds a lone surrogate "
                f"({_SURROGATE.search(value).group()!r}), which no UTF-8 file can store")
    return None


def tfds_label_names(key):
    """The file tfds reads the label names of the class feature ``key`` from."""
    return key.replace("/", ".") + ".labels.txt"


TFDS_LABEL_NAMES = tfds_label_names(label_keys()[0])
FIXED_FILES = (METADATA, LABELS, REJECTED, DATASET_INFO, TFDS_FEATURES, TFDS_LABEL_NAMES,
               *KIND_FILES, *(tfds_label_names(key) for key in KIND_LABEL_KEYS),
               NEAR_DUPLICATES, hashes_name(0))


def level_files(levels):
    """The files of label levels: each level's ``labels-<level>.txt`` and tfds names file."""
    return [name for level in levels
            for name in (level_labels_name(level), tfds_label_names(label_keys(level)[0]))]


# the names this library gives its files: a file so named that it did not write is never removed
OUR_FILE = re.compile(
    rf"^({_SHARD}({_SHARD_SUFFIXES}|{re.escape(INDEX_SUFFIX)})|"
    rf"labels-{LEVEL}\.txt|image\.label\.{LEVEL}\.labels\.txt|hashes-g\d{{4}}\.csv|"
    rf"rejected-g\d{{4}}\.csv|near-duplicates-g\d{{4}}\.csv|"
    + "|".join(re.escape(name) for name in FIXED_FILES) + rf")({re.escape(TEMP_SUFFIX)})?\Z"
)
