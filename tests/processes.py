"""Real subprocesses: run one and SIGKILL it at a chosen moment (crash tests); ask a worker
process what it has imported."""

import os
import signal
import subprocess
import sys
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


def loaded_modules():
    """The names of the modules this process has imported (a joblib task for workers)."""
    return set(sys.modules)
