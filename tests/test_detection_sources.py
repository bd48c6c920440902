"""Detection sources as they come: AutoML detection CSVs (both vertex forms, with and without a
header), COCO instances files and Pascal VOC folders, each read into the per-box table; the
box checker; and the routes from ``read_source`` and the command line."""

import json
import logging
import math

import pandas as pd
import pytest

from tfrecorder_lite import SchemaError, cli
from tfrecorder_lite.sources import registry
from tfrecorder_lite.record.boxes import box_problem
from tfrecorder_lite.sources.coco import read_coco
from tfrecorder_lite.sources.voc import read_voc

NAN = math.nan
BOXES = ["xmin", "ymin", "xmax", "ymax"]


def expected_table(rows, extra=(), ints=(), floats=()):
    """The per-box table ``rows`` should give: label objects, float coordinates, Int64 flags."""
    columns = ["split", "image_uri", "label", *BOXES, *extra]
    table = pd.DataFrame(rows, columns=columns)
    table["label"] = pd.Series([row[2] for row in rows], dtype=object)
    return table.astype({**dict.fromkeys(BOXES, "float64"), **dict.fromkeys(ints, "Int64"),
                         **dict.fromkeys(floats, "float64")})


def read_text_csv(text, **options):
    return registry.read_csv(text.encode(), "boxes.csv", **options)


# ----------------------------------------------------------------------------- AutoML CSV

AUTOML = """\
TRAIN,gs://b/image1.png,car,0.1,0.1,,,0.3,0.3,,
TRAIN,gs://b/image1.png,bike,.7,.6,,,.8,.9,,
UNASSIGNED,gs://b/im2.png,car,0.1,0.1,0.2,0.1,0.2,0.3,0.1,0.3
TEST,gs://b/im3.png,,,,,,,,,
VALIDATE,gs://b/im4.png,NEGATIVE_IMAGE,,,,,,,,,
TRAIN,gs://b/image1.png,car,0.5,0.25,0.75,0.25,0.75,0.5,0.5,0.5
"""

AUTOML_TABLE = [
    ("TRAIN", "gs://b/image1.png", "car", 0.1, 0.1, 0.3, 0.3),
    ("TRAIN", "gs://b/image1.png", "bike", 0.7, 0.6, 0.8, 0.9),
    ("TRAIN", "gs://b/image1.png", "car", 0.5, 0.25, 0.75, 0.5),  # its third box, rows apart
    ("UNASSIGNED", "gs://b/im2.png", "car", 0.1, 0.1, 0.2, 0.3),
    ("TEST", "gs://b/im3.png", None, NAN, NAN, NAN, NAN),
    ("VALIDATION", "gs://b/im4.png", None, NAN, NAN, NAN, NAN),
]


@pytest.mark.parametrize("header", ["", "ML_USE,GCS_FILE_PATH,LABEL,X1,Y1,X2,Y2,X3,Y3,X4,Y4\n",
                                    "split,image_uri,label\n"], ids=["none", "automl", "ours"])
def test_automl_detection_csv_gives_one_row_per_box_grouped_by_image(header):
    table = read_text_csv(header + AUTOML)
    pd.testing.assert_frame_equal(table, expected_table(AUTOML_TABLE))


def test_automl_detection_csv_through_read_source_with_its_own_column_names(tmp_path):
    (tmp_path / "boxes.csv").write_text(AUTOML.replace("\n", "\r\n"))
    table, base = registry.read_source(tmp_path / "boxes.csv", split_col="set",
                                      image_col="path", label_col="object")
    assert list(table.columns) == ["set", "path", "object", *BOXES]
    assert table["object"].tolist() == ["car", "bike", "car", "car", None, None]
    assert base == str(tmp_path)


@pytest.mark.parametrize("task,labels", [
    ("detection", None), ("classification", [["0", "1"], ["0", "1"]])])
def test_whole_number_coordinates_are_refused_unless_task_says_which(task, labels):
    text = "TRAIN,a.jpg,1,0,0,1,0,1,1,0,1\nTEST,b.jpg,1,0,0,,,1,1,,\n"
    with pytest.raises(SchemaError) as info:
        read_text_csv(text)
    assert 'task="detection" or task="classification"' in str(info.value)
    assert "--task" in str(info.value)
    table = read_text_csv(text, task=task)
    if labels is None:
        pd.testing.assert_frame_equal(table, expected_table(
            [("TRAIN", "a.jpg", "1", 0, 0, 1, 1), ("TEST", "b.jpg", "1", 0, 0, 1, 1)]))
    else:
        assert [sorted(set(v)) for v in table["label"]] == labels  # multi-label, as before


