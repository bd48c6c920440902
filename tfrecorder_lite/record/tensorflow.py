"""TensorFlow, imported where records are parsed, without its C++ start-up lines.

On a machine without a GPU, TensorFlow 2.21 writes from C++, every time it starts: that logging
is not initialized yet, which CPU instructions and oneDNN options it has, that no CUDA driver
was found, and that cuInit failed. They open every CLI run and script and say nothing about the
user's data. ``TF_CPP_MIN_LOG_LEVEL`` does not stop them (they come before TensorFlow's logging
reads it), so, unless the user set that variable themselves (then nothing is hidden), the
process's standard error is sent to /dev/null while TensorFlow is imported and finds its
devices, and ``TF_CPP_MIN_LOG_LEVEL`` is set to 2 for what TensorFlow logs later.
"""

import contextlib
import os
import sys

_LEVEL = "TF_CPP_MIN_LOG_LEVEL"


def import_tensorflow():
    """The ``tensorflow`` module, imported quietly the first time (see the module's text)."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    if _LEVEL in os.environ:  # the user chose what to see
        import tensorflow

        return tensorflow
    os.environ[_LEVEL] = "2"
    with _standard_error_silenced():
        import tensorflow

        tensorflow.config.list_physical_devices()  # where cuInit fails, without a GPU
    return tensorflow


def as_written(tf, function):
    """``function`` for ``tf.data`` to trace as it is written, without AutoGraph's conversion.

    AutoGraph rewrites a function's Python source, and every function it calls, the first
    time a process traces it: for the library's pipeline functions (TensorFlow ops only, their
    Python ``if``s on Python values) that rewriting was most of the time the first ``load()``
    of a process took, and it changes nothing in the graph. Functions traced inside (a
    ``map`` in an ``interleave``) are left as written too.
    """
    return tf.autograph.experimental.do_not_convert(function)


@contextlib.contextmanager
def _standard_error_silenced():
    """Send file descriptor 2 to /dev/null inside the block (no-op where that cannot be done)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
    except (OSError, AttributeError, ValueError):
        yield
        return
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
