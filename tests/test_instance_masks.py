"""Instance masks: COCO polygons and RLE rasterized as pycocotools does, written as the Object
Detection API's ``image/object/mask`` beside the boxes, read back by ``load()``, ``verify`` and
the TF Model Garden's detection decoder with ``include_mask=True``."""

import io
import json

import numpy as np
import pytest
from PIL import Image
from pycocotools import mask as mask_api

import tfrecorder_lite
from conftest import photo, save
from imagegen import read_examples
from tfrecorder_lite import SchemaError
from tfrecorder_lite.images import coco_rle
from tfrecorder_lite.images.instance_masks import MaskRejected, rasterize_polygons, rle_mask
from tfrecorder_lite.read.verification import verify
from tfrecorder_lite.sources.coco import read_coco



def _polygons(rng, height, width, count, rounding):
    polygons = []
    for _ in range(count):
        corners = int(rng.integers(3, 12))
        points = np.stack([rng.uniform(0, width, corners), rng.uniform(0, height, corners)], 1)
        polygons.append((np.round(points * rounding) / rounding if rounding else points)
                        .ravel().tolist())
    return polygons


@pytest.mark.parametrize("rounding", [0, 1, 2])
def test_polygons_agree_with_pycocotools_pixel_for_pixel(rounding):
    rng = np.random.default_rng(rounding)
    for _ in range(400):
        height, width = (int(v) for v in rng.integers(3, 90, 2))
        polygons = _polygons(rng, height, width, int(rng.integers(1, 4)), rounding)
        ours = rasterize_polygons(polygons, height, width)
        theirs = mask_api.decode(mask_api.merge(mask_api.frPyObjects(polygons, height, width)))
        assert np.array_equal(ours, theirs), (height, width, polygons)


def test_rles_agree_with_pycocotools_compressed_and_not():
    rng = np.random.default_rng(7)
    for _ in range(300):
        height, width = (int(v) for v in rng.integers(1, 70, 2))
        mask = (rng.random((height, width)) < rng.random()).astype(np.uint8)
        compressed = mask_api.encode(np.asfortranarray(mask))
        rle = {"size": [height, width], "counts": compressed["counts"].decode()}
        assert np.array_equal(rle_mask(rle, height, width), mask)
        flips = np.flatnonzero(np.diff(np.concatenate([[0], mask.T.ravel(), [2]])))
        counts = np.diff(np.concatenate([[0], flips])).tolist()
        theirs = mask_api.decode(mask_api.frPyObjects(
            {"size": [height, width], "counts": counts}, height, width))
        assert np.array_equal(rle_mask({"size": [height, width], "counts": counts},
                                       height, width), theirs)


def test_bad_polygons_and_rles_are_named():
    with pytest.raises(MaskRejected, match=r"polygon 1: point \(12, 3\) is outside the image "
                                           r"\(10x8, width x height\)"):
        rasterize_polygons([[1, 1, 12, 3, 5, 6]], 8, 10)
    with pytest.raises(MaskRejected, match="polygon 2 has 4 coordinates"):
        rasterize_polygons([[1, 1, 2, 3, 5, 6], [1, 1, 2, 2]], 8, 10)
    with pytest.raises(MaskRejected, match=r"RLE size 8x9 is not its image's 8x10"):
        rle_mask({"size": [8, 9], "counts": [72]}, 8, 10)
    with pytest.raises(MaskRejected, match="counts cover 70 pixels, the image 8x10 = 80"):
        rle_mask({"size": [8, 10], "counts": [30, 40]}, 8, 10)
    with pytest.raises(ValueError, match="end in the middle"):
        coco_rle.uncompress(b"0`")


def _coco(tmp_path, bad=False):
    """A COCO file of three images: polygons, a crowd RLE, an image without objects; with
    ``bad``, a fourth image whose polygon leaves it."""
    images, annotations, truth = [], [], {}
    rng = np.random.default_rng(3)
    for i, (height, width) in enumerate([(40, 60), (48, 32), (30, 30)] +
                                        ([(20, 20)] if bad else []), 1):
        save(photo(height, width, seed=i), tmp_path / f"{i}.jpg")
        images.append({"id": i, "file_name": f"{i}.jpg", "height": height, "width": width})
        masks = []
        if i == 1:
            for polygon in ([[5, 5, 30, 8, 20, 30]], [[35.5, 10, 55, 12, 50, 35, 40, 30]]):
                annotations.append({"id": len(annotations) + 1, "image_id": i, "category_id": 1,
                                    "bbox": [5, 5, 25, 25], "area": 300.0, "iscrowd": 0,
                                    "segmentation": polygon})
                masks.append(mask_api.decode(mask_api.merge(
                    mask_api.frPyObjects(polygon, height, width))))
        if i == 2:
            crowd = (rng.random((height, width)) < 0.3).astype(np.uint8)
            rle = mask_api.encode(np.asfortranarray(crowd))
            annotations.append({"id": len(annotations) + 1, "image_id": i, "category_id": 2,
                                "bbox": [0, 0, 30, 40], "area": float(crowd.sum()),
                                "iscrowd": 1, "segmentation": {
                                    "size": [height, width], "counts": rle["counts"].decode()}})
            masks.append(crowd)
        if i == 4:
            annotations.append({"id": len(annotations) + 1, "image_id": i, "category_id": 1,
                                "bbox": [1, 1, 5, 5], "area": 9.0, "iscrowd": 0,
                                "segmentation": [[1, 1, 25, 2, 3, 6]]})
        truth[f"{i}.jpg"] = masks
    path = tmp_path / "instances_train2017.json"
    path.write_text(json.dumps({"images": images, "annotations": annotations, "categories": [
        {"id": 1, "name": "cat"}, {"id": 2, "name": "people"}]}))
    return path, truth