def test_multi_label_csvs_stay_multi_label():
    """Ragged rows of text labels, or of integer labels that are no boxes, are multi-label;
    with a header row its first data row is kept."""
    for text in ["split,image_uri,label\nTRAIN,a.jpg,cat,dog\nTEST,b.jpg,bird\n",
                 "TRAIN,a.jpg,cat,dog\nTEST,b.jpg,bird\n"]:
        table = read_text_csv(text)
        assert table["label"].tolist() == [["cat", "dog"], ["bird"]]
    table = read_text_csv("TRAIN,a.jpg,1,0,1,1\nTRAIN,b.jpg,2\n")  # whole numbers, no box shape
    assert table["label"].tolist() == [["1", "0", "1", "1"], ["2"]]


def test_bad_rows_of_a_detection_csv_are_named_by_line():
    text = AUTOML + ("TRAIN,gs://b/im5.png,car,.1,.2,.3\n"
                     "TRAIN,gs://b/im6.png,car,.1,.1,.9,.1,.9,.9,.2,.9\n")
    table = read_text_csv(text)  # each bad row refuses its image, the others are read
    refused = {table.image_uri[row]: reason
               for row, reason in table.attrs["source_problems"].items()}
    assert list(refused) == ["gs://b/im5.png", "gs://b/im6.png"]
    assert refused["gs://b/im5.png"].startswith("line 7: not an AutoML detection row")
    assert refused["gs://b/im5.png"].endswith("its coordinates are neither four vertices nor two")
    assert table.attrs["csv_lines"][-2:] == [7, 8] and len(table) == len(AUTOML_TABLE) + 2
    table = read_text_csv("TRAIN,a.png,car,.1,.1,,,.5,.5,,\nTRAIN,b.png,car,.1,.1,.9,.1,.9,.9,"
                          ".2,.9\n", task="detection")
    assert list(table.attrs["source_problems"].values()) == [
        "line 2: not an AutoML detection row (ML_USE,PATH,LABEL,x_min,y_min,x_max,y_min,x_max,"
        "y_max,x_min,y_max or ML_USE,PATH,LABEL,x_min,y_min,,,x_max,y_max,,): its four vertices "
        "are not x_min,y_min,x_max,y_min,x_max,y_max,x_min,y_max"]


def test_the_no_objects_row_of_an_image_with_boxes_is_dropped():
    table = read_text_csv("TRAIN,a.png,,,,,,,,,\nTRAIN,a.png,car,.1,.1,,,.5,.5,,\n"
                          "TRAIN,b.png,,,,,,,,,\nTRAIN,b.png,,,,,,,,,\n")
    pd.testing.assert_frame_equal(table, expected_table(
        [("TRAIN", "a.png", "car", 0.1, 0.1, 0.5, 0.5), ("TRAIN", "b.png", None, *[NAN] * 4)]))


def test_one_image_in_two_splits_is_refused():
    with pytest.raises(SchemaError, match="image gs://b/im2.png is UNASSIGNED on line 3 and "
                                          "TEST on line 7; an image belongs to one split"):
        read_text_csv(AUTOML + "TEST,gs://b/im2.png,car,.1,.1,,,.2,.2,,\n")


def test_a_per_box_csv_with_its_header_is_read_as_it_is():
    text = "split,image_uri,label,xmin,ymin,xmax,ymax\nTRAIN,a.jpg,car,0.1,0.2,0.5,0.6\n"
    table = read_text_csv(text)
    assert table.to_dict("records") == [{"split": "TRAIN", "image_uri": "a.jpg", "label": "car",
                                         "xmin": 0.1, "ymin": 0.2, "xmax": 0.5, "ymax": 0.6}]


# ----------------------------------------------------------------------------- COCO

