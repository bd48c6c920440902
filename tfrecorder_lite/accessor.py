"""The ``DataFrame.tfrecord`` accessor: it stores the frame and delegates."""

import pandas as pd

from . import conversion, validation


@pd.api.extensions.register_dataframe_accessor("tfrecord")
class TFRecordAccessor:
    """``df.tfrecord.validate()`` and ``df.tfrecord.to_tfrecord(output_dir)``."""

    def __init__(self, df):
        self._df = df

    def validate(self, **options):
        """Problems of this table (see :func:`tfrecorder_lite.validation.validate`)."""
        return validation.validate(self._df, **options)

    def to_tfrecord(self, output_dir, **options):
        """Write TFRecord shards (see :func:`tfrecorder_lite.conversion.to_tfrecord`)."""
        return conversion.to_tfrecord(self._df, output_dir, **options)
