"""Vertex AI import files (JSON Lines and CSV) and YOLO folders: read into the table of their
task, converted to the same records as the equivalent AutoML CSV or per-box table, recognized
by ``convert()`` and the command line by their content; every malformed line or file reported
by line (or file) and field; paths inside them kept inside the folder the user named."""

import io
import json
import logging
import math
import re
import os

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import tfrecorder_lite
from tfrecorder_lite import InvalidRowError, SchemaError, cli
from tfrecorder_lite.output.manifest import read_manifest
from tfrecorder_lite.record.encoding import decode_example
from tfrecorder_lite.record.framing import iter_records
from tfrecorder_lite.storage import Store
from conftest import photo, save
from imagegen import read_examples

ML_USE = "aiplatform.googleapis.com/ml_use"
OPTIONS = dict(progress=False, n_jobs=1)


def records_by_file(out):
    """``{split: {image/filename: {key: values}}}`` of every record of an output."""
    store = Store(str(out))
    manifest, _ = read_manifest(store)
    found = {}
    for split, entry in manifest.splits.items():
        for shard in entry.shards:
            with store.open_read(shard.name) as f:
                for data in iter_records(f, manifest.compression):
                    record = {k: v for k, (_, v) in decode_example(data).items()}
                    found.setdefault(split, {})[record["image/filename"][0].decode()] = record
    return found


def line(image, split=None, ensure_ascii=True, **annotations):
    item = {"imageGcsUri": image, **annotations}
    if split is not None:
        item["dataItemResourceLabels"] = {ML_USE: split, "owner": "me"}
    return json.dumps(item, ensure_ascii=ensure_ascii)


@pytest.fixture
def folder(tmp_path):
    """Eight photos in ``images/`` (sizes differ)."""
    for i in range(8):
        save(photo(30 + 2 * i, 40 + i, seed=i), tmp_path / "images" / f"im{i}.jpg")
    return tmp_path


SPLITS = ["training", "training", "training", "validation", "test", None, "training", "test"]
CSV_SPLITS = ["TRAIN", "TRAIN", "TRAIN", "VALIDATION", "TEST", "UNASSIGNED", "TRAIN", "TEST"]


# ----------------------------------------------------------------------------- Vertex AI

def test_vertex_single_label_jsonl_gives_the_records_of_the_automl_csv(folder):
    names = ["daisy", "rose"]
    (folder / "flowers.jsonl").write_text("\n".join(
        line(f"images/im{i}.jpg", SPLITS[i], classificationAnnotation={
            "displayName": names[i % 2],
            "annotationResourceLabels": {"aiplatform.googleapis.com/annotation_set_name": "x"}})
        for i in range(8)) + "\n")
    (folder / "flowers.csv").write_text("".join(
        f"{CSV_SPLITS[i]},images/im{i}.jpg,{names[i % 2]}\n" for i in range(8)))
    table = tfrecorder_lite.read_vertex(folder / "flowers.jsonl")
    assert table.columns.tolist() == ["split", "image_uri", "label"]
    assert table.split.tolist() == CSV_SPLITS  # ml_use -> split; none -> UNASSIGNED
    assert table.label.tolist() == [names[i % 2] for i in range(8)]
    assert table.image_uri.tolist() == [str(folder / "images" / f"im{i}.jpg") for i in range(8)]
    vertex = tfrecorder_lite.convert(folder / "flowers.jsonl", folder / "v", **OPTIONS,
                                     on_error="skip")
    automl = tfrecorder_lite.convert(folder / "flowers.csv", folder / "a", **OPTIONS,
                                     on_error="skip")
    assert vertex.counts == automl.counts == {"TRAIN": 4, "VALIDATION": 1, "TEST": 2}
    assert vertex.rejected.reason.tolist() == automl.rejected.reason.tolist()  # UNASSIGNED
    assert vertex.labels == automl.labels == names
    assert records_by_file(folder / "v") == records_by_file(folder / "a")


def test_vertex_multi_label_jsonl_gives_the_records_of_the_automl_multi_label_csv(folder):
    labels = [["daisy", "rose"], ["rose"], ["tulip", "daisy", "rose"], [], ["daisy"],
              ["rose"], ["tulip"], ["daisy", "tulip"]]
    lines = []
    for i, these in enumerate(labels):
        if i == 1:  # one label a line may be written as Vertex's single-label annotation
            lines.append(line(f"images/im{i}.jpg", SPLITS[i],
                              classificationAnnotation={"displayName": these[0]}))
        else:
            lines.append(line(f"images/im{i}.jpg", SPLITS[i], classificationAnnotations=[
                {"displayName": name} for name in these]))
    (folder / "multi.jsonl").write_text("\n".join(lines))
    (folder / "multi.csv").write_text("".join(
        ",".join([CSV_SPLITS[i], f"images/im{i}.jpg", *these]) + "\n"
        for i, these in enumerate(labels)))
    table = tfrecorder_lite.read_vertex(folder / "multi.jsonl")
    assert table.label.tolist() == labels
    options = dict(OPTIONS, on_error="skip")
    vertex = tfrecorder_lite.convert(folder / "multi.jsonl", folder / "v", **options)
    automl = tfrecorder_lite.convert(folder / "multi.csv", folder / "a", **options)
    assert vertex.metadata["task"] == automl.metadata["task"] == "multi-label"
    assert vertex.counts == automl.counts and vertex.labels == automl.labels
    assert len(vertex.rejected) == len(automl.rejected)
    assert records_by_file(folder / "v") == records_by_file(folder / "a")


BOXES = [  # per image: (label, xmin, ymin, xmax, ymax); none: an image without objects
    [("car", 0.1, 0.2, 0.5, 0.6), ("person", 0.05, 0.05, 0.2, 0.25)],
    [("person", 0.2, 0.3, 0.7, 0.9)],
    [],
    [("car", 0.0, 0.0, 1.0, 1.0), ("car", 0.25, 0.5, 0.75, 0.625), ("bike", 0.3, 0.3, 0.4, 0.4)],
    [("bike", 0.5, 0.5, 0.9, 0.9)],
    [("car", 0.125, 0.125, 0.5, 0.5)],
    [],
    [("person", 0.6, 0.1, 0.9, 0.7)],
]


