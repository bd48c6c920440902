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
    """

    num_records: int
    shuffle: bool = False
    seed: int = 0

    def records(self, positions):
        """The record index (manifest order) of each global position (an int array)."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size and positions.min() < 0:
            raise SchemaError(f"global positions are not negative: {positions.min()}")
        n = self.num_records
        epochs, offsets = np.divmod(positions, n)
        if not self.shuffle:
            return offsets
        out = np.empty_like(offsets)
        for epoch in np.unique(epochs):
            chosen = epochs == epoch
            out[chosen] = permute(offsets[chosen], n, self.seed, int(epoch))
        return out


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
