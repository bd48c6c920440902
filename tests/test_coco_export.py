"""COCO out: ``to_coco`` (and ``tfrecorder-lite export-coco``) of a detection output is COCO
instances JSON that pycocotools reads as it is; a COCO file converted in and exported out keeps
every box, category and crowd flag, and COCOeval of the original annotations as detections
against it gives AP = 1.0. The YOLO records are read by the TF Model Garden's decoder."""

import json
import os

import numpy as np
import pytest

import tfrecorder_lite
from tfrecorder_lite import SchemaError, VerifyError, cli
from conftest import photo, save

pytestmark = pytest.mark.slow  # pycocotools' COCOeval, the Model Garden's decoder: other readers

OPTIONS = dict(progress=False, n_jobs=1)


@pytest.fixture
def coco_file(tmp_path):
    """A COCO instances file of 10 photos: category ids with gaps, crowd boxes, an image
    without annotations, several boxes an image, odd sizes, non-round pixel boxes."""
    rng = np.random.default_rng(7)
    coco = {"images": [], "annotations": [],
            "categories": [{"id": 2, "name": "bicycle"}, {"id": 5, "name": "airplane"},
                           {"id": 18, "name": "dog"}]}
    for i in range(10):
        height, width = 40 + 3 * i, 50 + 5 * i
        image_id = 1000 + 7 * i
        save(photo(height, width, seed=i), tmp_path / "val" / f"{image_id:012d}.jpg")
        coco["images"].append({"id": image_id, "file_name": f"{image_id:012d}.jpg",
                               "height": height, "width": width})
        for j in range(0 if i == 4 else 1 + i % 3):
            w, h = rng.uniform(4, width / 2), rng.uniform(4, height / 2)
            x, y = rng.uniform(0, width - w), rng.uniform(0, height - h)
            coco["annotations"].append({
                "id": len(coco["annotations"]) + 1, "image_id": image_id,
                "category_id": [2, 5, 18][(i + j) % 3], "bbox": [x, y, w, h],
                "area": w * h * 0.8, "iscrowd": int(i == 7 and j == 0)})
    path = tmp_path / "instances_val.json"
    path.write_text(json.dumps(coco))
    return path, coco


def test_a_coco_file_converted_in_and_exported_out_keeps_every_box_and_gives_ap_1(
        coco_file, tmp_path):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    path, original = coco_file
    tfrecorder_lite.convert(path, tmp_path / "out", image_dir=tmp_path / "val", **OPTIONS)
    exported = tfrecorder_lite.to_coco(tmp_path / "out", "validation", tmp_path / "gt.json")
    assert json.loads((tmp_path / "gt.json").read_text()) == exported
    assert sorted((c["id"], c["name"]) for c in exported["categories"]) == \
        [(2, "bicycle"), (5, "airplane"), (18, "dog")]
    assert sorted((i["id"], i["file_name"], i["width"], i["height"])
                  for i in exported["images"]) == \
        sorted((i["id"], i["file_name"], i["width"], i["height"]) for i in original["images"])

    def boxes(coco):
        return sorted((a["image_id"], a["category_id"], a["iscrowd"],
                       *np.round(a["bbox"], 3).tolist(), round(a["area"], 2))
                      for a in coco["annotations"])

    assert len(exported["annotations"]) == len(original["annotations"]) == 17
    ours, theirs = boxes(exported), boxes(original)
    for a, b in zip(ours, theirs):
        assert a[:3] == b[:3]
        np.testing.assert_allclose(a[3:], b[3:], rtol=1e-5, atol=1e-3)

    ground_truth = COCO(str(tmp_path / "gt.json"))
    detections = ground_truth.loadRes([
        {"image_id": a["image_id"], "category_id": a["category_id"], "bbox": a["bbox"],
         "score": 1.0} for a in original["annotations"]])
    evaluation = COCOeval(ground_truth, detections, "bbox")
    evaluation.evaluate()
    evaluation.accumulate()
    evaluation.summarize()
    assert evaluation.stats[0] == pytest.approx(1.0)  # AP @ IoU 0.50:0.95
    assert evaluation.stats[1] == pytest.approx(1.0)  # AP @ IoU 0.50

    # a wrong detection set must not score 1.0: the check can fail
    shifted = ground_truth.loadRes([
        {"image_id": a["image_id"], "category_id": a["category_id"],
         "bbox": [a["bbox"][0] + a["bbox"][2] / 2, *a["bbox"][1:]], "score": 1.0}
        for a in original["annotations"]])
    worse = COCOeval(ground_truth, shifted, "bbox")
    worse.evaluate()
    worse.accumulate()
    worse.summarize()
    assert worse.stats[0] < 0.5


