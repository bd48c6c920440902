"""storage/urls.py: what a path or URL names, how relative ones resolve, and whose options a
filesystem gets."""

import os

import pandas as pd
import pytest

from tfrecorder_lite import UnsupportedURLError
from tfrecorder_lite.storage import urls
from tfrecorder_lite.table.file_checks import _plain_absolute


@pytest.mark.parametrize("uri, protocol", [
    ("images/a.jpg", "file"), ("/abs/a.jpg", "file"), ("file:///abs/a.jpg", "file"),
    ("GS://bucket/a.jpg", "gs"), ("s3://b/k", "s3"), ("https://h/x?sig=1", "https"),
    ("C:\\data\\a.jpg", "file"), ("weird-scheme://x", "file"),  # not an identifier: a path
])
def test_the_protocol_of_a_uri(uri, protocol):
    assert urls.protocol_of(uri) == protocol
    assert urls.is_remote(uri) is (protocol != "file")


def test_relative_paths_resolve_against_the_base_local_or_remote(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert urls.resolve("a/../b.jpg") == str(tmp_path / "b.jpg")
    assert urls.resolve("b.jpg", base="/data/set") == "/data/set/b.jpg"
    assert urls.resolve("sub/../b.jpg", base="gs://bucket/set") == "gs://bucket/set/b.jpg"
    assert urls.resolve("/abs/b.jpg", base="gs://bucket/set") == "/abs/b.jpg"
    assert urls.resolve("s3://bucket/k.jpg", base="/data") == "s3://bucket/k.jpg"
    assert urls.resolve(tmp_path / "x") == str(tmp_path / "x")  # a PathLike
    assert urls.resolve("~/x.jpg") == os.path.join(os.path.expanduser("~"), "x.jpg")


def test_file_urls_are_percent_decoded_and_refuse_what_would_cut_them():
    assert urls.resolve("file:///data/a%20b%23%3F%25.jpg") == "/data/a b#?%.jpg"
    assert urls.resolve("file://localhost/data/a.jpg") == "/data/a.jpg"
    with pytest.raises(UnsupportedURLError, match="write a '\\?' or '#' of a file name as %3F"):
        urls.resolve("file:///data/a#1.jpg")
    with pytest.raises(UnsupportedURLError, match="not of the host 'server'"):
        urls.resolve("file://server/data/a.jpg")
    with pytest.raises(UnsupportedURLError, match="unsupported URL scheme 'nosuch://'"):
        urls.resolve("nosuch://bucket/a.jpg")


def test_parent_and_basename_of_paths_and_urls():
    assert urls.parent("gs://b/set/a.jpg") == "gs://b/set"
    assert urls.parent("/data/a.jpg") == "/data"
    assert urls.basename("https://h/set/a.jpg?X-Amz-Signature=s") == "a.jpg"
    assert urls.basename("s3://b/odd #1?.png") == "odd #1?.png"  # ordinary characters there
    assert urls.basename("/data/set/") == ""


def test_the_hint_of_a_relative_path_says_where_it_was_looked_for(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert urls.relative_path_hint("a.jpg", "/d/a.jpg", "/d") == \
        " (looked for /d/a.jpg: the relative path a.jpg was resolved against base_dir /d)"
    assert f"against the working folder {tmp_path}" in urls.relative_path_hint("a.jpg", "x")
    assert urls.relative_path_hint("/abs/a.jpg", "/abs/a.jpg") == ""
    assert urls.relative_path_hint("gs://b/a.jpg", "gs://b/a.jpg") == ""


def test_storage_options_are_one_dict_for_every_url_or_one_per_protocol():
    one = {"anon": True}
    assert urls.options_for("s3", one) == one and urls.options_for("gs", one) == one
    keyed = {"s3": {"anon": True}, "gs": {"token": "anon"}}
    assert urls.options_for("s3a", keyed) == {"anon": True}  # s3a:// is s3's
    assert urls.options_for("gcs", keyed) == {"token": "anon"}
    assert urls.options_for("memory", keyed) == {}
    assert urls.options_for("s3", None) == {}


def test_http_filesystems_get_the_idle_timeout_and_not_our_options():
    fs = urls.filesystem("https", {"timeout": 5, "retries": 2, "headers": {"X-A": "1"}})
    assert fs.client_kwargs["timeout"].sock_read == 5
    assert fs.kwargs == {"headers": {"X-A": "1"}}


def test_paths_the_plan_takes_as_they_are_are_those_resolve_gives_back_unchanged():
    cases = ["/a/b.jpg", "/a//b", "/a/./b", "/a/../b", "/a/b/", "/a/.", "/a/..", "/a/.b",
             "/a/..b/c", "/a/b.", "a/b", "./a", "~/x", "gs://b/x", "file:///a/b", "/", "//x",
             "/..", "/.", None, float("nan")]
    flags = _plain_absolute(pd.Series(cases, dtype=object))
    assert flags.tolist() == [c in ("/a/b.jpg", "/a/.b", "/a/..b/c", "/a/b.") for c in cases]
    for case, flag in zip(cases, flags):
        if flag:
            assert urls.resolve(case) == case