def coco_document():
    """Category ids with gaps, a crowd box, an image without annotations, a zero-width box."""
    return {
        "info": {"description": "test"},
        "images": [
            {"id": 7, "file_name": "000007.jpg", "width": 200, "height": 100},
            {"id": 9, "file_name": "000009.jpg", "width": 50, "height": 40},
            {"id": 12, "file_name": "000012.jpg", "width": 80, "height": 80},
        ],
        "annotations": [
            {"id": 1, "image_id": 7, "category_id": 18, "bbox": [20, 10, 100, 50],
             "area": 4321.5, "iscrowd": 0},
            {"id": 2, "image_id": 7, "category_id": 1, "bbox": [0, 0, 200, 100], "area": 15000.0,
             "iscrowd": 1},
            {"id": 3, "image_id": 12, "category_id": 3, "bbox": [8, 8, 0, 20], "area": 0.0,
             "iscrowd": 0},
            {"id": 4, "image_id": 7, "category_id": 3, "bbox": [50, 25, 50, 50], "area": 2000.0,
             "iscrowd": 0},
        ],
        "categories": [{"id": 1, "name": "person"}, {"id": 3, "name": "car"},
                       {"id": 18, "name": "dog"}],
    }


def write_json(path, document):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def test_coco_instances_give_the_per_box_table_and_coco_ids(tmp_path, caplog):
    path = write_json(tmp_path / "annotations" / "instances_val2017.json", coco_document())
    with caplog.at_level(logging.WARNING, logger="tfrecorder_lite"):
        table = read_coco(path, image_dir=tmp_path / "val2017")
    images = tmp_path / "val2017"
    pd.testing.assert_frame_equal(table, expected_table([
        ("VALIDATION", str(images / "000007.jpg"), "dog", 0.1, 0.1, 0.6, 0.6, 0, 4321.5, 7),
        ("VALIDATION", str(images / "000007.jpg"), "person", 0.0, 0.0, 1.0, 1.0, 1, 15000.0, 7),
        ("VALIDATION", str(images / "000007.jpg"), "car", 0.25, 0.25, 0.5, 0.75, 0, 2000.0, 7),
        ("VALIDATION", str(images / "000009.jpg"), None, NAN, NAN, NAN, NAN, None, NAN, 9),
        ("VALIDATION", str(images / "000012.jpg"), None, NAN, NAN, NAN, NAN, None, NAN, 12),
    ], extra=["is_crowd", "area", "image_id"], ints=["is_crowd"], floats=["area"]))
    assert table.attrs["label_map"] == {"person": 1, "car": 3, "dog": 18}
    warning, = [r.getMessage() for r in caplog.records]
    assert "1 box(es) with a width or height <= 0 left out" in warning
    assert "annotation 3 of " + str(images / "000012.jpg") in warning


def test_coco_boxes_past_the_edge_and_annotations_of_unknown_images_are_counted(tmp_path,
                                                                              caplog):
    document = coco_document()
    document["annotations"] += [
        {"id": 5, "image_id": 9, "category_id": 1, "bbox": [10, 10, 40.5, 10], "iscrowd": 0},
        {"id": 6, "image_id": 99, "category_id": 1, "bbox": [1, 1, 2, 2], "iscrowd": 0}]
    path = write_json(tmp_path / "instances_val2017.json", document)
    with caplog.at_level(logging.WARNING, logger="tfrecorder_lite"):
        table = read_coco(path)
    assert table["label"].tolist() == ["dog", "person", "car", None, None]  # as before
    warnings = [r.getMessage() for r in caplog.records]
    assert "1 box(es) reaching past the image's edge left out" in warnings[1]
    assert f"annotation 5 of {tmp_path / '000009.jpg'}" in warnings[1]
    assert "1 annotation(s) name image ids that are not in 'images' and were left out, " \
           "e.g. image_id 99" in warnings[2]


@pytest.mark.parametrize("name,split,expected", [
    ("instances_train2017.json", None, "TRAIN"),
    ("instances_minival2014.json", None, "VALIDATION"),
    ("image_info_test-dev2017.json", None, "TEST"),
    ("instances_default.json", "train", "TRAIN"),
    ("instances_train2017.json", "test", "TEST"),
])
def test_coco_split_from_the_name_or_the_option(tmp_path, name, split, expected):
    table = read_coco(write_json(tmp_path / name, coco_document()), split=split)
    assert set(table["split"]) == {expected}
    assert table["image_uri"][0] == str(tmp_path / "000007.jpg")  # default: the JSON's folder


@pytest.mark.parametrize("name", ["instances_default.json", "instances_trainval35k.json"])
def test_coco_split_that_the_name_does_not_tell_is_asked_for(tmp_path, name):
    with pytest.raises(SchemaError, match=f"cannot tell the split of {name} .*split=\"train\""):
        read_coco(write_json(tmp_path / name, coco_document()))


