"""tfrecorder_lite: a table of labelled images -> verified TFRecord shards -> tf.data pipelines.

``import tfrecorder_lite`` registers the ``DataFrame.tfrecord`` accessor. TensorFlow is imported
only where records are read.
"""

import logging

from ._version import __version__

logging.getLogger(__name__).addHandler(logging.NullHandler())

from . import accessor  # noqa: E402,F401  (registers DataFrame.tfrecord)
from .conversion import convert, to_tfrecord  # noqa: E402
from .detection_sources import read_coco, read_voc  # noqa: E402
from .errors import (  # noqa: E402
    InvalidRowError, ManifestError, MissingDependencyError, OutputExistsError, OutputLockedError,
    SchemaError, TFRecorderError, UnsupportedURLError, VerifyError,
)
from .loader import load  # noqa: E402
from .output.manifest import read_metadata  # noqa: E402
from .report import inspect  # noqa: E402
from .validation import validate  # noqa: E402
from .verification import verify  # noqa: E402
from .writer import ConversionResult  # noqa: E402

__all__ = [
    "ConversionResult", "InvalidRowError", "ManifestError", "MissingDependencyError",
    "OutputExistsError", "OutputLockedError", "SchemaError", "TFRecorderError",
    "UnsupportedURLError", "VerifyError",
    "__version__", "convert", "inspect", "load", "read_coco", "read_metadata", "read_voc",
    "to_tfrecord", "validate", "verify",
]
