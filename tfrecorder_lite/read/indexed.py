"""``load()``'s pipeline by index: the serialized records at a stream of global positions.

The pipeline counts global positions (:mod:`~tfrecorder_lite.read.order`) with
``tf.data.Dataset.range``, turns each group of positions into record indexes and reads those
records through a :class:`~tfrecorder_lite.read.data_source.DataSource`. Every element is a
pure function of its position, so tf.data's symbolic checkpoints save an iterator as the
position it has reached (its size does not grow with the split's) and restore it
exactly; the reads run in a ``tf.py_function``, which holds no state, so the checkpoint policy
for it is IGNORE.

The first iterator starts at the dataset's :class:`InputPosition`, which is ``start`` unless
something moved it before the iterator was made (:class:`~tfrecorder_lite.read.resume.
BackupAndRestore` does, from its backup). Each later iterator of a dataset of whole epochs
reads the epochs after the previous one's (Keras' ``fit(epochs=N)``, ``repeat()`` and a
second ``for`` loop each see the next permutation), still a pure function of the global
position.
"""

import functools
import threading

import numpy as np

from . import checkpoints
from .. import redaction
from ..errors import SchemaError
from .order import GlobalOrder, check_hosts, host_share

logger = redaction.logger(__name__)  # every record redacted

_READ_GROUP = 64  # records read per call into Python
_LOCAL_GROUPS_IN_FLIGHT = 2  # groups of local records read at once, on tf.data's threads
# groups of remote records read ahead, one after the other, in a thread of their own (the
# store's latency is hidden by the blocks fetched ahead, _READ_AHEAD)
_REMOTE_GROUPS_AHEAD = 8
_NO_END = np.iinfo(np.int64).max
_LAST_POSITION = 1 << 62  # global positions stay below it: int64 arithmetic on them never overflows
_READ_AHEAD = 1024  # records beyond each group whose remote blocks are fetched ahead
# records fetched as soon as the pipeline is made, while TensorFlow builds it (the first
# groups read)
_FETCHED_FIRST = 2 * _READ_GROUP
_FIRST_BYTES = 16 << 20  # at most this many bytes of them fetched record by record


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
        self._iterations = 0
        self._lock = threading.Lock()

    def after_steps(self, start, steps):
        """The global position reached from ``start`` after ``steps`` batches of every host."""
        return start + steps * (self.batch_size or 1) * self.num_hosts

    def next_span(self):
        """``(first, stop)``: the global positions a new iterator reads. The first iterator
        reads ``[next_start, stop)``; each later one the same number of whole epochs after
        the previous one's (an endless dataset: from ``next_start`` each time)."""
        if self.stop is None:
            return self.next_start, _NO_END
        with self._lock:
            k, self._iterations = self._iterations, self._iterations + 1
        if k == 0:
            return self.next_start, self.stop
        whole = self.stop - self.next_start // self.num_records * self.num_records \
            if self.num_records else 0  # the first iterator's epochs, from the first's start
        first = self.stop + (k - 1) * whole
        return first, first + whole

    @property
    def repeats_evenly(self):
        """Whether every iterator reads as many records (the first starts at an epoch's
        start), so that the dataset has a cardinality."""
        return self.stop is not None and (not self.num_records or
                                          self.next_start % self.num_records == 0)


