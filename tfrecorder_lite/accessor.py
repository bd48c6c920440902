"""The ``DataFrame.tfrecord`` accessor: it stores the frame and delegates."""

import pandas as pd

from . import conversion, direct, validation


@pd.api.extensions.register_dataframe_accessor("tfrecord")
class TFRecordAccessor:
    """``df.tfrecord.validate()``, ``df.tfrecord.to_tfrecord(output_dir)`` and
    ``df.tfrecord.dataset(split)``."""

    def __init__(self, df):
        self._df = df

    def validate(self, **options):
        """Problems of this table (see :func:`tfrecorder_lite.validation.validate`)."""
        return validation.validate(self._df, **options)

    def to_tfrecord(self, output_dir, **options):
        """Write TFRecord shards (see :func:`tfrecorder_lite.conversion.to_tfrecord`)."""
        return conversion.to_tfrecord(self._df, output_dir, **options)

    def dataset(self, split="TRAIN", **options):
        """A tf.data pipeline straight from this table (see
        :func:`tfrecorder_lite.direct.dataset`)."""
        return direct.dataset(self._df, split, **options)