def test_coco_instance_masks_are_written_and_read_back(tmp_path):
    path, truth = _coco(tmp_path)
    assert "mask" not in read_coco(path).columns  # only when asked
    table = read_coco(path, include_masks=True)
    result = tfrecorder_lite.convert(path, tmp_path / "out", include_masks=True, progress=False)
    assert result.counts == {"TRAIN": 3}
    for record in read_examples(tmp_path / "out"):
        name = record["image/filename"].decode()
        stored = record.get("image/object/mask", [])
        stored = stored if isinstance(stored, list) else [stored]
        assert len(stored) == len(truth[name])
        for png, expected in zip(stored, truth[name]):
            image = Image.open(io.BytesIO(png))
            assert (image.format, image.mode) == ("PNG", "L")
            assert np.array_equal(np.asarray(image), expected)
    assert "verified" in str(verify(tmp_path / "out", decode=True))
    assert len(table) == 4  # two boxes, one crowd, one image without objects
    assert table.tfrecord.validate().empty  # its RLE cells (dicts) are hashed as text

    batches = tfrecorder_lite.load(tmp_path / "out", "TRAIN", batch_size=3, image_size=(20, 20))
    images, target = next(iter(batches))
    assert target["masks"].shape[0] == 3 and target["masks"].shape[2:] == (20, 20)
    assert set(np.unique(target["masks"].numpy())) <= {0, 1}
    for example in tfrecorder_lite.load(tmp_path / "out", "TRAIN", as_supervised=False):
        expected = truth[example["image/filename"].numpy().decode()]
        masks = example["masks"].numpy()
        assert masks.shape == (len(expected), *example["image"].shape[:2])
        for ours, theirs in zip(masks, expected):
            assert np.array_equal(ours, theirs)


def test_a_polygon_outside_its_image_rejects_the_image(tmp_path):
    path, _ = _coco(tmp_path, bad=True)
    result = tfrecorder_lite.convert(path, tmp_path / "out", include_masks=True,
                                     on_error="skip", progress=False)
    assert result.counts == {"TRAIN": 3}
    assert list(result.rejected["reason"]) == [
        "box 1 of 1: polygon 1: point (25, 2) is outside the image (20x20, width x height)"]
    assert "verified" in str(verify(tmp_path / "out", decode=True))


@pytest.mark.slow  # loads the Model Garden from its wheel (downloaded once)
def test_the_model_garden_decoder_reads_the_masks(tmp_path):
    tf = pytest.importorskip("tensorflow")
    from model_garden import decoder_class

    path, truth = _coco(tmp_path)
    tfrecorder_lite.convert(path, tmp_path / "out", include_masks=True, progress=False)
    decoder = decoder_class()(include_mask=True)
    read = 0
    for shard in sorted({r["_shard"] for r in read_examples(tmp_path / "out")}):
        for serialized in tf.data.TFRecordDataset(str(tmp_path / "out" / shard)):
            decoded = decoder.decode(serialized)
            name = tf.train.Example.FromString(serialized.numpy()).features.feature[
                "image/filename"].bytes_list.value[0].decode()
            masks = decoded["groundtruth_instance_masks"].numpy()
            assert masks.shape[0] == len(truth[name])
            for ours, theirs in zip(masks, truth[name]):
                assert np.array_equal(ours.astype(np.uint8), theirs)
            read += 1
    assert read == 3


def test_inspect_tints_each_instance_mask():
    from tfrecorder_lite.images.mask_pixels import encode_ids
    from tfrecorder_lite.record.boxes import Boxes

    mask = np.zeros((20, 20), np.uint8)
    mask[5:15, 5:15] = 1
    thumbnail = Image.new("RGB", (40, 40), (128, 128, 128))
    values = {f"image/object/bbox/{name}": ("float", [value]) for name, value in
              (("xmin", 0.05), ("ymin", 0.05), ("xmax", 0.95), ("ymax", 0.95))}
    values.update({"image/object/class/label": ("int64", [1]),
                   "image/object/class/text": ("bytes", [b"cat"]),
                   "image/object/mask": ("bytes", [encode_ids(mask)])})
    Boxes(vocabulary=("", "cat"), masks=True).draw(thumbnail, values, None)
    pixels = np.asarray(thumbnail)
    assert (pixels[20, 20] != 128).any()  # inside the mask: tinted
    assert (pixels[8, 20] == 128).all()  # inside the box, outside the mask: as it was


def test_to_coco_exports_each_instance_mask_as_pycocotools_reads_it(tmp_path):
    from pycocotools.coco import COCO

    path, truth = _coco(tmp_path)
    tfrecorder_lite.convert(path, tmp_path / "out", include_masks=True, progress=False)
    exported = tmp_path / "exported.json"
    tfrecorder_lite.to_coco(tmp_path / "out", "TRAIN", str(exported))
    coco = COCO(str(exported))
    found = {}
    for image in coco.dataset["images"]:
        annotations = coco.loadAnns(coco.getAnnIds(imgIds=[image["id"]]))
        assert all("segmentation" in a for a in annotations)
        found[image["file_name"]] = [coco.annToMask(a) for a in annotations]
    assert found.keys() == truth.keys()
    for name, masks in truth.items():
        assert len(found[name]) == len(masks)
        for ours, theirs in zip(found[name], masks):
            assert np.array_equal(ours, theirs)


def test_keras_layout_refuses_instance_masks_that_the_layers_would_not_move(tmp_path):
    path, _ = _coco(tmp_path)
    tfrecorder_lite.convert(path, tmp_path / "out", include_masks=True, progress=False)
    with pytest.raises(SchemaError, match="instance masks, which Keras' augmentation layers"):
        tfrecorder_lite.load(tmp_path / "out", "TRAIN", as_supervised="keras")
