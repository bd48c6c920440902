"""The TF Model Garden's detection decoder (``official/vision/dataloaders/tf_example_decoder.py``)
and its semantic segmentation Decoder and Parser (``segmentation_input.py``), for tests that
check records against a real reader.

tf-models-official pins a TensorFlow older than the one installed, so it is not installed: its
wheel is downloaded once from PyPI (``pip download --no-deps``) into a cache folder reused
between runs, and the decoder's two files are imported straight from the wheel. The package
``__init__`` files they sit under (``official/vision/__init__.py`` imports configs and tasks,
which need far more) are replaced by empty stand-in packages, and ``tf_keras``, which the decoder
imports but does not use, by an empty module when it is not installed. Where tf-models-official
is importable whole, its own module is used.

``segmentation_input.py`` is loaded the same way, with its own ``parser``, ``decoder`` and
``preprocess_ops`` (whose ``normalize_image`` the Parser calls, with its ``box_ops``); what they
import but the Decoder and the Parser's image-and-mask step do not use (the segmentation
configs, ``utils``, ``augment``) are stand-ins, the config's ``DenseFeatureConfig`` a plain object with
its defaults' fields.
"""

import functools
import glob
import importlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import types
import zipfile

VERSION = "2.20.0"
DECODER = "official/vision/dataloaders/tf_example_decoder.py"
_FILES = ("official/vision/dataloaders/decoder.py", DECODER)
SEGMENTATION = "official/vision/dataloaders/segmentation_input.py"
_SEGMENTATION_FILES = ("official/vision/dataloaders/decoder.py",
                       "official/vision/dataloaders/parser.py",
                       "official/vision/ops/box_ops.py", "official/vision/ops/preprocess_ops.py",
                       SEGMENTATION)


def cache_dir():
    """The folder the wheel is kept in between runs."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tfrecorder_lite-tests")


def wheel_path():
    """The tf-models-official wheel, downloaded from PyPI on first use."""
    folder = cache_dir()
    pattern = os.path.join(folder, f"tf_models_official-{VERSION}-*.whl")
    found = glob.glob(pattern)
    if not found:
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder) as download:  # complete, then moved in
            done = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                 "--disable-pip-version-check", "-q", f"tf-models-official=={VERSION}", "-d",
                 download], capture_output=True, text=True)
            wheels = glob.glob(os.path.join(download, "*.whl"))
            if done.returncode or not wheels:
                raise RuntimeError(f"pip download tf-models-official=={VERSION} failed: "
                                   f"{done.stderr.strip()[-2000:]}")
            os.replace(wheels[0], os.path.join(folder, os.path.basename(wheels[0])))
        found = glob.glob(pattern)
    return found[0]


@functools.lru_cache(maxsize=None)
def decoder_class():
    """``TfExampleDecoder`` of the Model Garden (TensorFlow is imported)."""
    if importlib.util.find_spec("official") is not None:
        try:
            return importlib.import_module(DECODER[:-3].replace("/", ".")).TfExampleDecoder
        except ImportError:  # installed without what official/vision/__init__.py imports
            pass
    return _load_from_wheel(wheel_path()).TfExampleDecoder


@functools.lru_cache(maxsize=None)
def segmentation_classes():
    """``(Decoder, Parser)`` of the Model Garden's ``segmentation_input.py``."""
    if importlib.util.find_spec("official") is not None:
        try:
            module = importlib.import_module(SEGMENTATION[:-3].replace("/", "."))
            return module.Decoder, module.Parser
        except ImportError:
            pass
    module = _load_from_wheel(wheel_path(), _SEGMENTATION_FILES, {
        "official.vision.configs": {},
        "official.vision.configs.semantic_segmentation": {
            "DenseFeatureConfig": DenseFeatureConfig},
        "official.vision.dataloaders.utils": {}, "official.vision.ops": {},
        "official.vision.ops.augment": {}})
    return module.Decoder, module.Parser


class DenseFeatureConfig:
    """The fields of ``official.vision.configs.semantic_segmentation.DenseFeatureConfig`` with
    its defaults (an RGB image under ``image/encoded``, ImageNet's mean and deviation)."""

    def __init__(self, feature_name="image/encoded", num_channels=3,
                 mean=(123.675, 116.28, 103.53), stddev=(58.395, 57.12, 57.375)):
        self.feature_name, self.num_channels = feature_name, num_channels
        self.mean, self.stddev = list(mean), list(stddev)


def _load_from_wheel(wheel, files=_FILES, extra=None):
    """Import ``files`` from ``wheel`` under stand-in parent packages (and the stand-in modules
    of ``extra``: name -> attributes); the stand-ins leave ``sys.modules`` afterwards, the loaded
    modules keep what they imported. Returns the last file's module."""
    with zipfile.ZipFile(wheel) as archive:
        sources = {name: archive.read(name).decode("utf-8") for name in files}
    extra = extra or {}
    stand_ins = ["official", "official.vision", "official.vision.dataloaders", *extra]
    if importlib.util.find_spec("tf_keras") is None:
        stand_ins.append("tf_keras")
    saved = {name: sys.modules.get(name) for name in stand_ins}
    for name in stand_ins:
        module = types.ModuleType(name)
        module.__path__ = []  # a package: its submodules are put in by hand below
        module.__dict__.update(extra.get(name, {}))
        sys.modules[name] = module
        parent, _, leaf = name.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], leaf, module)
    try:
        for name, source in sources.items():
            module_name = name[:-3].replace("/", ".")
            module = types.ModuleType(module_name)
            module.__file__ = f"{wheel}/{name}"
            sys.modules[module_name] = module
            parent, _, leaf = module_name.rpartition(".")
            setattr(sys.modules[parent], leaf, module)
            exec(compile(source, module.__file__, "exec"), module.__dict__)
        return module
    finally:
        for name in [*stand_ins, *(n[:-3].replace("/", ".") for n in files)]:
            if saved.get(name) is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = saved[name]
