"""Images, tables and output folders behind URLs: gs:// and s3:// (real emulators on 127.0.0.1),
http:// (a loopback server), memory:// and file://. The same bytes as from the local disk, commits
that never show a partial object, a killed remote conversion that resumes, remote load/verify."""

import base64
import hashlib
import json
import os
import pickle
import re
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
import tensorflow as tf

import imagegen as ig
import tfrecorder_lite
from conftest import GCS_OPTIONS
from object_stores import Server
from processes import TESTS, kill_when
from tfrecorder_lite import (
    InvalidRowError, ManifestError, MissingDependencyError, SchemaError, UnsupportedURLError,
    VerifyError, cli, storage)
from tfrecorder_lite.read import shard_cache
from tfrecorder_lite.read.loader import reads_natively

OPTIONS = {"n_jobs": 2, "progress": False, "on_error": "skip", "num_shards": 2}
SHARD_OR_MANIFEST = ("tfrecord", "metadata.json", "labels.txt", "rejected.csv")


def remote_digest(fs, url):
    """{relative name: sha256} of every object below ``url`` (state folder included)."""
    top = fs._strip_protocol(url).rstrip("/")
    fs.invalidate_cache()
    return {path[len(top) + 1:]: hashlib.sha256(fs.cat_file(path)).hexdigest()
            for path in fs.find(top)}


def output_digest(digest):
    """The part of a folder digest a conversion promises: shards, manifest, labels, rejects."""
    return {k: v for k, v in digest.items() if k.endswith(SHARD_OR_MANIFEST)}


def shard_digest(digest):
    """The shards and labels.txt: what stays the same when only the image URLs differ
    (rejected.csv shows the URLs, and metadata.json's fingerprint covers them)."""
    return {k: v for k, v in digest.items() if k.endswith(("tfrecord", "labels.txt"))}


@pytest.fixture(scope="module")
def local_images(tmp_path_factory):
    """A mixed table (good images of four formats, five bad rows) on the local disk."""
    root = tmp_path_factory.mktemp("cloud-images")
    df, bad = ig.mixed_table(root / "images", n_good=24)
    return df, str(root / "images")


@pytest.fixture(scope="module")
def local_reference(local_images, tmp_path_factory):
    """The conversion of the local table: what every remote variant must reproduce."""
    df, _ = local_images
    out = tmp_path_factory.mktemp("reference") / "out"
    result = df.tfrecord.to_tfrecord(str(out), **OPTIONS)
    return result, ig.tree_digest(out)


def remote_table(df, local_root, url):
    """The same table with each local image path replaced by its URL below ``url``."""
    remote = df.copy()
    remote["image_uri"] = [p.replace(local_root, url, 1) for p in df["image_uri"]]
    return remote


def same_shards(metadata, reference_metadata):
    """Shard names, counts and checksums per split, as a comparable value."""
    def shards(m):
        return {split: [(s["name"], s["num_examples"], s["crc32c"]) for s in info["shards"]]
                for split, info in m["splits"].items()}
    assert shards(metadata) == shards(reference_metadata)
    return True


# ============================================================ same bytes wherever the images live

@pytest.mark.parametrize("store_name", ["gcs", "s3"])
def test_images_on_an_object_store_give_the_bytes_of_the_local_disk(
        store_name, request, local_images, local_reference, tmp_path):
    store = request.getfixturevalue(store_name)
    df, root = local_images
    reference, reference_digest = local_reference
    bucket = store.upload(root, store.new_bucket() + "/images")
    out = tmp_path / "out"

    result = remote_table(df, root, bucket).tfrecord.to_tfrecord(
        str(out), storage_options=store.options, **OPTIONS)

    assert shard_digest(ig.tree_digest(out)) == shard_digest(reference_digest)
    assert same_shards(result.metadata, reference.metadata)
    assert list(result.rejected.index) == list(reference.rejected.index)
    assert list(result.rejected.reason) == list(reference.rejected.reason)  # "file not found" too


