"""A PyTorch sampler over a split's records in ``load(shuffle="global")``'s global order, that
saves and restores its position: :class:`RecordSampler`.

It follows torchdata's ``StatefulDataLoader`` protocol (``state_dict()`` /
``load_state_dict()``, taken with every batch the loader yields) and ``DistributedSampler``'s
``set_epoch(epoch)``. The order is :mod:`~tfrecorder_lite.read.order`'s: the same records, the
same permutation per ``(seed, epoch)`` and the same share per host as ``load(shuffle="global",
seed=..., num_hosts=..., host_index=...)``. It needs no PyTorch: a sampler is an iterable of
indexes with a length.
"""

import numpy as np

from ..errors import SchemaError
from .order import GlobalOrder, check_hosts, host_share

_CHUNK = 1024  # record indexes computed at once


def _count(value, name, low):
    """``value`` checked to be an int of at least ``low``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise SchemaError(f"{name} must be an int >= {low}, not {value!r}")
    return int(value)


class RecordSampler:
    """The record indexes one host reads, in ``load(shuffle="global")``'s global order.

    Positions count the records read by all hosts together since the first epoch began, as
    ``load()``'s ``start`` does. Each iteration reads this host's share of the positions from
    where the sampler stands to the end of ``epochs`` epochs (the rest of an interrupted one
    first), so that a ``DataLoader`` iterated once per epoch reads epoch after epoch, each in
    its own permutation.

    Args:
        source: the split's records: a DataSource (anything with a length), or their number.
        shuffle: each epoch in a permutation of its own (``load(shuffle="global")``'s); False:
            manifest order.
        seed: the permutations' seed (None: a random one, kept in the state).
        start: the global position to start at.
        epochs: epochs one iteration reads (None: endless).
        num_hosts, host_index: the hosts (PyTorch's world size and rank) and this one.

    Raises:
        SchemaError: an argument of the wrong type or range, or ``shuffle`` on several hosts
            without a seed.
    """

    def __init__(self, source, *, shuffle=True, seed=None, start=0, epochs=1, num_hosts=1,
                 host_index=0):
        num_records = source if isinstance(source, (int, np.integer)) else len(source)
        self.num_records = _count(num_records, "the number of records", 0)
        self.num_hosts, self.host_index = check_hosts(num_hosts, host_index)
        self.epochs = None if epochs is None else _count(epochs, "epochs", 1)
        self.shuffle = bool(shuffle)
        if seed is None and self.shuffle and self.num_hosts > 1:
            raise SchemaError(f"shuffle on {self.num_hosts} hosts needs a seed (the same on "
                              "every host), so that they share one global order")
        if seed is None:
            seed = int.from_bytes(np.random.default_rng().bytes(8), "little") >> 1
        self.seed = _count(seed, "seed", 0)
        self._order = GlobalOrder(self.num_records, self.shuffle, self.seed)
        self._position = _count(start, "start", 0)  # the next global position to read
        self._end = None  # where the iteration in progress (or interrupted) ends
        self._first = self._position  # where the iteration in progress (or next) starts

    def __repr__(self):
        return (f"RecordSampler(records={self.num_records}, shuffle={self.shuffle}, "
                f"seed={self.seed}, position={self._position}, hosts={self.num_hosts}, "
                f"host_index={self.host_index})")

    @property
    def position(self):
        """The global position reached: the next record all hosts together read."""
        return self._position

    def _end_from(self, position):
        """Where an iteration starting at ``position`` ends (None: endless)."""
        if self.epochs is None or not self.num_records:
            return None if self.num_records else position
        return (position // self.num_records + self.epochs) * self.num_records

    def _bounds(self):
        """``(first, end)`` of the next iteration: the rest of an interrupted one, or a new
        one from the position."""
        if self._end is not None and self._position < self._end:
            return self._position, self._end
        return self._position, self._end_from(self._position)

    def __len__(self):
        """The indexes of the iteration in progress, or else of the next one."""
        first, end = (self._first, self._end) if self._end is not None and \
            self._first < self._end else self._bounds()
        if end is None:
            raise TypeError("an endless RecordSampler (epochs=None) has no length")
        return len(host_share(first, end, self.num_hosts, self.host_index))

    def __iter__(self):
        first, end = self._bounds()
        self._first, self._end = first, end
        return self._indexes(first, end)

    def _indexes(self, first, end):
        hosts = self.num_hosts
        stop = np.iinfo(np.int64).max if end is None else end
        share = host_share(first, stop, hosts, self.host_index)
        for at in range(0, len(share), _CHUNK):
            positions = share[at:at + _CHUNK]
            for position, record in zip(positions, self._order.records(np.asarray(positions))):
                # every host has read up to here when this host reads ``position``
                reached = position - self.host_index + hosts
                self._position = reached if end is None else min(reached, end)
                yield int(record)
        if end is not None:
            self._position = self._first = end

    def set_epoch(self, epoch):
        """Read epoch ``epoch`` next: from its first record, or, when the sampler stands
        inside that epoch already (a restored state), from there."""
        epoch = _count(epoch, "epoch", 0)
        n = self.num_records
        if not epoch * n <= self._position < (epoch + 1) * n:
            self._position, self._end = epoch * n, None
            self._first = self._position

    def state_dict(self):
        """The position, and what it is a position of (plain ints, JSON-ready)."""
        return {"position": self._position, "end": self._end, "num_records": self.num_records,
                "shuffle": self.shuffle, "seed": self.seed, "num_hosts": self.num_hosts,
                "host_index": self.host_index}

    def load_state_dict(self, state):
        """Go on from a state :meth:`state_dict` returned.

        Raises:
            SchemaError: the state is of another split size, order, seed or host (naming the
                difference), or not such a state.
        """
        mine = self.state_dict()
        missing = [key for key in mine if key not in state]
        if missing:
            raise SchemaError(f"not a RecordSampler state: {missing} missing from {state!r}")
        differ = [f"{key} {state[key]!r} (this sampler's: {mine[key]!r})"
                  for key in ("num_records", "shuffle", "seed", "num_hosts", "host_index")
                  if state[key] != mine[key]]
        if differ:
            raise SchemaError(
                "the state is of another order: " + ", ".join(differ) + ". To go on with the "
                "same global order on another number of hosts, make each host's sampler with "
                f"start={state['position']!r}")
        self._position = _count(state["position"], "position", 0)
        self._end = None if state["end"] is None else _count(state["end"], "end", 0)
        self._first = self._position