def test_coco_category_problems(tmp_path):
    document = coco_document()
    document["categories"].insert(0, {"id": 0, "name": "objects"})  # unused: a Roboflow export
    table = read_coco(write_json(tmp_path / "instances_train.json", document))
    assert table.attrs["label_map"] == {"person": 1, "car": 3, "dog": 18}
    document["annotations"][0]["category_id"] = 0
    with pytest.raises(SchemaError, match="category 'objects' has id 0; detection label ids "
                                          "start at 1"):
        read_coco(write_json(tmp_path / "instances_train.json", document))
    document["annotations"][0]["category_id"] = 5
    with pytest.raises(SchemaError, match="annotation 1 names category_id 5, which is not in "
                                          "'categories'"):
        read_coco(write_json(tmp_path / "instances_train.json", document))
    with pytest.raises(SchemaError, match="is not a COCO annotations file"):
        read_coco(write_json(tmp_path / "instances_train.json", {"annotations": []}))


# ----------------------------------------------------------------------------- Pascal VOC

def voc_xml(filename, objects, size=(500, 375)):
    """A VOC annotation: ``objects`` are (name, difficult, truncated, (xmin, ymin, xmax, ymax))."""
    parts = [f"<annotation><folder>VOC2012</folder><filename>{filename}</filename>"
             f"<size><width>{size[0]}</width><height>{size[1]}</height><depth>3</depth></size>"]
    for name, difficult, truncated, box in objects:
        coordinates = "".join(f"<{k}>{v}</{k}>" for k, v in zip(BOXES, box))
        parts.append(f"<object><name>{name}</name><pose>Left</pose><truncated>{truncated}"
                     f"</truncated><difficult>{difficult}</difficult><bndbox>{coordinates}"
                     "</bndbox></object>")
    return "".join(parts) + "</annotation>"


@pytest.fixture
def voc(tmp_path):
    """A VOC folder: train a, b; val c (no objects); d annotated but in no list."""
    root = tmp_path / "VOCdevkit" / "VOC2012"
    (root / "JPEGImages").mkdir(parents=True)
    (root / "Annotations").mkdir()
    annotations = {
        "a": voc_xml("a.jpg", [("dog", 0, 1, (50, 75, 250, 300)),
                               ("person", 1, 0, (1, 1, 500, 375))]),
        "b": voc_xml("b.jpg", [("dog", 0, 0, (100, 40, 200, 80))], size=(400, 200)),
        "c": voc_xml("c.jpg", []),
        "d": voc_xml("d.jpg", [("cat", 0, 0, (1, 1, 2, 2))]),
    }
    for image_id, text in annotations.items():
        (root / "Annotations" / f"{image_id}.xml").write_text(text)
    main = root / "ImageSets" / "Main"
    main.mkdir(parents=True)
    (main / "train.txt").write_text("b\na\n")
    (main / "val.txt").write_text("c\n")
    (main / "trainval.txt").write_text("b\na\nc\n")
    (main / "dog_train.txt").write_text("b  1\na  1\n")  # per-class lists are not splits
    return root


def test_voc_folder_gives_the_per_box_table_with_flags_and_splits(voc, caplog):
    with caplog.at_level(logging.WARNING, logger="tfrecorder_lite"):
        table = read_voc(voc)
    images = voc / "JPEGImages"
    pd.testing.assert_frame_equal(table, expected_table([
        ("TRAIN", str(images / "b.jpg"), "dog", 0.25, 0.2, 0.5, 0.4, 0, 0),
        ("TRAIN", str(images / "a.jpg"), "dog", 0.1, 0.2, 0.5, 0.8, 0, 1),
        ("TRAIN", str(images / "a.jpg"), "person", 0.002, 1 / 375, 1.0, 1.0, 1, 0),
        ("VALIDATION", str(images / "c.jpg"), None, NAN, NAN, NAN, NAN, None, None),
    ], extra=["difficult", "truncated"], ints=["difficult", "truncated"]))
    warning, = [r.getMessage() for r in caplog.records]
    assert "1 annotation(s) are in no ImageSets/Main list and were left out, e.g. " \
           "Annotations/d.xml" in warning


