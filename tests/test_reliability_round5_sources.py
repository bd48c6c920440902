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
from tfrecorder_lite.sources import image_folder, registry
from conftest import photo, save

OPTIONS = dict(progress=False, n_jobs=1)
GB = 10**9
ML_USE = "aiplatform.googleapis.com/ml_use"


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
    from tfrecorder_lite.sources import yolo
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


# ----------------------------------------------------------------------------- symlinks

def yolo_folder(root, count=4, names=("car", "bike")):
    """A YOLO folder of ``count`` train images, image i holding one box of class i % 2."""
    for i in range(count):
        save(photo(30, 40, seed=i), root / "images" / "train" / f"im{i}.jpg")
        (root / "labels" / "train").mkdir(parents=True, exist_ok=True)
        (root / "labels" / "train" / f"im{i}.txt").write_text(f"{i % 2} 0.5 0.5 0.2 0.2\n")
    (root / "data.yaml").write_text(f"train: images/train\nnames: {list(names)}\n")
    return root


@pytest.fixture
def outside(tmp_path):
    """A folder beside the dataset: a photo and a label file a link may point at."""
    folder = tmp_path / "outside"
    save(photo(30, 40, seed=9), folder / "private.jpg")
    (folder / "private.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    save(photo(30, 40, seed=8), folder / "train" / "elsewhere.jpg")
    return folder


@pytest.mark.parametrize("link", ["image", "label", "train folder"])
def test_a_yolo_symlink_leading_out_of_the_folder_is_refused_unless_allowed(tmp_path, outside,
                                                                            link):
    root = yolo_folder(tmp_path / "yolo")
    if link == "image":
        os.remove(root / "images" / "train" / "im1.jpg")
        os.symlink(outside / "private.jpg", root / "images" / "train" / "im1.jpg")
        named = os.path.join("images", "train", "im1.jpg")
    elif link == "label":
        os.remove(root / "labels" / "train" / "im1.txt")
        os.symlink(outside / "private.txt", root / "labels" / "train" / "im1.txt")
        named = os.path.join("labels", "train", "im1.txt")
    else:
        os.symlink(outside / "train", root / "more")
        (root / "data.yaml").write_text("train: [images/train, more]\nnames: [car, bike]\n")
        named = "data.yaml: train: 'more' leads outside"
    with pytest.raises(SchemaError) as caught:
        tfrecorder_lite.read_yolo(root)
    assert named in str(caught.value) and "symbolic link" in str(caught.value)
    assert "allow_outside_paths=True" in str(caught.value)
    table = tfrecorder_lite.read_yolo(root, allow_outside_paths=True)
    assert table.image_uri.nunique() == 5 if link == "train folder" else 4


def test_an_image_folder_symlink_leading_out_is_a_rejected_row(tmp_path, outside):
    root = tmp_path / "folder"
    for i in range(3):
        save(photo(30, 40, seed=i), root / "train" / "cat" / f"{i}.jpg")
    os.symlink(outside / "private.jpg", root / "train" / "cat" / "linked.jpg")
    os.symlink(root / "train" / "cat" / "0.jpg", root / "train" / "cat" / "inside.jpg")
    result = convert(root, tmp_path / "out", on_error="skip")
    assert result.counts == {"TRAIN": 4}  # a link that stays in the folder is read
    reason, = result.rejected.reason
    assert reason.startswith(f"train/cat/linked.jpg is a symbolic link to "
                             f"{outside / 'private.jpg'}, outside {root}")
    problems = image_folder.read_image_folder(root).tfrecord.validate(check=None)
    assert problems.problem.tolist() == [reason]
    with pytest.raises(InvalidRowError, match="linked.jpg is a symbolic link"):
        convert(root, tmp_path / "raise")
    allowed = convert(root, tmp_path / "allowed", allow_outside_paths=True)
    assert allowed.counts == {"TRAIN": 5}


def voc_folder(root, count=3):
    (root / "ImageSets" / "Main").mkdir(parents=True)
    (root / "Annotations").mkdir()
    for i in range(count):
        save(photo(30, 40, seed=i), root / "JPEGImages" / f"img{i}.jpg")
        (root / "Annotations" / f"img{i}.xml").write_text(
            f"<annotation><filename>img{i}.jpg</filename><size><width>40</width>"
            "<height>30</height></size><object><name>car</name><bndbox><xmin>2</xmin>"
            "<ymin>2</ymin><xmax>20</xmax><ymax>20</ymax></bndbox></object></annotation>")
    (root / "ImageSets" / "Main" / "train.txt").write_text(
        "".join(f"img{i}\n" for i in range(count)))
    return root


def test_a_voc_symlink_leading_out_rejects_its_image_or_refuses_the_folder(tmp_path, outside):
    root = voc_folder(tmp_path / "VOC")
    os.remove(root / "JPEGImages" / "img1.jpg")
    os.symlink(outside / "private.jpg", root / "JPEGImages" / "img1.jpg")
    result = convert(root, tmp_path / "out", on_error="skip")
    assert result.counts == {"TRAIN": 2}
    reason, = result.rejected.reason
    assert "<filename> 'img1.jpg' names a file outside the image folder" in reason
    assert "(through a symbolic link)" in reason
    assert convert(root, tmp_path / "allowed", allow_outside_paths=True).counts == {"TRAIN": 3}
    (outside / "img2.xml").write_text((root / "Annotations" / "img2.xml").read_text())
    os.remove(root / "Annotations" / "img2.xml")
    os.symlink(outside / "img2.xml", root / "Annotations" / "img2.xml")
    with pytest.raises(SchemaError, match=r"img2\.xml is a symbolic link to .*outside"):
        tfrecorder_lite.read_voc(root)


# ----------------------------------------------------------------------------- masks

MALFORMED_MASKS = {  # image id: (segmentation, what the reason names)
    1: ({"size": [30, 40], "counts": "~~~~"}, "RLE counts '~~~~': counts hold '~' at 0"),
    2: ({"size": ["a", "b"], "counts": [1200]}, "RLE size ['a', 'b']: expected [height, width]"),
    3: ({"size": [30, 40], "counts": None}, "RLE counts None: expected whole numbers >= 0"),
    4: ({"size": [30, 40], "counts": [10**30]}, f"RLE counts cover {10**30} pixels, the image "
                                                "30x40 = 1200"),
    5: ([["a", "b", "c", "d", "e", "f"]], "polygon 1 holds 'a', not a number"),
    6: ({"size": [30, 40], "counts": "P" * 200 + "0"}, "a number longer than any image's"),
}


def coco_with_masks(root):
    """instances_train.json of seven 40x30 photos: image 0 a good polygon, images 1-6 the
    malformed masks."""
    images, annotations = [], []
    for i in range(7):
        save(photo(30, 40, seed=i), root / f"img{i}.jpg")
        images.append({"id": i, "file_name": f"img{i}.jpg", "width": 40, "height": 30})
        segmentation = MALFORMED_MASKS[i][0] if i else [[2, 2, 12, 2, 12, 12]]
        annotations.append({"id": 10 + i, "image_id": i, "category_id": 1,
                            "bbox": [2, 2, 10, 10], "segmentation": segmentation,
                            "iscrowd": int(isinstance(segmentation, dict))})
    path = root / "instances_train.json"
    path.write_text(json.dumps({"images": images, "annotations": annotations,
                                "categories": [{"id": 1, "name": "car"}]}))
    return path


def test_malformed_coco_masks_are_rejected_rows_naming_image_and_field(tmp_path):
    path = coco_with_masks(tmp_path / "coco")
    result = convert(path, tmp_path / "out", include_masks=True, on_error="skip")
    assert result.counts == {"TRAIN": 1}
    reasons = dict(zip(result.rejected.image_uri.map(os.path.basename),
                       result.rejected.reason))
    assert sorted(reasons) == [f"img{i}.jpg" for i in MALFORMED_MASKS]
    for i, (_, named) in MALFORMED_MASKS.items():
        assert reasons[f"img{i}.jpg"].startswith(
            f"image {i} ('img{i}.jpg') of instances_train.json: annotation {10 + i} has "
            "segmentation: "), reasons[f"img{i}.jpg"]
        assert named in reasons[f"img{i}.jpg"]
    with pytest.raises(InvalidRowError) as caught:
        convert(path, tmp_path / "raise", include_masks=True)
    assert "img1.jpg" in str(caught.value) and "segmentation: RLE counts '~~~~'" in \
        str(caught.value)
    table = tfrecorder_lite.read_coco(path, include_masks=True)
    problems = table.tfrecord.validate(check=None)
    assert sorted(problems.problem) == sorted(reasons.values())


def test_malformed_masks_of_a_per_box_table_are_rejected_rows_and_problems(tmp_path):
    """The same masks in a table made by hand: refused by the table's checks (validate()
    names them), each image a rejected row, the good image written."""
    import pandas as pd

    rows = []
    for i in range(7):
        image = save(photo(30, 40, seed=i), tmp_path / f"img{i}.jpg")
        mask = MALFORMED_MASKS[i][0] if i else [[2, 2, 12, 2, 12, 12]]
        rows.append(("TRAIN", str(image), "car", 0.1, 0.1, 0.5, 0.5,
                     json.dumps(mask) if i == 3 else mask))  # JSON text as from a CSV
    table = pd.DataFrame(rows, columns=["split", "image_uri", "label", "xmin", "ymin", "xmax",
                                        "ymax", "mask"])
    problems = table.tfrecord.validate(check=None)
    assert problems.row.tolist() == list(MALFORMED_MASKS)
    for problem, (_, named) in zip(problems.problem, MALFORMED_MASKS.values()):
        assert problem.startswith("box 1 of 1: ") and named in problem
    result = table.tfrecord.to_tfrecord(tmp_path / "out", on_error="skip", **OPTIONS)
    assert result.counts == {"TRAIN": 1}
    assert result.rejected.reason.tolist() == problems.problem.tolist()
    with pytest.raises(InvalidRowError, match=r"row 1 \(.*img1\.jpg\): box 1 of 1: RLE counts"):
        table.tfrecord.to_tfrecord(tmp_path / "raise", **OPTIONS)


# ----------------------------------------------------------------------------- credentials

SECRETS = ("hunter2", "SIGSECRET", "longpassword")


def secret_urls(url):
    """Image URLs with credentials: user info, a signed query, a password so long that a
    reason cutting the URL short would lose its ``@``."""
    host = url.replace("http://", "")
    return [f"http://user:hunter2@{host}/missing.jpg?X-Amz-Signature=SIGSECRET",
            f"http://me:{'longpassword' * 8}@{host}/also-missing.jpg"]


def assert_no_secret(result, out, *texts):
    shown = [result.rejected.to_csv(), *texts]
    shown += [p.read_text(errors="replace") for p in out.rglob("*") if p.is_file()]
    for secret in SECRETS:
        assert not [text for text in shown if secret in text], secret


def test_credentials_in_an_annotation_files_image_urls_reach_no_rejection(tmp_path, caplog):
    from object_stores import Server

    server = Server("http", root=tmp_path)
    try:
        urls = secret_urls(server.url)
        save(photo(30, 40), tmp_path / "images" / "good.jpg")
        names = ["good.jpg", *urls]
        (tmp_path / "images" / "instances_train.json").write_text(json.dumps({
            "images": [{"id": i, "file_name": name, "width": 40, "height": 30}
                       for i, name in enumerate(names)],
            "annotations": [{"id": i, "image_id": i, "category_id": 1, "bbox": [1, 1, 5, 5]}
                            for i in range(3)],
            "categories": [{"id": 1, "name": "car"}]}))
        (tmp_path / "images" / "labels.jsonl").write_text("\n".join(json.dumps({
            "imageGcsUri": name, "classificationAnnotation": {"displayName": "car"},
            "dataItemResourceLabels": {ML_USE: "training"}}) for name in names) + "\n")
        for source, read in [("instances_train.json", tfrecorder_lite.read_coco),
                             ("labels.jsonl", tfrecorder_lite.read_vertex)]:
            path = tmp_path / "images" / source
            for allow in (False, True):  # refused by the path rule, or not found there
                out = tmp_path / f"out-{source}-{allow}"
                result = convert(path, out, on_error="skip", allow_outside_paths=allow)
                assert result.counts == {"TRAIN": 1} and len(result.rejected) == 2
                assert_no_secret(result, out)
                if allow:
                    assert (result.rejected.reason == "file not found").all()
                    assert result.rejected.image_uri.str.contains("REDACTED@").all()
                else:
                    assert result.rejected.reason.str.contains("REDACTED@").all()
                problems = read(path, allow_outside_paths=allow).tfrecord.validate(
                    check="header")
                assert len(problems) == 2
                with pytest.raises(InvalidRowError) as caught:
                    convert(path, tmp_path / f"raise-{source}-{allow}",
                            allow_outside_paths=allow)
                assert_no_secret(result, out, problems.to_csv(), str(caught.value),
                                 caught.value.reason, caplog.text)
    finally:
        server.stop()


# ----------------------------------------------------------------------------- bad lines


def vertex_line(image, split="training", **annotations):
    return json.dumps({"imageGcsUri": image, "dataItemResourceLabels": {ML_USE: split},
                       **annotations})


@pytest.fixture
def sixteen(tmp_path):
    """Sixteen photos in ``images/``."""
    for i in range(16):
        save(photo(30, 40, seed=i), tmp_path / "images" / f"im{i}.jpg")
    return tmp_path


BAD_LINES = {  # line: (its text, what its reason says)
    3: ("{not json", "line 3: not JSON (Expecting property name"),
    7: (vertex_line("images/im6.jpg", "trainig", classificationAnnotation={"displayName": "a"}),
        f"line 7: dataItemResourceLabels[\"{ML_USE}\"]: 'trainig' is no ml_use"),
    11: (vertex_line("images/im10.jpg", classificationAnnotation={"name": "a"}),
         "line 11: classificationAnnotation.displayName: missing"),
    16: (json.dumps({"classificationAnnotation": {"displayName": "b"}}),
         "line 16: imageGcsUri: missing"),
}


def test_a_vertex_file_with_4_bad_lines_of_16_writes_the_12_and_rejects_each(sixteen):
    lines = [BAD_LINES[n][0] if n in BAD_LINES else vertex_line(
        f"images/im{n - 1}.jpg", classificationAnnotation={"displayName": "ab"[n % 2]})
        for n in range(1, 17)]
    (sixteen / "flowers.jsonl").write_text("\n".join(lines) + "\n")
    result = convert(sixteen / "flowers.jsonl", sixteen / "out", on_error="skip")
    assert result.counts == {"TRAIN": 12}
    assert len(result.rejected) == 4
    for reason, (_, expected) in zip(result.rejected.reason, BAD_LINES.values()):
        assert reason.startswith(expected), (reason, expected)
    assert len((sixteen / "out" / "rejected.csv").read_text().splitlines()) == 1 + 4
    problems = tfrecorder_lite.read_vertex(sixteen / "flowers.jsonl").tfrecord.validate(
        check=None)
    assert problems.problem.tolist() == result.rejected.reason.tolist()
    with pytest.raises(InvalidRowError) as caught:
        convert(sixteen / "flowers.jsonl", sixteen / "raise")
    assert str(caught.value).startswith("row 2 (JSON line 3 of flowers.jsonl): line 3: not JSON")


def test_a_bad_vertex_box_or_csv_line_rejects_its_image_only(sixteen):
    good = {"displayName": "car", "xMin": 0.1, "yMin": 0.1, "xMax": 0.5, "yMax": 0.5}
    (sixteen / "boxes.jsonl").write_text("\n".join([
        vertex_line("images/im0.jpg", boundingBoxAnnotations=[good]),
        vertex_line("images/im1.jpg", boundingBoxAnnotations=[good, {**good,
                                                                     "displayName": None}]),
        vertex_line("images/im2.jpg", boundingBoxAnnotations={"not": "a list"}),
        vertex_line("images/im3.jpg", boundingBoxAnnotations=[good]),
        vertex_line("images/im1.jpg", boundingBoxAnnotations=[good]),  # im1's other line
    ]) + "\n")
    result = convert(sixteen / "boxes.jsonl", sixteen / "out", on_error="skip")
    assert result.counts == {"TRAIN": 2}
    assert dict(zip(result.rejected.image_uri.map(os.path.basename), result.rejected.reason)) \
        == {"im1.jpg": "line 2: boundingBoxAnnotations[1].displayName: missing",
            "im2.jpg": "line 3: boundingBoxAnnotations: not a list of annotations"}
    with pytest.raises(InvalidRowError, match=r"JSON line 2 of boxes\.jsonl.*im1\.jpg"):
        convert(sixteen / "boxes.jsonl", sixteen / "raise")
    # a Vertex AI CSV, classification and detection, read as Vertex AI's
    (sixteen / "labels.csv").write_text("".join(
        f"{'later' if i == 2 else 'training'},images/im{i}.jpg,ab\n" for i in range(4)))
    table = tfrecorder_lite.read_vertex(sixteen / "labels.csv")
    result = table.tfrecord.to_tfrecord(sixteen / "csv", on_error="skip", **OPTIONS)
    assert result.counts == {"TRAIN": 3}
    assert result.rejected.reason.tolist() == [
        "line 3: ML_USE: 'later' is no ml_use: expected training, validation or test (or "
        "none: UNASSIGNED)"]
    (sixteen / "boxes.csv").write_text("".join(
        f"training,images/im{i}.jpg,car,0.1,{'x' if i == 1 else '0.2'},,,0.5,0.6,,\n"
        for i in range(3)) + "later,images/im3.jpg,car,0.1,0.2,,,0.5,0.6,,\n")
    table = tfrecorder_lite.read_vertex(sixteen / "boxes.csv")
    result = table.tfrecord.to_tfrecord(sixteen / "csv-boxes", on_error="skip", **OPTIONS)
    assert result.counts == {"TRAIN": 2}
    reasons = dict(zip(result.rejected.image_uri.map(os.path.basename), result.rejected.reason))
    assert reasons["im1.jpg"].startswith("line 2: not an AutoML detection row")
    assert reasons["im3.jpg"].startswith("line 4: ML_USE: 'later' is no ml_use")
    with pytest.raises(InvalidRowError, match=r"im1\.jpg\): line 2: not an AutoML"):
        table.tfrecord.to_tfrecord(sixteen / "raise-csv", **OPTIONS)


def test_an_automl_csv_row_with_a_bad_box_rejects_its_image_only(sixteen):
    (sixteen / "boxes.csv").write_text("".join(
        f"TRAIN,images/im{i}.jpg,car,0.1,0.2,,,{'0x1' if i == 2 else '0.5'},0.6,,\n"
        for i in range(5)))
    result = convert(sixteen / "boxes.csv", sixteen / "out", on_error="skip")
    assert result.counts == {"TRAIN": 4}
    reason, = result.rejected.reason
    assert reason.startswith("line 3: not an AutoML detection row") and "'0x1'" in reason
    assert tfrecorder_lite.validate(registry.read_source(sixteen / "boxes.csv")[0], check=None) \
        .problem.tolist() == [reason]
    with pytest.raises(InvalidRowError, match=r"\(CSV line 3\)"):
        convert(sixteen / "boxes.csv", sixteen / "raise")


def test_a_yolo_label_file_naming_an_unknown_class_rejects_its_image_only(tmp_path):
    root = yolo_folder(tmp_path / "yolo")
    (root / "labels" / "train" / "im2.txt").write_text("0 0.5 0.5 0.2 0.2\n7 0.5 0.5 0.2 0.2\n")
    result = convert(root, tmp_path / "out", on_error="skip")
    assert result.counts == {"TRAIN": 3}
    reason, = result.rejected.reason
    assert reason == (f"{os.path.join('labels', 'train', 'im2.txt')} line 2: class '7' is not "
                      "in names (0-1)")
    assert os.path.basename(result.rejected.image_uri.iloc[0]) == "im2.jpg"
    with pytest.raises(InvalidRowError) as caught:
        convert(root, tmp_path / "raise")
    assert "im2.jpg" in str(caught.value) and "im2.txt line 2: class '7'" in str(caught.value)
    problems = tfrecorder_lite.read_yolo(root).tfrecord.validate(check=None)
    assert problems.problem.tolist() == [reason]


def test_a_malformed_voc_annotation_rejects_its_image_only(tmp_path):
    root = voc_folder(tmp_path / "VOC", count=5)
    annotations = root / "Annotations"
    text = (annotations / "img1.xml").read_text()
    (annotations / "img1.xml").write_text(text.replace("<width>40</width>", "<width>0</width>"))
    (annotations / "img2.xml").write_text(text.replace("img1", "img2").replace(
        "<name>car</name>", "<name>car</name><difficult>yes</difficult>"))
    (annotations / "img3.xml").write_text(text.replace("img1", "img3").replace(
        "<xmin>2</xmin>", "<xmin>two</xmin>"))
    (annotations / "img4.xml").write_text(text.replace("img1", "img4")[:-20])  # cut short
    result = convert(root, tmp_path / "out", on_error="skip")
    assert result.counts == {"TRAIN": 1}
    reasons = dict(zip(result.rejected.image_uri.map(os.path.basename), result.rejected.reason))
    assert reasons["img1.jpg"] == f"{annotations / 'img1.xml'}: size/width and size/height " \
        "must be the image's size in pixels, not '0' and '30'"
    assert reasons["img2.jpg"] == f"{annotations / 'img2.xml'}: object 1 has difficult 'yes', " \
        "expected 0 or 1"
    assert reasons["img3.jpg"] == "box 1 of 1: xmin is missing"
    assert reasons["img4.jpg"].startswith(f"{annotations / 'img4.xml'} is not well-formed XML")
    assert tfrecorder_lite.read_voc(root).tfrecord.validate(check=None).problem.tolist() == \
        result.rejected.reason.tolist()
    with pytest.raises(InvalidRowError, match=r"img1\.jpg\): .*img1\.xml: size/width"):
        convert(root, tmp_path / "raise")