def test_export_coco_on_the_command_line_and_what_it_refuses(coco_file, tmp_path, capsys,
                                                              image_table):
    path, original = coco_file
    tfrecorder_lite.convert(path, tmp_path / "out", image_dir=tmp_path / "val", **OPTIONS)
    assert cli.main(["export-coco", str(tmp_path / "out"), "VALIDATION",
                     str(tmp_path / "cli.json")]) == 0
    assert "10 images, 17 boxes, 3 categories" in capsys.readouterr().out
    assert json.loads((tmp_path / "cli.json").read_text()) == tfrecorder_lite.to_coco(
        tmp_path / "out", "VALIDATION", tmp_path / "api.json")
    assert cli.main(["export-coco", str(tmp_path / "out"), "TRAIN",
                     str(tmp_path / "x.json")]) == 2
    assert "split 'TRAIN' not in" in capsys.readouterr().err
    image_table.tfrecord.to_tfrecord(tmp_path / "classes", **OPTIONS)
    with pytest.raises(SchemaError, match="classification output; COCO instances are "
                                          "exported from a detection output"):
        tfrecorder_lite.to_coco(tmp_path / "classes", "TRAIN", tmp_path / "y.json")
    assert not os.path.exists(tmp_path / "y.json")


def test_to_coco_names_a_damaged_or_missing_shard_and_refuses_a_folder(coco_file, tmp_path):
    path, _ = coco_file
    out = tmp_path / "out"
    tfrecorder_lite.convert(path, out, image_dir=tmp_path / "val", **OPTIONS)
    (tmp_path / "exports").mkdir()
    with pytest.raises(SchemaError, match="to_coco's path .*exports is a folder"):
        tfrecorder_lite.to_coco(out, "validation", tmp_path / "exports")
    assert not os.path.exists(tmp_path / "exports.tmp")
    shard = next(out.glob("validation-*.tfrecord"))
    data = bytearray(shard.read_bytes())
    data[-10] ^= 0xFF  # in the last record's data
    shard.write_bytes(bytes(data))
    with pytest.raises(VerifyError, match=rf"{shard.name}: record \d+: data CRC mismatch.*"
                                          "run tfrecorder-lite verify"):
        tfrecorder_lite.to_coco(out, "validation", tmp_path / "gt.json")
    shard.unlink()
    with pytest.raises(VerifyError, match=rf"{shard.name}: missing \(metadata.json lists it "
                                          r"in VALIDATION\)"):
        tfrecorder_lite.to_coco(out, "validation", tmp_path / "gt.json")
    assert not os.path.exists(tmp_path / "gt.json")


def test_a_yolo_folders_records_are_read_by_the_model_garden_decoder(tmp_path):
    tf = pytest.importorskip("tensorflow")
    from model_garden import decoder_class
    from test_vertex_yolo import BOXES, yolo_folder

    root = yolo_folder(tmp_path / "yolo")
    tfrecorder_lite.convert(root, tmp_path / "out", **OPTIONS)
    metadata = json.loads((tmp_path / "out" / "metadata.json").read_text())
    decoder = decoder_class()()
    found = {}
    for split in metadata["splits"].values():
        for shard in split["shards"]:
            for raw in tf.data.TFRecordDataset(str(tmp_path / "out" / shard["name"])):
                decoded = decoder.decode(raw)
                found[int(decoded["source_id"].numpy())] = decoded
    assert len(found) == len(BOXES)
    ids = {"car": 1, "person": 2, "bike": 3}
    for i, boxes in enumerate(BOXES):  # images are read in folder order: source id i
        decoded = found[i]
        np.testing.assert_allclose(decoded["groundtruth_boxes"].numpy().reshape(-1, 4),
                                   [[y0, x0, y1, x1] for _, x0, y0, x1, y1 in boxes]
                                   or np.zeros((0, 4)), atol=1e-6)
        assert decoded["groundtruth_classes"].numpy().tolist() == [ids[b[0]] for b in boxes]
        assert (decoded["height"].numpy(), decoded["width"].numpy()) == (30 + 2 * i, 40 + i)