def test_voc_trainval_and_test_lists_and_no_lists(voc):
    main = voc / "ImageSets" / "Main"
    (main / "train.txt").unlink()
    (main / "val.txt").unlink()
    (main / "test.txt").write_text("d\n")
    table = read_voc(voc)
    assert table.groupby("image_uri", sort=False)["split"].first().tolist() == \
        ["TRAIN", "TRAIN", "TRAIN", "TEST"]  # trainval is TRAIN without train.txt and val.txt
    (main / "test.txt").write_text("a\n")
    with pytest.raises(SchemaError, match="image 'a' is in ImageSets/Main/trainval.txt and "
                                          "test.txt; an image belongs to one split"):
        read_voc(voc)
    for path in main.iterdir():
        path.unlink()
    table = read_voc(voc)  # no lists: every annotation, UNASSIGNED, in name order
    assert set(table["split"]) == {"UNASSIGNED"}
    assert table["image_uri"].drop_duplicates().str[-5:].tolist() == \
        ["a.jpg", "b.jpg", "c.jpg", "d.jpg"]


def test_voc_list_naming_a_missing_annotation(voc):
    (voc / "ImageSets" / "Main" / "val.txt").write_text("c\nzz\n")
    with pytest.raises(SchemaError, match="names 1 image\\(s\\) without Annotations/<id>.xml, "
                                          "e.g. 'zz'"):
        read_voc(voc)


@pytest.mark.parametrize("declaration", [
    '<!DOCTYPE annotation [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>',
    '<!DOCTYPE annotation SYSTEM "file:///etc/passwd">',
])
def test_voc_xml_with_a_doctype_is_refused(voc, declaration):
    path = voc / "Annotations" / "a.xml"
    path.write_text('<?xml version="1.0"?>' + declaration + voc_xml("a.jpg", []))
    table = read_voc(voc)  # its image is refused with the reason, the others are read
    reason, = table.attrs["source_problems"].values()
    assert reason.startswith(f"{path}: declares a DOCTYPE or ENTITY")
    assert "Remove the declaration" in reason


def test_voc_bad_size_and_flag_name_the_file(voc):
    path = voc / "Annotations" / "b.xml"
    path.write_text(voc_xml("b.jpg", [("dog", 0, 0, (1, 1, 2, 2))], size=(0, 200)))
    reason, = read_voc(voc).attrs["source_problems"].values()  # its image refused
    assert reason.startswith(f"{path}: size/width and size/height must be")
    path.write_text(voc_xml("b.jpg", [("dog", "yes", 0, (1, 1, 2, 2))]))
    reason, = read_voc(voc).attrs["source_problems"].values()
    assert reason == f"{path}: object 1 has difficult 'yes', expected 0 or 1"


# ----------------------------------------------------------------------------- boxes

@pytest.mark.parametrize("boxes,units,size,problem", [
    ([(0.1, 0.2, 0.5, 0.6)], "relative", None, None),
    ([(0, 0, 1, 1), (0.1, 0.1, 0.2, 0.2), (0.6, 0.1, 0.2, 0.3)], "relative", None,
     "box 3 of 3: xmin 0.6 > xmax 0.2"),
    ([(0.1, 0.2, 0.5, 0.6), (0.6, 0.1, 0.2, 0.3), (0, 0, 1, 1)], "relative", None,
     "box 2 of 3: xmin 0.6 > xmax 0.2"),
    ([(0.5, 0.1, 0.5, 0.3)], "relative", None, "box 1 of 1: xmin 0.5 = xmax 0.5"),
    ([(0.1, 0.4, 0.2, 0.3)], "relative", None, "box 1 of 1: ymin 0.4 > ymax 0.3"),
    ([(0.1, 0.2, 1.2, 0.3)], "relative", None, "box 1 of 1: xmax 1.2 is outside [0, 1]"),
    ([(-0.1, 0.2, 0.5, 0.3)], "relative", None, "box 1 of 1: xmin -0.1 is outside [0, 1]"),
    ([(0.1, NAN, 0.5, 0.3)], "relative", None, "box 1 of 1: ymin is missing or not a number"),
    ([(0.1, 0.2, None, 0.3)], "relative", None, "box 1 of 1: xmax is missing"),
    ([(0.1, 0.2, "0.5", 0.3)], "relative", None, "box 1 of 1: xmax '0.5' is not a number"),
    ([(0.1, 0.2, 0.3)], "relative", None, "box 1 of 1: 3 coordinates, expected 4 "
                                          "(xmin, ymin, xmax, ymax)"),
    ([(0.1234567, 0, 0.1234566, 1)], "relative", None,
     "box 1 of 1: xmin 0.1234567 > xmax 0.1234566"),
    ([(10, 20, 640, 480)], "pixels", (480, 640), None),
    ([(10, 20, 641, 480)], "pixels", (480, 640),
     "box 1 of 1: xmax 641 is outside [0, 640] (the image's width)"),
    ([(10, 20, 600, 480.5)], "pixels", (480, 640),
     "box 1 of 1: ymax 480.5 is outside [0, 480] (the image's height)"),
    ([(0.1, 0.1, 0.2, 0.2)] * 501, "relative", None, "501 boxes: at most 500 an image"),
    ([(0.1, 0.1, 0.2, 0.2)] * 500, "relative", None, None),
    ([], "relative", None, None),
])
def test_box_problem(boxes, units, size, problem):
    assert box_problem(boxes, units, size) == problem


