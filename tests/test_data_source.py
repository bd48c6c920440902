"""data_source(): random access by index over a split's records, in manifest order, through
the .tfindex files: the same records and values as load(as_supervised=False), locally and on
the GCS and S3 emulators; bad indexes, damaged index files and compressed outputs are errors
that name the file; the source pickles and is safe in threads."""

import json
import os
import pickle
import shutil
import subprocess
import sys
import threading

import numpy as np
import pandas as pd
import pytest

import tfrecorder_lite
from tfrecorder_lite import SchemaError, VerifyError
from tfrecorder_lite.read.data_source import DataSource
from tfrecorder_lite.storage import Store
from conftest import photo, save


def _table(root, n=30, kind="classification"):
    """A table of ``n`` JPEG and PNG images of several sizes, in TRAIN and TEST."""
    rows = []
    for i in range(n):
        fmt, ext = ("JPEG", "jpg") if i % 3 else ("PNG", "png")
        path = save(photo(16 + i % 5, 20 + i % 7, seed=i), root / "images" / f"{i}.{ext}", fmt)
        split = "TRAIN" if i < n - 6 else "TEST"
        if kind == "multi":
            rows.append((split, path, ["cat", "dog", "owl"][: 1 + i % 3]))
        elif kind == "detection":
            rows += [(split, path, "cat", 0.1, 0.2, 0.6, 0.7)] + \
                [(split, path, "dog", 0.3, 0.1, 0.9, 0.8)] * (i % 2)
        else:
            rows.append((split, path, ["cat", "dog", "owl"][i % 3]))
    columns = ["split", "image_uri", "label"] + \
        (["xmin", "ymin", "xmax", "ymax"] if kind == "detection" else [])
    return pd.DataFrame(rows, columns=columns)


@pytest.fixture(scope="session")
def outputs(tmp_path_factory):
    """One output per kind, TRAIN in three shards: kind -> output folder."""
    root = tmp_path_factory.mktemp("data-source")
    return {kind: _table(root / kind, kind=kind).tfrecord.to_tfrecord(
        root / kind / "out", num_shards={"TRAIN": 3, "TEST": 1}, progress=False).output_dir
        for kind in ("classification", "multi", "detection")}


def _same(a, b):
    if isinstance(a, bytes) or isinstance(b, bytes):
        return a == b
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and (a == b).all()


def _key(record):
    return record["image/filename"], record["image/encoded"]


@pytest.mark.parametrize("kind", ["classification", "multi", "detection"])
def test_every_record_agrees_with_load(outputs, kind):
    out = outputs[kind]
    src = tfrecorder_lite.data_source(out, "train", decode_image=True)
    loaded = [{k: v.numpy() for k, v in r.items()}
              for r in tfrecorder_lite.load(out, "TRAIN", as_supervised=False)]
    assert len(src) == len(loaded) == json.load(open(os.path.join(out, "metadata.json")))[
        "splits"]["TRAIN"]["num_examples"]
    by_key = {_key(r): r for r in loaded}
    for i in range(len(src)):
        record = src[i]
        expected = by_key.pop(_key(record))
        for key, value in record.items():  # every record feature, and the decoded image
            assert _same(value, expected[key]), (i, key, value, expected[key])
        assert set(expected) - set(record) <= {"boxes", "labels"}  # load's decoded boxes
    assert not by_key  # every record once


def test_records_come_in_manifest_order(outputs):
    out = outputs["classification"]
    import tensorflow as tf

    shards = json.load(open(os.path.join(out, "metadata.json")))["splits"]["TRAIN"]["shards"]
    expected = [r.numpy() for s in shards
                for r in tf.data.TFRecordDataset(os.path.join(out, s["name"]))]
    src = tfrecorder_lite.data_source(out, "TRAIN")
    assert src.read_serialized(range(len(src))) == expected
    assert src.read_serialized([5, 0, 5]) == [expected[5], expected[0], expected[5]]
    batch = src.__getitems__([3, 1])
    assert [r["image/encoded"] for r in batch] == [src[3]["image/encoded"],
                                                   src[1]["image/encoded"]]
    assert src._getitems([2])[0]["image/filename"] == src[2]["image/filename"]