@pytest.mark.parametrize("store_name", ["gcs", "s3"])
def test_output_on_an_object_store_gets_the_bytes_of_the_local_disk(
        store_name, request, local_images, local_reference):
    store = request.getfixturevalue(store_name)
    df, _ = local_images
    reference, reference_digest = local_reference
    out = store.new_bucket() + "/records"

    result = df.tfrecord.to_tfrecord(out, storage_options=store.options, **OPTIONS)

    assert result.output_dir == out
    assert output_digest(remote_digest(store.fs, out)) == output_digest(reference_digest)
    assert ".tfrecorder_lite" not in {k.split("/")[0] for k in remote_digest(store.fs, out)}
    assert same_shards(result.metadata, reference.metadata)
    again = df.tfrecord.to_tfrecord(out, storage_options=store.options, **OPTIONS)  # a no-op
    assert again.metadata == result.metadata
    assert list(again.rejected.reason) == list(result.rejected.reason)


def test_http_memory_and_file_urls_give_the_bytes_of_the_local_disk(
        local_images, local_reference, tmp_path):
    df, root = local_images
    reference, reference_digest = local_reference
    http = Server("http", root=root)
    try:
        memory = "memory://cloud-test/images"
        fs = storage.filesystem("memory")
        for name in os.listdir(root):
            fs.pipe_file(f"{memory}/{name}", open(os.path.join(root, name), "rb").read())
        mixed = df.copy()
        # every row through another kind of URL: http, memory, file://, and plain paths
        kinds = [f"{http.url}", memory, f"file://{root}", root]
        mixed["image_uri"] = [p.replace(root, kinds[i % 4], 1)
                              for i, p in enumerate(df["image_uri"])]
        result = mixed.tfrecord.to_tfrecord(str(tmp_path / "out"), **OPTIONS)
    finally:
        http.stop()
    assert shard_digest(ig.tree_digest(tmp_path / "out")) == shard_digest(reference_digest)
    assert same_shards(result.metadata, reference.metadata)


# ============================================================ sources: CSVs and folders behind URLs

def test_a_remote_csv_resolves_relative_paths_against_its_own_folder(s3, local_images,
                                                                    local_reference):
    df, root = local_images
    reference, _ = local_reference
    bucket = s3.new_bucket()
    s3.upload(root, f"{bucket}/data/images")
    table = df.assign(image_uri=[os.path.relpath(p, os.path.dirname(root))
                                 for p in df["image_uri"]])  # images/good_000.jpg, ...
    s3.fs.pipe_file(f"{bucket}/data/table.csv", table.to_csv(index=False).encode())

    result = tfrecorder_lite.convert(f"{bucket}/data/table.csv", f"{bucket}/out", **OPTIONS)

    assert same_shards(result.metadata, reference.metadata)
    missing = result.rejected[result.rejected.reason.str.startswith("file not found")]
    assert len(missing) == 1
    assert f"was resolved against base_dir {bucket}/data)" in missing.reason.iloc[0]


def test_a_remote_image_folder_is_read_as_split_label_file(gcs, tmp_path):
    local = tmp_path / "folder"
    for split, label, i in [("train", "cat", 0), ("train", "dog", 1), ("test", "cat", 2)]:
        ig.save(local / split / label / f"{i}.png", ig.noise_rgb(5, 6, seed=i), "PNG")
    (local / "README.txt").write_text("not an image")
    bucket = gcs.upload(local, gcs.new_bucket() + "/folder")
    reference = tfrecorder_lite.convert(str(local), str(tmp_path / "ref"), **OPTIONS)

    result = tfrecorder_lite.convert(bucket, str(tmp_path / "out"), storage_options=GCS_OPTIONS,
                                     **OPTIONS)

    assert result.counts == reference.counts == {"TRAIN": 2, "TEST": 1}
    assert result.labels == ["cat", "dog"]
    assert same_shards(result.metadata, reference.metadata)


# ============================================================ URLs are never local paths

def test_a_url_output_folder_is_never_written_to_the_local_disk(gcs, image_table, tmp_path,
                                                                monkeypatch):
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    out = gcs.new_bucket() + "/out"
    result = image_table.tfrecord.to_tfrecord(out, storage_options=GCS_OPTIONS, **OPTIONS)
    assert os.listdir(tmp_path / "work") == []  # no ./gs:/... folder
    assert "metadata.json" in remote_digest(gcs.fs, out)
    loaded = tfrecorder_lite.read_metadata(out, storage_options=GCS_OPTIONS)
    assert loaded == result.metadata


