"""inspect(): the HTML report of real outputs, its pictures, the CLI, and one real browser."""

import base64
import io
import json
import os
import re
import shutil

import numpy as np
import pandas as pd
import pytest
from PIL import Image, ImageStat

import tfrecorder_lite
from conftest import GCS_OPTIONS, photo, save
from tfrecorder_lite import cli
from tfrecorder_lite.read import report

LABEL = "<b>&cat"  # user data that must be escaped
ESCAPED = "&lt;b&gt;&amp;cat"
PNG_SRC = re.compile(r'src="data:image/png;base64,([^"]+)"')


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Two real outputs of one table: ``plain`` (PNG, JPEG, GIF; RGB, grayscale, RGBA; two
    sizes; two shards per split; a missing and a non-image row skipped, so TEST is empty) and
    ``gzip`` (the good rows, resized, GZIP shards, no rejected.csv)."""
    root = tmp_path_factory.mktemp("report")
    images = root / "images"
    kinds = [("PNG", "RGB"), ("JPEG", "RGB"), ("JPEG", "L"), ("PNG", "RGBA"), ("GIF", "P")]
    rows = []
    for i in range(12):
        fmt, mode = kinds[i % len(kinds)]
        height, width = (40, 60) if i % 2 else (48, 32)
        path = save(photo(height, width, seed=i, mode=mode), images / f"img{i}.{fmt.lower()}",
                    fmt)
        split = "TRAIN" if i < 9 else "VALIDATION"
        rows.append((split, path, "café 猫" if split == "VALIDATION" else [LABEL, "dog"][i % 2]))
    good = pd.DataFrame(rows, columns=["split", "image_uri", "label"])
    (images / "notes.jpg").write_text("not an image")
    bad = pd.DataFrame([("TRAIN", str(images / "missing.jpg"), "dog"),
                        ("TEST", str(images / "notes.jpg"), "dog")], columns=good.columns)
    options = dict(num_shards=2, on_error="skip", progress=False, n_jobs=1)
    pd.concat([good, bad], ignore_index=True).tfrecord.to_tfrecord(root / "plain", **options)
    good.tfrecord.to_tfrecord(root / "gzip", compression="GZIP", image_size=(24, 32), **options)
    return {"plain": str(root / "plain"), "gzip": str(root / "gzip")}


def pngs(page):
    """The embedded PNGs of an HTML page, decoded."""
    return [Image.open(io.BytesIO(base64.b64decode(data))) for data in PNG_SRC.findall(page)]


def test_report_shows_images_labels_and_rejected_rows(outputs):
    rep = tfrecorder_lite.inspect(outputs["plain"])
    page = rep.html
    assert rep.num_images == 12 == page.count("<area ")  # min(64, 12 records)
    for text in (ESCAPED, "dog", "café 猫", "img0.png", "img4.gif", "file not found",
                 "not an image", "train-00001-of-00002.tfrecord", "No examples."):
        assert text in page, text
    assert LABEL not in page and "<b>" not in page  # every text from the data is escaped
    assert re.findall(r'(?:src|href)="(?!data:)', page) == []  # nothing outside the page
    assert "http" not in PNG_SRC.sub("", page)
    assert rep.summary in page.replace(ESCAPED, LABEL)
    assert page.startswith("<!DOCTYPE html>") and "<html" not in rep._repr_html_()


def test_report_pictures_decode_with_their_sizes(outputs):
    # 5 images spread over TRAIN (9 records) and VALIDATION (3): 3 and 2; TEST is empty
    page = tfrecorder_lite.inspect(outputs["plain"], num=5).html
    assert page.count("<area ") == 5
    found = sorted(image.size for image in pngs(page))
    expected = [report.contact_sheet_size(3), report.contact_sheet_size(2),
                report.label_histogram_size(2), report.label_histogram_size(1)]
    assert found == sorted(expected)
    for image in pngs(page):
        image.load()  # decodes entirely
        assert ImageStat.Stat(image.convert("L")).stddev[0] > 5  # not blank
    histogram_sizes = (report.label_histogram_size(2), report.label_histogram_size(1))
    histograms = [image for image in pngs(page) if image.size in histogram_sizes]
    assert len(histograms) == 2
    for image in histograms:  # the bars are drawn
        colors = {color for _, color in image.convert("RGB").getcolors(image.width * image.height)}
        assert (66, 133, 244) in colors


def test_report_of_gzip_resized_output_and_one_split(outputs, tmp_path):
    rep = tfrecorder_lite.inspect(outputs["gzip"], split="train", num=64,
                                  out=tmp_path / "r.html")
    assert rep.num_images == 9 and "cannot decode" not in rep.html
    assert "compression GZIP" in rep.summary and "images resized (24x32)" in rep.summary
    assert "Rejected rows: 0" in rep.html and "<h2>VALIDATION</h2>" not in rep.html
    assert (tmp_path / "r.html").read_text(encoding="utf-8") == rep.html
    assert {image.size for image in pngs(rep.html)} == {report.contact_sheet_size(9),
                                                        report.label_histogram_size(2)}


def test_a_damaged_shard_is_named_in_the_report(outputs, tmp_path):
    out = shutil.copytree(outputs["plain"], tmp_path / "out")
    shard = out / "train-00000-of-00002.tfrecord"
    shard.write_bytes(shard.read_bytes()[:100])
    rep = tfrecorder_lite.inspect(out)
    assert f"{shard}: record 0: truncated record" in rep.html
    lost = tfrecorder_lite.read_metadata(out)["splits"]["TRAIN"]["shards"][0]["num_examples"]
    assert rep.num_images == 12 - lost  # the other TRAIN shard and VALIDATION


def test_cli_inspect_and_info(outputs, tmp_path, capsys):
    html = tmp_path / "report.html"
    assert cli.main(["inspect", outputs["plain"], "--num", "3", "--out", str(html)]) == 0
    assert html.read_text(encoding="utf-8").count("<area ") == 3
    assert capsys.readouterr().out == f"wrote {html}: 3 images from {outputs['plain']}\n"

    assert cli.main(["inspect", str(tmp_path), "--out", str(tmp_path / "x.html")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "is not a tfrecorder_lite output" in captured.err

    assert cli.main(["info", outputs["gzip"]]) == 0
    metadata = tfrecorder_lite.read_metadata(outputs["gzip"])
    printed = capsys.readouterr().out
    assert printed == report.summary_text(metadata.manifest, outputs["gzip"]) + "\n"
    assert "formats: jpeg 12\n" in printed and "TRAIN: 9 examples in 2 shard(s), " in printed
    assert str(metadata) == report.summary_text(metadata.manifest, metadata.where)  # print(metadata)
    assert metadata.where == str(outputs["gzip"]) and metadata["compression"] == "GZIP"


def test_report_of_a_remote_output(outputs):
    import fsspec

    fs = fsspec.filesystem("memory")
    for name in os.listdir(outputs["gzip"]):
        fs.put_file(os.path.join(outputs["gzip"], name), f"memory://report/gzip/{name}")
    rep = tfrecorder_lite.inspect("memory://report/gzip", num=4)
    assert rep.num_images == 4 and rep.summary.startswith("memory://report/gzip: 3 labels")


def test_inspect_reads_and_saves_the_report_on_gcs(outputs, gcs, capsys):
    """inspect(out=...) takes a URL like every other path: the page lands on the store whole."""
    folder = gcs.upload(outputs["gzip"], gcs.new_bucket() + "/gzip")
    out = folder.rsplit("/", 1)[0] + "/report.html"
    rep = tfrecorder_lite.inspect(folder, num=4, out=out, storage_options=GCS_OPTIONS)
    assert gcs.fs.cat_file(out) == rep.html.encode("utf-8")
    assert rep.num_images == 4 and rep.summary.startswith(f"{folder}: 3 labels")

    again = folder.rsplit("/", 1)[0] + "/cli.html"
    assert cli.main(["inspect", folder, "--num", "2", "--out", again,
                     "--storage-options", json.dumps(GCS_OPTIONS)]) == 0
    assert capsys.readouterr().out == f"wrote {again}: 2 images from {folder}\n"
    assert gcs.fs.cat_file(again).decode("utf-8").count("<area ") == 2
    assert sorted(p.rsplit("/", 1)[-1] for p in gcs.fs.ls(folder.rsplit("/", 1)[0])) == \
        ["cli.html", "gzip", "report.html"]  # no temporary object left


JPEG_SRC = re.compile(r'src="data:image/jpeg;base64,([^"]+)"')


def natural(height, width, seed):
    """A photo-like RGB image: brightness and colour of 1/f noise, the spectrum of natural
    photographs (as detailed, for a thumbnail's JPEG, as a photo of a circuit board). Made at
    1/4 of the size and enlarged smoothly, which keeps all a thumbnail shows."""
    rng = np.random.default_rng(seed)
    h, w = height // 4, width // 4
    fy, fx = np.fft.fftfreq(h)[:, None], np.fft.rfftfreq(w)[None, :]
    amplitude = 1 / np.maximum(np.hypot(fy, fx), 1 / max(h, w))

    def field():
        phase = rng.uniform(0, 2 * np.pi, amplitude.shape)
        values = np.fft.irfft2(amplitude * np.exp(1j * phase), (h, w))
        return (values - values.mean()) / values.std()

    pixels = 128 + 50 * field()[..., None] + 20 * np.stack([field() for _ in "rgb"], axis=-1)
    small = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    return small.resize((width, height), Image.Resampling.BICUBIC)


def test_the_notebook_view_stays_small_and_the_saved_page_lossless(tmp_path):
    # 64 real images of photo sizes (1024x768 JPEGs, 640x480 PNGs), in two splits
    rows = []
    for i in range(64):
        fmt, size, fast = ("JPEG", (768, 1024), {}) if i % 2 else \
            ("PNG", (480, 640), {"compress_level": 1})
        path = save(natural(*size, seed=i), tmp_path / "images" / f"{i}.{fmt.lower()}", fmt,
                    **fast)
        rows.append(("TRAIN" if i < 48 else "VALIDATION", path, f"label{i % 5}"))
    out = pd.DataFrame(rows, columns=["split", "image_uri", "label"]).tfrecord.to_tfrecord(
        tmp_path / "out", progress=False).output_dir
    rep = tfrecorder_lite.inspect(out)
    inline = rep._repr_html_()
    assert len(inline.encode("utf-8")) < 400_000  # a notebook keeps this in its file
    assert rep.num_images == 64 == inline.count("<area ")
    sheets = [Image.open(io.BytesIO(base64.b64decode(d))) for d in JPEG_SRC.findall(inline)]
    assert sheets[0].width <= 900  # fits a notebook output without being scaled down
    assert sorted(sheet.size for sheet in sheets) == sorted(
        [report.contact_sheet_size(n, report.INLINE_THUMB) for n in (48, 16)])
    for sheet in sheets:
        sheet.load()
        assert ImageStat.Stat(sheet.convert("L")).stddev[0] > 5  # not blank
    assert len(pngs(inline)) == 2  # the label histograms stay PNGs

    page = rep.html  # the saved page: every picture a PNG, the contact sheets as drawn
    assert JPEG_SRC.search(page) is None and len(pngs(page)) == 4
    assert page.count("<area ") == 64 and len(page) > len(inline)
