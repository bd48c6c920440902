"""Paths that are not image files: FIFOs, devices, sockets, folders, symlink loops, names too
long or holding NUL, huge sparse files. Each is a rejected row with a reason that says what it
is, in validate() and in writing alike; nothing hangs and memory stays bounded (checked in a
real subprocess under an address-space limit)."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from conftest import photo, save

GB = 10**9

SCRIPT = textwrap.dedent("""
    import json, resource, sys
    import pandas as pd
    import tfrecorder_lite

    root, rows, headroom = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    df = pd.DataFrame(rows, columns=["split", "image_uri", "label"], index=range(len(rows)))
    options = dict(base_dir=root, max_image_bytes=4 * 10**9)
    warm = df.iloc[[0, -1]]  # imports, pools and threads made before the limit is set
                             # (with the last row, the good one: a table of no good row is
                             # refused whole)
    warm.tfrecord.validate(check="decode", **options)
    warm.tfrecord.to_tfrecord(root + "/warm", on_error="skip", progress=False, **options)
    with open("/proc/self/status") as f:
        size = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize"))
    resource.setrlimit(resource.RLIMIT_AS, (size + headroom, size + headroom))
    found = df.tfrecord.validate(check="decode", **options)
    result = df.tfrecord.to_tfrecord(root + "/out", on_error="skip", progress=False, **options)
    big = df.iloc[[0, 1]].tfrecord.validate(check="header", base_dir=root)
    print(json.dumps({
        "validate": {str(r): p for r, p in zip(found.row, found.problem)},
        "written": sum(result.counts.values()),
        "rejected": {str(r): p for r, p in result.rejected.reason.items()},
        "default_limit": {str(r): p for r, p in zip(big.row, big.problem)},
    }))
""")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """(root, rows, expected reason per row) with every kind of hostile path."""
    root = tmp_path_factory.mktemp("hostile")
    with open(root / "huge.jpg", "wb") as f:  # 6 GB, sparse: above any sane limit
        f.truncate(6 * GB)
    with open(root / "zeros.png", "wb") as f:  # 2 GB of zeros, under the limit of this test
        f.truncate(2 * GB)
    os.mkfifo(root / "pipe.jpg")
    (root / "folder.jpg").mkdir()
    os.symlink("loop_b.jpg", root / "loop_a.jpg")
    os.symlink("loop_a.jpg", root / "loop_b.jpg")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(root / "socket.jpg"))
    save(photo(16, 16), root / "good.jpg", "JPEG")
    cases = [
        ("huge.jpg", "file too large: 6.0 GB"),
        ("zeros.png", "not an image"),
        ("pipe.jpg", "a FIFO (named pipe), not a regular file"),
        ("/dev/zero", "a device, not a regular file"),
        ("/dev/urandom", "a device, not a regular file"),
        ("folder.jpg", "is a folder, not a file"),
        ("socket.jpg", "a socket, not a regular file"),
        ("loop_a.jpg", "Too many levels of symbolic links"),
        ("x" * 300 + ".jpg", "File name too long"),
        ("nul\0byte.jpg", "the path contains a NUL character"),
        ("missing/cat.jpg", f"the relative path missing/cat.jpg was resolved against base_dir "
                            f"{root}"),
        ("good.jpg", None),
    ]
    yield root, cases
    listening.close()


def test_every_hostile_path_is_a_rejected_row_saying_what_it_is_in_bounded_memory(hostile):
    root, cases = hostile
    rows = [["TRAIN", path, "cat"] for path, _ in cases]
    env = {**os.environ, "MALLOC_ARENA_MAX": "2"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(root), json.dumps(rows),
                           str(1 * GB)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    for found in (report["validate"], report["rejected"]):
        for row, (path, reason) in enumerate(cases):
            if reason is None:
                assert str(row) not in found, found.get(str(row))
            else:
                assert reason in found.get(str(row), ""), (path, found.get(str(row)))
                assert "file not found" not in found[str(row)] or path.startswith("missing")
    assert report["written"] == 1
    # the default limit (256 MiB) refuses the 2 GB file too, by its size, unread
    assert report["default_limit"]["1"].startswith("file too large: 2.0 GB (limit 268.4 MB")


@pytest.mark.skipif(os.geteuid() == 0, reason="root enters every folder")
def test_a_file_in_a_folder_that_may_not_be_entered_is_a_rejected_row(tmp_path):
    import pandas as pd
    import tfrecorder_lite  # noqa: F401

    save(photo(16, 16), tmp_path / "closed" / "a.jpg", "JPEG")
    os.chmod(tmp_path / "closed", 0)
    try:
        df = pd.DataFrame([["TRAIN", str(tmp_path / "closed" / "a.jpg"), "cat"]],
                          columns=["split", "image_uri", "label"])
        result = df.tfrecord.to_tfrecord(tmp_path / "out", on_error="skip", progress=False)
        assert "Permission denied" in result.rejected.reason.iloc[0]
    finally:
        os.chmod(tmp_path / "closed", 0o755)


def test_cli_max_image_bytes_takes_units_and_rejects_larger_files(tmp_path, capsys):
    from tfrecorder_lite import cli

    small = save(photo(8, 8), tmp_path / "small.png", "PNG")
    large = save(photo(200, 200, seed=1), tmp_path / "large.png", "PNG")
    assert os.path.getsize(small) < 1024 < os.path.getsize(large)
    (tmp_path / "t.csv").write_text(f"TRAIN,{small},a\nTRAIN,{large},b\n")
    assert cli.main(["convert", str(tmp_path / "t.csv"), str(tmp_path / "out"), "--no-progress",
                     "--on-error", "skip", "--max-image-bytes", "1K"]) == 0
    rejected = (tmp_path / "out" / "rejected.csv").read_text()
    assert "large.png" in rejected and "file too large" in rejected and "limit 1.0 kB" in rejected
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["convert", str(tmp_path / "t.csv"), str(tmp_path / "x"),
                  "--max-image-bytes", "lots"])
    assert exit_info.value.code == 2 and "expected a size such as 256M" in capsys.readouterr().err
