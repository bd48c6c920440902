"""plan.build_plan: shard boundaries, the seeded order, the rejections and the fingerprint, all
decided before any image is read."""

import os

import pandas as pd
import pytest

from conftest import photo, save
from tfrecorder_lite import SchemaError
from tfrecorder_lite.images.normalize import ImageOptions
from tfrecorder_lite.table import file_checks as files_module
from tfrecorder_lite.write.plan import plan_table

COLUMNS = {"split_col": "split", "image_col": "image_uri", "label_col": "label"}


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """Twelve small PNGs; the table's rows name them by relative path."""
    root = tmp_path_factory.mktemp("plan")
    for i in range(12):
        save(photo(8, 8 + i, seed=i), root / f"{i}.png", "PNG")
    return root


def table(splits, labels=None, names=None):
    names = names or [f"{i}.png" for i in range(len(splits))]
    labels = labels or [["cat", "dog", "owl"][i % 3] for i in range(len(splits))]
    return pd.DataFrame({"split": splits, "image_uri": names, "label": labels})


def plan_of(df, images, **options):
    return plan_table(df, **COLUMNS, base_dir=str(images), image=ImageOptions(), **options)


def positions(plan, split):
    return [p for shard in plan.shards if shard.split == split for p in shard.positions]


def test_shards_split_each_split_evenly_in_order(images):
    plan = plan_of(table(["TRAIN"] * 10 + ["TEST"] * 2), images,
                   num_shards={"train": 3, "TEST": 5}, shuffle=False)
    assert [(s.name, tuple(s.positions.tolist())) for s in plan.shards] == [
        ("train-00000-of-00003.tfrecord", (0, 1, 2)),
        ("train-00001-of-00003.tfrecord", (3, 4, 5)),
        ("train-00002-of-00003.tfrecord", (6, 7, 8, 9)),
        ("test-00000-of-00002.tfrecord", (10,)),  # no more shards than rows
        ("test-00001-of-00002.tfrecord", (11,)),
    ]
    assert plan.splits == ("TRAIN", "TEST")
    gzip = plan_of(table(["TRAIN"] * 3), images, num_shards=1, compression="GZIP")
    assert [s.name for s in gzip.shards] == ["train-00000-of-00001.tfrecord.gz"]


def test_small_images_make_one_shard_a_split_by_default(images):
    plan = plan_of(table(["TRAIN"] * 9 + ["VALIDATION"] * 3), images)
    assert [s.name for s in plan.shards] == ["train-00000-of-00001.tfrecord",
                                             "validation-00000-of-00001.tfrecord"]


@pytest.mark.parametrize("num_shards", [0, -1, 2.5, "4", True])
def test_a_bad_shard_count_is_refused_by_value(images, num_shards):
    with pytest.raises(SchemaError, match=f"num_shards must be a positive integer.*{num_shards!r}"):
        plan_of(table(["TRAIN"] * 4), images, num_shards=num_shards)


def test_the_order_is_seeded_per_split(images):
    df = table(["TRAIN"] * 8 + ["TEST"] * 4)
    first, again = plan_of(df, images, seed=3), plan_of(df, images, seed=3)
    other = plan_of(df, images, seed=4)
    assert positions(first, "TRAIN") == positions(again, "TRAIN")
    assert positions(first, "TRAIN") != positions(other, "TRAIN")
    assert sorted(positions(other, "TRAIN")) == list(range(8))
    assert positions(plan_of(df, images, shuffle=False), "TRAIN") == list(range(8))
    # one split's order does not depend on the other splits' rows
    fewer_tests = plan_of(df.iloc[:10], images, seed=3)
    assert positions(fewer_tests, "TRAIN") == positions(first, "TRAIN")
    assert first.fingerprint == again.fingerprint != other.fingerprint


def test_rows_with_problems_are_rejected_before_any_image_is_read(images):
    (images / "notes.png").write_text("not an image, but only decoding can tell")
    df = table(["TRAIN", "TRAIN", "NOPE", "TRAIN", "TEST", "TRAIN"],
               labels=["cat", "dog", "cat", "", "bird", "cat"],
               names=["0.png", "missing.png", "2.png", "3.png", "4.png", "notes.png"])
    plan = plan_of(df, images, num_shards=1)
    reasons = dict(plan.rejected)
    assert sorted(reasons) == [1, 2, 3]
    assert reasons[1].startswith("file not found (looked for ")
    assert "the relative path missing.png was resolved against base_dir" in reasons[1]
    assert "NOPE" in reasons[2] and "label" in reasons[3]
    # notes.png is no image, which only reading it tells: the plan keeps its row
    assert sorted(positions(plan, "TRAIN")) == [0, 5] and positions(plan, "TEST") == [4]
    # a label that only rejected rows carry takes no id
    assert plan.labels == ["bird", "cat"]
    assert plan.label_values[1] == ((-1, ""),)


def test_a_file_over_max_image_bytes_is_rejected_naming_the_option(images):
    size = os.path.getsize(images / "5.png")
    plan = plan_table(table(["TRAIN"] * 6), **COLUMNS, base_dir=str(images),
                      image=ImageOptions(max_bytes=size - 1))
    reasons = dict(plan.rejected)
    assert 5 in reasons
    assert reasons[5] == (f"file too large: {size} bytes (limit {size - 1} bytes, "
                          "max_image_bytes)")