def per_box_table(folder, splits=CSV_SPLITS):
    rows = []
    for i, boxes in enumerate(BOXES):
        image = str(folder / "images" / f"im{i}.jpg")
        rows += [(splits[i], image, *box) for box in boxes] or \
            [(splits[i], image, None, math.nan, math.nan, math.nan, math.nan)]
    table = pd.DataFrame(rows, columns=["split", "image_uri", "label", "xmin", "ymin", "xmax",
                                        "ymax"])
    table["label"] = pd.Series([row[2] for row in rows], dtype=object)  # None: no object
    return table


def test_vertex_bounding_boxes_give_the_records_of_the_per_box_table(folder):
    lines = []
    for i, boxes in enumerate(BOXES):
        annotations = [{"displayName": label, "xMin": str(x0), "yMin": y0, "xMax": x1,
                        "yMax": str(y1)} for label, x0, y0, x1, y1 in boxes]  # text or numbers
        lines.append(line(f"images/im{i}.jpg", SPLITS[i],
                          **({"boundingBoxAnnotations": annotations} if i != 6 else {})))
    (folder / "boxes.jsonl").write_text("\n".join(lines) + "\n\n")
    table = tfrecorder_lite.read_vertex(folder / "boxes.jsonl")
    expected = per_box_table(folder)
    pd.testing.assert_frame_equal(table[expected.columns], expected, check_dtype=False)
    assert table.attrs["csv_lines"][:3] == ["JSON line 1 of boxes.jsonl"] * 2 + \
        ["JSON line 2 of boxes.jsonl"]
    options = dict(OPTIONS, on_error="skip")
    vertex = tfrecorder_lite.convert(folder / "boxes.jsonl", folder / "v", **options)
    direct = expected.tfrecord.to_tfrecord(folder / "t", **options)
    assert vertex.metadata["task"] == "detection" and vertex.labels == direct.labels
    assert vertex.metadata["boxes"] == direct.metadata["boxes"]
    assert records_by_file(folder / "v") == records_by_file(folder / "t")


