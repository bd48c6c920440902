"""Reliability, round 5 (issue 45), the sources: symlinks that lead out of a YOLO, image or VOC
folder, a data.yaml alias bomb, malformed instance masks, boxes and polygons, Vertex AI lines
and YOLO label files that reject their own row only, and credentials in rejections.

Each scenario is converted for real (Pillow images, TFRecord shards, subprocesses); each test
fails on the code before the issue's fixes."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import tfrecorder_lite
from tfrecorder_lite import InvalidRowError, SchemaError
from conftest import photo, save

OPTIONS = dict(progress=False, n_jobs=1)
GB = 10**9


def convert(source, out, **options):
    return tfrecorder_lite.convert(source, out, **OPTIONS, **options)


# ----------------------------------------------------------------------------- YAML aliases

def alias_bomb(root):
    """A data.yaml of about 300 bytes whose nested aliases compose 9**9 values."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for previous, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    lines += ["names: *i", "train: images/train"]
    (root / "images" / "train").mkdir(parents=True)
    (root / "data.yaml").write_text("\n".join(lines) + "\n")
    return root


BOMB_CHILD = textwrap.dedent("""
    import resource, sys
    import tfrecorder_lite
    from tfrecorder_lite.table import yolo
    import yaml

    resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]), int(sys.argv[2])))
    try:
        tfrecorder_lite.read_yolo(sys.argv[1])
    except tfrecorder_lite.SchemaError as exc:
        print("SchemaError", exc)
    except BaseException as exc:
        print(type(exc).__name__, str(exc)[:300])
""")


def test_a_data_yaml_alias_bomb_is_refused_naming_the_file_in_bounded_memory(tmp_path):
    root = alias_bomb(tmp_path / "yolo")
    assert len((root / "data.yaml").read_bytes()) < 400
    env = {**os.environ, "MALLOC_ARENA_MAX": "2", "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", BOMB_CHILD, str(root), str(int(1.5 * GB))],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kind, _, message = proc.stdout.strip().partition(" ")
    assert kind == "SchemaError", proc.stdout
    assert message.startswith(f"{root / 'data.yaml'}: line 2: the YAML alias *a is refused")
    assert "lol" not in message
    # an anchor alone (no alias) is plain YAML, read as before
    (root / "data.yaml").write_text("names: &n [car]\ntrain: images/train\n")
    save(photo(20, 20), root / "images" / "train" / "a.jpg")
    assert tfrecorder_lite.read_yolo(root).image_uri.tolist() == \
        [str(root / "images" / "train" / "a.jpg")]