def test_bad_indexes_are_index_and_type_errors(outputs):
    src = tfrecorder_lite.data_source(outputs["classification"], "TRAIN")
    n = len(src)
    assert src[np.int64(n - 1)]["image/encoded"] == src[n - 1]["image/encoded"]
    for index in (-1, n, 10 ** 12):
        with pytest.raises(IndexError, match=f"record {index} of split TRAIN: .* {n} records"):
            src[index]
    for index in (1.0, "1", None, True):
        with pytest.raises(TypeError, match="a record index is an int"):
            src[index]
    with pytest.raises(IndexError):
        src.__getitems__([0, n])


def test_pickles_with_a_stable_repr_free_of_secrets(outputs):
    src = tfrecorder_lite.data_source(outputs["classification"], "TRAIN", decode_image=True)
    src[0]  # the index and a cache are loaded; the copy takes the index along
    copy = pickle.loads(pickle.dumps(src))
    assert repr(copy) == repr(src) == repr(tfrecorder_lite.data_source(
        outputs["classification"], "TRAIN", decode_image=True))
    assert all(_same(copy[7][k], v) for k, v in src[7].items())
    remote = DataSource(Store("https://user:hunter2@example.com/records?token=s3cret"),
                        "TRAIN", (), {})
    assert "hunter2" not in repr(remote) and "s3cret" not in repr(remote)
    assert "example.com/records" in repr(remote)


def test_threads_read_the_same_records(outputs):
    src = tfrecorder_lite.data_source(outputs["classification"], "TRAIN")
    expected = src.read_serialized(range(len(src)))
    found, errors = {}, []

    def read(t):
        try:
            order = np.random.default_rng(t).permutation(len(src))
            found[t] = dict(zip(order, src.read_serialized(order)))
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=read, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all([mine[i] for i in range(len(src))] == expected for mine in found.values())


def test_a_compressed_output_is_refused_saying_what_to_do(outputs_of_every_kind):
    out, _ = outputs_of_every_kind["gzip"]
    with pytest.raises(SchemaError, match="compression='GZIP'.*cannot be read by offset.*"
                                          "without compression"):
        tfrecorder_lite.data_source(out, "TRAIN")


@pytest.fixture
def copy(outputs, tmp_path):
    """A copy of the classification output, and the name of its first TRAIN shard's index."""
    out = shutil.copytree(outputs["classification"], tmp_path / "out")
    shard = json.load(open(out / "metadata.json"))["splits"]["TRAIN"]["shards"][0]
    return out, shard["index"]["name"]


def _rewrite_index(out, name, change):
    lines = open(out / name).read().splitlines()
    open(out / name, "w").write("".join(line + "\n" for line in change(lines)))


def _shift(lines, i, by):
    offset, length = map(int, lines[i].split())
    lines[i] = f"{offset + by} {length}"
    return lines


def _longer(lines, by):
    offset, length = map(int, lines[-1].split())
    return lines[:-1] + [f"{offset} {length + by}"]


@pytest.mark.parametrize("change, message", [
    (lambda lines: lines[:-1], "lists 7 records, metadata.json says .* holds 8"),
    (lambda lines: _shift(lines, 3, 5), "record 3 at offset .* does not follow the record "
                                        "before it"),
    (lambda lines: _longer(lines, 40), "its records end at byte .*, and .* holds .* bytes"),
    (lambda lines: ["x y"] + lines[1:], "not an index file"),
])
def test_a_damaged_index_is_an_error_naming_it(copy, change, message):
    out, name = copy
    assert len(open(out / name).read().splitlines()) == 8  # the message's counts
    _rewrite_index(out, name, change)
    src = tfrecorder_lite.data_source(out, "TRAIN")
    with pytest.raises(VerifyError, match=f"{name}: {message}"):
        src[0]


