"""The TFRecord format: ``.tfrecord`` files (``.gz`` / ``.zz`` compressed) of length-prefixed,
CRC-checked records (``record/framing.py``), with a ``.tfindex`` of ``<offset> <length>`` lines
as PyTorch's ``tfrecord`` package and DALI read them."""

from ..record import framing


class TFRecordFormat:
    """TFRecord files, written and read without TensorFlow; ``tf.data`` reads them natively."""

    name = "tfrecord"
    suffixes = {None: ".tfrecord", "GZIP": ".tfrecord.gz", "ZLIB": ".tfrecord.zz"}

    @staticmethod
    def writer(fileobj, compression=None, sha256=False):
        """A ``RecordWriter`` framing records into ``fileobj`` (see ``record/framing.py``)."""
        return framing.RecordWriter(fileobj, compression, sha256)

    @staticmethod
    def records(fileobj, compression=None, file_size=None):
        """The records of a file, one ``bytes`` each, checked as they are read."""
        return framing.iter_records(fileobj, compression, file_size)

    @staticmethod
    def index_text(record_sizes):
        """The index file's text for records of these sizes, in order."""
        return framing.index_text(record_sizes)

    @staticmethod
    def dataset(tf, path, compression=None):
        """A ``tf.data`` dataset of the records of the file at ``path``."""
        return tf.data.TFRecordDataset(path, compression_type=compression)


TFRECORD = TFRecordFormat()
