"""Iterator checkpoints that belong to what they read.

``tf.train.Checkpoint(it=iterator)`` saves the state of each op of a pipeline, and restores it
into any pipeline of the same shape: a position saved on one output, seed or record count
would resume another one without a word. :func:`bind` ends each ``load()`` pipeline with a
``scan`` whose state is a description of what the pipeline reads (the output's shards, the
generation, split, record count, order, seed and hosts): the checkpoint saves it with the
rest, and every element is checked against the pipeline's own description, so an iterator
restored from elsewhere fails at its next element, naming what differs.
"""

import hashlib
import json

from ..record.tensorflow import as_written


def describe(split, shards, generation, shuffle, seed, num_hosts=1, host_index=0):
    """The description of a pipeline (JSON text) that a checkpoint of it carries.

    ``data`` stands for the records themselves (each shard's name, size and CRC32C), not
    their address: the same records copied to another folder or bucket resume as well.
    """
    digest = hashlib.sha256(json.dumps(
        [(s.name, s.bytes, s.crc32c or s.sha256, s.num_examples) for s in shards]).encode())
    return json.dumps({
        "data": digest.hexdigest()[:16],
        "generation": generation, "split": split,
        "records": sum(s.num_examples for s in shards),
        "order": {True: "shuffle=True", False: "manifest order"}.get(shuffle, shuffle),
        "seed": seed, "hosts": f"{host_index} of {num_hosts}",
    }, sort_keys=True)


def differences(saved, current):
    """What differs between the descriptions ``saved`` (a checkpoint's) and ``current``, in
    words."""
    try:
        before = json.loads(saved)
    except ValueError:
        return f"the checkpoint's description is not readable: {saved[:200]!r}"
    now = json.loads(current)
    found = [f"{key} {before.get(key)!r} in the checkpoint, {now[key]!r} here"
             for key in sorted(now) if before.get(key) != now[key]]
    if before.get("data") != now["data"]:
        found.append("(data: the records themselves; another output, or one rewritten or "
                     "appended to since)")
    return "; ".join(found)


def refuse(tf, saved, description):
    """Raise the error of an iterator restored from a checkpoint of ``saved`` (a description,
    bytes) into a pipeline of ``description``: a ``tf.errors.FailedPreconditionError``, which
    TensorFlow passes on as it is."""
    saved = saved.decode("utf-8", "replace") if isinstance(saved, bytes) else saved
    raise tf.errors.FailedPreconditionError(
        None, None, "this iterator was restored from a checkpoint of another pipeline, which "
        f"it cannot resume: {differences(saved, description)}. Restore it into load() of the "
        "output, split, generation, seed and hosts it was saved from")


def carry(tf, dataset, description):
    """``dataset``'s elements as ``(description, element)``: a ``scan`` whose state (saved in
    checkpoints) is the description of the pipeline it was created in."""
    return dataset.scan(tf.constant(description),
                        as_written(tf, lambda saved, element: (saved, (saved, element))))


def bind(tf, dataset, description):
    """``dataset`` with its checkpoints bound to ``description`` (see the module's doc)."""
    expected = tf.constant(description)

    def check(saved, element):
        same = tf.equal(saved, expected)
        checked = tf.cond(same, lambda: same, lambda: tf.py_function(
            lambda s: refuse(tf, s.numpy(), description), [saved], tf.bool))
        with tf.control_dependencies([checked]):
            return tf.nest.map_structure(tf.identity, element, expand_composites=True)

    return carry(tf, dataset, description).map(as_written(tf, check))
