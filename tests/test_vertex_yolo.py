"""Vertex AI import files (JSON Lines and CSV) and YOLO folders: read into the table of their
task, converted to the same records as the equivalent AutoML CSV or per-box table, recognized
by ``convert()`` and the command line by their content; every malformed line or file reported
by line (or file) and field; paths inside them kept inside the folder the user named."""

import json
import math
import re
import os

import pandas as pd
import pytest

import tfrecorder_lite
from tfrecorder_lite import InvalidRowError, SchemaError, cli
from tfrecorder_lite.output.manifest import read_manifest
from tfrecorder_lite.record.encoding import decode_example
from tfrecorder_lite.record.framing import iter_records
from tfrecorder_lite.storage import Store
from conftest import photo, save

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


def line(image, split=None, **annotations):
    item = {"imageGcsUri": image, **annotations}
    if split is not None:
        item["dataItemResourceLabels"] = {ML_USE: split, "owner": "me"}
    return json.dumps(item)


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


def test_vertex_masks_give_the_segmentation_table_which_convert_refuses_for_now(folder):
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
    with pytest.raises(SchemaError, match="segmentation input is not supported yet"):
        tfrecorder_lite.convert(folder / "masks.jsonl", folder / "out", **OPTIONS)
    assert not (folder / "out" / "metadata.json").exists()


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
    with pytest.raises(SchemaError) as caught:
        tfrecorder_lite.read_vertex(folder / "bad.jsonl")
    message = str(caught.value)
    for expected in ["line 2: not JSON", "line 3: a JSON list, not an object",
                     "line 4: imageGcsUri: missing",
                     f'line 5: dataItemResourceLabels["{ML_USE}"]: \'trainig\' is no ml_use',
                     "line 6: classificationAnnotation.displayName: missing",
                     "line 7: polygonAnnotation: polygon and polyline annotations are "
                     "segmentation input, which is not supported yet",
                     "line 8: detection annotations, but line 1 holds classification",
                     "line 9: imageGcsUri: '../outside.jpg' leads outside"]:
        assert expected in message
    assert not re.search(r"(: |; )line 1:", message) and "8 problem(s)" in message
    assert message.index("line 2:") < message.index("line 9:")  # in file order


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
    with pytest.raises(SchemaError, match=r"line 1: imageGcsUri: '\.\./outside\.jpg' leads "
                                          r"outside .*allow_outside_paths=True") as caught:
        tfrecorder_lite.read_vertex(folder / "sub" / "a.jsonl")
    assert "line 2: imageGcsUri" in str(caught.value)  # an absolute path too
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
        "1 0.1 0.1 0.2 0.1 0.2 0.2 0.1 0.2\n2 0.5 x 0.2 0.2\n")
    (root / "labels" / "train" / "gone.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    with pytest.raises(SchemaError) as caught:
        tfrecorder_lite.read_yolo(root)
    message = str(caught.value)
    name = os.path.join("labels", "train", "im0.txt")
    for expected in [f"{name} line 2: class '3' is not in names (0-2)",
                     f"{name} line 3: 4 fields, expected 5 (class cx cy w h)",
                     f"{name} line 4: a polygon (class x1 y1 x2 y2 ...): segmentation input "
                     "is not supported yet",
                     f"{name} line 5: cy 'x' is not a number",
                     f"{os.path.join('labels', 'train', 'gone.txt')}: a label file without "
                     "its image"]:
        assert expected in message
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
    with pytest.raises(SchemaError, match=r"line 4: imageGcsUri: '\.\./\.\./escape\.jpg' "
                                          r"leads outside memory://formats-test/yolo"):
        tfrecorder_lite.read_vertex("memory://formats-test/yolo/boxes.jsonl")
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
