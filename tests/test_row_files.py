"""A row may name several files: its table kind says which columns hold them; the plan resolves
and checks them as it does images, and the shard task reads them through the same path (the
same storage, limits and reasons), handing their bytes to the row's features."""

import dataclasses

import pandas as pd
import pytest

import tfrecorder_lite
from conftest import photo, save
from tfrecorder_lite.record.encoding import decode_example
from tfrecorder_lite.record.features import ClassLabel
from tfrecorder_lite.record.framing import iter_records
from tfrecorder_lite.record.keys import BYTES
from tfrecorder_lite.table import kinds
from tfrecorder_lite.table.classification import ClassificationTable
from tfrecorder_lite.write.plan import plan_table


@dataclasses.dataclass(frozen=True)
class Sidecar(ClassLabel):
    """The row's label, and the bytes of its other file as ``sidecar/encoded``."""

    def describe(self):
        return {**super().describe(), "sidecar/encoded": {"dtype": BYTES, "shape": []}}

    def encode(self, value, image=None, files=()):
        return {**super().encode(value), "sidecar/encoded": files[0]}


class SidecarTable(ClassificationTable):
    """Classification rows with a second file each, in the ``sidecar`` column."""

    @staticmethod
    def recognizes(df, options):
        return "sidecar" in df.columns

    @staticmethod
    def file_columns(options):
        return ("sidecar",)

    @staticmethod
    def label_fields(prepared, options, refused):
        (field,), values = ClassificationTable.label_fields(prepared, options, refused)
        return (Sidecar(**dataclasses.asdict(field)),), values


@pytest.fixture
def sidecar_kind(monkeypatch):
    monkeypatch.setattr(kinds, "KINDS", (SidecarTable(), *kinds.KINDS))


@pytest.fixture
def table(tmp_path):
    rows = []
    for i in range(6):
        save(photo(8, 8, seed=i), tmp_path / f"{i}.png", "PNG")
        (tmp_path / f"{i}.side").write_bytes(f"side file {i}".encode() * (i + 1))
        rows.append(("TRAIN", str(tmp_path / f"{i}.png"), ["a", "b"][i % 2],
                     str(tmp_path / f"{i}.side")))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label", "sidecar"])


def _records(out):
    [shard] = [p for p in out.iterdir() if p.name.endswith(".tfrecord")]
    with open(shard, "rb") as f:
        return [decode_example(data) for data in iter_records(f, None)]


def test_each_record_holds_the_bytes_of_its_rows_other_file(sidecar_kind, table, tmp_path):
    out = tmp_path / "out"
    tfrecorder_lite.to_tfrecord(table, out, shuffle=False, progress=False)
    records = _records(out)
    assert [r["sidecar/encoded"][1][0] for r in records] == \
        [open(path, "rb").read() for path in table["sidecar"]]
    assert "sidecar" not in records[0]  # a file column is no extra feature


def test_a_missing_or_too_large_other_file_rejects_its_row_naming_the_column(
        sidecar_kind, table, tmp_path):
    (tmp_path / "big.side").write_bytes(bytes(2000))  # the images are a few hundred bytes
    table.loc[1, "sidecar"] = str(tmp_path / "gone.side")
    table.loc[3, "sidecar"] = str(tmp_path / "big.side")
    result = tfrecorder_lite.to_tfrecord(table, tmp_path / "out", on_error="skip",
                                         max_image_bytes=1000, progress=False)
    reasons = dict(zip(result.rejected.index, result.rejected["reason"]))
    assert reasons[1].startswith("sidecar: file not found")
    assert reasons[3].startswith("sidecar: file too large: 2.0 kB")
    assert set(reasons) == {1, 3} and result.counts == {"TRAIN": 4}


def test_an_other_file_unreadable_at_write_time_rejects_its_row(sidecar_kind, table, tmp_path):
    plan = plan_table(table, shuffle=False)
    task = plan.task(plan.shards[0], table.index)
    (tmp_path / "2.side").unlink()  # gone after the plan stat'ed it
    from tfrecorder_lite.write.task import prepare_records

    prepared = prepare_records(task.rows, task.image, task.features, None, task.file_columns)
    assert prepared[2] == (None, "sidecar: file not found")
    assert all(record is not None for record, _ in prepared[:2] + prepared[3:])


def test_the_plan_fingerprint_follows_the_other_files(sidecar_kind, table, tmp_path):
    before = plan_table(table).fingerprint
    assert plan_table(table).fingerprint == before
    (tmp_path / "4.side").write_bytes(b"changed, and of another size")
    assert plan_table(table).fingerprint != before


def test_a_kind_naming_a_file_column_the_table_lacks_is_refused(monkeypatch, table):
    class Lacking(SidecarTable):
        @staticmethod
        def file_columns(options):
            return ("mask_uri",)

    monkeypatch.setattr(kinds, "KINDS", (Lacking(), *kinds.KINDS))
    with pytest.raises(tfrecorder_lite.SchemaError, match="missing file column"):
        plan_table(table)


def test_labels_of_a_sidecar_table_are_still_classification(sidecar_kind, table):
    fields = plan_table(table).features.labels
    assert isinstance(fields[0], ClassLabel) and fields[0].vocabulary == ("a", "b")


def test_validate_reports_a_rows_missing_or_too_large_other_file_as_the_writer_does(
        sidecar_kind, table, tmp_path):
    (tmp_path / "big.side").write_bytes(bytes(2000))
    table.loc[1, "sidecar"] = str(tmp_path / "gone.side")
    table.loc[3, "sidecar"] = str(tmp_path / "big.side")
    problems = tfrecorder_lite.validate(table, max_image_bytes=1000)
    found = dict(zip(problems["row"], problems["problem"]))
    result = tfrecorder_lite.to_tfrecord(table, tmp_path / "out", on_error="skip",
                                         max_image_bytes=1000, progress=False)
    assert found == dict(zip(result.rejected.index, result.rejected["reason"]))
    assert set(problems.loc[problems["row"] == 1, "column"]) == {"sidecar"}