def test_box_problem_takes_numpy_and_pandas_values():
    table = pd.DataFrame([(0.1, 0.2, 0.5, 0.6), (0.7, 0.2, 0.5, 0.6)], columns=BOXES)
    assert box_problem(list(table.itertuples(index=False, name=None))) == \
        "box 2 of 2: xmin 0.7 > xmax 0.5"
    assert box_problem([tuple(table.astype("float32").iloc[0])]) is None
    with pytest.raises(ValueError, match="units must be"):
        box_problem([], "pixels")


# ----------------------------------------------------------------------------- routes

class _Stop(Exception):
    """Ends a conversion once its table is read (the records are another module's job)."""


@pytest.fixture
def tables_read(monkeypatch):
    """Each table ``registry.read_source`` returns, with the options it was called with."""
    read, real = [], registry.read_source

    def reading(source, **options):
        read.append((real(source, **options), options))
        raise _Stop

    monkeypatch.setattr(registry, "read_source", reading)
    return read


def test_cli_reaches_coco_with_split_and_image_dir(tmp_path, tables_read, monkeypatch):
    write_json(tmp_path / "annotations" / "instances_train2017.json", coco_document())
    monkeypatch.chdir(tmp_path)
    with pytest.raises(_Stop):
        cli.main(["convert", "annotations/instances_train2017.json", "records/", "--split",
                  "validation", "--image-dir", "train2017/", "--split-col", "set"])
    ((table, base), options), = tables_read
    assert options["split"] == "validation" and options["task"] is None
    assert set(table["set"]) == {"VALIDATION"}
    assert table["image_uri"][0] == str(tmp_path / "train2017" / "000007.jpg")
    assert table.attrs["label_map"] == {"person": 1, "car": 3, "dog": 18}  # kept by renaming


def test_cli_reaches_voc(voc, tables_read, tmp_path):
    with pytest.raises(_Stop):
        cli.main(["convert", str(voc), str(tmp_path / "records"), "--label-col", "object"])
    ((table, base), _), = tables_read
    assert list(table.columns[:3]) == ["split", "image_uri", "object"]  # the names asked for
    assert table["object"].tolist() == ["dog", "dog", "person", None] and base == str(voc)


def test_cli_task_decides_an_ambiguous_csv(tmp_path, tables_read):
    (tmp_path / "t.csv").write_text("TRAIN,a.jpg,1,0,0,,,1,1,,\n")
    with pytest.raises(_Stop):
        cli.main(["convert", str(tmp_path / "t.csv"), str(tmp_path / "out"), "--task",
                  "detection"])
    ((table, _), _), = tables_read
    assert table[BOXES].values.tolist() == [[0, 0, 1, 1]]


def test_options_that_do_not_apply_are_refused(tmp_path, voc):
    (tmp_path / "t.csv").write_text(AUTOML)
    with pytest.raises(SchemaError, match="split='train' does not apply to"):
        registry.read_source(tmp_path / "t.csv", split="train")
    with pytest.raises(SchemaError, match="task='classification' does not apply to a Pascal VOC"):
        registry.read_source(voc, task="classification")
    with pytest.raises(SchemaError, match="task must be one of"):
        registry.read_source(tmp_path / "t.csv", task="boxes")
    with pytest.raises(SchemaError, match="image_dir='x' does not apply to a DataFrame"):
        registry.read_source(pd.DataFrame(), image_dir="x")
