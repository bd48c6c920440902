"""Reliability with hostile images: every row is accounted for, stored images decode in
TensorFlow to the pixels Pillow shows (upright), and decompression bombs are refused before
any pixel is decoded, within a bounded amount of memory.

All images are generated in tmp_path with numpy/Pillow (or crafted byte by byte).
"""

import io
import json
import os
import struct
import subprocess
import sys
import textwrap
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from PIL import Image, ImageOps

import imagegen as ig
import tfrecorder_lite
from tfrecorder_lite import InvalidRowError
from tfrecorder_lite.images import containers as structure

JPEG_MEAN_TOLERANCE = 4.0  # mean |difference| allowed where a JPEG codec is involved
JPEG_MAX_TOLERANCE = 40


@dataclass
class Case:
    """One row of the hostile table and what must become of it."""

    split: str
    uri: str
    label: str = "cat"
    reason: str = None       # fragment of the rejection reason; None: the row must be stored
    fmt: str = None          # expected image/format of the stored record
    expected: np.ndarray = None  # the RGB pixels a pipeline must see
    lossy: bool = False      # a JPEG codec is involved: compare within a tolerance
    upright: np.ndarray = None  # for EXIF-rotated sources: the image as it must be displayed
    native: bool = False     # the original file bytes must be stored unchanged


def pillow_view(path):
    """What Pillow shows: first frame/page, EXIF orientation applied, as RGB."""
    with Image.open(path) as image:
        image.seek(0)
        return np.asarray(ImageOps.exif_transpose(image).convert("RGB"))


