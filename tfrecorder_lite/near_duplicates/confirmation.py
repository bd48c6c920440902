"""Near-duplicate pairs confirmed: each pair the 64-bit search finds is checked again with
finer hashes of its two images (``perceptual_hash.fine_hashes``) and their mean colour,
taken from the luminance grid and chroma the write kept (``looks_file``), or from the image
read again where it kept none. Only the images of pairs found are read, each once, and
copies of one picture (equal 64-bit hashes in one split) are confirmed by their first
image.

Photos of one composition (garments laid out on one floor, products on one backdrop) share
the layout the 64-bit hash keeps; their fine hashes, which keep the detail too, are far
apart, or their colours are, while copies of one photo (resized, re-encoded, cropped by up
to 5% a side, brightened) stay close in both.
"""

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import redaction
from ..images import content_hash
from ..images.luminance_grid import encoded_grid_and_chroma
from ..images.normalize import ImageOptions, read_images
from .perceptual_hash import (BITS, FINE_BITS, FINE_MAX_DISTANCE, MAX_CHROMA_DIFFERENCE,
                              fine_distance, fine_hashes)

logger = redaction.logger(__name__)  # every record redacted

# How a pair is confirmed, as metadata.json says it
CONFIRMATION = (f"{FINE_BITS}-bit DCT hash of the same grid, whole and cropped by 0, "
                f"2.5 or 5% a side, within {FINE_MAX_DISTANCE} bits, mean Cb and Cr "
                f"within {MAX_CHROMA_DIFFERENCE}")
# images read and hashed, or kept grids hashed, by one call (a thread's share at a time;
# the fine hashes of a few grids at once stay in the CPU's caches)
_BATCH = 16
_COMPARED_AT_ONCE = 4096  # comparisons whose images' looks are held at once (bounds memory)


def _looks_of(batch, max_bytes, storage_options, hashed_by):
    """``[(key, (fine hashes, mean chroma)) or (key, the reason there are none)]`` of
    ``[(key, uri, content hash hex by hashed_by, or None)]``: an image that cannot be read,
    no longer has the bytes its hash says, or does not decode has a reason instead."""
    contents = read_images([uri for _, uri, _ in batch], ImageOptions(max_bytes=max_bytes),
                           storage_options)
    out, decoded = [], []
    for (key, _, digest), content in zip(batch, contents):
        if isinstance(content, Exception):
            out.append((key, "it could not be read again"))
        elif digest is not None and content_hash.hexdigest(hashed_by, content) != digest:
            out.append((key, "its file changed since it was written"))
        else:
            found = encoded_grid_and_chroma(content)
            if found is None:
                out.append((key, "it does not decode"))
            else:
                decoded.append((key, *found))
    if decoded:  # the batch's fine hashes at once
        fine = fine_hashes([grid for _, grid, _ in decoded])
        out += [(key, (hashes, chroma)) for (key, _, chroma), hashes in zip(decoded, fine)]
    return out


def _looks_of_kept(batch):
    """``[(key, (fine hashes, mean chroma))]`` of ``[(key, (grid, mean chroma))]``."""
    fine = fine_hashes([grid for _, (grid, _) in batch])
    return [(key, (hashes, chroma)) for (key, (_, chroma)), hashes in zip(batch, fine)]


def _looks_of_keys(pool, keys, source_of, kept, reading):
    """``({key: looks or the reason there are none}, images read again)`` of ``keys``: from
    what the write ``kept`` of them, else their images read again (``reading``: the
    ``(max_bytes, storage_options, hashed_by)`` of :func:`_looks_of`), in ``pool``'s
    threads."""
    known = kept(keys) if kept is not None and keys else {}
    items = [(key, *source_of(key)) for key in keys if key not in known]
    batches = [items[i:i + _BATCH] for i in range(0, len(items), _BATCH)]
    known = list(known.items())
    read = pool.map(_looks_of, batches, *([value] * len(batches) for value in reading))
    from_kept = pool.map(_looks_of_kept, [known[i:i + _BATCH]
                                          for i in range(0, len(known), _BATCH)])
    return dict(found for done in (from_kept, read) for batch in done for found in batch), \
        len(items)


def looks(data):
    """What confirms a pair, of encoded image bytes: ``(fine hashes, mean chroma)``, or None
    when they do not decode."""
    found = encoded_grid_and_chroma(data)
    return None if found is None else (fine_hashes([found[0]])[0], found[1])