@pytest.mark.parametrize("url", ["foo://bucket/out", "nosuchscheme://x"])
def test_an_unknown_scheme_is_refused_before_anything_is_written(image_table, tmp_path,
                                                                 monkeypatch, url):
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    with pytest.raises(UnsupportedURLError, match="unsupported URL scheme"):
        image_table.tfrecord.to_tfrecord(url, **OPTIONS)
    with pytest.raises(UnsupportedURLError):
        tfrecorder_lite.load(url, "TRAIN")
    assert os.listdir(tmp_path / "work") == []


def test_an_http_output_folder_is_refused_as_read_only(image_table):
    with pytest.raises(SchemaError, match="read-only"):
        image_table.tfrecord.to_tfrecord("http://127.0.0.1:9/out", **OPTIONS)


def test_an_image_url_with_an_unknown_scheme_is_a_rejected_row(image_table, tmp_path):
    table = image_table.copy()
    table.loc[3, "image_uri"] = "foo://bucket/x.jpg"
    result = table.tfrecord.to_tfrecord(str(tmp_path / "out"), **OPTIONS)
    assert result.rejected.reason.tolist() == ["unsupported URL scheme 'foo://' (not a protocol "
                                               "fsspec knows)"]
    with pytest.raises(InvalidRowError, match="foo://bucket/x.jpg"):
        table.tfrecord.to_tfrecord(str(tmp_path / "raise"), **{**OPTIONS, "on_error": "raise"})


def test_a_missing_filesystem_package_names_the_extra_to_install(tmp_path):
    script = textwrap.dedent("""
        import sys
        sys.modules["gcsfs"] = None  # as if it were not installed
        from tfrecorder_lite import cli
        sys.exit(cli.main(["convert", sys.argv[1], "gs://bucket/out", "--no-progress"]))
    """)
    (tmp_path / "table.csv").write_text("split,image_uri,label\nTRAIN,a.jpg,cat\n")
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "table.csv")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "tfrecorder-lite: error: gs:// URLs need a package that is not installed: "
        "pip install 'tfrecorder_lite[gcs]'"]
    assert issubclass(MissingDependencyError, ImportError)


# ============================================================ storage options for two protocols

def test_storage_options_keyed_by_protocol_reach_each_filesystem(gcs, s3, local_images,
                                                                 local_reference, monkeypatch):
    df, root = local_images
    reference, _ = local_reference
    images = s3.upload(root, s3.new_bucket() + "/images")
    out = gcs.new_bucket() + "/out"
    # a dead endpoint in the environment: the S3 images are found only through the options
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    options = {"s3": {"endpoint_url": s3.server.url}, "gs": GCS_OPTIONS}

    result = remote_table(df, root, images).tfrecord.to_tfrecord(out, storage_options=options,
                                                                 **OPTIONS)

    assert same_shards(result.metadata, reference.metadata)
    assert storage.options_for("gcs", options) == GCS_OPTIONS  # gcs:// is gs://
    assert storage.options_for("s3", {"anon": True}) == {"anon": True}  # one dict: every URL


# ============================================================ commits on object stores

@pytest.mark.parametrize("store_name", ["gcs", "s3"])
def test_a_failed_upload_leaves_no_object_and_no_manifest(store_name, request, local_images,
                                                         local_reference, monkeypatch):
    """A shard write that fails half-way (here the third write) must leave nothing under its
    final name: no partial object, no metadata.json. The re-run finishes byte-identical."""
    store = request.getfixturevalue(store_name)
    df, _ = local_images
    _, reference_digest = local_reference
    out = store.new_bucket() + "/out"
    real_write = storage.PendingFile.write
    writes = []

    def failing_write(pending, data):
        if pending.name.endswith(".tfrecord"):
            writes.append(len(data))
            if len(writes) == 3:
                raise OSError(5, "Input/output error")
        return real_write(pending, data)

    with monkeypatch.context() as patch:
        patch.setattr(storage.PendingFile, "write", failing_write)
        with pytest.raises(OSError, match="Input/output error"):
            df.tfrecord.to_tfrecord(out, storage_options=store.options,
                                    **{**OPTIONS, "n_jobs": 1})
    left = remote_digest(store.fs, out)
    assert "metadata.json" not in left
    committed = {k for k in left if k.endswith(".tfrecord")}
    assert all(left[k] == reference_digest[k] for k in committed)  # whole, or absent
    assert len(committed) < 4

    df.tfrecord.to_tfrecord(out, storage_options=store.options, **OPTIONS)
    assert output_digest(remote_digest(store.fs, out)) == output_digest(reference_digest)