def test_vertex_masks_give_the_segmentation_table_and_its_records(folder):
    colors = [{"color": {"red": 1.0}, "displayName": "road"},  # protobuf JSON leaves zeros out
              {"color": {"red": 0.0, "green": 0.5019608, "blue": 1}, "displayName": "sky"}]
    (folder / "masks.jsonl").write_text("\n".join(
        line(f"images/im{i}.jpg", SPLITS[i], segmentationAnnotation={
            "maskGcsUri": f"masks/im{i}.png", "annotationSpecColors": colors})
        for i in range(3)) + "\n" + line("gs://bucket/x.jpg", "test", maskAnnotation={
            "categoryMaskGcsUri": "gs://bucket/x.png", "annotationSpecColors": colors[:1]}))
    table = tfrecorder_lite.read_vertex(folder / "masks.jsonl")
    assert table.columns.tolist() == ["split", "image_uri", "mask_uri"]
    assert table.mask_uri.tolist() == [str(folder / "masks" / f"im{i}.png") for i in range(3)] \
        + ["gs://bucket/x.png"]
    assert table.attrs["task"] == "segmentation"
    assert table.attrs["mask_colors"] == {(255, 0, 0): "road", (0, 128, 255): "sky"}
    # the local masks, as colours: written as single-channel PNGs of the colours' class ids
    ids = {}
    for i in range(3):
        height, width = 30 + 2 * i, 40 + i
        ids[f"im{i}.jpg"] = np.zeros((height, width), np.uint8)
        ids[f"im{i}.jpg"][:, width // 2:] = 1
        colours = np.zeros((height, width, 3), np.uint8)
        colours[ids[f"im{i}.jpg"] == 0] = (255, 0, 0)
        colours[ids[f"im{i}.jpg"] == 1] = (0, 128, 255)
        save(Image.fromarray(colours, "RGB"), folder / "masks" / f"im{i}.png", "PNG")
    local = (folder / "masks.jsonl").read_text().splitlines()[:3]
    (folder / "local.jsonl").write_text("\n".join(local) + "\n")
    result = tfrecorder_lite.convert(folder / "local.jsonl", folder / "out", **OPTIONS)
    assert result.metadata["task"] == "segmentation" and result.labels == ["road", "sky"]
    for record in read_examples(folder / "out"):
        mask = Image.open(io.BytesIO(record["image/segmentation/class/encoded"]))
        assert np.array_equal(np.asarray(mask), ids[record["image/filename"].decode()])


def test_every_malformed_vertex_line_is_reported_with_its_line_and_field(folder):
    lines = [
        line("images/im0.jpg", "training", classificationAnnotation={"displayName": "a"}),
        "{not json",
        json.dumps(["an", "array"]),
        json.dumps({"classificationAnnotation": {"displayName": "a"}}),
        line("images/im1.jpg", "trainig", classificationAnnotation={"displayName": "a"}),
        line("images/im2.jpg", "test", classificationAnnotation={"name": "a"}),
        line("images/im3.jpg", "test", polygonAnnotation={"vertexes": [{"x": 0.1, "y": 0.1}]}),
        line("images/im4.jpg", "test", boundingBoxAnnotations=[
            {"displayName": "a", "xMin": 0.1, "yMin": 0.1, "xMax": 0.2, "yMax": 0.2}]),
        line("../outside.jpg", "test", classificationAnnotation={"displayName": "a"}),
    ]
    (folder / "bad.jsonl").write_text("\n".join(lines))
    table = tfrecorder_lite.read_vertex(folder / "bad.jsonl")  # each bad line refuses its row
    reasons = list(table.attrs["source_problems"].values())
    message = "; ".join(reasons)
    for expected in ["line 2: not JSON", "line 3: a JSON list, not an object",
                     "line 4: imageGcsUri: missing",
                     f'line 5: dataItemResourceLabels["{ML_USE}"]: \'trainig\' is no ml_use',
                     "line 6: classificationAnnotation.displayName: missing",
                     "line 7: polygonAnnotation.displayName: missing",
                     "line 7: polygonAnnotation.vertexes: [{'x': 0.1, 'y': 0.1}]: expected a "
                     'list of 3 vertexes {"x", "y"} at least',
                     "line 7: polygon annotations, but line 1 holds classification",
                     "line 8: detection annotations, but line 1 holds classification",
                     "line 9: imageGcsUri: '../outside.jpg' leads outside"]:
        assert expected in message
    assert not re.search(r"(^|; )line 1:", message) and len(reasons) == 8
    assert [reason.split(":")[0] for reason in reasons] == [f"line {n}" for n in range(2, 10)]
    result = tfrecorder_lite.convert(folder / "bad.jsonl", folder / "out", **OPTIONS,
                                     on_error="skip")
    assert result.counts == {"TRAIN": 1, "TEST": 0} and result.rejected.reason.tolist() == reasons


def test_a_bad_vertex_box_rejects_its_image_whole_and_names_its_line(folder):
    good = {"displayName": "car", "xMin": 0.1, "yMin": 0.1, "xMax": 0.5, "yMax": 0.5}
    (folder / "boxes.jsonl").write_text("\n".join([
        line("images/im0.jpg", "training", boundingBoxAnnotations=[good]),
        line("images/im1.jpg", "training", boundingBoxAnnotations=[
            good, {**good, "xMin": 0.7}]),  # inverted
        line("images/im2.jpg", "training", boundingBoxAnnotations=[
            {**good, "yMax": "1.5"}]),  # outside [0, 1]
    ]))
    with pytest.raises(InvalidRowError) as caught:
        tfrecorder_lite.convert(folder / "boxes.jsonl", folder / "out", **OPTIONS)
    assert "JSON line 2 of boxes.jsonl" in str(caught.value)
    assert "box 2 of 2: xmin 0.7 > xmax 0.5" in str(caught.value)
    result = tfrecorder_lite.convert(folder / "boxes.jsonl", folder / "out", **OPTIONS,
                                     on_error="skip")
    assert result.counts == {"TRAIN": 1}
    assert sorted(result.rejected.reason) == ["box 1 of 1: ymax 1.5 is outside [0, 1]",
                                              "box 2 of 2: xmin 0.7 > xmax 0.5",
                                              "box 2 of 2: xmin 0.7 > xmax 0.5"]


def test_a_vertex_csv_without_ml_use_is_recognized_and_matches_the_one_with_it(folder):
    (folder / "with.csv").write_text("".join(
        f"{s or ''},images/im{i}.jpg,{'ab'[i % 2]}\n" for i, s in enumerate(SPLITS)))
    (folder / "without.csv").write_text("".join(
        (f"{s}," if s else "") + f"images/im{i}.jpg,{'ab'[i % 2]}\n"
        for i, s in enumerate(SPLITS)))
    table = tfrecorder_lite.read_vertex(folder / "without.csv")
    assert table.split.tolist() == CSV_SPLITS
    assert table.label.tolist() == ["ab"[i % 2] for i in range(8)]
    options = dict(OPTIONS, on_error="skip")
    tfrecorder_lite.convert(folder / "with.csv", folder / "w", **options)
    tfrecorder_lite.convert(folder / "without.csv", folder / "wo", **options)
    assert records_by_file(folder / "w") == records_by_file(folder / "wo")
    # an AutoML detection row without ML_USE is a Vertex AI detection row
    (folder / "boxes.csv").write_text("images/im0.jpg,car,0.1,0.2,,,0.5,0.6,,\n"
                                      "test,images/im1.jpg,car,0.1,0.2,,,0.5,0.6,,\n")
    boxes = tfrecorder_lite.read_vertex(folder / "boxes.csv")
    assert boxes.split.tolist() == ["UNASSIGNED", "TEST"]
    assert boxes[["xmin", "ymax"]].values.tolist() == [[0.1, 0.6], [0.1, 0.6]]


def test_vertex_image_paths_stay_in_the_files_folder_unless_allowed(folder):
    outside = folder / "outside.jpg"
    save(photo(20, 20), outside)
    (folder / "sub").mkdir()
    (folder / "sub" / "a.jsonl").write_text(
        line("../outside.jpg", "training", classificationAnnotation={"displayName": "x"}) +
        "\n" + line(str(outside), "test", classificationAnnotation={"displayName": "x"}) +
        "\n" + line("gs://bucket/in-the-cloud.jpg", "test",
                    classificationAnnotation={"displayName": "x"}))
    refused = tfrecorder_lite.read_vertex(folder / "sub" / "a.jsonl").attrs["source_problems"]
    assert re.match(r"line 1: imageGcsUri: '\.\./outside\.jpg' leads outside .*"
                    r"allow_outside_paths=True", refused[0])
    assert refused[1].startswith("line 2: imageGcsUri") and 2 not in refused  # absolute too
    table = tfrecorder_lite.read_vertex(folder / "sub" / "a.jsonl", allow_outside_paths=True)
    assert table.image_uri.tolist() == [str(outside), str(outside),
                                        "gs://bucket/in-the-cloud.jpg"]


def test_the_command_line_converts_a_vertex_jsonl_and_reports_its_bad_lines(folder, capsys):
    (folder / "flowers.jsonl").write_text("\n".join(
        line(f"images/im{i}.jpg", "training", classificationAnnotation={"displayName": "a"})
        for i in range(4)))
    assert cli.main(["convert", str(folder / "flowers.jsonl"), str(folder / "out"),
                     "--no-progress", "--jobs", "1"]) == 0
    assert "wrote TRAIN 4" in capsys.readouterr().out
    (folder / "bad.jsonl").write_text(line("images/im0.jpg", "later"))
    assert cli.main(["convert", str(folder / "bad.jsonl"), str(folder / "out2"),
                     "--no-progress"]) == 2
    assert "line 1: dataItemResourceLabels" in capsys.readouterr().err


# ----------------------------------------------------------------------------- YOLO

def yolo_folder(root, names=("car", "person", "bike"), layout="ultralytics"):
    """A YOLO folder of the eight photos and BOXES: images 0-5 train, 6-7 val; image 2 has an
    empty label file, image 6 none. ``layout``: ``"ultralytics"`` (images/train,
    labels/train) or ``"roboflow"`` (train/images, train/labels, data.yaml naming ../train)."""
    for i, boxes in enumerate(BOXES):
        split = "train" if i < 6 else "val"
        images, labels = (f"images/{split}", f"labels/{split}") if layout == "ultralytics" \
            else (f"{split}/images", f"{split}/labels")
        save(photo(30 + 2 * i, 40 + i, seed=i), root / images / f"im{i}.jpg")
        if i == 6:
            continue
        (root / labels).mkdir(parents=True, exist_ok=True)
        (root / labels / f"im{i}.txt").write_text("".join(
            f"{names.index(label)} {(x0 + x1) / 2} {(y0 + y1) / 2} {x1 - x0} {y1 - y0}\n"
            for label, x0, y0, x1, y1 in boxes))
    if layout == "ultralytics":
        entries = "train: images/train\nval: images/val\ntest:\n"
    else:
        entries = "train: ../train/images\nval: ../val/images\n"
    (root / "data.yaml").write_text(
        f"path: somewhere/else\n{entries}nc: {len(names)}\nnames:\n" +
        "".join(f"  {i}: {name}\n" for i, name in enumerate(names)))
    return root


YOLO_SPLITS = ["TRAIN"] * 6 + ["VALIDATION"] * 2


@pytest.mark.parametrize("layout", ["ultralytics", "roboflow"])
def test_a_yolo_folder_gives_the_boxes_of_the_per_box_table(tmp_path, layout):
    root = yolo_folder(tmp_path / "yolo", layout=layout)
    table = tfrecorder_lite.read_yolo(root)
    expected = per_box_table(tmp_path / "yolo", YOLO_SPLITS)
    if layout == "roboflow":
        expected["image_uri"] = [p.replace(f"{os.sep}images{os.sep}", os.sep).replace(
            f"yolo{os.sep}", f"yolo{os.sep}{'train' if s == 'TRAIN' else 'val'}{os.sep}images"
                             f"{os.sep}") for p, s in zip(expected.image_uri, expected.split)]
    else:
        expected["image_uri"] = [p.replace(f"images{os.sep}", f"images{os.sep}"
                                           f"{'train' if s == 'TRAIN' else 'val'}{os.sep}")
                                 for p, s in zip(expected.image_uri, expected.split)]
    pd.testing.assert_frame_equal(table[expected.columns], expected, check_dtype=False,
                                  atol=1e-12)
    assert table.attrs["label_map"] == {"car": 1, "person": 2, "bike": 3}  # YOLO's order
    result = tfrecorder_lite.convert(root, tmp_path / "out", **OPTIONS)
    assert result.labels == ["", "car", "person", "bike"]
    direct = expected.tfrecord.to_tfrecord(tmp_path / "direct", **OPTIONS,
                                           label_map=table.attrs["label_map"])
    assert result.counts == direct.counts == {"TRAIN": 6, "VALIDATION": 2}
    ours, theirs = records_by_file(tmp_path / "out"), records_by_file(tmp_path / "direct")
    assert ours.keys() == theirs.keys()
    for split in ours:
        for name, record in ours[split].items():
            other = theirs[split][name]
            for key in record:
                if "bbox" in key:
                    assert record[key] == pytest.approx(other[key], abs=1e-6), (name, key)
                else:
                    assert record[key] == other[key], (name, key)


def test_yolo_names_as_a_list_a_data_yaml_path_and_image_lists(tmp_path):
    root = yolo_folder(tmp_path / "yolo")
    (root / "data.yaml").write_text("train: [train.txt]\nval: val.txt\n"
                                    "names: [car, person, bike]\n")
    (root / "train.txt").write_text("".join(f"./images/train/im{i}.jpg\n" for i in range(3)))
    (root / "val.txt").write_text("images/val/im7.jpg\n")
    table = tfrecorder_lite.read_yolo(root / "data.yaml")
    assert table.drop_duplicates("image_uri").split.tolist() == ["TRAIN"] * 3 + ["VALIDATION"]
    assert table.label.tolist() == ["car", "person", "person", None, "person"]


def test_every_malformed_yolo_file_and_line_is_reported(tmp_path):
    root = yolo_folder(tmp_path / "yolo")
    (root / "labels" / "train" / "im0.txt").write_text(
        "0 0.5 0.5 0.2 0.2\n3 0.5 0.5 0.2 0.2\n1 0.5 0.5 0.2\n"
        "1 0.1 0.1 0.2 0.1 0.2 0.2 0.1\n2 0.5 x 0.2 0.2\n1 0.1 0.1 0.2 y 0.2 0.2\n")
    table = tfrecorder_lite.read_yolo(root)  # the malformed lines refuse their image
    message, = table.attrs["source_problems"].values()
    name = os.path.join("labels", "train", "im0.txt")
    for expected in [f"{name} line 2: class '3' is not in names (0-2)",
                     f"{name} line 3: 4 fields, expected 5 (class cx cy w h)",
                     f"{name} line 4: 8 fields, expected 5 (class cx cy w h) or an odd "
                     "number from 7 (a polygon: class x1 y1 x2 y2 x3 y3 ...)",
                     f"{name} line 5: cy 'x' is not a number",
                     f"{name} line 6: y2 'y' is not a number"]:
        assert expected in message
    (root / "labels" / "train" / "gone.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    with pytest.raises(SchemaError) as caught:
        tfrecorder_lite.read_yolo(root)
    assert str(caught.value).endswith(f"{os.path.join('labels', 'train', 'gone.txt')}: a label "
                                      "file without its image (no image of that name in the "
                                      "images folder)")
    (root / "data.yaml").write_text("train: images/train\nval: images/nowhere\n"
                                    "test: ../../../etc\nnames: [car, person, bike]\n")
    with pytest.raises(SchemaError) as caught:
        tfrecorder_lite.read_yolo(root)
    assert "data.yaml: val: images/nowhere does not exist" in str(caught.value)
    assert "data.yaml: test: '../../../etc' leads outside" in str(caught.value)


def test_a_bad_yolo_box_rejects_its_image_whole_naming_the_label_file(tmp_path):
    root = yolo_folder(tmp_path / "yolo")
    (root / "labels" / "train" / "im1.txt").write_text("0 0.5 0.5 0.2 0.2\n1 0.95 0.5 0.2 0.2\n")
    with pytest.raises(InvalidRowError) as caught:
        tfrecorder_lite.convert(root, tmp_path / "out", **OPTIONS)
    assert f"({os.path.join('labels', 'train', 'im1.txt')})" in str(caught.value)
    assert "box 2 of 2: xmax 1.05 is outside [0, 1]" in str(caught.value)


def test_the_command_line_converts_a_yolo_folder(tmp_path, capsys):
    root = yolo_folder(tmp_path / "yolo")
    assert cli.main(["convert", str(root), str(tmp_path / "out"), "--no-progress",
                     "--jobs", "1"]) == 0
    assert "wrote TRAIN 6, VALIDATION 2" in capsys.readouterr().out
    assert cli.main(["convert", str(root), str(tmp_path / "out2"), "--no-progress",
                     "--task", "classification"]) == 2
    assert "does not apply to a YOLO folder" in capsys.readouterr().err


def test_a_yolo_folder_and_a_vertex_file_read_from_urls_give_the_local_records(tmp_path):
    import fsspec

    root = yolo_folder(tmp_path / "yolo")
    fs = fsspec.filesystem("memory")
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            fs.pipe(f"memory://formats-test/yolo/{os.path.relpath(path, root)}",
                    open(path, "rb").read())
    local = tfrecorder_lite.read_yolo(root)
    remote = tfrecorder_lite.read_yolo("memory://formats-test/yolo")
    assert remote.image_uri.tolist() == [
        "memory://formats-test/yolo/" + os.path.relpath(p, root) for p in local.image_uri]
    pd.testing.assert_frame_equal(remote.drop(columns="image_uri"),
                                  local.drop(columns="image_uri"))
    tfrecorder_lite.convert("memory://formats-test/yolo", tmp_path / "from-url", **OPTIONS)
    tfrecorder_lite.convert(root, tmp_path / "from-disk", **OPTIONS)
    assert records_by_file(tmp_path / "from-url") == records_by_file(tmp_path / "from-disk")
    exported = tfrecorder_lite.to_coco(tmp_path / "from-url", "TRAIN",
                                       "memory://formats-test/instances.json")
    assert json.loads(fs.cat("memory://formats-test/instances.json")) == exported

    fs.pipe("memory://formats-test/yolo/boxes.jsonl", "\n".join(
        line(f"images/train/im{i}.jpg", "training", boundingBoxAnnotations=[
            {"displayName": "car", "xMin": 0.1, "yMin": 0.1, "xMax": 0.5, "yMax": 0.5}])
        for i in range(3)).encode() + b"\n" + line("../../escape.jpg", "test").encode())
    refused = tfrecorder_lite.read_vertex("memory://formats-test/yolo/boxes.jsonl").attrs[
        "source_problems"]
    assert list(refused) == [3] and re.match(r"line 4: imageGcsUri: '\.\./\.\./escape\.jpg' "
                                             r"leads outside memory://formats-test/yolo",
                                             refused[3])
    fs.rm("memory://formats-test", recursive=True)


def test_yolo_image_lists_resolve_against_their_folder_and_stay_in_the_dataset(tmp_path):
    root = yolo_folder(tmp_path / "yolo")
    (root / "lists").mkdir()
    (root / "lists" / "train.txt").write_text("../images/train/im0.jpg\n"
                                              "../images/train/im1.jpg\n")
    (root / "lists" / "val.txt").write_text("../images/val/im7.jpg\n../images/train/im0.jpg\n")
    (root / "data.yaml").write_text("train: lists/train.txt\nval: lists/val.txt\n"
                                    "names: [car, person, bike]\n")
    with pytest.raises(SchemaError, match=r"images.train.im0\.jpg is listed in train and in "
                                          r"val; an image belongs to one split, once"):
        tfrecorder_lite.read_yolo(root)
    (root / "lists" / "val.txt").write_text("../images/val/im7.jpg\n../../outside.jpg\n")
    with pytest.raises(SchemaError, match=r"lists.val\.txt line 2: '\.\./\.\./outside\.jpg' "
                                          r"leads outside"):
        tfrecorder_lite.read_yolo(root)
    (root / "lists" / "val.txt").write_text("../images/val/im7.jpg\n")
    table = tfrecorder_lite.read_yolo(root)
    assert table.drop_duplicates("image_uri").image_uri.tolist() == [
        str(root / "images" / "train" / "im0.jpg"), str(root / "images" / "train" / "im1.jpg"),
        str(root / "images" / "val" / "im7.jpg")]


# ----------------------------------------------------------------------------- polygons

POLYGONS = {  # image -> (size (height, width), [(label, pixel polygon)]): integer corners
    "im0.jpg": ((30, 40), [("cat", [2, 3, 20, 5, 15, 25]),
                           ("dog", [22, 2, 38, 4, 36, 20, 25, 18])]),
    "im1.jpg": ((32, 41), [("dog", [0, 0, 41, 0, 41, 32, 0, 32])]),  # the whole image
    "im2.jpg": ((34, 42), []),
    "im3.jpg": ((36, 43), [("cat", [5, 5, 30, 6, 28, 30, 10, 33, 4, 20])]),
}
POLYGON_SPLITS = {"im0.jpg": "train", "im1.jpg": "train", "im2.jpg": "val", "im3.jpg": "test"}


def relative(polygon, size):
    height, width = size
    return [v / (width if i % 2 == 0 else height) for i, v in enumerate(polygon)]


def truth_mask(polygon, size):
    """The 0/1 mask pycocotools gives of a pixel polygon."""
    from pycocotools import mask as mask_api

    return mask_api.decode(mask_api.merge(mask_api.frPyObjects([polygon], *size)))


def polygon_photos(folder, layout=lambda name: f"images/{name}"):
    for i, (name, (size, _)) in enumerate(POLYGONS.items()):
        save(photo(*size, seed=i), folder / layout(name))


def assert_polygon_records(out):
    """The records of ``out`` hold POLYGONS: each polygon's extent as its box, and the mask
    pycocotools gives of the pixel polygon, pixel for pixel."""
    records = {name: record for split in records_by_file(out).values()
               for name, record in split.items()}
    assert sorted(records) == sorted(POLYGONS)
    for name, (size, objects) in POLYGONS.items():
        record = records[name]
        assert [t.decode() for t in record.get("image/object/class/text", [])] == \
            [label for label, _ in objects]
        masks = record.get("image/object/mask", [])
        assert len(masks) == len(objects)
        for number, ((_, polygon), png) in enumerate(zip(objects, masks)):
            mask = Image.open(io.BytesIO(png))
            assert (mask.format, mask.mode, mask.size) == ("PNG", "L", size[::-1])
            assert np.array_equal(np.asarray(mask), truth_mask(polygon, size)), (name, number)
            extent = relative(polygon, size)
            box = [min(extent[0::2]), min(extent[1::2]), max(extent[0::2]), max(extent[1::2])]
            assert [record[f"image/object/bbox/{k}"][number]
                    for k in ("xmin", "ymin", "xmax", "ymax")] == pytest.approx(box, abs=1e-6)


def test_vertex_polygons_become_instance_masks_pixel_for_pixel(folder):
    polygon_photos(folder)
    ml_use = {"train": "training", "val": "validation", "test": "test"}
    lines = []
    for name, (size, objects) in POLYGONS.items():
        annotations = []
        for label, polygon in objects:
            xy = relative(polygon, size)
            vertexes = [{"x": x, "y": y} for x, y in zip(xy[0::2], xy[1::2])]
            vertexes = [{k: v for k, v in vertex.items() if v != 0} for vertex in vertexes]
            annotations.append({"displayName": label, "vertexes": vertexes})  # 0 left out
        if name == "im3.jpg":  # the REST field: one polygon, numbers as text
            annotations[0]["vertexes"][0]["x"] = str(annotations[0]["vertexes"][0]["x"])
            shape = {"polygonAnnotation": annotations[0]}
        else:  # Google's samples: a list
            shape = {"polygonAnnotations": annotations} if annotations else {}
        lines.append(line(f"images/{name}", ml_use[POLYGON_SPLITS[name]], **shape))
    (folder / "polygons.jsonl").write_text("\n".join(lines) + "\n")
    table = tfrecorder_lite.read_vertex(folder / "polygons.jsonl")
    assert table.columns.tolist() == ["split", "image_uri", "label", "xmin", "ymin", "xmax",
                                      "ymax", "mask"]
    assert table.label.tolist() == ["cat", "dog", "dog", None, "cat"]
    assert table["mask"][0] == {"relative_polygons": [relative([2, 3, 20, 5, 15, 25],
                                                                (30, 40))]}
    result = tfrecorder_lite.convert(folder / "polygons.jsonl", folder / "out", **OPTIONS)
    assert result.counts == {"TRAIN": 2, "VALIDATION": 1, "TEST": 1}
    assert result.metadata["task"] == "detection" and result.labels == ["", "cat", "dog"]
    assert_polygon_records(folder / "out")
    # a table of one's own with the same relative polygons gives the same records
    splits = {"train": "TRAIN", "val": "VALIDATION", "test": "TEST"}
    rows = []
    for name, (size, objects) in POLYGONS.items():
        image, split = str(folder / "images" / name), splits[POLYGON_SPLITS[name]]
        for label, polygon in objects:
            xy = relative(polygon, size)
            rows.append((split, image, label, min(xy[0::2]), min(xy[1::2]), max(xy[0::2]),
                         max(xy[1::2]), {"relative_polygons": [xy]}))
        rows += [] if objects else [(split, image, None, *[math.nan] * 4, None)]
    own = pd.DataFrame(rows, columns=["split", "image_uri", "label", "xmin", "ymin", "xmax",
                                      "ymax", "mask"])
    own.tfrecord.to_tfrecord(folder / "own", **OPTIONS)
    assert records_by_file(folder / "own") == records_by_file(folder / "out")
    # resized, each mask is resized with its image (nearest neighbour)
    small = tfrecorder_lite.convert(folder / "polygons.jsonl", folder / "small", **OPTIONS,
                                    image_size=(16, 16))
    assert small.counts == result.counts
    for record in read_examples(folder / "small"):
        masks = record.get("image/object/mask", [])
        for png in masks if isinstance(masks, list) else [masks]:
            assert Image.open(io.BytesIO(png)).size == (16, 16)


def test_yolo_polygon_lines_become_instance_masks_pixel_for_pixel(tmp_path):
    root = tmp_path / "yolo"
    polygon_photos(root, lambda name: f"images/{POLYGON_SPLITS[name]}/{name}")
    names = ["cat", "dog"]
    for name, (size, objects) in POLYGONS.items():
        if objects:
            (root / "labels" / POLYGON_SPLITS[name]).mkdir(parents=True, exist_ok=True)
            (root / "labels" / POLYGON_SPLITS[name] / f"{name[:-4]}.txt").write_text("".join(
                " ".join(map(str, [names.index(label), *relative(polygon, size)])) + "\n"
                for label, polygon in objects))
    (root / "data.yaml").write_text("train: images/train\nval: images/val\ntest: images/test\n"
                                    "names: [cat, dog]\n")
    table = tfrecorder_lite.read_yolo(root)
    assert "mask" in table.columns and table.label.tolist() == ["cat", "dog", "dog", None, "cat"]
    result = tfrecorder_lite.convert(root, tmp_path / "out", **OPTIONS)
    assert result.counts == {"TRAIN": 2, "VALIDATION": 1, "TEST": 1}
    assert result.labels == ["", "cat", "dog"]
    assert_polygon_records(tmp_path / "out")
    # a box line among polygons: that object has no mask, its image is refused naming the line
    (root / "labels" / "train" / "im1.txt").write_text("1 0 0 1 0 1 1 0 1\n0 0.5 0.5 0.2 0.2\n")
    with pytest.raises(InvalidRowError) as caught:
        tfrecorder_lite.convert(root, tmp_path / "refused", **OPTIONS)
    reason = (f"{os.path.join('labels', 'train', 'im1.txt')} line 2: a box (class cx cy w h) "
              "in a dataset of polygons (class x1 y1 x2 y2 ...): every object needs its "
              "polygon, its instance mask")
    assert reason in str(caught.value)
    skipped = tfrecorder_lite.convert(root, tmp_path / "skipped", **OPTIONS, on_error="skip")
    assert skipped.counts == {"TRAIN": 1, "VALIDATION": 1, "TEST": 1}
    assert skipped.rejected.reason.tolist() == [reason]


def test_a_vertex_polyline_refuses_its_image_naming_the_line_and_a_polygon_outside_too(folder):
    square = [{"x": 0.1, "y": 0.1}, {"x": 0.5, "y": 0.1}, {"x": 0.5, "y": 0.5}]
    (folder / "lines.jsonl").write_text("\n".join([
        line("images/im0.jpg", "training", polygonAnnotations=[
            {"displayName": "car", "vertexes": square}]),
        line("images/im1.jpg", "training", polygonAnnotations=[
            {"displayName": "car", "vertexes": square}], polylineAnnotations=[
            {"displayName": "crack", "vertexes": square[:2]}]),
        line("images/im2.jpg", "training", polygonAnnotations=[
            {"displayName": "car", "vertexes": [*square, {"x": 1.25, "y": 0.2}]}]),
    ]) + "\n")
    with pytest.raises(InvalidRowError) as caught:
        tfrecorder_lite.convert(folder / "lines.jsonl", folder / "out", **OPTIONS)
    assert "JSON line 2 of lines.jsonl" in str(caught.value)
    assert ("line 2: polylineAnnotations[0] (crack): a polyline is an open line, not an area, "
            "so it has no instance mask") in str(caught.value)
    problems = tfrecorder_lite.read_vertex(folder / "lines.jsonl").tfrecord.validate()
    assert [reason.split(";")[0] for reason in problems.problem] == [
        "line 2: polylineAnnotations[0] (crack): a polyline is an open line, not an area, so "
        "it has no instance mask", "box 1 of 1: xmax 1.25 is outside [0, 1]"]
    result = tfrecorder_lite.convert(folder / "lines.jsonl", folder / "out", **OPTIONS,
                                     on_error="skip")
    assert result.counts == {"TRAIN": 1}
    assert [reason.split(";")[0] for reason in result.rejected.reason] == [
        "line 2: polylineAnnotations[0] (crack): a polyline is an open line, not an area, so "
        "it has no instance mask", "box 1 of 1: xmax 1.25 is outside [0, 1]"]


def test_the_rest_apis_segmentation_union_reads_as_its_member(folder, caplog):
    """``segmentationAnnotation: {maskAnnotation | polygonAnnotation | polylineAnnotation}``
    (Vertex AI's ImageSegmentationAnnotation) gives what the member alone gives."""
    colors = [{"color": {"red": 1.0}, "displayName": "road"}]
    mask = {"maskGcsUri": "masks/im0.png", "annotationSpecColors": colors}
    (folder / "flat.jsonl").write_text(line("images/im0.jpg", "training",
                                            segmentationAnnotation=mask) + "\n")
    (folder / "union.jsonl").write_text(line("images/im0.jpg", "training",
                                             segmentationAnnotation={"maskAnnotation": mask}))
    flat, union = (tfrecorder_lite.read_vertex(folder / f"{n}.jsonl") for n in ("flat", "union"))
    assert union.equals(flat) and union.attrs["mask_colors"] == {(255, 0, 0): "road"}
    assert union.attrs["task"] == flat.attrs["task"] == "segmentation"
    assert union.mask_uri.tolist() == [str(folder / "masks" / "im0.png")]
    square = [{"x": 0.1, "y": 0.1}, {"x": 0.5, "y": 0.1}, {"x": 0.5, "y": 0.5}]
    polygon = {"displayName": "car", "vertexes": square}
    (folder / "flat.jsonl").write_text(line("images/im0.jpg", "training",
                                            polygonAnnotation=polygon))
    (folder / "union.jsonl").write_text(line(
        "images/im0.jpg", "training", segmentationAnnotation={
            "polygonAnnotation": polygon, "annotationResourceLabels": {"set": "a"}}))
    with caplog.at_level(logging.INFO, logger="tfrecorder_lite"):
        flat, union = (tfrecorder_lite.read_vertex(folder / f"{n}.jsonl")
                       for n in ("flat", "union"))
    assert "segmentationAnnotation.annotationResourceLabels" in caplog.text
    assert union.equals(flat) and union.label.tolist() == ["car"]
    assert union["mask"][0] == {"relative_polygons": [[0.1, 0.1, 0.5, 0.1, 0.5, 0.5]]}
    (folder / "union.jsonl").write_text("\n".join([
        line("images/im0.jpg", "training", segmentationAnnotation={
            "polylineAnnotation": {"displayName": "crack", "vertexes": square[:2]}}),
        line("images/im1.jpg", "training", segmentationAnnotation={
            "polygonAnnotation": {"displayName": "car", "vertexes": square[:2]}}),
        line("images/im2.jpg", "training", segmentationAnnotation={
            "maskAnnotation": mask, "maskGcsUri": "masks/im2.png"})]))
    refused = "; ".join(tfrecorder_lite.read_vertex(folder / "union.jsonl").attrs[
        "source_problems"].values())
    assert "line 2: segmentationAnnotation.polygonAnnotation.vertexes: " in refused
    assert ("line 3: segmentationAnnotation: holds both maskAnnotation and maskGcsUri: one "
            "annotation") in refused
    (folder / "union.jsonl").write_text(line("images/im0.jpg", "training",
                                             segmentationAnnotation={"polylineAnnotation": {
                                                 "displayName": "crack",
                                                 "vertexes": square[:2]}}))
    problems = tfrecorder_lite.read_vertex(folder / "union.jsonl").tfrecord.validate()
    assert problems.problem.tolist()[0].startswith(
        "line 1: segmentationAnnotation.polylineAnnotation (crack): a polyline is an open line")


# ----------------------------------------------------------------------------- told by content

def test_a_vertex_jsonl_named_json_is_read_as_vertex_and_a_json_of_neither_is_named(
        folder, capsys):
    lines = "\n".join(line(f"images/im{i}.jpg", SPLITS[i], classificationAnnotation={
        "displayName": "ab"[i % 2]}) for i in range(8)) + "\n"
    (folder / "export.jsonl").write_text(lines)
    (folder / "export.json").write_text(lines)
    options = dict(OPTIONS, on_error="skip")
    named_json = tfrecorder_lite.convert(folder / "export.json", folder / "j", **options)
    named_jsonl = tfrecorder_lite.convert(folder / "export.jsonl", folder / "l", **options)
    assert named_json.counts == named_jsonl.counts == {"TRAIN": 4, "VALIDATION": 1, "TEST": 2}
    assert records_by_file(folder / "j") == records_by_file(folder / "l")
    assert cli.main(["convert", str(folder / "export.json"), str(folder / "cli"),
                     "--no-progress", "--jobs", "1", "--on-error", "skip"]) == 0
    assert "wrote TRAIN 4, VALIDATION 1, TEST 2" in capsys.readouterr().out
    with pytest.raises(SchemaError, match=r"split='train' does not apply to a Vertex AI JSON "
                                          r"Lines file"):
        tfrecorder_lite.convert(folder / "export.json", folder / "x", split="train", **options)
    # JSON Lines whose first line is bad: still Vertex AI's, its reader names the line
    (folder / "bad.json").write_text(json.dumps({"classificationAnnotation": {
        "displayName": "a"}}) + "\n" + lines)
    bad = tfrecorder_lite.convert(folder / "bad.json", folder / "x", **options)
    assert bad.counts == named_json.counts
    assert bad.rejected.reason.tolist()[0] == "line 1: imageGcsUri: missing"
    neither = (r"is neither a COCO annotations file \(one JSON document with an 'images' "
               r"list\) nor a Vertex AI JSON Lines file \(one JSON object a line, each with "
               r"'imageGcsUri'\): ")
    for name, content, why in [
            ("object.json", '{"info": {"year": 2017},\n "licenses": []}', "it is an object "
                                                                          "without an 'images'"),
            ("list.json", '[{"imageGcsUri": "images/im0.jpg"}]', "it is a JSON list without"),
            ("broken.json", '{"images": [\n', r"it is not JSON: Expecting value"),
            ("latin.json", b'{"images": []}\n\xe9'.decode("latin-1"), r"line 2 is not UTF-8")]:
        (folder / name).write_bytes(content.encode("latin-1"))
        with pytest.raises(SchemaError, match=neither + why):
            tfrecorder_lite.convert(folder / name, folder / "x", **options)
    # a COCO file is still COCO, on one line too
    (folder / "instances_train.json").write_text(json.dumps({
        "images": [{"id": 1, "file_name": "images/im0.jpg", "height": 30, "width": 40}],
        "annotations": [], "categories": [{"id": 1, "name": "car"}]}))
    coco = tfrecorder_lite.convert(folder / "instances_train.json", folder / "coco", **OPTIONS)
    assert coco.counts == {"TRAIN": 1} and coco.metadata["task"] == "detection"


def test_a_latin1_vertex_csv_is_read_with_the_encoding_given(folder, capsys):
    labels = ["café" if i % 2 else "crème" for i in range(8)]
    rows = "".join(f"{'training' if i < 6 else 'test'},images/im{i}.jpg,{labels[i]}\n"
                   for i in range(8))
    (folder / "latin.csv").write_bytes(rows.encode("latin-1"))
    (folder / "utf8.csv").write_text(rows, encoding="utf-8")
    with pytest.raises(SchemaError, match=r"latin\.csv: line 1 is not utf-8: byte 0xe8 in "
                                          r"'training,images/im0\.jpg,cr\\xe8'; save the file "
                                          r"as UTF-8"):
        tfrecorder_lite.read_vertex(folder / "latin.csv")
    assert tfrecorder_lite.read_vertex(folder / "latin.csv", encoding="latin-1").label.tolist() \
        == labels
    latin = tfrecorder_lite.convert(folder / "latin.csv", folder / "l", **OPTIONS,
                                    encoding="latin-1")
    utf8 = tfrecorder_lite.convert(folder / "utf8.csv", folder / "u", **OPTIONS)
    assert latin.counts == {"TRAIN": 6, "TEST": 2}
    assert latin.labels == utf8.labels == ["café", "crème"]
    assert records_by_file(folder / "l") == records_by_file(folder / "u")
    # without its ML_USE field (told from an AutoML CSV by its first field), on the CLI
    (folder / "no_ml_use.csv").write_bytes(rows.replace("training,", "").replace(
        "test,", "").encode("latin-1"))
    with pytest.raises(SchemaError, match=r"no_ml_use\.csv: line 1 is not utf-8"):
        tfrecorder_lite.convert(folder / "no_ml_use.csv", folder / "x", **OPTIONS)
    assert cli.main(["convert", str(folder / "no_ml_use.csv"), str(folder / "cli"),
                     "--no-progress", "--encoding", "latin-1", "--unassigned", "assign",
                     "--jobs", "1"]) == 0
    assert tfrecorder_lite.read_vertex(folder / "no_ml_use.csv", encoding="latin-1"
                                       ).label.tolist() == labels
    # JSON Lines too (Vertex AI writes UTF-8; a file saved otherwise is read as told)
    (folder / "latin.jsonl").write_bytes(line("images/im0.jpg", "training", ensure_ascii=False,
                                              classificationAnnotation={"displayName": "café"}
                                              ).encode("latin-1"))
    assert tfrecorder_lite.read_vertex(folder / "latin.jsonl", encoding="latin-1").label[0] == \
        "café"


def test_the_annotation_size_bound_holds_for_vertex_yolo_and_automl_files(folder):
    def refused(name, size, limit):  # sizes this close are said in bytes
        return (rf"{name} is {size} bytes; annotation files are read whole, up to {limit} "
                rf"bytes \(max_annotation_bytes={limit}\)")

    jsonl = "\n".join(line(f"images/im{i}.jpg", "training", classificationAnnotation={
        "displayName": "a"}) for i in range(8))
    csv_text = "".join(f"TRAIN,images/im{i}.jpg,a\n" for i in range(8))
    boxes = "".join(f"TRAIN,images/im{i}.jpg,car,0.1,0.2,,,0.5,0.6,,\n" for i in range(8))
    files = {"v.jsonl": jsonl, "v.json": jsonl, "v.csv": csv_text.replace("TRAIN,", ""),
             "boxes.csv": boxes}
    for name, text in files.items():
        (folder / name).write_text(text)
        size = len(text.encode())
        with pytest.raises(SchemaError, match=refused(re.escape(name), size, size - 1)):
            tfrecorder_lite.convert(folder / name, folder / "x", **OPTIONS,
                                    max_annotation_bytes=size - 1)
        assert tfrecorder_lite.convert(folder / name, folder / f"ok-{name}", **OPTIONS,
                                       max_annotation_bytes=size, unassigned="assign").counts
    for name in ("v.jsonl", "v.csv"):
        with pytest.raises(SchemaError, match=rf"{re.escape(name)} is [\d.]+ (kB|bytes); "
                                              r"annotation files are read whole, up to 10 bytes "
                                              r"\(max_annotation_bytes=10\)"):
            tfrecorder_lite.read_vertex(folder / name, max_annotation_bytes=10)
    # a classification CSV is a table, not an annotation file: not bounded
    (folder / "table.csv").write_text(csv_text)
    assert tfrecorder_lite.convert(folder / "table.csv", folder / "table", **OPTIONS,
                                   max_annotation_bytes=10).counts == {"TRAIN": 8}

    root = yolo_folder(folder / "yolo")
    label = root / "labels" / "train" / "im3.txt"
    label.write_text(label.read_text() * 4)  # its boxes four times: the largest file
    size = label.stat().st_size
    assert max(p.stat().st_size for p in root.rglob("*.txt") if p != label) < size
    assert (root / "data.yaml").stat().st_size < size
    with pytest.raises(SchemaError, match=refused(re.escape(os.path.join(
            "labels", "train", "im3.txt")), size, size - 1)) as caught:
        tfrecorder_lite.read_yolo(root, max_annotation_bytes=size - 1)
    assert "a label file without its image" not in str(caught.value)
    with pytest.raises(SchemaError, match=refused(".*data.yaml", (root / "data.yaml").stat()
                                                  .st_size, 20)):
        tfrecorder_lite.convert(root, folder / "y", **OPTIONS, max_annotation_bytes=20)
    assert tfrecorder_lite.convert(root, folder / "y", **OPTIONS,
                                   max_annotation_bytes=size).counts == {"TRAIN": 6,
                                                                         "VALIDATION": 2}