def alike(first, second):
    """Whether two images' :func:`looks` are a copy's."""
    (fine, chroma), (other_fine, other_chroma) = first, second
    return (fine_distance(fine, other_fine) <= FINE_MAX_DISTANCE and
            max(abs(a - b) for a, b in zip(chroma, other_chroma)) <=
            MAX_CHROMA_DIFFERENCE)


def confirmed(pairs, source_of, storage_options=None, max_bytes=None,
              hashed_by=content_hash.DEFAULT, threads=None, stand_in=None, kept=None):
    """The pairs whose images' fine hashes are within ``FINE_MAX_DISTANCE`` and mean chroma
    within ``MAX_CHROMA_DIFFERENCE``.

    A pair one of whose images cannot be read again (or has changed) is kept, as found: it
    may be a copy, and nothing is lost by reporting it. A warning says how many.

    Args:
        pairs: the pairs (``pairs.Pairs``).
        source_of: key -> ``(uri, content hash hex or None)``: where its image is, and the
            bytes' content hash when it was written earlier (checked before hashing).
        storage_options: fsspec options for remote URIs.
        max_bytes: images larger than this are not read (their pairs are kept).
        hashed_by: the content hash ``source_of`` gives (``content_hash.NAMES``).
        threads: images read and hashed side by side (default: one a core, up to 8;
            decoding releases the GIL, opening an image does not).
        stand_in: key -> the key whose image stands for it (the first of its copies, as
            ``search.near_pairs`` gives them), or None for each key itself: each pair of
            stand-ins is compared once, and only their images are read.
        kept: a function of the keys giving ``{key: (luminance grid, mean chroma)}`` as the
            write kept them (``looks_file.kept_looks``), for some or all; or None. The other
            keys' images are read again.

    Returns:
        The pairs kept (Pairs), in their order.
    """
    if not len(pairs):
        return pairs
    stand_in = stand_in or (lambda key: key)
    compared, which = {}, []  # each pair of stand-ins once; each pair's by its number
    for later, earlier, _ in pairs:  # (a comparison either way round is one)
        which.append(compared.setdefault(frozenset((stand_in(later), stand_in(earlier))),
                                         len(compared)))
    compared = [tuple(pair) for pair in compared]
    last = {}  # key -> the last chunk of comparisons that needs its looks
    for number, pair in enumerate(compared):
        for key in pair:
            last[key] = number // _COMPARED_AT_ONCE
    limit = ImageOptions().max_bytes if max_bytes is None else max_bytes
    threads = min(8, os.cpu_count() or 1) if threads is None else threads
    looks, read_again = {}, 0
    verdicts = []  # per pair of stand-ins: True (alike), False, or why it is unconfirmed
    with ThreadPoolExecutor(max(1, threads),
                            thread_name_prefix="tfrecorder_lite-confirm") as pool:
        for chunk in range(0, len(compared), _COMPARED_AT_ONCE):
            pairs_now = compared[chunk:chunk + _COMPARED_AT_ONCE]
            keys = list(dict.fromkeys(key for pair in pairs_now for key in pair))
            found, read = _looks_of_keys(pool, [key for key in keys if key not in looks],
                                         source_of, kept, (limit, storage_options, hashed_by))
            looks.update(found)
            read_again += read
            for pair in pairs_now:
                first, second = looks[pair[0]], looks[pair[-1]]
                missing = next((f for f in (first, second) if isinstance(f, str)), None)
                verdicts.append(missing if missing is not None else alike(first, second))
            for key in keys:  # the looks no later comparison needs
                if last[key] == chunk // _COMPARED_AT_ONCE:
                    del looks[key]
    which = np.asarray(which, dtype=np.int64)
    kept_pairs = pairs[np.array([isinstance(verdict, str) or bool(verdict)
                                 for verdict in verdicts], dtype=bool)[which]]
    reasons = {}  # why pairs are unconfirmed: how many pairs each
    for verdict, count in zip(verdicts, np.bincount(which, minlength=len(verdicts)).tolist()):
        if isinstance(verdict, str):
            reasons[verdict] = reasons.get(verdict, 0) + count
    unconfirmed = sum(reasons.values())
    if unconfirmed:
        logger.warning("%d near-duplicate pair(s) are reported unconfirmed: an image of each "
                       "could not be hashed again (%s)", unconfirmed,
                       "; ".join(f"{n}: {why}" for why, n in reasons.items()))
    logger.info("near-duplicates: %d of %d pair(s) the %d-bit hash found confirmed by the "
                "%d-bit one and their colour (%d comparison(s) of %d image(s), %d of them "
                "read again)", len(kept_pairs), len(pairs), BITS, FINE_BITS,
                len(compared), len(last), read_again)
    return kept_pairs
