"""The record kinds, by the ``task`` metadata.json names them by.

A kind is one module (``record/boxes.py`` for boxes, ``record/segmentation_kind.py`` for
masks) holding its features and its RecordKind; this is where kinds are registered, so that
readers rebuild any output's features from its metadata.json without naming a kind.
Classification (one label, several per record, or one per level) is the kind of an output
without ``task``.
"""

from . import boxes, segmentation_kind
from .features import ClassLabel, RecordKind
from .keys import BYTES, INT64, label_keys


class ClassificationRecords(RecordKind):
    """Records of one label each, a list of labels (multi-label), or one label per level."""

    tasks = (None, "multi-label")

    def task(self, features):
        return "multi-label" if any(f.multi for f in features.labels) else None

    def label_fields(self, manifest):
        return tuple(ClassLabel(level, manifest.multi_label, tuple(manifest.level_labels(level)))
                     for level in manifest.levels)

    def fixed_keys(self, labels, task):
        fixed = {}
        for level in labels if isinstance(labels, dict) else [None]:
            id_key, text_key = label_keys(level)
            fixed.update({id_key: INT64, text_key: BYTES})
        return fixed, [None] if task == "multi-label" else []


CLASSIFICATION = ClassificationRecords()
KINDS = (CLASSIFICATION, boxes.DETECTION, segmentation_kind.SEGMENTATION)
_BY_TASK = {task: kind for kind in KINDS for task in kind.tasks}
TASKS = tuple(task for task in _BY_TASK if task is not None)  # metadata.json's task values
#: metadata.json fields that kinds write (e.g. ``boxes``), beside the fields of every output
KIND_FIELDS = tuple(field for kind in KINDS for field in kind.fields)
#: files that kinds write beside the label files (e.g. ``label_map.pbtxt``)
KIND_FILES = tuple(name for kind in KINDS for name in kind.files)
#: the label id keys of kinds' own features (each has a tfds label names file)
KIND_LABEL_KEYS = tuple(key for kind in KINDS for key in kind.label_id_keys)


def kind_of(task):
    """The RecordKind of metadata.json's ``task`` (None: classification)."""
    return _BY_TASK[task]


def features_of(manifest):
    """The FeatureSet of an output, from its (checked) Manifest."""
    return kind_of(manifest.task).features(manifest)
