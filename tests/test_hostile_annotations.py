"""Reliability, round 4 (issue 34): annotation files that lie, labels that would break label
files, paths that escape their image folder, secrets in warnings, tampered detection outputs.

Each scenario is converted for real (Pillow images, TFRecord shards, the command line); each
test fails on the code before the issue's fixes."""

import importlib
import json
import logging
import os
import pkgutil

import pandas as pd
import pytest

import tfrecorder_lite
from tfrecorder_lite import SchemaError, VerifyError, cli, redaction
from tfrecorder_lite.sources import registry
from tfrecorder_lite.sources.coco import read_coco
from tfrecorder_lite.sources.voc import read_voc
from conftest import photo, save

BOXES = ["xmin", "ymin", "xmax", "ymax"]
SECRET_URL = "memory://user:hunter2@bucket/coco"


def convert(source, out, **options):
    return tfrecorder_lite.convert(source, out, progress=False, n_jobs=1, **options)


def label_map_items(text):
    """``[(id, name)]`` of a label_map.pbtxt, parsed by protobuf's own text format parser
    (with the Object Detection API's StringIntLabelMap message, built here)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

    proto = descriptor_pb2.FileDescriptorProto(name="label_map_test.proto", package="t")
    item = proto.message_type.add(name="StringIntLabelMapItem")
    field = descriptor_pb2.FieldDescriptorProto
    item.field.add(name="name", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    item.field.add(name="id", number=2, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    label_map = proto.message_type.add(name="StringIntLabelMap")
    label_map.field.add(name="item", number=1, type=field.TYPE_MESSAGE,
                        type_name=".t.StringIntLabelMapItem", label=field.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    message = message_factory.GetMessageClass(pool.FindMessageTypeByName("t.StringIntLabelMap"))
    parsed = text_format.Parse(text, message())
    return [(i.id, i.name) for i in parsed.item]


def coco(images, annotations, categories=({"id": 1, "name": "car"},)):
    return {"images": list(images), "annotations": list(annotations),
            "categories": list(categories)}


def write_coco(path, document):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def box(id_, image_id, bbox=(2, 2, 10, 10), category=1, **more):
    return {"id": id_, "image_id": image_id, "category_id": category, "bbox": list(bbox),
            **more}


@pytest.fixture
def photos(tmp_path):
    """Five 40x30 photos in ``images/``: img0.jpg ... img4.jpg."""
    for i in range(5):
        save(photo(30, 40, seed=i), tmp_path / "images" / f"img{i}.jpg")
    return tmp_path / "images"


def image_entry(i, **more):
    return {"id": i, "file_name": f"img{i}.jpg", "width": 40, "height": 30, **more}


# ----------------------------------------------------------------------------- 1. line breaks

def voc_folder(root, names):
    """A VOC folder whose image ``img<i>`` has one object named ``names[i]``, all TRAIN."""
    (root / "ImageSets" / "Main").mkdir(parents=True)
    (root / "Annotations").mkdir()
    for i, name in enumerate(names):
        save(photo(30, 40, seed=i), root / "JPEGImages" / f"img{i}.jpg")
        (root / "Annotations" / f"img{i}.xml").write_text(
            f"<annotation><filename>img{i}.jpg</filename><size><width>40</width>"
            f"<height>30</height></size><object><name>{name}</name><bndbox><xmin>2</xmin>"
            "<ymin>2</ymin><xmax>20</xmax><ymax>20</ymax></bndbox></object></annotation>")
    (root / "ImageSets" / "Main" / "train.txt").write_text(
        "".join(f"img{i}\n" for i in range(len(names))))
    return root


@pytest.mark.parametrize("source", ["automl", "voc", "dataframe"])
def test_a_label_with_a_line_break_is_refused_by_every_detection_source(tmp_path, photos,
                                                                        source):
    bad = "a\nb"
    if source == "automl":
        (tmp_path / "boxes.csv").write_text(
            'TRAIN,images/img0.jpg,"a\nb",0.1,0.1,,,0.5,0.5,,\n'
            "TRAIN,images/img1.jpg,zebra,0.1,0.1,,,0.5,0.5,,\n"
            "TRAIN,images/img2.jpg,b,0.2,0.2,,,0.6,0.6,,\n")
        table = tmp_path / "boxes.csv"
    elif source == "voc":
        table = voc_folder(tmp_path / "VOC", ["a&#10;b", "zebra", "b"])
    else:
        table = pd.DataFrame([("TRAIN", str(photos / f"img{i}.jpg"), label, 0.1, 0.1, 0.5, 0.5)
                              for i, label in enumerate([bad, "zebra", "b"])],
                             columns=["split", "image_uri", "label", *BOXES])
        problems = table.tfrecord.validate(check=None)
        assert problems.problem.str.contains("line break").tolist() == [True]
    out = tmp_path / "out"
    result = convert(table, out, on_error="skip")
    assert result.counts == {"TRAIN": 2}
    reason, = result.rejected.reason
    assert "label 'a\\nb' holds a control character or line break" in reason
    assert result.labels == ["", "b", "zebra"]
    assert (out / "labels.txt").read_text().splitlines() == ["", "b", "zebra"]
    assert label_map_items((out / "label_map.pbtxt").read_text()) == [(1, "b"), (2, "zebra")]
    assert tfrecorder_lite.verify(out).startswith("OK")


def test_label_map_pbtxt_parses_with_quotes_backslashes_and_any_script(tmp_path, photos):
    names = ["it's", 'say "hi"', "back\\slash", "日本語", "emoji 🚗"]
    table = pd.DataFrame([("TRAIN", str(photos / f"img{i}.jpg"), name, 0.1, 0.1, 0.5, 0.5)
                          for i, name in enumerate(names)],
                         columns=["split", "image_uri", "label", *BOXES])
    result = table.tfrecord.to_tfrecord(tmp_path / "out", progress=False, n_jobs=1)
    parsed = label_map_items((tmp_path / "out" / "label_map.pbtxt").read_text())
    assert parsed == [(i, text) for i, text in enumerate(result.labels) if i]
    assert sorted(text for _, text in parsed) == sorted(names)


def test_verify_refuses_labels_that_would_break_the_label_files(tmp_path, photos):
    table = pd.DataFrame([("TRAIN", str(photos / "img0.jpg"), "car", 0.1, 0.1, 0.5, 0.5)],
                         columns=["split", "image_uri", "label", *BOXES])
    out = tmp_path / "out"
    table.tfrecord.to_tfrecord(out, progress=False, n_jobs=1)
    metadata = json.loads((out / "metadata.json").read_text())
    metadata["labels"][1] = "c\nar"
    metadata["splits"]["TRAIN"]["label_counts"] = {"c\nar": 1}
    (out / "metadata.json").write_text(json.dumps(metadata))
    (out / "labels.txt").write_text("\nc\nar\n")  # what such a manifest's labels.txt holds
    with pytest.raises(VerifyError, match=r"labels.txt line 2: label 'c\\nar' holds a control"):
        tfrecorder_lite.verify(out)


# ----------------------------------------------------------------------------- 2. image ids

def test_images_sharing_a_coco_id_are_refused_and_keep_no_one_elses_boxes(tmp_path, photos):
    document = coco(
        [image_entry(0, id=7), image_entry(1, id=7), image_entry(2, id=1),
         image_entry(3, id=1.0), image_entry(4, id=True)],
        [box(1, 7), box(2, 7, (5, 5, 20, 20)), box(3, 1), box(4, 1.0, (1, 1, 3, 3))])
    path = write_coco(tmp_path / "instances_train.json", document)
    table = read_coco(path, image_dir=photos)
    result = convert(table, tmp_path / "out", on_error="skip")
    assert result.counts == {"TRAIN": 1}  # img2 (id 1) only, with its own box only
    reasons = dict(zip(result.rejected.image_uri.map(os.path.basename), result.rejected.reason))
    assert set(reasons) == {"img0.jpg", "img1.jpg", "img3.jpg", "img4.jpg"}
    assert "image id 7 is the id of 2 images ('img0.jpg', 'img1.jpg')" in reasons["img0.jpg"]
    assert "cannot be told apart" in reasons["img1.jpg"]
    assert "image id 1.0 is not an integer" in reasons["img3.jpg"]
    assert "image id True is not an integer" in reasons["img4.jpg"]
    assert result.metadata["boxes"]["num_boxes"] == {"TRAIN": 1}
    assert result.metadata["splits"]["TRAIN"]["label_counts"] == {"car": 1}


# ----------------------------------------------------------------------------- 3. secrets

def test_coco_warnings_show_no_credential(tmp_path, caplog):
    import fsspec

    document = coco([{"id": 1, "file_name": "a.jpg?X-Amz-Signature=sig123", "width": 10,
                      "height": 10}],
                    [box(1, 1, (5, 5, 9, 9)), box(2, 99)])  # past the edge; an unknown image
    url = f"{SECRET_URL}/instances_val.json?X-Amz-Signature=sig123"
    fsspec.filesystem("memory").pipe_file(url, json.dumps(document).encode())
    with caplog.at_level(logging.INFO, logger="tfrecorder_lite"):
        table = read_coco(url, image_dir="http://user:hunter2@127.0.0.1:9/images")
    assert len(table) == 1
    messages = [r.getMessage() for r in caplog.records]
    assert any("reaching past the image's edge" in m for m in messages)
    assert any("name image ids that are not in 'images'" in m for m in messages)
    assert all("REDACTED" in m for m in messages)
    assert not [m for m in messages if "hunter2" in m or "sig123" in m]


def test_every_logger_of_the_package_redacts(caplog):
    loggers = {}
    for info in pkgutil.walk_packages(tfrecorder_lite.__path__, "tfrecorder_lite."):
        module = importlib.import_module(info.name)
        loggers.update((value.name, value) for value in vars(module).values()
                       if isinstance(value, logging.Logger)
                       and value.name.startswith("tfrecorder_lite."))
    assert "tfrecorder_lite.sources.coco" in loggers and len(loggers) >= 10
    with caplog.at_level(logging.INFO, logger="tfrecorder_lite"):
        for log in loggers.values():
            log.warning("read %s", "https://u:hunter2@h/x.jpg?sig=abc")
    assert len(caplog.records) == len(loggers)
    assert [r.name for r in caplog.records if "hunter2" in r.getMessage()
            or "abc" in r.getMessage()] == []
    assert redaction.REDACTED in caplog.records[0].getMessage()


# ----------------------------------------------------------------------------- 4. JSON limits

def test_a_deeply_nested_coco_json_is_a_one_line_error(tmp_path, capsys):
    path = tmp_path / "instances_train.json"
    path.write_text("[" * 10_000 + "]" * 10_000)
    with pytest.raises(SchemaError, match="nested too deeply"):
        read_coco(path)
    assert cli.main(["convert", str(path), str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nested too deeply" in err and "Traceback" not in err


def test_coco_json_past_the_size_bound_or_with_nan_is_refused_before_parsing(tmp_path):
    path = write_coco(tmp_path / "instances_train.json",
                      coco([image_entry(0)], [box(1, 0)]))
    size = path.stat().st_size
    with pytest.raises(SchemaError, match=rf"is {size} bytes; annotation files are read whole, "
                                          r"up to 100 bytes \(max_annotation_bytes=100\)"):
        read_coco(path, max_annotation_bytes=100)
    assert len(read_coco(path, max_annotation_bytes=size)) == 1
    path.write_text(path.read_text().replace('"width": 40', '"width": NaN'))
    with pytest.raises(SchemaError, match="is not JSON: NaN is not a JSON value"):
        read_coco(path)


# ----------------------------------------------------------------------------- 5. verify

@pytest.fixture
def detection_output(tmp_path, photos):
    table = pd.DataFrame([("TRAIN", str(photos / "img0.jpg"), "car", 0.1, 0.1, 0.5, 0.5),
                          ("TRAIN", str(photos / "img0.jpg"), "dog", 0.2, 0.2, 0.6, 0.6),
                          ("TEST", str(photos / "img1.jpg"), "car", 0.1, 0.1, 0.5, 0.5)],
                         columns=["split", "image_uri", "label", *BOXES])
    out = tmp_path / "out"
    table.tfrecord.to_tfrecord(out, progress=False, n_jobs=1)
    assert tfrecorder_lite.verify(out).startswith("OK")
    return out


@pytest.mark.parametrize("edit,problem", [
    (lambda boxes: boxes["num_boxes"].update(TRAIN=-999), "boxes.num_boxes is"),
    (lambda boxes: boxes["num_boxes"].update(TRAIN="2"), "boxes.num_boxes is"),
    (lambda boxes: boxes["num_boxes"].update(TRAIN=True), "boxes.num_boxes is"),
    (lambda boxes: boxes.pop("num_boxes"), 'boxes.num_boxes is "missing"'),
    (lambda boxes: boxes.update(label_offset=0), "boxes.label_offset is 0, expected 1"),
])
def test_verify_finds_edited_box_counts(detection_output, edit, problem):
    metadata = json.loads((detection_output / "metadata.json").read_text())
    edit(metadata["boxes"])
    (detection_output / "metadata.json").write_text(json.dumps(metadata))
    with pytest.raises(VerifyError, match=problem) as caught:
        tfrecorder_lite.verify(detection_output)
    assert len(caught.value.problems) == 1


def test_verify_checks_the_label_map_even_without_its_pointer(detection_output):
    metadata = json.loads((detection_output / "metadata.json").read_text())
    del metadata["boxes"]["label_map"]
    (detection_output / "metadata.json").write_text(json.dumps(metadata))
    label_map = detection_output / "label_map.pbtxt"
    label_map.write_text(label_map.read_text().replace("'dog'", "'cat'"))
    with pytest.raises(VerifyError) as caught:
        tfrecorder_lite.verify(detection_output)
    assert sorted(caught.value.problems) == [
        "label_map.pbtxt does not match metadata.json's labels",
        'metadata.json: boxes.label_map is "missing", expected "label_map.pbtxt"']
    label_map.unlink()
    with pytest.raises(VerifyError, match="label_map.pbtxt is missing"):
        tfrecorder_lite.verify(detection_output)


# ----------------------------------------------------------------------------- 6. VOC lists

def test_an_image_list_that_is_not_utf8_is_named(tmp_path):
    root = voc_folder(tmp_path / "VOC", ["car", "dog"])
    (root / "ImageSets" / "Main" / "train.txt").write_bytes(b"img0\nimg\xff1\n")
    with pytest.raises(SchemaError) as caught:
        read_voc(root)
    message = str(caught.value)
    assert str(root / "ImageSets" / "Main" / "train.txt") in message
    assert "line 2 is not UTF-8 text: byte 0xff at offset 8" in message


def test_a_voc_annotation_or_list_past_the_size_bound_is_refused_before_it_is_read(tmp_path):
    root = voc_folder(tmp_path / "VOC", ["car", "dog"])
    annotation = root / "Annotations" / "img1.xml"
    size = annotation.stat().st_size
    annotation.write_bytes(annotation.read_bytes() + b" " * 200)  # XML allows trailing space
    with pytest.raises(SchemaError, match=rf"img1.xml is {size + 200} bytes; annotation files "
                                          rf"are read whole, up to {size + 100} bytes "
                                          rf"\(max_annotation_bytes={size + 100}\)"):
        read_voc(root, max_annotation_bytes=size + 100)
    listed = root / "ImageSets" / "Main" / "train.txt"
    with pytest.raises(SchemaError, match=r"train.txt is \d+ bytes; annotation files"):
        read_voc(root, max_annotation_bytes=listed.stat().st_size - 1)
    assert len(read_voc(root, max_annotation_bytes=size + 200)) == 2
    with pytest.raises(SchemaError, match=r"img1.xml is \d+ bytes"):  # the bound of every door
        registry.read_source(str(root), max_annotation_bytes=size + 100)


# ----------------------------------------------------------------------------- 7. surrogates

def test_a_coco_category_with_a_lone_surrogate_is_refused_before_anything_is_written(
        tmp_path, photos):
    path = tmp_path / "instances_train.json"
    document = coco([image_entry(0), image_entry(1)], [box(1, 0), box(2, 1, category=2)],
                    [{"id": 1, "name": "car"}, {"id": 2, "name": "bad\ud800"}])
    path.write_text(json.dumps(document))  # JSON spells it "bad\\ud800"
    out = tmp_path / "out"
    with pytest.raises(SchemaError, match=r"category 2: label 'bad\\ud800' is not valid "
                                          r"Unicode text: it holds a lone surrogate"):
        convert(path, out, image_dir=photos)
    assert not os.path.exists(out / ".tfrecorder_lite")
    document["categories"][1]["name"] = "bad"
    path.write_text(json.dumps(document))
    result = convert(path, out, image_dir=photos)  # the corrected run needs no overwrite
    assert result.counts == {"TRAIN": 2}


@pytest.mark.parametrize("kind", ["classification", "detection"])
def test_a_table_label_with_a_lone_surrogate_is_a_rejected_row(tmp_path, photos, kind):
    rows = [("TRAIN", str(photos / f"img{i}.jpg")) for i in range(3)]
    table = pd.DataFrame(rows, columns=["split", "image_uri"])
    table["label"] = pd.Series(["car", "bad\ud800", "dog"], dtype=object)
    if kind == "detection":
        table = table.assign(xmin=0.1, ymin=0.1, xmax=0.5, ymax=0.5)
    problems = table.tfrecord.validate(check=None)
    assert problems.row.tolist() == [1]
    assert "holds a lone surrogate" in problems.problem[0]
    result = table.tfrecord.to_tfrecord(tmp_path / "out", on_error="skip", progress=False,
                                        n_jobs=1)
    assert result.counts == {"TRAIN": 2} and result.rejected.index.tolist() == [1]
    assert [t for t in result.labels if t] == ["car", "dog"]
    assert tfrecorder_lite.verify(tmp_path / "out").startswith("OK")


# ----------------------------------------------------------------------------- paths

@pytest.mark.parametrize("name", ["../outside.jpg", "OUTSIDE", "file://OUTSIDE",
                                  "http://127.0.0.1:9/x.jpg", "sub/../../outside.jpg"])
def test_a_coco_file_may_only_name_images_inside_its_image_folder(tmp_path, photos, name):
    outside = save(photo(30, 40, seed=9), tmp_path / "outside.jpg")
    name = name.replace("OUTSIDE", outside)
    document = coco([image_entry(0), image_entry(1, file_name=name)], [box(1, 0), box(2, 1)])
    path = write_coco(tmp_path / "instances_train.json", document)
    result = convert(path, tmp_path / "out", image_dir=photos, on_error="skip")
    assert result.counts == {"TRAIN": 1}
    reason, = result.rejected.reason
    assert f"file_name {name!r} names a file outside the image folder {photos}" in reason
    assert "Pass allow_outside_paths=True (--allow-outside-paths) to read it" in reason
    if "127.0.0.1" not in name:
        allowed = convert(path, tmp_path / "allowed", image_dir=photos,
                          allow_outside_paths=True)
        assert allowed.counts == {"TRAIN": 2}


def test_a_voc_filename_outside_jpegimages_is_refused_unless_allowed(tmp_path):
    root = voc_folder(tmp_path / "VOC", ["car", "dog"])
    outside = save(photo(30, 40, seed=9), tmp_path / "secret.jpg")
    xml = root / "Annotations" / "img1.xml"
    xml.write_text(xml.read_text().replace("img1.jpg", outside))
    table = read_voc(root)
    problems = table.tfrecord.validate(check=None)
    assert problems.problem.str.contains("names a file outside the image folder").tolist() == [True]
    rejected = convert(root, tmp_path / "out", on_error="skip").rejected
    assert "--allow-outside-paths" in rejected.reason.iloc[0]
    assert cli.main(["convert", str(root), str(tmp_path / "cli"), "--no-progress",
                     "--allow-outside-paths"]) == 0
    metadata = json.loads((tmp_path / "cli" / "metadata.json").read_text())
    assert metadata["splits"]["TRAIN"]["num_examples"] == 2
    with pytest.raises(SchemaError, match="allow_outside_paths=True does not apply to a "
                                          "DataFrame"):
        registry.read_source(table, allow_outside_paths=True)


# ----------------------------------------------------------------------------- splits

@pytest.mark.parametrize("spelling", ["./images/img0.jpg", "images/img0.jpg/",
                                      "images/x/../img0.jpg"])
def test_one_image_in_two_splits_is_refused_however_it_is_spelled(tmp_path, photos, spelling):
    (tmp_path / "boxes.csv").write_text(f"TRAIN,images/img0.jpg,car,0.1,0.1,,,0.5,0.5,,\n"
                                        f"TEST,{spelling},car,0.2,0.2,,,0.6,0.6,,\n")
    with pytest.raises(SchemaError, match="image images/img0.jpg is TRAIN on line 1 and TEST "
                                          "on line 2; an image belongs to one split"):
        registry.read_source(tmp_path / "boxes.csv")


# ----------------------------------------------------------------------------- all rejected

def test_a_table_whose_every_row_is_rejected_writes_no_output(tmp_path, photos):
    missing = pd.DataFrame([("TRAIN", str(tmp_path / "nope.jpg"), "car"),
                            ("TEST", str(photos / "img0.jpg"), " ")],
                           columns=["split", "image_uri", "label"])
    with pytest.raises(SchemaError, match="none of the table's 2 rows can be written"):
        missing.tfrecord.to_tfrecord(tmp_path / "out", on_error="skip", progress=False)
    assert not os.path.exists(tmp_path / "out" / "metadata.json")
    assert cli.main(["convert", str(write_coco(tmp_path / "instances_train.json", coco(
        [{"id": 1, "file_name": None, "width": 4, "height": 4}], []))),
        str(tmp_path / "cli"), "--on-error", "skip", "--no-progress"]) == 2
    assert not os.path.exists(tmp_path / "cli" / "metadata.json")


def test_a_table_whose_every_row_fails_while_writing_leaves_the_folder_reusable(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for i in range(3):
        (broken / f"{i}.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a JPEG")
    table = pd.DataFrame([("TRAIN", str(broken / f"{i}.jpg"), "car") for i in range(3)],
                         columns=["split", "image_uri", "label"])
    out = tmp_path / "out"
    with pytest.raises(SchemaError, match="none of the table's 3 rows can be written"):
        table.tfrecord.to_tfrecord(out, on_error="skip", progress=False, n_jobs=1)
    assert sorted(os.listdir(out)) == []  # no shard, no state, no metadata.json
    for i in range(3):
        save(photo(30, 40, seed=i), broken / f"{i}.jpg")
    result = table.tfrecord.to_tfrecord(out, on_error="skip", progress=False, n_jobs=1)
    assert result.counts == {"TRAIN": 3}


# ----------------------------------------------------------------------------- strict values

@pytest.mark.parametrize("change,reason", [
    (lambda d: d["annotations"][1].update(bbox=[True, 0, 1, 1]),
     "annotation 2 has bbox [True, 0, 1, 1], not four numbers [x, y, width, height]"),
    (lambda d: d["annotations"][1].update(bbox=["1", 0, 1, 1]), "not four numbers"),
    (lambda d: d["annotations"][1].update(iscrowd="0"), "annotation 2 has iscrowd '0', "
                                                        "expected 0 or 1"),
    (lambda d: d["annotations"][1].update(iscrowd=2), "iscrowd 2, expected 0 or 1"),
    (lambda d: d["annotations"][1].update(area="big"), "area 'big' is not a number"),
    (lambda d: d["images"][1].update(file_name=None), "file_name None names no image file"),
    (lambda d: d["images"][1].update(width=True), "width True and height 30 are not the "
                                                  "image's size in pixels"),
])
def test_coco_values_are_taken_as_coco_defines_them(tmp_path, photos, change, reason):
    document = coco([image_entry(0), image_entry(1)], [box(1, 0), box(2, 1)])
    change(document)
    path = write_coco(tmp_path / "instances_train.json", document)
    result = convert(path, tmp_path / "out", image_dir=photos, on_error="skip")
    assert result.counts == {"TRAIN": 1}
    found, = result.rejected.reason
    assert reason in found and found.startswith("image 1 (")


@pytest.mark.parametrize("cell", ["0.5_0", "١", "nan", "0x1"])
def test_automl_coordinates_are_plain_decimal_numbers(tmp_path, cell):
    (tmp_path / "boxes.csv").write_text(f"TRAIN,a.jpg,car,0.1,0.1,,,{cell},0.5,,\n")
    table, _ = registry.read_source(tmp_path / "boxes.csv", task="detection")
    assert table.attrs["source_problems"][0].startswith("line 1: not an AutoML detection row")


# ----------------------------------------------------------------------------- info, warnings

def test_info_names_detection_and_counts_boxes_and_no_empty_label_is_warned(
        detection_output, tmp_path, photos, capsys, caplog):
    assert cli.main(["info", str(detection_output)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{detection_output}: 2 labels (detection: 3 boxes), ")
    assert "TRAIN: 1 examples (2 boxes) in 1 shard(s)" in lines[2]
    assert "TEST: 1 examples (1 boxes) in 1 shard(s)" in "\n".join(lines)
    document = coco([image_entry(0)], [box(1, 0, category=3)],
                    [{"id": 3, "name": "car"}, {"id": 7, "name": "bus"}])
    path = write_coco(tmp_path / "instances_train.json", document)
    with caplog.at_level(logging.WARNING, logger="tfrecorder_lite"):
        convert(path, tmp_path / "coco", image_dir=photos)
    warned, = [r.getMessage() for r in caplog.records]  # bus has an id and no box
    assert warned.endswith(": ['bus']")


@pytest.mark.parametrize("check", ["decode", "header"])
def test_a_coco_size_that_is_not_the_image_s_refuses_it_naming_both(tmp_path, photos, check):
    document = coco([image_entry(0), image_entry(1, width=80), image_entry(2, height=40)],
                    [box(1, 0), box(2, 1), box(3, 2)])
    path = write_coco(tmp_path / "instances_train.json", document)
    result = convert(path, tmp_path / "out", image_dir=photos, on_error="skip", check=check,
                     image_size=(16, 16))
    assert result.counts == {"TRAIN": 1}
    reasons = dict(zip(result.rejected.image_uri.map(os.path.basename), result.rejected.reason))
    assert reasons == {
        "img1.jpg": "the annotation file gives the image width 80 and height 30, the image "
                    "itself is 40x30 (width x height): its boxes were divided by the wrong "
                    "size. Correct the file's width and height",
        "img2.jpg": "the annotation file gives the image width 40 and height 40, the image "
                    "itself is 40x30 (width x height): its boxes were divided by the wrong "
                    "size. Correct the file's width and height"}


def test_a_voc_size_that_is_not_the_image_s_refuses_it(tmp_path):
    root = voc_folder(tmp_path / "VOC", ["car", "dog"])
    xml = root / "Annotations" / "img1.xml"
    xml.write_text(xml.read_text().replace("<width>40</width>", "<width>400</width>"))
    result = convert(root, tmp_path / "out", on_error="skip")
    assert result.counts == {"TRAIN": 1}
    reason, = result.rejected.reason
    assert reason.startswith("the annotation file gives the image width 400 and height 30, "
                             "the image itself is 40x30")


def test_validate_reads_each_image_of_a_detection_table_once(tmp_path, photos):
    """Rows of one image are its boxes, not duplicate images; an image's problem (here the
    size its COCO file declares) is every row's."""
    document = coco([image_entry(0), image_entry(1, width=80)],
                    [box(1, 0), box(2, 0, (5, 5, 9, 9)), box(3, 1), box(4, 1, (4, 4, 8, 8))])
    table = read_coco(write_coco(tmp_path / "instances_train.json", document), image_dir=photos)
    problems = table.tfrecord.validate(check="header")
    assert problems.row.tolist() == [2, 3]
    assert problems.problem.str.startswith("the annotation file gives the image width 80 and "
                                           "height 30, the image itself is 40x30").all()


@pytest.mark.parametrize("uri,folder,inside", [
    ("gs://b/imgs/a.jpg", "gs://b/imgs", True),
    ("gs://b/imgs/../secret/a.jpg", "gs://b/imgs", False),  # '..' inside a URL climbs too
    ("gs://b/imgs2/a.jpg", "gs://b/imgs", False),
    ("https://h/imgs/%2e%2e/admin", "https://h/imgs", False),  # servers decode %2e%2e
    ("https://h/imgs/a.jpg?X-Amz-Signature=s", "https://h/imgs", True),
    ("s3://b/imgs/a.jpg", "gs://b/imgs", False),
    ("/data/imgs/../imgs/a.jpg", "/data/imgs", True),
    ("/data/imgsx/a.jpg", "/data/imgs", False),
])
def test_the_one_containment_rule_normalizes_paths_and_urls(uri, folder, inside):
    from tfrecorder_lite import storage
    from tfrecorder_lite.sources import paths

    assert storage.is_within(uri, folder) is inside
    assert paths.is_inside(uri, folder) is inside