def test_an_index_that_differs_from_its_checksum_is_an_error(copy):
    out, name = copy
    text = open(out / name).read()
    open(out / name, "w").write(text.replace(" ", "  ", 1))  # same numbers, other bytes
    with pytest.raises(VerifyError, match=f"{name}: its crc32c differs"):
        tfrecorder_lite.data_source(out, "TRAIN")[0]


def test_a_missing_index_is_an_error_naming_it(copy):
    out, name = copy
    os.remove(out / name)
    with pytest.raises(VerifyError, match=f"{name}: missing .*metadata.json lists it"):
        tfrecorder_lite.data_source(out, "TRAIN")[3]


def test_a_damaged_record_is_an_error_never_a_wrong_record(copy):
    out, name = copy
    shard = name.replace(".tfindex", ".tfrecord")
    offset, length = map(int, open(out / name).read().splitlines()[2].split())
    data = bytearray(open(out / shard, "rb").read())
    data[offset + length - 10] ^= 0xFF  # a byte of record 2's payload
    open(out / shard, "wb").write(bytes(data))
    src = tfrecorder_lite.data_source(out, "TRAIN")
    assert src[1]["image/encoded"]
    with pytest.raises(VerifyError, match=f"{shard}: record 2 .*data CRC mismatch"):
        src[2]


def test_outputs_without_index_files_get_them_built(copy, outputs):
    """Outputs written before index files existed list none in metadata.json."""
    out, name = copy
    meta = json.load(open(out / "metadata.json"))
    for split in meta["splits"].values():
        for shard in split["shards"]:
            del shard["index"]
            os.remove(out / shard["name"].replace(".tfrecord", ".tfindex"))
    json.dump(meta, open(out / "metadata.json", "w"))
    src = tfrecorder_lite.data_source(out, "TRAIN")
    original = tfrecorder_lite.data_source(outputs["classification"], "TRAIN")
    assert src.read_serialized(range(len(src))) == original.read_serialized(range(len(src)))


