"""tfrecorder_lite: a table of labelled images -> verified TFRecord shards -> tf.data pipelines.

``import tfrecorder_lite`` registers the ``DataFrame.tfrecord`` accessor (when pandas is
imported, before or after). The public functions load their modules on first use, so a worker
process that only writes shards imports neither pandas nor TensorFlow; TensorFlow is imported
only where records are read.
"""

import importlib
import importlib.abc
import importlib.util
import logging
import sys

from ._version import __version__
from .errors import (
    InvalidRowError, ManifestError, MissingDependencyError, OutputExistsError, OutputLockedError,
    SchemaError, TFRecorderError, UnsupportedURLError, VerifyError,
)

logging.getLogger(__name__).addHandler(logging.NullHandler())

_LAZY = {  # public name -> the module that defines it
    "BackupAndRestore": "read.resume", "ConversionResult": "write.driver",
    "convert": "conversion", "data_source": "read.data_source", "inspect": "read.report",
    "load": "read.loader", "read_coco": "sources.coco",
    "read_metadata": "output.manifest", "read_vertex": "sources.vertex",
    "RecordSampler": "read.torch_sampler",
    "read_voc": "sources.voc", "read_yolo": "sources.yolo",
    "to_coco": "read.coco_export", "to_tfrecord": "conversion", "validate": "validation",
    "verify": "read.verification",
}

__all__ = [
    "BackupAndRestore", "ConversionResult", "InvalidRowError", "ManifestError",
    "MissingDependencyError", "OutputExistsError", "OutputLockedError", "RecordSampler",
    "SchemaError", "TFRecorderError", "UnsupportedURLError", "VerifyError",
    "__version__", "convert", "data_source", "inspect", "load", "read_coco", "read_metadata",
    "read_vertex", "read_voc", "read_yolo", "to_coco", "to_tfrecord", "validate", "verify",
]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


class _AccessorAfterPandas(importlib.abc.MetaPathFinder):
    """Registers the accessor as soon as pandas has been imported (it was not yet)."""

    def __init__(self):
        self._looking = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "pandas" or self._looking:
            return None
        self._looking = True
        try:
            spec = importlib.util.find_spec(fullname)  # as the other finders find it
        finally:
            self._looking = False
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _ThenRegister(spec.loader, self)
        return spec


class _ThenRegister(importlib.abc.Loader):
    """pandas' own loader, followed by the accessor's registration."""

    def __init__(self, loader, finder):
        self._loader, self._finder = loader, finder

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        module.__spec__.loader = module.__loader__ = self._loader
        self._loader.exec_module(module)
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        importlib.import_module(".accessor", __name__)


if "pandas" in sys.modules:
    from . import accessor  # noqa: E402,F401  (registers DataFrame.tfrecord)
else:
    sys.meta_path.insert(0, _AccessorAfterPandas())