def records(tf, source, order, position, description, symbolic=True):
    """The dataset of serialized records at the global positions of one host.

    Args:
        tf: the TensorFlow module.
        source: the split's DataSource.
        order: its GlobalOrder.
        position: the InputPosition (its ``next_start`` is read when an iterator starts).
        description: what the pipeline reads (:func:`~tfrecorder_lite.read.checkpoints.
            describe`): an iterator restored from a checkpoint of another is refused before
            any record is read.
        symbolic: turn tf.data's symbolic checkpointing on (off for a pipeline that adds a
            shuffle buffer, which it cannot save).

    Returns:
        A ``tf.data.Dataset`` of scalar ``tf.string`` records.
    """
    hosts, host = position.num_hosts, position.host_index

    def span():
        first, stop = position.next_span()
        return np.int64(first + host), np.int64(stop)

    def positions(_):
        first, stop = tf.py_function(span, [], (tf.int64, tf.int64))
        return tf.data.Dataset.range(first, stop, hosts)

    def read(saved, group):
        if saved.numpy()[0] != expected:
            checkpoints.refuse(tf, saved.numpy()[0], description)
        group = group.numpy()
        if not source.is_local and len(group):  # the next groups' blocks, on their way
            ahead = np.arange(group[-1] + hosts, group[-1] + hosts * _READ_AHEAD, hosts)
            source.prefetch(order.records(ahead))
        found = source.read_serialized(order.records(group))
        return np.array(found, dtype=object)

    expected = description.encode()
    if not source.is_local and position.num_records:
        threading.Thread(target=_fetch_first, args=(source, order, position),
                         name="tfrecorder_lite-first-reads", daemon=True).start()
    dataset = checkpoints.carry(tf, tf.data.Dataset.range(1).flat_map(positions), description)
    dataset = dataset.batch(_READ_GROUP)
    reads = functools.partial(tf.py_function, read, Tout=tf.string)
    if source.is_local:
        dataset = dataset.map(lambda saved, group: reads([saved, group]),
                              num_parallel_calls=_LOCAL_GROUPS_IN_FLIGHT, deterministic=True)
    else:  # read in prefetch's own thread: a read waiting on the store holds no decoder's
        dataset = dataset.map(lambda saved, group: reads([saved, group])).prefetch(
            _REMOTE_GROUPS_AHEAD)
    dataset = dataset.unbatch()
    options = tf.data.Options()
    options.experimental_symbolic_checkpoint = symbolic
    options.experimental_external_state_policy = \
        tf.data.experimental.ExternalStatePolicy.IGNORE
    return dataset.with_options(options)


def _fetch_first(source, order, position):
    """Start fetching the first records the dataset's first iterator reads, and their
    remote blocks (its start may still move: this only fetches ahead, nothing depends on
    it). A failure is left for the reads to raise."""
    first, hosts = position.next_start + position.host_index, position.num_hosts
    end = _NO_END if position.stop is None else position.stop
    stop = min(first + hosts * _FETCHED_FIRST, end)
    try:
        source.fetch_first(order.records(np.arange(first, stop, hosts)), _FIRST_BYTES)
        # then the blocks of the records after them (a global order's next groups need
        # blocks of their own, which came last when the first records' came first)
        ahead = np.arange(stop, min(stop + hosts * _READ_AHEAD, end), hosts)
        if len(ahead):
            source.prefetch(order.records(ahead))
    except Exception as exc:  # the iterator's reads raise it, naming what failed
        logger.debug("fetching the first records ahead failed: %s", exc)


def count(position):
    """Records one iterator of a fresh dataset yields on this host (None: endless)."""
    if position.stop is None:
        return None
    return len(host_share(position.next_start, position.stop, position.num_hosts,
                          position.host_index))


def global_order(num_records, shuffle, seed, shard_sizes=(), cycle_length=0):
    """The GlobalOrder of ``load()``'s ``shuffle`` and ``seed`` (a random seed for None);
    with ``shard_sizes``, the shards are shuffled (or, without shuffle, read
    ``cycle_length`` at a time in turn), not the records."""
    if shuffle and seed is None:
        seed = int.from_bytes(np.random.default_rng().bytes(8), "little") >> 1
    return GlobalOrder(num_records, bool(shuffle), seed or 0, tuple(shard_sizes),
                       cycle_length)


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
    if isinstance(start, bool) or not isinstance(start, (int, np.integer)) or \
            not 0 <= start < _LAST_POSITION:
        raise SchemaError(f"start must be a global position (an int from 0 to 2**62), not "
                          f"{start!r}")
    if epochs is not None and (isinstance(epochs, bool) or
                               not isinstance(epochs, (int, np.integer)) or epochs < 1):
        raise SchemaError(f"epochs must be an int >= 1, or None for endless, not {epochs!r}")
    if epochs is not None and num_records and \
            (start // num_records + epochs) * num_records >= _LAST_POSITION:
        raise SchemaError(f"start={start} and epochs={epochs} end past global position 2**62, "
                          f"the last this reader counts to")
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
