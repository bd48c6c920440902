"""The global order of a split's records: which record sits at each global position, and
which positions each host reads. Pure arithmetic on integers, no TensorFlow.

A global position counts records from the start of training: position ``p`` is offset
``p % n`` of epoch ``p // n`` (``n`` records in the split). With shuffling, each epoch visits
the records in a permutation of its own, a pure function of ``(seed, epoch)``: a keyed
Feistel network on the smallest even number of bits that covers ``n``, walked until it lands
below ``n`` (cycle walking), so it needs no memory and no table, gives the same order on every
machine and version, and any position is found without computing the others. Hosts take the
positions of one global stream in turn (host ``h`` of ``H``: ``start + h``, ``start + h + H``,
...), so a job that stops at global position ``p`` and resumes at ``p`` on another number of
hosts continues the same global order.
"""

import functools
from dataclasses import dataclass

import numpy as np

from ..errors import SchemaError

_ROUNDS = 6
_MASK64 = (1 << 64) - 1


def _splitmix64(value):
    """One step of splitmix64 on a Python int (a well-mixed 64-bit value)."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


def _round_keys(seed, epoch):
    """The Feistel round keys of an epoch: 64-bit values derived from the seed and epoch."""
    state = _splitmix64(_splitmix64(seed & _MASK64) ^ (epoch & _MASK64))
    keys = []
    for _ in range(_ROUNDS):
        state = _splitmix64(state)
        keys.append(state)
    return np.array(keys, dtype=np.uint64)


def _mix(values, key):
    """A keyed 64-bit mixing of a uint64 array (the Feistel round function)."""
    with np.errstate(over="ignore"):
        x = values ^ key
        x = (x ^ (x >> np.uint64(33))) * np.uint64(0xFF51AFD7ED558CCD)
        x = (x ^ (x >> np.uint64(33))) * np.uint64(0xC4CEB9FE1A85EC53)
        return x ^ (x >> np.uint64(33))


def permute(offsets, num_records, seed, epoch):
    """The record at each offset of an epoch's permutation of ``range(num_records)``.

    Args:
        offsets: int array of offsets in ``[0, num_records)``.
        num_records: the records permuted.
        seed, epoch: non-negative ints; each pair gives its own permutation.

    Returns:
        An int64 array of record indexes, one per offset.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    if num_records <= 1:
        return offsets.copy()
    half = max(1, ((num_records - 1).bit_length() + 1) // 2)  # 2 * half bits cover n
    mask = np.uint64((1 << half) - 1)
    keys = _round_keys(seed, epoch)
    values = offsets.astype(np.uint64)
    todo = np.ones(len(values), dtype=bool)
    while todo.any():
        left, right = values[todo] >> np.uint64(half), values[todo] & mask
        for key in keys:
            left, right = right, left ^ (_mix(right, key) & mask)
        values[todo] = (left << np.uint64(half)) | right
        todo[todo] = values[todo] >= np.uint64(num_records)  # walk on from outside the range
    return values.astype(np.int64)


@dataclass(frozen=True)
class GlobalOrder:
    """Which record sits at each global position of a split.

    Attributes:
        num_records: the split's records.
        shuffle: each epoch in a permutation of its own; False: manifest order every epoch.
        seed: the permutations' seed.
        shard_sizes: with ``shuffle``, permute the shards instead of the records: each epoch
            reads whole shards, in an order of its own, each shard's records in order (for
            reads that stream shards; a shuffle buffer mixes their records). Without
            ``shuffle`` and with ``cycle_length``, the order of :func:`interleaved`.
        cycle_length: shards read in turn, without ``shuffle`` (0: one after the other).
    """

    num_records: int
    shuffle: bool = False
    seed: int = 0
    shard_sizes: tuple = ()
    cycle_length: int = 0

    @functools.cached_property
    def _interleaved(self):
        return interleaved(self.shard_sizes, self.cycle_length)

    def records(self, positions):
        """The record index (manifest order) of each global position (an int array)."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size and positions.min() < 0:
            raise SchemaError(f"global positions are not negative: {positions.min()}")
        n = self.num_records
        epochs, offsets = np.divmod(positions, n)
        if not self.shuffle:
            return self._interleaved[offsets] if self.cycle_length else offsets
        out = np.empty_like(offsets)
        for epoch in np.unique(epochs):
            chosen = epochs == epoch
            if self.shard_sizes:
                out[chosen] = self._by_shard(offsets[chosen], int(epoch))
            else:
                out[chosen] = permute(offsets[chosen], n, self.seed, int(epoch))
        return out

    def _by_shard(self, offsets, epoch):
        """The records at ``offsets`` of an epoch that reads the shards in a permutation."""
        sizes = np.asarray(self.shard_sizes, dtype=np.int64)
        firsts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        shards = permute(np.arange(len(sizes)), len(sizes), self.seed, epoch)
        ends = np.cumsum(sizes[shards])  # where each shard ends in this epoch's order
        slot = np.searchsorted(ends, offsets, side="right")
        return firsts[shards[slot]] + offsets - (ends[slot] - sizes[shards[slot]])


def interleaved(shard_sizes, cycle_length):
    """The record indexes (manifest order) in the order a deterministic ``tf.data``
    ``interleave`` of the shards (``cycle_length`` open at once, one record from each in
    turn) reads them: ``load()``'s order of local shards, for the same order from a store.

    A turn at a slot yields the next record of its shard; the turn after its last record
    closes it, and the slot's next turn opens the next shard and yields its first record.
    So a shard of ``s`` records opened at round ``r`` yields at rounds ``r`` to ``r + s - 1``
    and its slot opens the next shard at round ``r + s + 1``.
    """
    import heapq

    sizes = np.asarray(shard_sizes, dtype=np.int64)
    slots = [(0, j) for j in range(max(1, min(cycle_length, len(sizes))))]  # (round, slot)
    opened = np.zeros((len(sizes), 2), dtype=np.int64)  # the round and slot of each shard
    for shard, size in enumerate(sizes):
        rnd, slot = heapq.heappop(slots)
        opened[shard] = rnd, slot
        heapq.heappush(slots, (rnd + int(size) + 1, slot))
    shard_of = np.repeat(np.arange(len(sizes)), sizes)
    firsts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    within = np.arange(int(sizes.sum())) - firsts[shard_of]
    return np.lexsort((opened[shard_of, 1], opened[shard_of, 0] + within)).astype(np.int64)


def host_share(start, stop, num_hosts=1, host_index=0):
    """The global positions in ``[start, stop)`` that host ``host_index`` of ``num_hosts``
    reads: ``start + host_index``, then every ``num_hosts``-th."""
    return range(start + host_index, stop, num_hosts)


def check_hosts(num_hosts, host_index):
    """``(num_hosts, host_index)`` checked: ints, ``0 <= host_index < num_hosts``.

    Raises:
        SchemaError: naming the values and what is allowed.
    """
    for name, value in (("num_hosts", num_hosts), ("host_index", host_index)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise SchemaError(f"{name} must be an int, not {value!r}")
    if num_hosts < 1 or not 0 <= host_index < num_hosts:
        raise SchemaError(f"host_index must be in [0, num_hosts), and num_hosts at least 1: "
                          f"got num_hosts={num_hosts}, host_index={host_index}")
    return int(num_hosts), int(host_index)
