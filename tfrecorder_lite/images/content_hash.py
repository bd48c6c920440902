"""The hash that recognises an image's file by its bytes: what a hashes file keeps of each
image (an append finds the rows already written by it), and what ``validate()`` finds
byte-identical images by.

New outputs use XXH3-128 (xxhash): a non-cryptographic 128-bit hash, several times faster
than SHA-256, and as unlikely to give two different files one value by chance. It
recognises copies; it is not meant to resist files made on purpose to collide. Outputs whose
hashes files keep SHA-256 (written before) keep it: an output's generations share one hash,
the one metadata.json names (``near_duplicates.content_hash``; absent: SHA-256).
"""

import hashlib

import xxhash

SHA256 = "sha256"
XXH3_128 = "xxh3_128"
DEFAULT = XXH3_128
_DIGEST_BYTES = {SHA256: 32, XXH3_128: 16}
_BYTES = {SHA256: lambda data: hashlib.sha256(data).digest(), XXH3_128: xxhash.xxh3_128_digest}
_HEX = {SHA256: lambda data: hashlib.sha256(data).hexdigest(),
        XXH3_128: xxhash.xxh3_128_hexdigest}
NAMES = tuple(_DIGEST_BYTES)


def digest(name, data):
    """The hash ``name`` of ``data`` (bytes), as bytes."""
    return _BYTES[name](data)


def hexdigest(name, data):
    """The hash ``name`` of ``data`` (bytes), as hex."""
    return _HEX[name](data)


def digest_bytes(name):
    """The bytes of one digest of the hash ``name``."""
    return _DIGEST_BYTES[name]


def of_output(near_duplicates):
    """The hash an output's hashes files keep, from metadata.json's ``near_duplicates``
    entry (outputs that do not name one keep SHA-256)."""
    return (near_duplicates or {}).get("content_hash", SHA256)
