"""The ``DataFrame.tfrecord`` accessor: it stores the frame and delegates.

It imports only pandas: the modules it delegates to are imported on first use, since it may be
registered while one of them is being imported (see ``tfrecorder_lite/__init__.py``).
"""

import importlib

import pandas as pd


def _module(name):
    return importlib.import_module(f"tfrecorder_lite.{name}")


@pd.api.extensions.register_dataframe_accessor("tfrecord")
class TFRecordAccessor:
    """``df.tfrecord.validate()``, ``df.tfrecord.to_tfrecord(output_dir)`` and
    ``df.tfrecord.dataset(split)``."""

    def __init__(self, df):
        self._df = df

    def validate(self, **options):
        """Problems of this table (see :func:`tfrecorder_lite.validation.validate`)."""
        return _module("validation").validate(self._df, **options)

    def to_tfrecord(self, output_dir, **options):
        """Write TFRecord shards (see :func:`tfrecorder_lite.conversion.to_tfrecord`)."""
        return _module("conversion").to_tfrecord(self._df, output_dir, **options)

    def dataset(self, split="TRAIN", **options):
        """A tf.data pipeline straight from this table (see
        :func:`tfrecorder_lite.table_dataset.dataset`)."""
        return _module("table_dataset").dataset(self._df, split, **options)
