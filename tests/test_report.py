"""inspect(): the HTML report of real outputs, its pictures, the CLI, and one real browser."""

import base64
import io
import os
import re
import shutil
import subprocess

import pandas as pd
import pytest
from PIL import Image, ImageStat

import tfrecorder_lite
from conftest import photo, save
from tfrecorder_lite import cli, report

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


def _chromium():
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser",
                                                "google-chrome"))), None)


@pytest.mark.slow
def test_report_renders_in_a_headless_browser(outputs, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium binary (apt-get install chromium)")
    page = tfrecorder_lite.inspect(outputs["plain"], out=tmp_path / "r.html")
    shot = tmp_path / "shot.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                    "--window-size=1200,2000", (tmp_path / "r.html").as_uri()],
                   capture_output=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    with Image.open(shot) as image:
        assert image.format == "PNG" and image.size == (1200, 2000)
        rgb = image.convert("RGB")
    assert ImageStat.Stat(rgb.convert("L")).stddev[0] > 10  # not blank
    colors = {color for _, color in rgb.getcolors(1200 * 2000)}
    assert (66, 133, 244) in colors  # a histogram bar: the embedded PNGs were drawn
    assert page.num_images == 12


def test_report_of_a_remote_output(outputs):
    import fsspec

    fs = fsspec.filesystem("memory")
    for name in os.listdir(outputs["gzip"]):
        fs.put_file(os.path.join(outputs["gzip"], name), f"memory://report/gzip/{name}")
    rep = tfrecorder_lite.inspect("memory://report/gzip", num=4)
    assert rep.num_images == 4 and rep.summary.startswith("memory://report/gzip: 3 labels")