@pytest.mark.parametrize("store_name", ["gcs", "s3"])
def test_remote_outputs_agree_read_by_ranges(outputs, store_name, request):
    store = request.getfixturevalue(store_name)
    out = outputs["detection"]
    url = store.upload(out, store.new_bucket() + "/records")
    local = tfrecorder_lite.data_source(out, "TRAIN", decode_image=True)
    # small blocks: records span blocks, and a batch needs several runs of them
    src = tfrecorder_lite.data_source(url, "TRAIN", decode_image=True,
                                      storage_options=store.options, block_size=4096,
                                      cache_bytes=3 * 4096)
    order = np.random.default_rng(0).permutation(len(src))
    remote = src.__getitems__(order)
    for i, record in zip(order, remote):
        assert all(_same(v, local[i][k]) for k, v in record.items())
    assert [r["image/encoded"] for r in pickle.loads(pickle.dumps(src)).read(order[:5])] == \
        [local[i]["image/encoded"] for i in order[:5]]
    assert src._blocks._cached <= 3 * 4096
    # threads sharing one source: a block being fetched by one is awaited by the others
    shared = tfrecorder_lite.data_source(url, "TRAIN", storage_options=store.options,
                                         block_size=4096)
    expected = local.read_serialized(order)
    found = [None] * 4
    threads = [threading.Thread(target=lambda t=t: found.__setitem__(
        t, shared.read_serialized(order))) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == [expected] * 4
    for kind in ("classification", "multi"):
        url = store.upload(outputs[kind], store.new_bucket() + "/records")
        src = tfrecorder_lite.data_source(url, "TRAIN", storage_options=store.options)
        local = tfrecorder_lite.data_source(outputs[kind], "TRAIN")
        assert src.read_serialized(range(len(src))) == local.read_serialized(range(len(src)))


@pytest.mark.slow  # starts Grain's and PyTorch's worker processes
@pytest.mark.parametrize("loader", ["grain", "torch"])
def test_grain_and_torch_read_every_record_once_per_epoch_with_2_workers(outputs, loader):
    out = outputs["classification"]
    script = os.path.join(os.path.dirname(__file__), "training_readers.py")
    done = subprocess.run([sys.executable, script, loader, str(out), "2"], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    epochs = json.loads(done.stdout.strip().splitlines()[-1])
    src = tfrecorder_lite.data_source(out, "TRAIN")
    expected = sorted(src[i]["image/filename"].decode() for i in range(len(src)))
    assert len(epochs) == 2
    for names in epochs:
        assert sorted(names) == expected  # every record exactly once
    assert epochs[0] != epochs[1] and epochs[0] != expected  # shuffled, anew each epoch


# ------------------------------------------------------------------ image_size: as load()

@pytest.fixture(scope="module")
def sized_output(tmp_path_factory):
    """JPEGs large enough for 1/2, 1/4 and 1/8 scale decodes at 24x32, JPEGs and PNGs smaller
    than that (enlarged), a grayscale JPEG and a progressive one."""
    root = tmp_path_factory.mktemp("sized")
    sizes = [(300, 260), (130, 150), (60, 70), (40, 90), (30, 40), (20, 20), (100, 33)]
    rows = []
    for i, (height, width) in enumerate(sizes):
        rows.append(("TRAIN", save(photo(height, width, seed=i), root / f"{i}.jpg", quality=90),
                     "a"))
        rows.append(("TRAIN", save(photo(height, width, seed=10 + i), root / f"{i}.png", "PNG"),
                     "b"))
    rows.append(("TRAIN", save(photo(200, 180, seed=30, mode="L"), root / "gray.jpg"), "a"))
    rows.append(("TRAIN", save(photo(170, 210, seed=31), root / "progressive.jpg",
                               progressive=True), "b"))
    table = pd.DataFrame(rows, columns=["split", "image_uri", "label"])
    return table.tfrecord.to_tfrecord(root / "out", num_shards=2, progress=False).output_dir


@pytest.mark.parametrize("size, channels", [((24, 32), 3), ((24, 32), 1), (50, 3),
                                           ((224, 224), 3), ((224, 224), 1)])
def test_image_size_gives_load_pixels(sized_output, size, channels):
    # load() decodes a JPEG at 1/2, 1/4 or 1/8 scale (libjpeg) and resizes with
    # tf.image.resize in float32; here Pillow's libjpeg decodes at the same scale and the
    # resize repeats TensorFlow's arithmetic (the same float32 taps and weights, the four
    # pixels summed in the same order), so every pixel is load()'s. Anything else (another
    # scale, antialiasing, truncating instead of rounding, the sums in another order or in
    # double precision) moves some pixels, most of them, or some by many levels.
    src = tfrecorder_lite.data_source(sized_output, "TRAIN", decode_image=True,
                                      image_size=size, channels=channels)
    loaded = {r["image/filename"].numpy(): r["image"].numpy() for r in tfrecorder_lite.load(
        sized_output, "TRAIN", image_size=size, channels=channels, as_supervised=False)}
    height, width = (size, size) if isinstance(size, int) else size
    for i in range(len(src)):
        record = src[i]
        image, expected = record["image"], loaded.pop(record["image/filename"])
        assert image.dtype == np.uint8 and image.shape == (height, width, channels)
        np.testing.assert_array_equal(image, expected, err_msg=str(record["image/filename"]))
    assert not loaded


def test_resize_is_tf_image_resize_exactly():
    # images/resize.py against tf.image.resize itself, rounded as load() rounds: shrunk and
    # enlarged, by whole and odd factors, one and three channels, down to one pixel
    import tensorflow as tf
    from tfrecorder_lite.images.resize import resize_bilinear

    cases = [((300, 260), (224, 224)), ((640, 427), (224, 224)), ((37, 91), (224, 224)),
             ((120, 80), (60, 40)), ((1, 1), (5, 3)), ((9, 200), (1, 7)), ((448, 448), (224, 224))]
    for (height, width), size in cases:
        for channels in (1, 3):
            pixels = np.asarray(photo(height, width, seed=height + channels).convert(
                "RGB" if channels == 3 else "L")).reshape(height, width, channels)
            expected = tf.cast(tf.image.resize(pixels, size) + 0.5, tf.uint8).numpy()
            np.testing.assert_array_equal(resize_bilinear(pixels, size), expected,
                                          err_msg=f"{height}x{width}x{channels} -> {size}")


def test_resize_image_gathers_with_pillow_and_gives_tf_image_resize():
    # resize_image gathers the pixels on either side of each sample point with Pillow's
    # nearest-neighbour scaling, checked against TensorFlow's columns on a probe image: its
    # pixels are tf.image.resize's, also where sample points fall on whole columns (352 and
    # 288 to 224: Pillow's origin nudged), beyond the edge columns (enlarged), and for one
    # channel; where no origin agrees it declines, and decode() still gives them
    import io
    import tensorflow as tf
    from tfrecorder_lite.images import resize

    assert resize._pillow_columns(352, 224)[0] != -0.5  # the nudged case is among these
    cases = [((352, 288), (224, 224)), ((186, 248), (224, 224)), ((37, 91), (224, 224)),
             ((300, 260), (224, 224)), ((120, 80), (60, 40)), ((9, 200), (5, 7)),
             ((1, 1), (5, 3)), ((448, 352), (224, 224))]
    for (height, width), size in cases:
        for mode in ("RGB", "L"):
            image = photo(height, width, seed=height + width).convert(mode)
            pixels = np.asarray(image).reshape(height, width, len(mode))
            expected = tf.cast(tf.image.resize(pixels, size) + 0.5, tf.uint8).numpy()
            got = resize.resize_image(image, size)
            assert got is not None, (height, width, size)
            np.testing.assert_array_equal(got, expected, err_msg=f"{height}x{width} {mode}")
    assert resize._pillow_columns(480, 224) is None  # no origin agrees: numpy gathers
    image = photo(100, 480, seed=5)
    encoded = io.BytesIO()
    image.save(encoded, "PNG")
    assert resize.resize_image(image, (64, 224)) is None
    expected = tf.cast(tf.image.resize(np.asarray(image), (64, 224)) + 0.5, tf.uint8).numpy()
    np.testing.assert_array_equal(resize.decode(encoded.getvalue(), 3, (64, 224)), expected)


def test_resize_threads_at_once_give_tf_image_resize():
    # the resize works in scratch arrays kept per thread: threads resizing images of different
    # sizes at once (as a DataSource shared by threads does) each get tf.image.resize's pixels
    import tensorflow as tf
    from concurrent.futures import ThreadPoolExecutor
    from tfrecorder_lite.images.resize import resize_bilinear

    cases = []
    for i, ((height, width), size) in enumerate([((300, 260), (224, 224)), ((64, 48), (96, 80)),
                                                 ((200, 331), (224, 224)), ((50, 70), (20, 30))]):
        pixels = np.asarray(photo(height, width, seed=70 + i)).reshape(height, width, 3)
        cases.append((pixels, size,
                      tf.cast(tf.image.resize(pixels, size) + 0.5, tf.uint8).numpy()))

    def resize_all(case):
        pixels, size, expected = case
        return all(np.array_equal(resize_bilinear(pixels, size), expected) for _ in range(40))

    with ThreadPoolExecutor(len(cases)) as pool:
        assert list(pool.map(resize_all, cases)) == [True] * len(cases)


def test_image_size_is_refused_where_it_cannot_apply(outputs, tmp_path):
    with pytest.raises(SchemaError, match="decode_image=True"):
        tfrecorder_lite.data_source(outputs["classification"], "TRAIN", image_size=(8, 8))
    with pytest.raises(SchemaError, match="image_size must be \\(height, width\\)"):
        tfrecorder_lite.data_source(outputs["classification"], "TRAIN", decode_image=True,
                                    image_size=(8, 0))
    table = pd.DataFrame({"split": ["TRAIN"] * 2, "x": [1.0, 2.0], "label": ["a", "b"]})
    out = table.tfrecord.to_tfrecord(tmp_path / "no-images", progress=False,
                                     image_col=None).output_dir
    with pytest.raises(SchemaError, match="holds no images, so image_size does not apply"):
        tfrecorder_lite.data_source(out, "TRAIN", decode_image=True, image_size=(8, 8))
