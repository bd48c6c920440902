"""Options that several doors share, parsed and checked once into frozen objects.

``to_tfrecord``, ``convert``, ``df.tfrecord.dataset``, ``load`` and the CLI take the same
spellings of the same options; each door turns them into these objects before anything is
read, so an option means the same everywhere and a bad value gets the same message.
"""

from dataclasses import dataclass

from .errors import SchemaError
from .images.normalize import DEFAULT_MAX_BYTES, ImageOptions
from .record.features import BOX_FORMATS

CHECKS = ("decode", "header")
ON_ERROR = ("raise", "skip")
IMAGE_FORMATS = ("jpeg", "png")


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


def image_options(check="decode", size=None, image_format="jpeg",
                  max_image_bytes=DEFAULT_MAX_BYTES):
    """The ImageOptions of a conversion's image options, checked."""
    one_of("check", check, CHECKS)
    one_of("image_format", image_format, IMAGE_FORMATS)
    if isinstance(max_image_bytes, bool) or not isinstance(max_image_bytes, int) or \
            max_image_bytes <= 0:
        raise SchemaError(f"max_image_bytes must be a positive number of bytes, not "
                          f"{max_image_bytes!r}")
    return ImageOptions(check=check, size=image_size(size), format=image_format,
                        max_bytes=max_image_bytes)


@dataclass(frozen=True)
class PipelineOptions:
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
        one_of("channels", self.channels, (1, 3))
        if self.batch_size is not None and (isinstance(self.batch_size, bool) or
                                            not isinstance(self.batch_size, int) or
                                            self.batch_size <= 0):
            raise SchemaError(f"batch_size must be a positive number or None, not "
                              f"{self.batch_size!r}")