def build_hostile_table(root):
    """Good images of every kind next to every kind of broken row. Returns {row label: Case}."""
    root = os.fspath(root)

    def p(name):
        return os.path.join(root, name)

    cases = {}
    # ---- ordinary images TensorFlow decodes natively: stored byte for byte
    jpeg = ig.save(p("photo.jpg"), ig.pattern(48, 64, seed=1), "JPEG", quality=90)
    cases["jpeg"] = Case("train", jpeg, fmt="jpeg", lossy=True, native=True)
    path = ig.save(p("progressive.jpg"), ig.pattern(40, 56, seed=2), "JPEG", quality=90,
                   progressive=True)
    cases["jpeg_progressive"] = Case("train", path, "dog", fmt="jpeg", lossy=True, native=True)
    gray = Image.fromarray(ig.pattern(36, 44, seed=3)).convert("L")
    path = ig.save(p("gray.jpg"), gray, "JPEG", quality=90)
    cases["jpeg_gray"] = Case("validation", path, fmt="jpeg", lossy=True, native=True)
    path = ig.save(p("bad_exif.jpg"), ig.pattern(30, 40, seed=4), "JPEG", quality=90,
                   exif=b"Exif\x00\x00this is not a TIFF structure")
    cases["jpeg_broken_exif"] = Case("train", path, "dog", fmt="jpeg", lossy=True)
    path = ig.save(p("noise.png"), ig.noise_rgb(33, 47, seed=5), "PNG")
    cases["png_rgb"] = Case("train", path, fmt="png", native=True)
    path = ig.write_bytes(p("really_a_png.jpg"), ig.encode(ig.noise_rgb(21, 34, seed=6), "PNG"))
    cases["png_named_jpg"] = Case("test", path, "dog", fmt="png", native=True)
    path = ig.save(p("palette.png"), ig.palette_image(25, 31, seed=7), "PNG")
    cases["png_palette"] = Case("train", path, fmt="png", native=True)
    rgba = np.dstack([ig.noise_rgb(22, 26, seed=8),
                      np.random.default_rng(8).integers(0, 256, (22, 26), dtype=np.uint8)])
    path = ig.save(p("rgba.png"), Image.fromarray(rgba, "RGBA"), "PNG")
    cases["png_rgba"] = Case("train", path, "dog", fmt="png", native=True)
    la = Image.fromarray(ig.pattern(18, 23, seed=9)).convert("LA")
    cases["png_la"] = Case("test", ig.save(p("la.png"), la, "PNG"), fmt="png", native=True)
    one_bit = Image.fromarray(ig.noise_rgb(17, 29, seed=10)).convert("1")
    cases["png_1bit"] = Case("train", ig.save(p("bilevel.png"), one_bit, "PNG"), fmt="png",
                             native=True)
    gif = ig.palette_image(19, 27, seed=11, colors=16)
    cases["gif"] = Case("validation", ig.save(p("still.gif"), gif, "GIF"), "dog", fmt="gif",
                        native=True)
    path = ig.save(p("rgb24.bmp"), ig.noise_rgb(13, 15, seed=12), "BMP")
    cases["bmp24"] = Case("train", path, fmt="bmp", native=True)

    # ---- images that must be converted once, losslessly unless the source was a JPEG
    a16 = np.random.default_rng(13).integers(0, 65536, (20, 30), dtype=np.uint16)
    path = ig.save(p("gray16.png"), Image.fromarray(a16), "PNG")
    cases["png16_gray"] = Case("train", path, fmt="png", expected=np.dstack([a16 >> 8] * 3))
    rgb16 = np.random.default_rng(14).integers(0, 65536, (14, 19, 3), dtype=np.uint16)
    path = ig.write_bytes(p("rgb16.png"), ig.png16_rgb(rgb16))
    cases["png16_rgb"] = Case("test", path, "dog", fmt="png", expected=(rgb16 >> 8).astype(np.uint8))
    frames = [ig.palette_image(24, 32, seed=15 + i, colors=16) for i in range(3)]
    path = ig.animated_gif(p("animated.gif"), frames)
    cases["gif_animated"] = Case("train", path, fmt="png",
                                 expected=np.asarray(frames[0].convert("RGB")))
    pages = [ig.noise_rgb(26, 21, seed=20 + i) for i in range(3)]
    path = ig.multipage_tiff(p("pages.tiff"), pages)
    cases["tiff_multipage"] = Case("validation", path, fmt="png", expected=pages[0])
    bmp32 = np.dstack([ig.noise_rgb(11, 17, seed=24), np.full((11, 17), 200, np.uint8)])
    path = ig.save(p("rgba32.bmp"), Image.fromarray(bmp32, "RGBA"), "BMP")
    cases["bmp32"] = Case("train", path, fmt="png", expected=bmp32[..., :3])
    webp = ig.noise_rgb(16, 24, seed=25)
    path = ig.save(p("lossless.webp"), webp, "WEBP", lossless=True)
    cases["webp_lossless"] = Case("test", path, fmt="png", expected=webp)
    cmyk = Image.fromarray(ig.pattern(40, 52, seed=26)).convert("CMYK")
    path = ig.save(p("cmyk.jpg"), cmyk, "JPEG", quality=95)
    cases["jpeg_cmyk"] = Case("train", path, "dog", fmt="jpeg", lossy=True)
    for orientation in range(2, 9):
        upright = ig.noise_rgb(12, 20, seed=30 + orientation)  # landscape when displayed
        path = ig.save(p(f"exif{orientation}.png"), ig.sideways(upright, orientation), "PNG",
                       exif=ig.exif_bytes(orientation))
        cases[f"png_exif{orientation}"] = Case("train", path, fmt="png", expected=upright,
                                               upright=upright)
    for orientation in (6, 8, 3):
        upright = ig.pattern(32, 48, seed=40 + orientation)
        path = ig.save(p(f"exif{orientation}.jpg"), ig.sideways(upright, orientation), "JPEG",
                       quality=95, exif=ig.exif_bytes(orientation))
        cases[f"jpeg_exif{orientation}"] = Case("train", path, fmt="jpeg", lossy=True,
                                                 upright=upright)

    # ---- broken rows, each with the reason a human should read
    cases["zero_byte"] = Case("train", ig.write_bytes(p("zero.jpg"), b""), reason="empty file")
    data = ig.encode(ig.pattern(64, 64, seed=50), "JPEG", quality=90)
    cases["truncated_jpeg"] = Case("train", ig.write_bytes(p("cut.jpg"), data[: len(data) // 2]),
                                   reason="truncated")
    data = ig.encode(ig.noise_rgb(64, 64, seed=51), "PNG")
    cases["truncated_png"] = Case("test", ig.write_bytes(p("cut.png"), data[: len(data) // 2]),
                                  reason="truncated")
    cases["text_as_jpg"] = Case("train", ig.write_bytes(p("readme.jpg"), b"just some text\n" * 9),
                                reason="not an image")
    cases["bomb"] = Case("train", ig.write_bytes(p("bomb.png"), ig.bomb_png(30_000, 30_000)),
                         reason="decompression bomb")
    # 100 Mpx: above the library's 89 Mpx limit but below the point where Pillow itself refuses
    cases["bomb_100mpx"] = Case("validation",
                                ig.write_bytes(p("bomb100.png"), ig.bomb_png(10_000, 10_000)),
                                reason="decompression bomb")
    cases["missing"] = Case("train", p("no_such_file.jpg"), reason="file not found")
    cases["bad_split"] = Case("TRIAN", jpeg, reason="unknown split 'TRIAN'")
    cases["empty_label"] = Case("train", jpeg, label="", reason="empty label")
    cases["empty_uri"] = Case("test", "", reason="empty image_uri")

    for case in cases.values():  # what Pillow shows, unless the case states the truth itself
        if case.reason is None and case.expected is None:
            case.expected = pillow_view(case.uri)
    return cases


def table_of(cases):
    names = list(cases)
    return pd.DataFrame(
        {"split": [cases[n].split for n in names], "image_uri": [cases[n].uri for n in names],
         "label": [cases[n].label for n in names], "source_id": range(100, 100 + len(names))},
        index=pd.Index(names, name="key"))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """The hostile table converted once with on_error="skip": (cases, df, result, output_dir)."""
    root = tmp_path_factory.mktemp("hostile")
    cases = build_hostile_table(root / "images")
    df = table_of(cases)
    out = root / "out"
    result = df.tfrecord.to_tfrecord(out, on_error="skip", n_jobs=1, progress=False,
                                     num_shards=2)
    records = {r["image/filename"].decode(): r for r in ig.read_examples(str(out))}
    return cases, df, result, str(out), records


def record_of(records, case):
    return records[os.path.basename(case.uri)]


# ------------------------------------------------------------------------- every row accounted

def test_every_row_is_written_or_rejected_with_a_reason(hostile):
    cases, df, result, out, records = hostile
    bad = {name for name, case in cases.items() if case.reason}
    good = set(cases) - bad

    assert sum(result.counts.values()) + len(result.rejected) == len(df)
    assert set(result.rejected.index) == bad
    assert len(records) == len(good) == sum(result.counts.values())
    assert set(records) == {os.path.basename(cases[n].uri) for n in good}

    rejected = result.rejected
    assert list(rejected.columns) == list(df.columns) + ["reason"]
    for name in bad:
        row = rejected.loc[name]
        for column in df.columns:  # the input row, unchanged
            assert row[column] == df.loc[name, column], (name, column)
        assert cases[name].reason.lower() in row["reason"].lower(), (name, row["reason"])

    # rejected.csv holds the same rows and reasons; metadata.json counts them
    on_disk = pd.read_csv(os.path.join(out, "rejected.csv"), index_col=0, keep_default_na=False)
    assert sorted(on_disk.index) == sorted(bad)
    assert on_disk["reason"].to_dict() == rejected["reason"].to_dict()
    assert on_disk["source_id"].to_dict() == rejected["source_id"].to_dict()
    with open(os.path.join(out, "metadata.json"), encoding="utf-8") as f:
        metadata = json.load(f)
    assert metadata["rejected"] == len(bad) == result.metadata["rejected"]
    assert {s: v["num_examples"] for s, v in metadata["splits"].items()} == result.counts
    assert not os.path.exists(os.path.join(out, ".tfrecorder_lite"))
    assert not [n for n in os.listdir(out) if n.endswith(".tmp")]


def test_header_check_stores_and_rejects_what_the_decode_check_does(hostile, tmp_path):
    """check="header" decodes no pixels, yet writes the same shards and rejects the same rows
    for the same reasons (plain JPEGs take a path without Pillow there)."""
    _, df, result, _, _ = hostile
    header = df.tfrecord.to_tfrecord(tmp_path / "header", check="header", on_error="skip",
                                     n_jobs=1, progress=False, num_shards=2)
    pd.testing.assert_frame_equal(header.rejected, result.rejected)
    assert header.metadata["splits"] == result.metadata["splits"]  # every shard's sha256
    assert header.metadata["image"] == result.metadata["image"]


def test_bomb_reason_names_its_size(hostile):
    _, _, result, _, _ = hostile
    assert "900 Mpx" in result.rejected.loc["bomb", "reason"]
    assert "100 Mpx" in result.rejected.loc["bomb_100mpx", "reason"]


def test_on_error_raise_names_a_bad_row_and_its_path(hostile, tmp_path):
    cases, df, skipped, _, _ = hostile
    out = tmp_path / "out"
    with pytest.raises(InvalidRowError) as info:
        df.tfrecord.to_tfrecord(out, on_error="raise", n_jobs=1, progress=False, num_shards=2)
    error = info.value
    assert error.row in skipped.rejected.index
    case = cases[error.row]
    assert error.reason == skipped.rejected.loc[error.row, "reason"]
    assert repr(error.row) in str(error) and error.reason in str(error)
    if case.uri:
        assert error.path == os.path.normpath(case.uri)
        assert case.uri in str(error)
    assert not (out / "metadata.json").exists()
    assert not list(out.glob("*.tmp")) if out.exists() else True


def test_on_error_raise_names_rows_the_table_refuses_before_reading_any_image(tmp_path):
    """The documented order: a missing file (row 3) is found from the table, before the broken
    image of row 1 is read; without it, the broken image is named."""
    good = ig.save(tmp_path / "good.png", ig.noise_rgb(8, 8), "PNG")
    broken = ig.write_bytes(tmp_path / "broken.jpg", b"not an image at all")
    df = pd.DataFrame({"split": ["train"] * 4,
                       "image_uri": [good, broken, good, str(tmp_path / "missing.jpg")],
                       "label": ["a", "a", "b", "b"]})
    out = tmp_path / "out"
    with pytest.raises(InvalidRowError) as info:
        df.tfrecord.to_tfrecord(out, on_error="raise", shuffle=False, n_jobs=1, progress=False)
    assert (info.value.row, info.value.reason) == (3, "file not found")
    assert not out.exists()  # refused before the output folder was touched
    with pytest.raises(InvalidRowError) as info:
        df.iloc[:3].tfrecord.to_tfrecord(out, on_error="raise", shuffle=False, n_jobs=1,
                                         progress=False)
    assert (info.value.row, info.value.path, info.value.reason) == (1, broken, "not an image")
    assert not (out / "metadata.json").exists()


def test_on_error_raise_names_the_path_of_a_row_with_a_bad_split(tmp_path):
    good = ig.save(tmp_path / "good.png", ig.noise_rgb(8, 8), "PNG")
    df = pd.DataFrame({"split": ["train", "TRIAN"], "image_uri": [good, good],
                       "label": ["a", "b"]})
    with pytest.raises(InvalidRowError) as info:
        df.tfrecord.to_tfrecord(tmp_path / "out", on_error="raise", n_jobs=1, progress=False)
    assert info.value.row == 1
    assert info.value.path == good and good in str(info.value)


# ------------------------------------------------------------------------- decoded pixels

def _assert_pixels(name, got, expected, lossy):
    assert got.shape == expected.shape, (name, got.shape, expected.shape)
    if lossy:
        diff = np.abs(got.astype(int) - expected.astype(int))
        assert diff.mean() <= JPEG_MEAN_TOLERANCE and diff.max() <= JPEG_MAX_TOLERANCE, (
            name, diff.mean(), diff.max())
    else:
        assert np.array_equal(got, expected), name


def test_stored_images_decode_to_the_pixels_pillow_shows(hostile):
    cases, _, _, _, records = hostile
    checked = 0
    for name, case in cases.items():
        if case.reason:
            continue
        record = record_of(records, case)
        got = ig.tf_decode(record["image/encoded"], channels=3)
        _assert_pixels(name, got, case.expected, case.lossy)
        if not case.lossy:  # lossless sources: also what Pillow shows of the stored bytes
            assert np.array_equal(got, ig.pillow_rgb(record["image/encoded"])), name
        checked += 1
    assert checked == sum(1 for case in cases.values() if not case.reason) >= 25


def test_stored_features_describe_what_tensorflow_decodes(hostile):
    cases, _, result, _, records = hostile
    for name, case in cases.items():
        if case.reason:
            continue
        record = record_of(records, case)
        assert record["image/format"].decode() == case.fmt, name
        decoded = ig.tf_decode(record["image/encoded"], channels=0)
        assert (record["image/height"], record["image/width"], record["image/channels"]) == \
            decoded.shape, name
        if case.native:
            with open(case.uri, "rb") as f:
                assert record["image/encoded"] == f.read(), f"{name}: not stored as is"
        label = result.labels.index(case.label)
        assert record["image/class/label"] == label and record["image/class/text"] == b"%s" % (
            case.label.encode())


def test_special_formats_are_stored_as_promised(hostile):
    cases, _, _, _, records = hostile

    def rec(name):
        return record_of(records, cases[name])

    assert rec("png_named_jpg")["image/format"] == b"png"
    assert rec("jpeg_cmyk")["image/channels"] == 3
    assert rec("png16_gray")["image/channels"] == 1  # 8-bit gray, v >> 8
    assert ig.tf_decode(rec("png16_gray")["image/encoded"], channels=0).dtype == np.uint8
    # first frame / first page, not another one
    animated = ig.tf_decode(rec("gif_animated")["image/encoded"])
    assert np.array_equal(animated, cases["gif_animated"].expected)
    with Image.open(cases["gif_animated"].uri) as gif:
        assert gif.n_frames == 3
    with Image.open(cases["tiff_multipage"].uri) as tiff:
        assert tiff.n_frames == 3


def test_exif_orientation_is_applied(hostile):
    cases, _, _, _, records = hostile
    rotated = {name: case for name, case in cases.items() if case.upright is not None}
    assert len(rotated) == 10
    for name, case in rotated.items():
        record = record_of(records, case)
        got = ig.tf_decode(record["image/encoded"])
        height, width = case.upright.shape[:2]
        assert width > height, name  # generated landscape, displayed landscape
        with Image.open(case.uri) as source:  # ... but stored otherwise in the file
            assert source.getexif()[ig.EXIF_ORIENTATION] == int(name[-1])
            if int(name[-1]) >= 5:
                assert source.size == (height, width), name
        assert (record["image/height"], record["image/width"]) == (height, width), name
        # it is what Pillow shows after exif_transpose
        _assert_pixels(name, got, pillow_view(case.uri), case.lossy)
        if case.lossy:  # the upright image, up to two JPEG generations: check the markers
            corner = got[: height // 4 - 2, : width // 4 - 2].reshape(-1, 3).mean(axis=0)
            stripe = got[:, width - width // 8 + 2:].reshape(-1, 3).mean(axis=0)
            assert corner[0] > 200 and corner[2] < 60, (name, corner)  # red, top-left
            assert stripe[2] > 200 and stripe[0] < 60, (name, stripe)  # blue, right edge
        else:
            assert np.array_equal(got, case.upright), name


def test_exif_orientation_is_applied_when_resizing(tmp_path):
    rows = []
    expected = {}
    for orientation in (6, 8):
        for fmt, ext in (("JPEG", "jpg"), ("PNG", "png")):
            upright = ig.pattern(60, 90, seed=orientation)
            path = ig.save(tmp_path / f"o{orientation}.{ext}", ig.sideways(upright, orientation),
                           fmt, exif=ig.exif_bytes(orientation), **(
                               {"quality": 95} if fmt == "JPEG" else {}))
            rows.append(("train", path, "x"))
            expected[os.path.basename(path)] = np.asarray(
                Image.fromarray(upright).resize((45, 30), Image.BILINEAR))
    df = pd.DataFrame(rows, columns=["split", "image_uri", "label"])
    out = tmp_path / "out"
    df.tfrecord.to_tfrecord(out, image_size=(30, 45), image_format="png", n_jobs=1,
                            progress=False)
    records = ig.read_examples(str(out))
    assert len(records) == 4
    for record in records:
        got = ig.tf_decode(record["image/encoded"])
        want = expected[record["image/filename"].decode()]
        assert got.shape == (30, 45, 3)
        diff = np.abs(got.astype(int) - want.astype(int))
        assert diff.mean() <= 6, (record["image/filename"], diff.mean())


# ------------------------------------------------------------------------- decompression bombs

BOMB_CHILD = textwrap.dedent("""
    import json, os, resource, sys
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    out, bomb, bomb100, good = sys.argv[2:6]

    import pandas as pd
    from PIL import Image
    import tfrecorder_lite

    report = {}
    try:  # the limit binds: 3 GiB (what decoding the 30000 x 30000 bomb takes) cannot be had
        block = bytearray(3 * 2**30)
        report["limit_binds"] = False
    except MemoryError:
        report["limit_binds"] = True
    df = pd.DataFrame({"split": ["train"] * 3, "image_uri": [bomb, bomb100, good],
                       "label": ["a", "a", "b"]}, index=["bomb", "bomb100", "good"])
    problems = df.tfrecord.validate(check="decode", n_jobs=1)
    report["validate"] = dict(zip(problems["row"], problems["problem"]))
    result = df.tfrecord.to_tfrecord(os.path.join(out, "default"), on_error="skip", n_jobs=1,
                                     progress=False)
    report["default"] = [result.counts, result.rejected["reason"].to_dict()]
    Image.MAX_IMAGE_PIXELS = None  # a user who switched Pillow's own guard off
    result = df.tfrecord.to_tfrecord(os.path.join(out, "unguarded"), on_error="skip", n_jobs=1,
                                     progress=False)
    report["pillow_guard_off"] = [result.counts, result.rejected["reason"].to_dict()]
    report["tensorflow_imported"] = "tensorflow" in sys.modules
    with open("/proc/self/status") as f:  # VmHWM: ru_maxrss keeps the parent's over exec
        report["peak_kib"] = next(int(line.split()[1]) for line in f
                                  if line.startswith("VmHWM:"))
    print(json.dumps(report))
""")


def test_decompression_bomb_is_refused_within_bounded_memory(tmp_path):
    """A 30000 x 30000 PNG of a few hundred bytes is refused without decoding a pixel, under an
    address-space limit (2 GiB) that decoding it (2.7 GB of RGB) could never fit in."""
    bomb = ig.write_bytes(tmp_path / "bomb.png", ig.bomb_png(30_000, 30_000))
    bomb100 = ig.write_bytes(tmp_path / "bomb100.png", ig.bomb_png(10_000, 10_000))
    good = ig.save(tmp_path / "good.png", ig.noise_rgb(16, 16), "PNG")
    assert os.path.getsize(bomb) < 2000
    script = tmp_path / "child.py"
    script.write_text(BOMB_CHILD)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    limit = 2 * 2**30
    proc = subprocess.run([sys.executable, str(script), str(limit), str(tmp_path / "out"), bomb,
                           bomb100, good], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["limit_binds"]
    assert not report["tensorflow_imported"], "the writer must not need TensorFlow"
    for key in ("default", "pillow_guard_off"):
        counts, reasons = report[key]
        assert counts == {"TRAIN": 1}, key
        assert set(reasons) == {"bomb", "bomb100"}, key
        assert all(r.startswith("decompression bomb") for r in reasons.values()), (key, reasons)
    assert report["validate"]["bomb"].startswith("decompression bomb")
    assert report["validate"]["bomb100"].startswith("decompression bomb")
    assert "good" not in report["validate"]
    assert report["peak_kib"] < 1.5 * 2**20  # far below one decoded bomb


# ------------------------------------------------------------------------- known weak spots

def _tail_truncated_png(tmp_path):
    data = ig.encode(ig.noise_rgb(32, 32, seed=60), "PNG")
    return ig.write_bytes(tmp_path / "no_iend.png", data[:-12])  # IEND chunk lost


def _png_with_bad_idat_crc(tmp_path):
    data = bytearray(ig.encode(ig.noise_rgb(32, 32, seed=61), "PNG"))
    at = data.index(b"IDAT")
    length = int.from_bytes(data[at - 4:at], "big")
    data[at + 4 + length] ^= 0xFF  # one flipped bit-rot byte in the IDAT CRC
    return ig.write_bytes(tmp_path / "bad_crc.png", bytes(data))


def _gif_without_trailer(tmp_path):
    data = ig.encode(ig.palette_image(20, 20, seed=62), "GIF")
    return ig.write_bytes(tmp_path / "no_trailer.gif", data[:-2])


def _os2_bitmap(tmp_path):
    # 24-bit OS/2 1.x bitmap: the first pixels happen to read as "24 bits, no compression" at
    # the offsets of a Windows BITMAPINFOHEADER.
    rows = [bytes([1, 2, 24, 0, 0, 0, 0, 0, 0, 5, 6, 7]), bytes([9, 9, 9] * 4)]
    return ig.write_bytes(tmp_path / "os2.bmp", ig.os2_bmp(rows))


def _bmp_cut_in_pixels(tmp_path):
    data = ig.encode(ig.noise_rgb(16, 20, seed=65), "BMP")
    return ig.write_bytes(tmp_path / "cut.bmp", data[:-40])


def _jpeg_cut_in_scan(tmp_path):
    data = ig.encode(ig.noise_rgb(64, 64, seed=66), "JPEG")
    return ig.write_bytes(tmp_path / "cut_scan.jpg", data[:-200])


def _progressive_jpeg_cut(tmp_path):
    data = ig.encode(ig.noise_rgb(64, 64, seed=67), "JPEG", progressive=True)
    return ig.write_bytes(tmp_path / "cut_progressive.jpg", data[: len(data) * 3 // 4])


def _jpeg_with_embedded_jpeg_cut(tmp_path):
    # a whole thumbnail JPEG (with its own scan and end marker) inside a comment segment: only
    # walking the segments by length tells that the main image's end marker is missing
    thumbnail = ig.encode(ig.noise_rgb(8, 8, seed=69), "JPEG")
    data = ig.encode(ig.noise_rgb(64, 64, seed=69), "JPEG", comment=thumbnail)
    assert thumbnail in data
    return ig.write_bytes(tmp_path / "cut_with_thumbnail.jpg", data[:-300])


def _complete_png(tmp_path):
    return ig.save(tmp_path / "fine.png", ig.noise_rgb(32, 32, seed=63), "PNG")


@pytest.mark.parametrize("check", ["decode", "header"])
@pytest.mark.parametrize("make", [
    _complete_png,
    _tail_truncated_png,
    _png_with_bad_idat_crc,
    _gif_without_trailer,
    _os2_bitmap,
    _bmp_cut_in_pixels,
    _jpeg_cut_in_scan,
    _progressive_jpeg_cut,
    _jpeg_with_embedded_jpeg_cut,
])
def test_every_stored_image_decodes_in_tensorflow(tmp_path, make, check):
    path = make(tmp_path)
    good = ig.save(tmp_path / "control.png", ig.noise_rgb(8, 8, seed=64), "PNG")
    df = pd.DataFrame({"split": ["train", "train"], "image_uri": [path, good],
                       "label": ["a", "b"]})
    out = tmp_path / "out"
    result = df.tfrecord.to_tfrecord(out, on_error="skip", check=check, n_jobs=1,
                                     progress=False)
    assert sum(result.counts.values()) + len(result.rejected) == 2
    # either the row was refused, or TensorFlow decodes every stored image
    tfrecorder_lite.verify(out, decode=True)


@pytest.mark.parametrize("check", ["decode", "header"])
@pytest.mark.parametrize("make, reason", [
    (_tail_truncated_png, "truncated PNG"),
    (_png_with_bad_idat_crc, "damaged PNG data (bad CRC in 'IDAT' chunk)"),
    (_gif_without_trailer, "truncated GIF"),
    (_bmp_cut_in_pixels, "truncated BMP"),
    (_jpeg_cut_in_scan, "truncated JPEG"),
    (_progressive_jpeg_cut, "truncated JPEG"),
    (_jpeg_with_embedded_jpeg_cut, "truncated JPEG"),
])
def test_damage_that_tensorflow_refuses_is_rejected_in_both_check_modes(tmp_path, make, reason,
                                                                         check):
    df = pd.DataFrame({"split": ["train"] * 2, "image_uri": [make(tmp_path), _sound(tmp_path)],
                       "label": ["a"] * 2})  # a table of no sound image is refused whole
    result = df.tfrecord.to_tfrecord(tmp_path / "out", on_error="skip", check=check, n_jobs=1,
                                     progress=False)
    assert result.rejected["reason"].tolist() == [reason]


def _sound(folder):
    """A sound PNG in ``folder``: the row beside a damaged one that keeps its table
    convertible (a table whose every row is rejected is refused as a whole)."""
    return ig.write_bytes(folder / "sound.png", ig.encode(ig.noise_rgb(16, 16, seed=1), "PNG"))


def _jpeg_variants():
    """{name: (JPEG bytes, whether the Pillow-free header reader must answer)}."""
    rgb = ig.pattern(30, 44, seed=70)
    image = Image.fromarray(rgb)
    big_endian_exif6 = (b"MM\x00*" + struct.pack(">IH", 8, 1)
                        + struct.pack(">HHIHH", ig.EXIF_ORIENTATION, 3, 1, 6, 0)
                        + struct.pack(">I", 0))
    camera = Image.Exif()
    camera[0x010F] = "Camera maker"
    xmp = (b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><rdf:Description '
           b'tiff:Orientation="6"/></rdf:RDF></x:xmpmeta>')
    mpo = io.BytesIO()
    image.save(mpo, "MPO", save_all=True, append_images=[image])
    baseline = ig.encode(rgb, "JPEG", quality=90)
    dqt = baseline.index(b"\xff\xdb")
    length = int.from_bytes(baseline[dqt + 2:dqt + 4], "big")
    loose_dqt = (baseline[:dqt + 2] + (length + 1).to_bytes(2, "big")
                 + baseline[dqt + 4:dqt + 2 + length] + b"\x00" + baseline[dqt + 2 + length:])
    variants = {
        "baseline": (baseline, True),
        "progressive": (ig.encode(rgb, "JPEG", progressive=True), True),
        "optimized_444_q100": (ig.encode(rgb, "JPEG", quality=100, optimize=True,
                                         subsampling=0), True),
        "gray": (ig.encode(image.convert("L"), "JPEG"), True),
        "icc_comment_restarts": (ig.encode(rgb, "JPEG", icc_profile=b"\x01" * 70_000,
                                           comment=b"hello", restart_marker_blocks=2), True),
        "exif_without_orientation": (ig.encode(rgb, "JPEG", exif=camera.tobytes()), True),
        "exif6_big_endian": (ig.encode(rgb, "JPEG", exif=b"Exif\x00\x00" + big_endian_exif6),
                             True),
        "cmyk": (ig.encode(image.convert("CMYK"), "JPEG"), False),
        "xmp_orientation": (ig.encode(rgb, "JPEG", xmp=xmp), False),
        "mpo": (mpo.getvalue(), False),
        "broken_exif": (ig.encode(rgb, "JPEG", exif=b"Exif\x00\x00not a TIFF structure"),
                        False),
        "cut_in_header": (baseline[:120], False),
        "loose_dqt": (loose_dqt, False),
    }
    for orientation in range(1, 9):
        data = ig.encode(rgb, "JPEG", exif=ig.exif_bytes(orientation))
        variants[f"exif{orientation}"] = (data, True)
    return variants


def test_pillow_free_jpeg_header_reader_agrees_with_pillow():
    """It answers for plain JPEGs exactly as Pillow does, and leaves every other file to
    Pillow (None)."""
    for name, (data, plain) in _jpeg_variants().items():
        header = structure.jpeg_header(data)
        assert (header is not None) == plain, name
        if plain:
            with Image.open(io.BytesIO(data)) as image:
                pillow = (image.height, image.width, len(image.mode),
                          image.getexif().get(ig.EXIF_ORIENTATION, 1))
            assert header == pillow, name


def _with_chunks(png, before_pixels=(), after_pixels=()):
    """``png`` with chunks inserted before its first IDAT and before its IEND."""
    first, end = png.index(b"IDAT") - 4, png.rindex(b"IEND") - 4
    return (png[:first] + b"".join(ig.png_chunk(k, d) for k, d in before_pixels)
            + png[first:end] + b"".join(ig.png_chunk(k, d) for k, d in after_pixels) + png[end:])


def _png_variants():
    """name -> (PNG bytes, whether the Pillow-free header check answers for it)."""
    rgb = ig.noise_rgb(9, 13, seed=5)
    palette = ig.palette_image(9, 13, seed=5)
    base = ig.encode(Image.fromarray(rgb), "PNG")
    interlaced_header = bytearray(base)
    interlaced_header[28] = 1  # Adam7: only the header is read here
    interlaced_header[29:33] = struct.pack(">I", zlib.crc32(bytes(interlaced_header[12:29])))
    exif = Image.Exif()
    exif[ig.EXIF_ORIENTATION] = 6
    variants = {
        "rgb": (base, True),
        "rgba": (ig.encode(Image.fromarray(rgb).convert("RGBA"), "PNG"), True),
        "gray": (ig.encode(Image.fromarray(rgb).convert("L"), "PNG"), True),
        "gray_alpha": (ig.encode(Image.fromarray(rgb).convert("LA"), "PNG"), True),
        "one_bit": (ig.encode(Image.fromarray(rgb).convert("1"), "PNG"), True),
        "palette": (ig.encode(palette, "PNG"), True),
        "palette_2_bit": (ig.encode(ig.palette_image(9, 13, colors=4), "PNG", bits=2), True),
        "palette_trns": (ig.encode(palette, "PNG", transparency=0), True),
        "gray_trns": (ig.encode(Image.fromarray(rgb).convert("L"), "PNG", transparency=5),
                      True),
        "rgb_trns": (ig.encode(Image.fromarray(rgb), "PNG", transparency=(5, 5, 5)), True),
        "dpi_gamma_srgb_chrm": (_with_chunks(ig.encode(Image.fromarray(rgb), "PNG", dpi=(72, 72)),
                                             [(b"gAMA", struct.pack(">I", 45455)),
                                              (b"sRGB", b"\x00"), (b"cHRM", bytes(32))]), True),
        "interlaced": (bytes(interlaced_header), True),
        "16_bit": (ig.png16_rgb(rgb.astype(np.uint16) * 257), False),
        "text": (ig.encode(Image.fromarray(rgb), "PNG", pnginfo=_png_text()), False),
        "exif": (ig.encode(Image.fromarray(rgb), "PNG", exif=exif), False),
        "icc": (ig.encode(Image.fromarray(rgb), "PNG", icc_profile=b"\x01" * 300), False),
        "text_after_pixels": (_with_chunks(base, after_pixels=[(b"tEXt", b"k\x00v")]), False),
        "short_gamma": (_with_chunks(base, [(b"gAMA", b"\x00\x01")]), False),
        "odd_chrm": (_with_chunks(base, [(b"cHRM", bytes(5))]), False),  # Pillow refuses it
        "short_gray_trns": (_with_chunks(ig.encode(Image.fromarray(rgb).convert("L"), "PNG"),
                                         [(b"tRNS", b"\x05")]), False),
        "palette_without_plte": (ig.raw_png(2, 1, [b"\x00\x01"], color_type=3), False),
        "animated": (_with_chunks(base, [(b"acTL", struct.pack(">II", 1, 0))]), False),
        "bad_crc": (base[:40] + bytes([base[40] ^ 1]) + base[41:], False),
        "cut": (base[:-10], False),
        "no_pixels": (ig.raw_png(0, 0, []), False),
    }
    return variants


def _png_text():
    from PIL import PngImagePlugin
    info = PngImagePlugin.PngInfo()
    info.add_text("Software", "a drawing program")
    return info


def test_pillow_free_png_header_check_agrees_with_pillow(monkeypatch):
    """It answers for plain PNGs exactly as the Pillow path does, and leaves every other file
    (damaged, metadata that may hold an orientation, 16-bit, unusual chunks) to Pillow."""
    from tfrecorder_lite.images import normalize as images

    options = images.ImageOptions(check="header")
    answers = {}
    for name, (data, plain) in _png_variants().items():
        walk = structure.png_chunks(data)
        stored = images._plain_png(data, walk, options)
        assert (stored is not None) == plain, name
        answers[name] = stored
    monkeypatch.setattr(images, "_plain_png", lambda data, walk, options: None)
    for name, (data, plain) in _png_variants().items():
        if plain:
            with Image.open(io.BytesIO(data)) as image:  # Pillow's own view of the header
                assert (image.height, image.width) == (9, 13), name
            assert images.prepare_image(data, options) == answers[name], name


def test_header_check_of_jpegs_left_to_pillow_keeps_pillow_reasons(tmp_path):
    variants = _jpeg_variants()
    rows = [("train", ig.write_bytes(tmp_path / f"{name}.jpg", variants[name][0]), "a")
            for name in ("loose_dqt", "xmp_orientation", "exif6_big_endian", "cmyk")]
    df = pd.DataFrame(rows, columns=["split", "image_uri", "label"],
                      index=["loose_dqt", "xmp", "exif6", "cmyk"])
    out = tmp_path / "out"
    result = df.tfrecord.to_tfrecord(out, check="header", on_error="skip", n_jobs=1,
                                     progress=False)
    assert result.rejected["reason"].to_dict() == {
        "loose_dqt": "damaged JPEG header"}  # Pillow hides its own reason here
    records = {r["image/filename"].decode(): r for r in ig.read_examples(str(out))}
    for name in ("xmp_orientation", "exif6_big_endian"):  # rotated upright: 44 high, 30 wide
        record = records[f"{name}.jpg"]
        assert (record["image/height"], record["image/width"]) == (44, 30), name
        assert ig.tf_decode(record["image/encoded"]).shape == (44, 30, 3), name
    assert records["cmyk.jpg"]["image/channels"] == 3  # converted: TF has no CMYK


@pytest.mark.parametrize("fmt, ext", [("JPEG", "jpg"), ("PNG", "png"), ("GIF", "gif")])
def test_bytes_after_the_end_marker_are_kept_as_they_are(tmp_path, fmt, ext):
    """Trailing bytes after EOI / IEND / the GIF trailer are common and every decoder ignores
    them, so the file is stored unchanged and TensorFlow decodes it."""
    image = ig.palette_image(12, 9, seed=68) if fmt == "GIF" else ig.noise_rgb(12, 9, seed=68)
    data = ig.encode(image, fmt) + b"\x00" * 64 + b"junk \xff\xda\x00\x08 \xff\xd8"
    path = ig.write_bytes(tmp_path / f"trailing.{ext}", data)
    df = pd.DataFrame({"split": ["train"], "image_uri": [path], "label": ["a"]})
    out = tmp_path / "out"
    result = df.tfrecord.to_tfrecord(out, on_error="skip", n_jobs=1, progress=False)
    assert result.rejected.empty
    (record,) = ig.read_examples(str(out))
    assert record["image/encoded"] == data
    tfrecorder_lite.verify(out, decode=True)


def test_channels_feature_matches_decoded_png_with_transparency_chunk(tmp_path):
    gray = Image.fromarray(ig.noise_rgb(6, 7)[..., 0], "L")
    rows = [("train", ig.save(tmp_path / "gray_trns.png", gray, "PNG", transparency=5), "a"),
            ("train", ig.save(tmp_path / "rgb_trns.png", ig.noise_rgb(6, 7), "PNG",
                              transparency=(5, 5, 5)), "a")]
    palette = ig.palette_image(6, 7)
    rows.append(("train", ig.save(tmp_path / "pal_trns.png", palette, "PNG", transparency=0),
                 "a"))
    df = pd.DataFrame(rows, columns=["split", "image_uri", "label"])
    out = tmp_path / "out"
    df.tfrecord.to_tfrecord(out, n_jobs=1, progress=False)
    for record in ig.read_examples(str(out)):
        decoded = ig.tf_decode(record["image/encoded"], channels=0)
        assert record["image/channels"] == decoded.shape[-1], record["image/filename"]


def test_transparent_gifs_keep_their_transparency_as_alpha(tmp_path):
    """TensorFlow decodes a GIF's transparent pixels as black, losing them; still and animated
    transparent GIFs alike are stored as RGBA PNG equal to Pillow's view of the first frame."""
    still = ig.palette_image(9, 11, seed=71, colors=4)
    frames = [ig.palette_image(9, 11, seed=72 + i, colors=4) for i in range(2)]
    paths = [ig.save(tmp_path / "still.gif", still, "GIF", transparency=0),
             ig.animated_gif(tmp_path / "moving.gif", frames, transparency=0)]
    df = pd.DataFrame({"split": ["train"] * 2, "image_uri": paths, "label": ["a", "b"]})
    out = tmp_path / "out"
    df.tfrecord.to_tfrecord(out, n_jobs=1, shuffle=False, progress=False)
    for record, path in zip(ig.read_examples(str(out)), paths):
        with Image.open(path) as source:
            expected = np.asarray(source.convert("RGBA"))
        assert (expected[..., 3] == 0).any()  # the case is real: some pixels are transparent
        assert record["image/format"] == b"png" and record["image/channels"] == 4
        assert np.array_equal(ig.tf_decode(record["image/encoded"], channels=0), expected)
    assert tfrecorder_lite.verify(out, decode=True).startswith("OK")


def _png_with_late_chunk(upright, orientation, kind, payload):
    """A PNG whose orientation chunk comes after the pixel data (IDAT), just before IEND."""
    data = ig.encode(ig.sideways(upright, orientation), "PNG")
    iend = data.rindex(b"IEND") - 4
    return data[:iend] + ig.png_chunk(kind, payload) + data[iend:]


@pytest.mark.parametrize("check", ["decode", "header"])
@pytest.mark.parametrize("where", ["eXIf", "XMP"])
def test_png_orientation_stored_after_the_pixels_is_applied(tmp_path, where, check):
    upright = ig.noise_rgb(10, 16, seed=73)
    chunk = b"eXIf" if where == "eXIf" else b"iTXt"
    if where == "eXIf":
        data = _png_with_late_chunk(upright, 6, chunk, ig.exif_bytes(6))
    else:
        xmp = (b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/'
               b'1999/02/22-rdf-syntax-ns#"><rdf:Description xmlns:tiff="http://ns.adobe.com/'
               b'tiff/1.0/" tiff:Orientation="6"/></rdf:RDF></x:xmpmeta>')
        data = _png_with_late_chunk(upright, 6, chunk,
                                    b"XML:com.adobe.xmp\x00\x00\x00\x00\x00" + xmp)
    assert data.index(b"IDAT") < data.index(chunk)
    path = ig.write_bytes(tmp_path / "late.png", data)
    df = pd.DataFrame({"split": ["train"], "image_uri": [path], "label": ["a"]})
    out = tmp_path / "out"
    df.tfrecord.to_tfrecord(out, check=check, n_jobs=1, progress=False)
    (record,) = ig.read_examples(str(out))
    assert np.array_equal(ig.tf_decode(record["image/encoded"]), upright)


def test_truncated_png_reason_says_truncated_png(tmp_path):
    data = ig.encode(ig.noise_rgb(64, 64, seed=70), "PNG")
    path = ig.write_bytes(tmp_path / "cut.png", data[: len(data) // 2])
    df = pd.DataFrame({"split": ["train"] * 2, "image_uri": [path, _sound(tmp_path)],
                       "label": ["a"] * 2})
    result = df.tfrecord.to_tfrecord(tmp_path / "out", on_error="skip", n_jobs=1,
                                     progress=False)
    reason = result.rejected["reason"].iloc[0]
    assert reason == "truncated PNG", reason


# ----------------------------------------------------------------------------- warning filters

def test_silencing_pillow_is_one_block_at_a_time_and_leaves_the_filters_as_they_were():
    import threading
    import warnings

    from tfrecorder_lite.images.quiet import silenced

    before = list(warnings.filters)
    inside, leave, second_in = threading.Event(), threading.Event(), threading.Event()

    def first():
        with silenced(Image.DecompressionBombWarning):
            inside.set()
            leave.wait(10)

    def second():
        with silenced():
            second_in.set()

    a, b = threading.Thread(target=first), threading.Thread(target=second)
    a.start()
    assert inside.wait(10)
    b.start()
    # catch_warnings swaps the process's filters: a second block inside at once would put
    # back the first one's filter when it leaves
    assert not second_in.wait(1)
    leave.set()
    a.join(10)
    b.join(10)
    assert second_in.is_set()
    assert warnings.filters == before


def test_a_conversion_in_threads_leaves_the_callers_warning_filters_alone(tmp_path):
    """A header-checked write that hashes opens each image with Pillow in several threads (a
    filter ignoring every warning was left behind, before ``quiet.silenced``)."""
    import warnings

    paths = []
    for i in range(120):
        path = tmp_path / "images" / f"im{i}.{'png' if i % 5 == 0 else 'jpg'}"
        path.parent.mkdir(exist_ok=True)
        ig.rich_photo(24 + i % 7, 32, seed=i).save(path)
        paths.append(str(path))
    df = pd.DataFrame({"split": ["TRAIN", "TEST"] * 60, "image_uri": paths,
                       "label": ["a", "b", "c"] * 40})
    before = list(warnings.filters)
    for run in range(3):
        df.tfrecord.to_tfrecord(tmp_path / f"out{run}", check="header", leakage="warn",
                                progress=False, n_jobs=2, num_shards=2)
        assert warnings.filters == before, run


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_child_forked_while_a_thread_silences_pillow_can_silence_it_too():
    import threading
    import time

    from tfrecorder_lite.images.quiet import silenced

    inside, leave = threading.Event(), threading.Event()

    def hold():
        with silenced():
            inside.set()
            leave.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(10)
    pid = os.fork()
    if pid == 0:  # the child: the thread holding the lock was not copied into it
        with silenced():
            pass
        os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the child waited for a lock held by a thread it does not have")
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        leave.set()
        holder.join(10)
