"""The pairs of near-identical images across splits, found from their perceptual hashes
(``near_duplicates.perceptual_hash``) without comparing all pairs.

:func:`near_pairs` finds every pair of hashes within a distance without comparing all pairs:
the bits are cut into bands, each band indexed by its value and given a radius, the radii
plus one adding up to more than the distance ``d``. A pair within ``d`` then differs in at
most its radius in some band (pigeonhole), so each hash looks up only the values that close
to its own bands (multi-index hashing); the widths and radii are chosen by a cost model from
the number of hashes.
"""

import functools
import itertools
import math

import numpy as np

from .perceptual_hash import BITS, MAX_DISTANCE


def _popcount(values):
    """Set bits of each uint64."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(values)
    count = np.zeros(values.shape, dtype=np.uint8)
    for shift in range(0, BITS, 16):
        count += _POPCOUNT16[((values >> np.uint64(shift)) & np.uint64(0xFFFF)).astype(np.int64)]
    return count


_POPCOUNT16 = np.array([bin(i).count("1") for i in range(1 << 16)], dtype=np.uint8)


# What the search costs, in nanoseconds (fitted to timings on a 2-core Xeon; only their
# ratios matter): a key looked up (more in a table larger than the caches), a bucket found
# with hashes in it, a hash compared (more among many hashes), a slot of a band's table
# built, a hash sorted into a band, a round of lookups (one flip of a chunk of queries), a
# pair compared when all pairs are.
_PROBE, _LARGE_TABLE, _HIT, _CANDIDATE, _SLOT, _SORTED = 3.5, 1.3, 3.0, 8.0, 8.0, 30.0
_ROUND, _PAIR = 30_000.0, 2.6
_CACHED_WIDTH = 21  # a table of up to 2**21 slots stays in the caches
_CACHED_HASHES = 17  # and up to 2**17 hashes
_MAX_WIDTH = 21  # a band's table has 2**width slots (5 bytes each, 13 while built)
_CANDIDATES = 1 << 19  # hashes compared at once (about 40 bytes each while compared)
_INDEX_PART = 1 << 20  # crops indexed at once (about 30 bytes each while indexed)


@functools.lru_cache(maxsize=None)
def _probes(width, radius):
    """The number of ``width``-bit keys within ``radius`` bits of a key."""
    return sum(math.comb(width, i) for i in range(min(radius, width) + 1))


def _cost(count, queries, widths, radii, chunk=1 << 17):
    """The estimated cost of looking ``queries`` hashes up among ``count`` through bands."""
    total = 0.0
    candidate = _CANDIDATE * (1 + 0.4 * max(0.0, math.log2(max(count, 1)) - _CACHED_HASHES))
    for width, radius in zip(widths, radii):
        per_slot = count / 2 ** width  # hashes per bucket
        per_probe = (_PROBE + _LARGE_TABLE * max(0, width - _CACHED_WIDTH) +
                     _HIT * -math.expm1(-per_slot) + candidate * per_slot)
        rounds = _probes(width, radius) * -(-queries // chunk)
        total += queries * _probes(width, radius) * per_probe + _ROUND * rounds
        total += _SLOT * 2 ** width + _SORTED * (count + queries)
    return total


def _bands(count, queries, span, max_distance):
    """``(widths, radii)`` of the cheapest bands (by ``_cost``; 1 to 9 bands, the radii as
    even as can be, the widths found by moving one bit at a time from a hash a bucket) for
    ``queries`` lookups among ``count`` hashes of ``span`` bits, or None when comparing every
    pair costs less.

    A pair within ``max_distance`` differs in at most its radius in some band when the radii
    plus one add up to more than ``max_distance``: had it differed in more in every band, it
    would differ in at least that sum. Bits outside every band (a band is at most
    ``_MAX_WIDTH`` bits) only add to a pair's distance, so they may be left out.
    """
    best, layout = _PAIR * count * queries, None
    if best <= _SORTED * (count + queries) + _ROUND:  # less than any band costs
        return None
    start = min(_MAX_WIDTH, max(1, round(math.log2(max(count, 1)))))  # a hash a bucket
    for bands in range(1, min(max_distance + 1, span, 9) + 1):
        extra = max_distance + 1 - bands  # the radii's sum
        radii = [extra // bands + (i < extra % bands) for i in range(bands)]
        widths = [min(start, span // bands + (i < span % bands)) for i in range(bands)]
        cost = _cost(count, queries, widths, radii)
        moved = True
        while moved:  # widen, narrow or move a bit between bands while that costs less
            moved = False
            for trial in _neighbours(widths, span):
                trial_cost = _cost(count, queries, trial, radii)
                if trial_cost < cost:
                    cost, widths, moved = trial_cost, trial, True
        if cost < best:
            best, layout = cost, (widths, radii)
    return layout


def _neighbours(widths, span):
    """The band widths one bit away from ``widths`` (at most ``span`` bits in all)."""
    for i, j in itertools.product(range(len(widths)), range(-1, len(widths))):
        trial = list(widths)
        trial[i] += 1
        if j == i:
            trial[i] -= 2
        elif j >= 0:
            trial[j] -= 1
        if 0 < min(trial) and max(trial) <= _MAX_WIDTH and sum(trial) <= span:
            yield trial


def _flips(width, radius):
    """Every value of ``width`` bits with at most ``radius`` bits set."""
    masks = [0]
    for r in range(1, min(radius, width) + 1):
        masks += [sum(1 << b for b in bits) for bits in itertools.combinations(range(width), r)]
    return sorted(masks)  # flips of the same high bits one after another: the same slots


def near_pairs(hashes, groups, max_distance=MAX_DISTANCE, chunk=1 << 17, involving=None,
               order=None, stand_ins=False):
    """Every pair of images within ``max_distance`` bits whose groups differ (copies of one
    picture in one group counted once, below).

    Two images are that close when the hash of one whole image is within ``max_distance``
    of the other's whole image or of one of its crops. Every pair across groups has an image
    outside the largest group, so only those look others up: their hashes (whole and crops)
    among the whole images' hashes, and their whole images' among the crops of the largest
    group. A table that is mostly TRAIN costs little more than its other splits.

    Args:
        hashes: uint64 array-like, one hash per image, or one row per image: its whole
            image's hash, then its crops' (as :func:`perceptual_hashes` gives them).
        groups: int array-like, one group per image (e.g. the split): pairs within one group
            are left out.
        max_distance: the largest distance of a pair, 0 to 63.
        chunk: lookups made at once (bounds memory).
        involving: indexes of the images every pair must have one of (an append's new
            images), or None for every pair. Then only they look others up, and the others'
            crops are looked up among their whole images: few hashes are indexed.
        order: a number per image, the order the images come in (a table's), or None for
            their indexes' order.
        stand_ins: also return each image's stand-in (below).

    Images of one group whose hashes are all equal (copies of one file, or of one picture)
    are looked up as one, so that many copies cost neither a search nor a report of every
    pair of them: each image of such a set is paired once, with the earliest (in ``order``)
    of the first images of the sets near its own that come before it, and each first image
    of a set stands in for its set's images (one comparison of the two stand-ins confirms a
    pair of sets). An image without copies is paired with every image near it, and stands
    in for itself.

    Returns:
        ``(first, second, distance)``: int64 arrays of the pairs' image indexes (first <
        second) and their smallest distance, sorted by ``(second, first)``; with
        ``stand_ins``, and an int64 array of each image's stand-in.
    """
    hashes = np.asarray(hashes, dtype=np.uint64)
    hashes = hashes[:, None] if hashes.ndim == 1 else hashes
    groups = np.asarray(groups, dtype=np.int64)
    order = np.arange(len(hashes)) if order is None else np.asarray(order, dtype=np.int64)
    sets = _copies(hashes, groups, order)
    if sets is None:
        found = _near_pairs(hashes, groups, max_distance, chunk, involving)
        return (*found, np.arange(len(hashes))) if stand_ins else found
    firsts, set_of = sets
    asking = None if involving is None else \
        np.unique(set_of[np.asarray(involving, dtype=np.int64)])
    first, second, distance = _near_pairs(hashes[firsts], groups[firsts], max_distance, chunk,
                                          asking)
    first, second, distance = _members_paired(first, second, distance, firsts, set_of, order)
    if involving is not None:
        new = np.zeros(len(hashes), dtype=bool)
        new[np.asarray(involving, dtype=np.int64)] = True
        keep = new[first] | new[second]
        first, second, distance = first[keep], second[keep], distance[keep]
    by_later = np.lexsort((first, second))
    found = first[by_later], second[by_later], distance[by_later]
    return (*found, firsts[set_of]) if stand_ins else found


def _copies(hashes, groups, order):
    """``(the first image of each set, the set of each image)`` of the images of one group
    with equal hashes (the first in ``order``; the sets numbered as their first images'
    indexes go), or None when no two images are such copies.

    The images are sorted once by a 64-bit key of their group and hashes, then by order;
    each run of one key is a set once its rows are checked equal a column at a time (a
    million copies cost a few arrays of a number an image, not copies of their hashes).
    """
    mixed = groups.astype(np.uint64)
    for column in hashes.T:  # a 64-bit key a row: equal rows, equal keys
        mixed *= np.uint64(0x9E3779B97F4A7C15)
        mixed ^= column
    by_key = np.lexsort((order, mixed))  # each key's images, the first in order first
    mixed = mixed[by_key]
    starts = np.ones(len(mixed), dtype=bool)
    starts[1:] = mixed[1:] != mixed[:-1]
    del mixed
    if starts.all():
        return None
    first_of = by_key[np.flatnonzero(starts)][np.cumsum(starts) - 1]  # a run's first image
    del starts
    same = groups[by_key] == groups[first_of]
    for column in hashes.T:
        same &= column[by_key] == column[first_of]
    if not same.all():  # two rows of one key that differ (a 64-bit collision)
        return _copies_compared(hashes, groups, order)
    del same
    first_of[by_key] = first_of.copy()  # by image, not by key
    firsts = np.unique(first_of)
    return firsts, np.searchsorted(firsts, first_of)


def _copies_compared(hashes, groups, order):
    """:func:`_copies` found by comparing whole rows (when two rows share a key)."""
    rows = np.column_stack([groups.astype(np.uint64), hashes])
    _, inverse = np.unique(rows, axis=0, return_inverse=True)
    inverse = np.ravel(inverse)
    by_set = np.lexsort((order, inverse))  # each set's images, its first one first
    starts = np.flatnonzero(np.diff(inverse[by_set], prepend=-1))
    first_of = by_set[starts][inverse]
    firsts = np.unique(first_of)
    return firsts, np.searchsorted(firsts, first_of)


def _members_paired(first, second, distance, firsts, set_of, order):
    """The pairs of images of the pairs of sets ``(first, second, distance)`` (set indexes):
    two images alone in their sets as they are; an image of a set of copies (or alone, near
    one) with the earliest first image (in ``order``) of the sets near its own that comes
    before it (one pair an image: copies in three groups are not reported twice); each pair
    as ``(smaller index, larger)``."""
    sizes = np.bincount(set_of, minlength=len(firsts))
    members = np.argsort(set_of, kind="stable")  # each set's images
    starts = np.concatenate([[0], np.cumsum(sizes)])
    alone = (sizes[first] == 1) & (sizes[second] == 1)
    out = [(firsts[first[alone]], firsts[second[alone]], distance[alone])]
    partner = np.full(len(set_of), -1, dtype=np.int64)  # each image's earliest partner
    gap = np.zeros(len(set_of), dtype=np.int64)
    for a, b, d in zip(first[~alone].tolist(), second[~alone].tolist(),
                       distance[~alone].tolist()):
        for mine, other in ((a, b), (b, a)):
            candidate = firsts[other]
            images = members[starts[mine]:starts[mine + 1]]
            images = images[order[images] > order[candidate]]
            known = partner[images]
            images = images[(known < 0) | (order[np.maximum(known, 0)] > order[candidate])]
            partner[images], gap[images] = candidate, d
    paired = np.flatnonzero(partner >= 0)
    out.append((partner[paired], paired, gap[paired]))
    first, second, distance = (np.concatenate([part[i] for part in out]).astype(np.int64)
                               for i in range(3))
    return np.minimum(first, second), np.maximum(first, second), distance


def _near_pairs(hashes, groups, max_distance, chunk, involving):
    """:func:`near_pairs` of images each looked up on its own."""
    if not 0 <= max_distance < BITS:
        raise ValueError(f"max_distance must be 0 to {BITS - 1}, not {max_distance!r}")
    empty = np.zeros(0, dtype=np.int64)
    _, groups, sizes = np.unique(np.asarray(groups, dtype=np.int64), return_inverse=True,
                                 return_counts=True)
    if len(sizes) < 2:
        return empty, empty, empty
    groups = groups.astype(np.int8 if len(sizes) < 128 else np.int32)  # a byte per image
    images, per_image = hashes.shape
    position = np.int32 if images * per_image < 2 ** 31 else np.int64
    if involving is None:
        asking = groups != np.argmax(sizes)
    else:
        asking = np.zeros(images, dtype=bool)
        asking[np.asarray(involving, dtype=np.int64)] = True
    askers = np.flatnonzero(asking).astype(position)
    others = np.flatnonzero(~asking).astype(position)  # the largest group, or the rest

    def whole_images():  # (index: image of each hash, its hashes; queries: likewise)
        every = np.arange(images, dtype=position), hashes[:, 0]
        asked = np.repeat(askers, per_image), hashes[askers].ravel()
        if involving is not None and len(asked[0]) < images:  # the fewer hashes indexed
            return (*asked, *every)
        return (*every, *asked)

    def crops(part):  # a part of the others' images at a time (the most hashes)
        crop_images, crop_hashes = np.repeat(part, per_image - 1), hashes[part, 1:].ravel()
        if involving is not None:  # the askers' whole images indexed, the crops looked up
            return askers, hashes[askers, 0], crop_images, crop_hashes
        return crop_images, crop_hashes, askers, hashes[askers, 0]

    step = max(1, _INDEX_PART // max(1, per_image - 1))
    searches = [whole_images] + [functools.partial(crops, others[i:i + step])
                                 for i in range(0, len(others), step)]
    found = []
    for search in searches:  # made one at a time: they are large
        search = search()
        if len(search[1]) and len(search[3]):
            found.append(_search(groups, *search, max_distance, chunk))
        del search
    if not found:
        return empty, empty, empty
    first = np.concatenate([f[0] for f in found]).astype(np.int64)
    second = np.concatenate([f[1] for f in found]).astype(np.int64)
    distance = np.concatenate([f[2] for f in found])
    first, second = np.minimum(first, second), np.maximum(first, second)
    order = np.lexsort((distance, first, second))  # by pair, its smallest distance first
    first, second, distance = first[order], second[order], distance[order]
    keep = np.ones(len(first), dtype=bool)
    keep[1:] = (first[1:] != first[:-1]) | (second[1:] != second[:-1])
    return first[keep], second[keep], distance[keep]


def _search(groups, index_images, index, query_images, queries, max_distance, chunk):
    """``(query image, index image, distance)`` of every query hash within ``max_distance``
    of an index hash of an image in another group (multi-index hashing over bands of the
    bits that are not 0 in every hash, or every pair when that costs less)."""
    span = int(np.bitwise_or.reduce(index) | np.bitwise_or.reduce(queries)).bit_length()
    layout = _bands(len(index), len(queries), max(span, 1), max_distance)
    index_groups, query_groups = groups[index_images], groups[query_images]
    if layout is None:
        found = [_all_pairs(index, queries, max_distance, chunk, index_groups, query_groups)]
    else:
        found, shift = [], max(span, 1)
        for width, radius in zip(*layout):
            shift -= width
            found.append(_band_pairs(index, queries, shift, width, radius, max_distance, chunk,
                                     index_groups, query_groups))
    asking = np.concatenate([f[0] for f in found])
    other = np.concatenate([f[1] for f in found])
    distance = _popcount(queries[asking] ^ index[other]).astype(np.int64)
    return query_images[asking], index_images[other], distance


def _all_pairs(index, queries, max_distance, chunk, index_groups, query_groups):
    """``(query, index hash)`` positions of the close pairs across groups, comparing all."""
    step = max(1, chunk // len(index))
    out_query, out_index = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for begin in range(0, len(queries), step):
        close = _popcount(queries[begin:begin + step, None] ^ index[None, :]) <= max_distance
        close &= query_groups[begin:begin + step, None] != index_groups[None, :]
        asking, other = np.nonzero(close)
        out_query.append(asking + begin)
        out_index.append(other)
    return np.concatenate(out_query), np.concatenate(out_index)


def _keys(hashes, shift, width):
    """The ``width`` bits of each hash above its lowest ``shift``, as int64."""
    keys = hashes >> np.uint64(shift)
    keys &= np.uint64((1 << width) - 1)
    return keys.view(np.int64)


def _by_key(keys):
    """The positions of ``keys`` (int64, below 2**31; their array is used up) in order of
    key, ties by position, as int32 (or int64 beyond 2**31 keys)."""
    keys <<= 32
    for begin in range(0, len(keys), 1 << 20):  # no second array of the keys' size
        keys[begin:begin + (1 << 20)] |= np.arange(begin, min(len(keys), begin + (1 << 20)))
    keys.sort()
    keys &= 0xFFFFFFFF
    return keys.astype(np.int32 if len(keys) < 2 ** 31 else np.int64)


def _band_pairs(index, queries, shift, width, radius, max_distance, chunk, index_groups,
                query_groups):
    """``(query, index hash)`` positions of the close pairs across groups found through one
    band: each query's key looked up with every flip of at most ``radius`` bits.

    The index's hashes are sorted by key, and a table of ``2**width + 1`` int32 holds where
    each key's hashes start (and a byte a key whether it has any). The queries are taken in
    order of key, ``chunk`` at a time, and one flip at a time, the flips in order: the lookups
    walk the table in order instead of jumping across it, and flips that change the same high
    bits look at the same slots one after another.
    """
    keys = _keys(index, shift, width)
    counts = np.bincount(keys, minlength=1 << width)
    occupied = counts > 0
    starts = np.zeros((1 << width) + 1, dtype=np.int32)  # bucket k: starts[k]:starts[k + 1]
    np.cumsum(counts, out=starts[1:], dtype=np.int32)
    del counts
    order = _by_key(keys)
    del keys
    in_order = index[order]  # a bucket's hashes side by side
    query_keys = _keys(queries, shift, width)
    by_key = _by_key(query_keys.copy())
    out_query, out_index = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for begin in range(0, len(queries), chunk):
        asking = by_key[begin:begin + chunk]
        key, mine = query_keys[asking], queries[asking]
        probe, hits = np.empty_like(key), np.empty(len(key), dtype=bool)
        for flip in _flips(width, radius):
            np.bitwise_xor(key, flip, out=probe)
            np.take(occupied, probe, out=hits, mode="clip")  # unbuffered
            hit = np.flatnonzero(hits)
            if not len(hit):
                continue
            slots = probe[hit]
            start = starts[slots].astype(np.int64)
            for who, positions in _candidates(hit, start, starts[slots + 1] - start,
                                              _CANDIDATES):
                close = np.flatnonzero(_popcount(in_order[positions] ^ mine[who]) <=
                                       max_distance)
                other, who = order[positions[close]], asking[who[close]]
                keep = index_groups[other] != query_groups[who]
                out_query.append(who[keep])
                out_index.append(other[keep])
    return np.concatenate(out_query), np.concatenate(out_index)


def _candidates(hit, start, found, most):
    """``(query, position in the sorted index)`` of every hash in the buckets found, in pieces
    of about ``most`` (a piece holds whole buckets: hashes that look alike crowd a few)."""
    ends = np.cumsum(found)
    first = 0
    while first < len(hit):
        done = int(ends[first - 1]) if first else 0
        last = max(first + 1, int(np.searchsorted(ends, done + most, side="right")))
        piece = found[first:last]
        # a bucket's start plus the rank of each of its hashes
        skip = start[first:last] - (np.cumsum(piece) - piece)
        yield (np.repeat(hit[first:last], piece),
               np.arange(int(ends[last - 1]) - done) + np.repeat(skip, piece))
        first = last
