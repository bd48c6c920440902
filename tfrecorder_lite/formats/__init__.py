"""Record file formats behind one interface: a shard file's suffix, its writer, its record
iterator, its ``tf.data`` reader and its index. TFRecord is today's only format; another is one
module here, registered in :data:`FORMATS`.

Every format has: ``name`` (metadata.json's ``format``), ``suffixes`` (compression -> file
suffix), ``writer(fileobj, compression, sha256)``, ``records(fileobj, compression,
file_size)``, ``index_text(record_sizes)``, ``dataset(tf, path, compression)``.
"""

from ..errors import ManifestError
from .tfrecord import TFRECORD

FORMATS = {TFRECORD.name: TFRECORD}
DEFAULT = TFRECORD


def format_named(name):
    """The format of metadata.json's ``format`` (None: an output written before the field)."""
    if name is None:
        return DEFAULT
    try:
        return FORMATS[name]
    except (KeyError, TypeError):
        raise ManifestError(f"format {name!r} is not one this version reads "
                            f"({', '.join(FORMATS)})") from None