def test_the_fingerprint_changes_when_an_image_file_does(images, tmp_path):
    for i in range(3):
        save(photo(8, 8, seed=i), tmp_path / f"{i}.png", "PNG")
    df = table(["TRAIN"] * 3)
    before = plan_of(df, tmp_path).fingerprint
    assert plan_of(df, tmp_path).fingerprint == before
    stat = os.stat(tmp_path / "1.png")
    os.utime(tmp_path / "1.png", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert plan_of(df, tmp_path).fingerprint != before


def test_a_task_carries_its_shard_rows_only(images):
    df = table(["TRAIN"] * 6).set_index(pd.Index([f"r{i}" for i in range(6)]))
    plan = plan_of(df, images, num_shards=2, shuffle=False)
    task = plan.task(plan.shards[1], df.index, threads=3)
    assert task.name == "train-00001-of-00002.tfrecord" and task.threads == 3
    assert [(p, label, os.path.basename(path), values)
            for p, label, path, values, _ in task.rows] \
        == [(3, "r3", "3.png", ((0, "cat"),)), (4, "r4", "4.png", ((1, "dog"),)),
            (5, "r5", "5.png", ((2, "owl"),))]
    assert task.features is plan.features and task.image == plan.image


def test_task_rows_kept_as_columns_give_every_row_back_whole_after_pickling():
    import pickle

    from tfrecorder_lite.write.task import TaskRows

    paths = ["a/1.jpg", "b/ü2.png", "", "gs://c/3 4.jpg", "d\n5.jpg"]
    values = [((i, f"l{i}"),) for i in range(5)]
    rows = TaskRows([10, 11, 12, 13, 14], None, paths, values, [()] * 5)
    again = pickle.loads(pickle.dumps(rows))
    want = [(10 + i, 10 + i, paths[i], values[i], ()) for i in range(5)]
    assert len(again) == 5 and list(again) == want and again == rows
    assert again[1:3] == want[1:3] and again[4:] == want[4:] and again[5:] == []
    labelled = TaskRows([0, 1], ["x", ("m", 2)], [None, None], [(), ()], [("f",), ("g",)])
    assert labelled[:] == [(0, "x", None, (), ("f",)), (1, ("m", 2), None, (), ("g",))]


def test_joined_texts_give_each_text_back_by_index_slice_and_when_joined():
    from tfrecorder_lite.memory import JoinedTexts

    texts = ["a/1.jpg", "b/ü2.png", "", "d\n5.jpg"]
    joined = JoinedTexts(texts)
    assert len(joined) == 4 and [joined[i] for i in range(4)] == texts
    assert joined[-1] == texts[-1] and joined[:] == texts and joined[1:3] == texts[1:3]
    assert joined[3:1] == [] and JoinedTexts()[:] == []
    with pytest.raises(IndexError):
        joined[4]
    both = JoinedTexts.joined([joined, JoinedTexts(), JoinedTexts(["x", "yz"])])
    assert len(both) == 6 and both[:] == texts + ["x", "yz"] and both[4] == "x"


def _plan_facts(plan, index):
    return (plan.fingerprint,
            [(s.name, s.positions.tolist(), s.source_bytes) for s in plan.shards],
            plan.rejected, [plan.task(s, index).rows for s in plan.shards],
            [plan.paths[p] for p in range(len(index))])


@pytest.mark.parametrize("labels", [None, [["cat"], ["dog", "owl"], [], ["cat", "owl"]] * 3],
                         ids=["one label", "multi-label"])
def test_a_table_planned_in_chunks_is_planned_as_in_one(images, monkeypatch, labels):
    """Images are stat'ed a chunk at a time: the chunks' edges change nothing (fingerprint,
    shards, rejections, the tasks' rows), with missing files and refused rows among them."""
    df = table(["TRAIN", "TEST", "TRAIN", "NOPE"] * 3, labels=labels,
               names=[f"{i}.png" if i % 5 else f"gone{i}.png" for i in range(12)])
    df.index = pd.RangeIndex(0, 12) if labels else pd.Index([f"r{i}" for i in range(12)])
    whole = plan_of(df, images, num_shards=2)
    monkeypatch.setattr(files_module, "_CHUNK", 5)
    chunked = plan_of(df, images, num_shards=2)
    assert _plan_facts(chunked, df.index) == _plan_facts(whole, df.index)
    assert {0, 3, 5, 7, 10, 11} <= dict(chunked.rejected).keys()  # gone*.png, NOPE splits
    assert chunked.paths[0].endswith("gone0.png") and chunked.paths[1].endswith("1.png")


def test_a_text_column_gives_each_row_across_its_chunks_as_a_take_does():
    import numpy

    from tfrecorder_lite.table.row_columns import TextColumn

    chunks = [[f"/x/{i}.jpg" if i % 5 else None for i in range(start, start + 7)]
              for start in range(0, 21, 7)]
    column = TextColumn([TextColumn.compact(c) for c in chunks])
    everything = [text for chunk in chunks for text in chunk]
    assert [column[p] for p in range(21)] == column.take(range(21)) == everything
    assert column[numpy.int64(10)] is None and column[13] == "/x/13.jpg"
    order = [20, 3, 10, 0, 14, 6, 7]  # across the chunks, in any order (one piece now)
    assert column.take(order) == [everything[p] for p in order]


@pytest.mark.parametrize("check", ["decode", "header"])
def test_a_plan_has_the_fingerprint_of_the_conversion_it_plans(images, tmp_path, check):
    # the near-duplicate mode a conversion takes by default depends on its check
    from tfrecorder_lite import options

    df = table(["TRAIN"] * 4 + ["TEST"] * 2)
    result = df.tfrecord.to_tfrecord(tmp_path / "out", base_dir=str(images), check=check,
                                     progress=False)
    image = options.image_options(check, leakage=options.leakage_for(None, check))
    planned = plan_table(df, **COLUMNS, base_dir=str(images), image=image)
    assert planned.fingerprint == result.metadata["fingerprint"]
    assert plan_table(df, **COLUMNS, base_dir=str(images), leakage="reject",
                      image=options.image_options(check)).fingerprint != planned.fingerprint