def test_pending_remote_files_appear_only_when_committed(s3):
    store = storage.Store(s3.new_bucket() + "/pending")
    pending = store.open_for_commit("a.bin")
    pending.write(b"x" * 1000)
    assert store.list() == []
    pending.commit()
    assert store.list() == ["a.bin"] and store.size("a.bin") == 1000
    discarded = store.open_for_commit("b.bin")
    discarded.write(b"y")
    discarded.discard()
    assert store.list() == ["a.bin"]


KILLED_CONVERT = textwrap.dedent("""
    # A real conversion that stops for good before uploading its second shard, once it has
    # written the file argv[3] (then it is killed).
    import sys
    sys.path.insert(0, sys.argv[4])
    from processes import stop_before_shard_commit
    import tfrecorder_lite
    stop_before_shard_commit(sys.argv[3], after=1)
    tfrecorder_lite.convert(sys.argv[1], sys.argv[2], num_shards=8, n_jobs=1, on_error="skip",
                            progress=False)
""")


def test_a_killed_remote_conversion_resumes_byte_identical(s3, tmp_path):
    """SIGKILL a real conversion into s3:// once a shard is committed and the next one is
    spooled but not uploaded, before metadata.json: the shard object it left is whole
    (identical to the finished run's), and re-running the same command finishes with the
    bytes of an uninterrupted run."""
    images = tmp_path / "images"
    lines = ["split,image_uri,label"]
    for i in range(80):
        ig.save(images / f"{i:03d}.jpg", ig.pattern(64, 64, seed=i), "JPEG", quality=85)
        lines.append(f"{'test' if i % 4 == 0 else 'train'},{i:03d}.jpg,c{i % 3}")
    (images / "table.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "convert.py").write_text(KILLED_CONVERT)
    csv = str(images / "table.csv")
    reference = tfrecorder_lite.convert(csv, str(tmp_path / "reference"), num_shards=8,
                                        on_error="skip", progress=False)
    reference_digest = ig.tree_digest(tmp_path / "reference")

    out = s3.new_bucket() + "/out"
    gate = tmp_path / "gate"
    killed = kill_when([sys.executable, str(tmp_path / "convert.py"), csv, out, str(gate), TESTS],
                       gate.exists)
    assert killed, "the conversion ended before it reached the gate"
    s3.fs.invalidate_cache()
    left = remote_digest(s3.fs, out)
    assert "metadata.json" not in left
    shards = {k: v for k, v in left.items() if k.endswith(".tfrecord")}
    assert len(shards) == 1 and all(v == reference_digest[k] for k, v in shards.items())
    assert {k for k in left if k.endswith(".tfrecord.json")} == \
        {f".tfrecorder_lite/{name}.json" for name in shards}  # its receipt, and no other

    result = tfrecorder_lite.convert(csv, out, num_shards=8, on_error="skip", progress=False)
    assert result.metadata["splits"] == reference.metadata["splits"]
    assert output_digest(remote_digest(s3.fs, out)) == output_digest(reference_digest)
    assert tfrecorder_lite.verify(out).startswith("OK")


# ============================================================ loading and verifying remote output

def elements(dataset):
    return [(image.numpy().tobytes(), int(label)) for image, label in dataset]


@pytest.mark.parametrize("store_name", ["gcs", "s3"])
def test_load_and_verify_remote_output_like_local_output(store_name, request, local_images,
                                                         local_reference, tmp_path):
    store = request.getfixturevalue(store_name)
    df, _ = local_images
    reference, _ = local_reference
    out = store.new_bucket() + "/out"
    df.tfrecord.to_tfrecord(out, storage_options=store.options, **OPTIONS)
    cache = tmp_path / "cache"

    for split in reference.counts:
        remote = tfrecorder_lite.load(out, split, storage_options=store.options, cache_dir=cache)
        local = tfrecorder_lite.load(reference.output_dir, split)
        assert elements(remote) == elements(local)
    copies = {shard_cache.copy_name(storage.Store(out), s)
              for info in tfrecorder_lite.read_metadata(reference.output_dir).manifest
              .splits.values() for s in info.shards}
    assert set(os.listdir(cache)) - {".lock"} == copies  # every shard kept whole, and checked
    assert tfrecorder_lite.verify(out, storage_options=store.options).startswith("OK")


def test_cached_shards_are_reused_and_a_rewritten_output_is_not_served_stale(s3, local_images,
                                                                             tmp_path):
    df, _ = local_images
    out = s3.new_bucket() + "/out"
    first = df.tfrecord.to_tfrecord(out, **OPTIONS)
    cache = tmp_path / "cache"
    before = elements(tfrecorder_lite.load(out, "TRAIN", cache_dir=cache))
    shard = first.metadata["splits"]["TRAIN"]["shards"][0]["name"]
    s3.fs.rm(f"{out}/{shard}")  # gone from the store: only the cached copy can serve it
    assert elements(tfrecorder_lite.load(out, "TRAIN", cache_dir=cache)) == before

    second = df.tfrecord.to_tfrecord(out, **{**OPTIONS, "seed": 1, "overwrite": True})
    after = elements(tfrecorder_lite.load(out, "TRAIN", cache_dir=cache))
    assert sorted(after) == sorted(before) and after != before  # the new order, not the cached
    assert second.metadata["splits"]["TRAIN"]["shards"][0]["crc32c"] != \
        first.metadata["splits"]["TRAIN"]["shards"][0]["crc32c"]


def test_verify_names_a_damaged_remote_shard(gcs, image_table):
    out = gcs.new_bucket() + "/out"
    result = image_table.tfrecord.to_tfrecord(out, storage_options=GCS_OPTIONS, **OPTIONS)
    shard = result.metadata["splits"]["TRAIN"]["shards"][0]["name"]
    data = bytearray(gcs.fs.cat_file(f"{out}/{shard}"))
    data[len(data) // 2] ^= 0xFF
    gcs.fs.pipe_file(f"{out}/{shard}", bytes(data))
    with pytest.raises(VerifyError, match=shard):
        tfrecorder_lite.verify(out, storage_options=GCS_OPTIONS)
    # and load(), which streams the shard, will not train on it: the damaged record is named
    with pytest.raises(tf.errors.OpError, match=re.escape(f"{out}/{shard}: record ") +
                       ".*data CRC mismatch"):
        list(tfrecorder_lite.load(out, "TRAIN", storage_options=GCS_OPTIONS))


def test_an_unfinished_remote_folder_is_a_manifest_error(s3):
    with pytest.raises(ManifestError, match="not a finished tfrecorder_lite output"):
        tfrecorder_lite.load(s3.new_bucket() + "/nothing", "TRAIN")


def test_tensorflow_reads_real_gcs_itself_and_everything_else_through_the_cache(monkeypatch):
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    assert reads_natively(storage.Store("gs://bucket/out"))
    assert not reads_natively(storage.Store("gs://bucket/out"), cache_dir="/tmp/c")
    assert not reads_natively(storage.Store("gs://bucket/out", {"token": "key.json"}))
    assert not reads_natively(storage.Store("s3://bucket/out"))
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")
    assert not reads_natively(storage.Store("gs://bucket/out"))


# ============================================================ the command line

def test_cli_converts_a_gcs_csv_into_s3_and_reads_it_back(gcs, s3, local_images, capsys):
    df, root = local_images
    images = gcs.upload(root, gcs.new_bucket() + "/images")
    table = remote_table(df, root, images)
    gcs.fs.pipe_file(f"{images}/table.csv", table.to_csv(index=False).encode())
    out = s3.new_bucket() + "/records"
    options = json.dumps({"gs": GCS_OPTIONS, "s3": {}})

    assert cli.main(["convert", f"{images}/table.csv", out, "--on-error", "skip",
                     "--no-progress", "--storage-options", options]) == 0
    assert f"to {out}" in capsys.readouterr().out
    assert cli.main(["info", out]) == 0
    assert "TRAIN:" in capsys.readouterr().out
    assert cli.main(["verify", out]) == 0
    assert capsys.readouterr().out.startswith("OK")


def test_cli_refuses_bad_storage_options_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["info", "gs://b/x", "--storage-options", "not json"])
    assert exit_info.value.code == 2
    assert "expected a JSON object" in capsys.readouterr().err


# ============================================================ validate and the picklable Store

def test_validate_reports_the_problems_of_a_remote_table_like_a_local_one(s3, local_images):
    df, root = local_images
    bucket = s3.upload(root, s3.new_bucket() + "/images")
    # the table's good images are one gradient pattern: near-duplicates of each other by
    # design, named with their paths (which differ here); tests/test_near_duplicates.py
    local = df.tfrecord.validate(check="decode", leakage="ignore")
    remote = remote_table(df, root, bucket).tfrecord.validate(check="decode", leakage="ignore")
    assert len(local) == 5  # the five bad rows of the mixed table
    assert remote.problem.tolist() == local.problem.tolist()
    assert remote.row.tolist() == local.row.tolist()


def test_a_store_pickles_without_its_filesystem_and_works_in_another_process(s3):
    url = s3.new_bucket() + "/pickled"
    store = storage.Store(url)
    store.write_atomic("a.txt", "written here")
    assert store.fs is not None  # the filesystem is built in this process ...
    script = textwrap.dedent("""
        import pickle, sys
        store = pickle.loads(sys.stdin.buffer.read())
        assert "fs" not in vars(store)  # ... and rebuilt, not unpickled, over there
        store.write_atomic("b.txt", store.read_text("a.txt") + ", read there")
    """)
    proc = subprocess.run([sys.executable, "-c", script], input=pickle.dumps(store),
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert store.list() == ["a.txt", "b.txt"]
    assert store.read_text("b.txt") == "written here, read there"


def test_the_filename_feature_keeps_object_names_whole(s3, tmp_path):
    """``?`` and ``#`` are ordinary characters of object names, not a query or a fragment."""
    name = "odd name #1?.png"
    ig.save(tmp_path / name, ig.noise_rgb(4, 5), "PNG")
    bucket = s3.new_bucket()
    s3.fs.put_file(str(tmp_path / name), f"{bucket}/{name}")
    table = pd.DataFrame({"split": ["TRAIN"], "image_uri": [f"{bucket}/{name}"],
                          "label": ["a"]})
    result = table.tfrecord.to_tfrecord(str(tmp_path / "out"), **OPTIONS)
    assert result.counts == {"TRAIN": 1}
    (record,) = ig.read_examples(result.output_dir)
    assert record["image/filename"] == name.encode()


@pytest.mark.parametrize("store_name", ["gcs", "s3"])
def test_listing_a_folder_answers_like_asking_for_each_file(store_name, request, local_images,
                                                            monkeypatch):
    """A folder holding many of a call's files is listed instead of asked for each file: same
    sizes and identities, a missing file is FileNotFoundError, a folder IsADirectoryError."""
    store = request.getfixturevalue(store_name)
    _, root = local_images
    bucket = store.upload(root, store.new_bucket() + "/images")
    store.fs.pipe_file(f"{bucket}/sub/x.bin", b"x")
    urls = [f"{bucket}/{name}" for name in sorted(os.listdir(root))]
    urls += [f"{bucket}/missing.jpg", f"{bucket}/sub"]
    asked = storage.stat_many(urls, store.options)
    monkeypatch.setattr(storage.remote, "_LIST_FOLDERS_FROM", 2)
    listed = storage.stat_many(urls, store.options)

    def kinds(results):
        return [r if isinstance(r, tuple) else type(r) for r in results]

    assert kinds(listed) == kinds(asked)
    assert kinds(listed)[-2:] == [FileNotFoundError, IsADirectoryError]
    sizes = [os.path.getsize(os.path.join(root, name)) for name in sorted(os.listdir(root))]
    assert [r[0] for r in listed[:-2]] == sizes
    assert listed[:-2] == asked[:-2]  # the identities (generation, ETag) too


def test_the_manifest_crc32c_is_the_one_cloud_storage_keeps(gcs, image_table):
    """GCS keeps a CRC32C of every object (base64, big-endian): a remote folder can be checked
    against metadata.json without downloading it."""
    out = gcs.new_bucket() + "/out"
    result = image_table.tfrecord.to_tfrecord(out, storage_options=GCS_OPTIONS, **OPTIONS)
    for info in result.metadata["splits"].values():
        for shard in info["shards"]:
            kept = gcs.fs.info(f"{out}/{shard['name']}")["crc32c"]
            assert base64.b64decode(kept).hex() == shard["crc32c"]
