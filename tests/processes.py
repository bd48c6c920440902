"""Real subprocesses: run one and SIGKILL it at a chosen moment (crash tests); ask a worker
process what it has imported."""

import os
import signal
import subprocess
import sys
import textwrap
import time


def kill_when(command, ready, timeout=120, poll=0.005):
    """Run ``command`` in a session of its own and SIGKILL it (with its children) as soon as
    ``ready()`` is true.

    Returns:
        True when it was killed, False when it ended by itself first.

    Raises:
        AssertionError: with its stderr, when it failed by itself.
    """
    proc = subprocess.Popen(command, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            if ready():
                os.killpg(proc.pid, signal.SIGKILL)
                break
            time.sleep(poll)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=60)
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"{command} failed: {stderr.decode()[-2000:]}")
    return proc.returncode == -signal.SIGKILL


TESTS = os.path.dirname(os.path.abspath(__file__))  # for scripts: sys.path.insert(0, TESTS)
_STOPPED_SECONDS = 300  # a stopped process that nobody kills still ends


def stop_before_shard_commit(gate, after=0):
    """From now on, this process stops for good right before it commits a shard, past its
    first ``after`` shard commits: the shard's bytes are all written under their temporary
    name (or spool), nothing is under the final name yet. It writes its pid to the file
    ``gate`` and sleeps there until it is killed.

    Only one process stops at a gate: the first to claim it (``<gate>.claim``); in any other
    (a cluster's other workers) shard commits go on. Undo with :func:`let_shard_commits_go`.
    """
    from tfrecorder_lite.output.layout import SHARD_NAME
    from tfrecorder_lite.storage.local import LocalPendingFile
    from tfrecorder_lite.storage.remote import RemotePendingFile

    committed = [0]
    for cls in (LocalPendingFile, RemotePendingFile):
        real = getattr(cls.commit, "ungated", cls.commit)

        def commit(self, real=real):
            if SHARD_NAME.match(self.name):
                if committed[0] >= after and _claim(gate):
                    time.sleep(_STOPPED_SECONDS)
                committed[0] += 1
            return real(self)

        commit.ungated = real
        cls.commit = commit


def let_shard_commits_go():
    """Undo :func:`stop_before_shard_commit` in this process."""
    from tfrecorder_lite.storage.local import LocalPendingFile
    from tfrecorder_lite.storage.remote import RemotePendingFile

    for cls in (LocalPendingFile, RemotePendingFile):
        cls.commit = getattr(cls.commit, "ungated", cls.commit)


def _claim(gate):
    """True for the one process that creates ``<gate>.claim``; it then writes ``gate`` (its
    pid), whole."""
    try:
        os.close(os.open(f"{gate}.claim", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    with open(f"{gate}.tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(f"{gate}.tmp", gate)
    return True


def wait_for_file(path, timeout=120, poll=0.005):
    """Wait until ``path`` exists; returns its text. Raises AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout} s"
        time.sleep(poll)
    with open(path) as f:
        return f.read()


def loaded_modules():
    """The names of the modules this process has imported (a joblib task for workers)."""
    return set(sys.modules)


# A real conversion that waits after its first shard until the file argv[3] exists (it writes
# argv[3] + ".waiting" when it starts to wait). argv: csv, output folder, gate, and optionally
# storage options (JSON) and "short-lease" (leases of 0.2 s beats, stale after 2 s).
PAUSED_AFTER_FIRST_SHARD = textwrap.dedent("""
    import json, os, sys, time
    import tfrecorder_lite
    from tfrecorder_lite.write import runners
    from tfrecorder_lite.output import lock

    if "short-lease" in sys.argv[5:]:
        lock.HEARTBEAT_SECONDS, lock.STALE_SECONDS = 0.2, 2.0
    real = runners.write_shard

    def gated(task, store, on_error):
        receipt = real(task, store, on_error)
        open(sys.argv[3] + ".waiting", "w").close()
        deadline = time.monotonic() + 120  # never outlive a test that failed before the gate
        while not os.path.exists(sys.argv[3]) and time.monotonic() < deadline:
            time.sleep(0.01)
        return receipt

    runners.write_shard = gated
    options = json.loads(sys.argv[4]) if len(sys.argv) > 4 else None
    tfrecorder_lite.convert(sys.argv[1], sys.argv[2], num_shards=4, n_jobs=1, progress=False,
                            storage_options=options)
""")
