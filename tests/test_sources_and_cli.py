"""CSV files (with and without header), image folders, and the command line (once as a
subprocess, otherwise in-process)."""

import os
import subprocess
import sys

import pandas as pd
import pytest

import tfrecorder_lite
from tfrecorder_lite import cli
from conftest import photo, save

@pytest.fixture
def csv_dir(tmp_path):
    """A folder with images/ and rows naming them by relative path."""
    rows = []
    for i in range(9):
        split = ("TRAIN", "VALIDATION", "TEST")[i % 3]
        save(photo(16, 20, seed=i), tmp_path / "data" / "images" / f"{i}.png", "PNG")
        rows.append(f"{split},images/{i}.png,{'ab'[i % 2]}")
    return tmp_path / "data", rows


def test_headerless_csv_reads_as_split_image_label(tmp_path, csv_dir):
    folder, rows = csv_dir
    (folder / "plain.csv").write_text("\n".join(rows) + "\n")
    result = tfrecorder_lite.convert(folder / "plain.csv", tmp_path / "out", progress=False)
    assert result.counts == {"TRAIN": 3, "VALIDATION": 3, "TEST": 3}  # first row is not lost
    assert result.labels == ["a", "b"]


def test_csv_with_header_resolves_paths_against_its_folder(tmp_path, csv_dir, monkeypatch):
    folder, rows = csv_dir
    (folder / "with_header.csv").write_text("split,image_uri,label\n" + "\n".join(rows) + "\n")
    monkeypatch.chdir(tmp_path)  # elsewhere than the CSV's folder
    result = tfrecorder_lite.convert(folder / "with_header.csv", tmp_path / "out",
                                     progress=False)
    assert sum(result.counts.values()) == 9 and result.rejected.empty


def test_image_folder_split_label_file(tmp_path):
    for split, label, n in [("train", "cat", 3), ("train", "dog", 2), ("val", "cat", 1),
                            ("test", "dog", 2)]:
        for i in range(n):
            save(photo(12, 12, seed=i), tmp_path / "tree" / split / label / f"{i}.jpg", "JPEG")
    (tmp_path / "tree" / "README.txt").write_text("not an image")
    result = tfrecorder_lite.convert(tmp_path / "tree", tmp_path / "out", progress=False)
    assert result.counts == {"TRAIN": 5, "VALIDATION": 1, "TEST": 2}
    assert result.labels == ["cat", "dog"]
    assert result.metadata["splits"]["TRAIN"]["label_counts"] == {"cat": 3, "dog": 2}


def test_cli_convert_info_verify(tmp_path, csv_dir, capsys):
    folder, rows = csv_dir
    (folder / "rows.csv").write_text("split,image_uri,label\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out"
    done = subprocess.run(  # the one subprocess: python -m tfrecorder_lite.cli runs as a program
        [sys.executable, "-m", "tfrecorder_lite.cli", "convert", str(folder / "rows.csv"),
         str(out), "--num-shards", "2", "--no-progress", "--image-size", "8x10",
         "--compression", "gzip", "--jobs", "1", "--sha256"],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "TRAIN 3" in done.stdout
    assert sorted(os.listdir(out))[:3] == ["hashes-g0000.csv", "labels.txt", "metadata.json"]
    metadata = tfrecorder_lite.read_metadata(out)
    assert metadata["image"]["size"] == [8, 10]
    shards = [s for info in metadata["splits"].values() for s in info["shards"]]
    assert all(len(s["sha256"]) == 64 and len(s["crc32c"]) == 8 for s in shards)
    assert cli.main(["info", str(out)]) == 0
    assert "TRAIN: 3 examples in 2 shard(s)" in capsys.readouterr().out
    assert cli.main(["verify", str(out)]) == 0
    assert capsys.readouterr().out.startswith("OK:")


@pytest.mark.parametrize("args,message", [
    (["convert", "no-such.csv", "OUT"], "neither"),
    (["convert", "{csv}", "OUT", "--on-error", "raise"], "file not found"),
    (["info", "no-such-dir"], "metadata.json not found"),
    (["convert", "{bad_columns}", "OUT"], "missing column"),
])
def test_cli_bad_input_exits_2_with_one_line_and_no_traceback(tmp_path, capsys, args,
                                                                 message):
    (tmp_path / "rows.csv").write_text("split,image_uri,label\nTRAIN,nowhere.jpg,a\n")
    (tmp_path / "bad.csv").write_text("set,path,label\nTRAIN,nowhere.jpg,a\n")
    args = [a.format(csv=tmp_path / "rows.csv", bad_columns=tmp_path / "bad.csv")
            .replace("OUT", str(tmp_path / "out")) for a in args]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_cli_skip_reports_rejected_rows(tmp_path, csv_dir, capsys):
    folder, rows = csv_dir
    (folder / "rows.csv").write_text("\n".join(rows + ["TRAIN,images/gone.png,a"]) + "\n")
    assert cli.main(["convert", str(folder / "rows.csv"), str(tmp_path / "out"), "--on-error",
                     "skip", "--no-progress"]) == 0
    assert "rejected 1 row(s)" in capsys.readouterr().out
    rejected = pd.read_csv(tmp_path / "out" / "rejected.csv")
    assert rejected["reason"].str.startswith("file not found").tolist() == [True]
