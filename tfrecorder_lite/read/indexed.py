"""``load()``'s pipeline by index: the serialized records at a stream of global positions.

The pipeline counts global positions (:mod:`~tfrecorder_lite.read.order`) with
``tf.data.Dataset.range``, turns each group of positions into record indexes and reads those
records through a :class:`~tfrecorder_lite.read.data_source.DataSource`. Every element is a
pure function of its position, so tf.data's symbolic checkpoints save an iterator as the
position it has reached (its size does not grow with the split's) and restore it
exactly; the reads run in a ``tf.py_function``, which holds no state, so the checkpoint policy
for it is IGNORE.

Each new iterator starts at the dataset's :class:`InputPosition`, which is ``start`` unless
something moved it before the iterator was made (:class:`~tfrecorder_lite.read.resume.
BackupAndRestore` does, from its backup).
"""

import numpy as np

from ..errors import SchemaError
from .order import GlobalOrder, check_hosts, host_share

_READ_GROUP = 64  # records read per call into Python
# groups read at once: remote reads wait on the store, and more groups in flight hide it
_GROUPS_IN_FLIGHT = {True: 2, False: 4}  # by "the store is local"
_NO_END = np.iinfo(np.int64).max


class InputPosition:
    """Where the next iterator of a ``load()`` dataset by index starts, and its layout.

    Attributes:
        next_start: the global position (records of all hosts together) the next iterator
            starts at.
        num_records: the split's records (one epoch).
        stop: the global position the dataset ends at, or None (endless).
        batch_size: records per batch of this host (None: unbatched).
        num_hosts, host_index: the hosts sharing the global order, and this one.
    """

    def __init__(self, start, num_records, stop, batch_size, num_hosts, host_index):
        self.next_start = start
        self.num_records, self.stop, self.batch_size = num_records, stop, batch_size
        self.num_hosts, self.host_index = num_hosts, host_index

    def after_steps(self, start, steps):
        """The global position reached from ``start`` after ``steps`` batches of every host."""
        return start + steps * (self.batch_size or 1) * self.num_hosts


def records(tf, source, order, position):
    """The dataset of serialized records at the global positions of one host.

    Args:
        tf: the TensorFlow module.
        source: the split's DataSource.
        order: its GlobalOrder.
        position: the InputPosition (its ``next_start`` is read when an iterator starts).

    Returns:
        A ``tf.data.Dataset`` of scalar ``tf.string`` records, with symbolic checkpointing on.
    """
    stop = _NO_END if position.stop is None else position.stop
    hosts, host = position.num_hosts, position.host_index

    def first_position():
        return np.int64(position.next_start + host)

    def positions(_):
        first = tf.py_function(first_position, [], tf.int64)
        return tf.data.Dataset.range(first, stop, hosts)

    def read(group):
        found = source.read_serialized(order.records(group.numpy()))
        return np.array(found, dtype=object)

    dataset = tf.data.Dataset.range(1).flat_map(positions).batch(_READ_GROUP).map(
        lambda group: tf.py_function(read, [group], tf.string),
        num_parallel_calls=_GROUPS_IN_FLIGHT[source.is_local], deterministic=True).unbatch()
    options = tf.data.Options()
    options.experimental_symbolic_checkpoint = True
    options.experimental_external_state_policy = \
        tf.data.experimental.ExternalStatePolicy.IGNORE
    return dataset.with_options(options)


def count(position):
    """Records one iterator of a fresh dataset yields on this host (None: endless)."""
    if position.stop is None:
        return None
    return len(host_share(position.next_start, position.stop, position.num_hosts,
                          position.host_index))


def global_order(num_records, shuffle, seed):
    """The GlobalOrder of ``load()``'s ``shuffle`` and ``seed`` (a random seed for None)."""
    if shuffle and seed is None:
        seed = int.from_bytes(np.random.default_rng().bytes(8), "little") >> 1
    return GlobalOrder(num_records, bool(shuffle), seed or 0)


def by_index_wanted(shuffle, start, epochs, num_hosts, host_index, input_context):
    """Whether ``load()``'s arguments ask for the pipeline by index.

    Raises:
        SchemaError: ``shuffle`` is text other than "global".
    """
    if isinstance(shuffle, str) and shuffle != "global":
        raise SchemaError(f"shuffle must be True, False or 'global', not {shuffle!r}")
    return shuffle == "global" or start != 0 or epochs != 1 or num_hosts != 1 or \
        host_index != 0 or input_context is not None


def input_position(num_records, shuffle, seed, start, epochs, batch_size, num_hosts,
                   host_index, input_context):
    """The InputPosition of ``load()``'s arguments, checked.

    Raises:
        SchemaError: naming the argument and what it allows.
    """
    if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or start < 0:
        raise SchemaError(f"start must be a global position (an int >= 0), not {start!r}")
    if epochs is not None and (isinstance(epochs, bool) or
                               not isinstance(epochs, (int, np.integer)) or epochs < 1):
        raise SchemaError(f"epochs must be an int >= 1, or None for endless, not {epochs!r}")
    if input_context is not None:
        if (num_hosts, host_index) != (1, 0):
            raise SchemaError("pass input_context or num_hosts and host_index, not both")
        num_hosts, host_index = input_context.num_input_pipelines, \
            input_context.input_pipeline_id
    num_hosts, host_index = check_hosts(num_hosts, host_index)
    if shuffle == "global" and num_hosts > 1 and seed is None:
        raise SchemaError(f"shuffle='global' on {num_hosts} hosts needs a seed (the same on "
                          "every host), so that they share one global order")
    if not num_records:
        stop = 0
    else:
        stop = None if epochs is None else (start // num_records + epochs) * num_records
    return InputPosition(int(start), num_records, stop, batch_size, num_hosts, host_index)
