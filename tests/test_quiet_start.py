"""TensorFlow's C++ start-up lines do not open the output of the CLI or a script, unless the
user set TF_CPP_MIN_LOG_LEVEL; real errors still reach standard error."""

import os
import subprocess
import sys

import pandas as pd

from conftest import photo, save

SCRIPT = """
import sys
import tfrecorder_lite
for image, label in tfrecorder_lite.load(sys.argv[1], "TRAIN"):
    pass
print("loaded")
tfrecorder_lite.load(sys.argv[1], "HOLDOUT")
"""


def test_tensorflow_starts_quietly_and_errors_still_show(tmp_path):
    rows = [("TRAIN", save(photo(12, 12, seed=i), tmp_path / f"{i}.jpg"), "cat") for i in range(3)]
    pd.DataFrame(rows, columns=["split", "image_uri", "label"]).tfrecord.to_tfrecord(
        tmp_path / "out", progress=False)
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}

    verify = subprocess.run([sys.executable, "-m", "tfrecorder_lite.cli", "verify", "--decode",
                             str(tmp_path / "out")], env=env, capture_output=True, text=True)
    assert verify.returncode == 0 and verify.stdout.startswith("OK")
    assert verify.stderr == ""

    script = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "out")], env=env,
                            capture_output=True, text=True)
    assert script.stdout == "loaded\n"
    assert script.stderr.strip().endswith(
        "SchemaError: split 'HOLDOUT' not in this output; it has ['TRAIN']")
    assert "cuda" not in script.stderr.lower() and "absl" not in script.stderr
