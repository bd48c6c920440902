"""CSV files as people have them: Excel's byte order mark and trailing commas, header-less
files starting with an UNASSIGNED row, ragged rows, Latin-1 text, images relative to elsewhere."""

import pytest

import tfrecorder_lite
from tfrecorder_lite import SchemaError, cli
from tfrecorder_lite.sources import registry
from conftest import photo, save

HEADER = "split,image_uri,label"


@pytest.fixture
def folder(tmp_path):
    """A folder ``data/`` holding ``images/0.png`` ... ``images/5.png``."""
    for i in range(6):
        save(photo(12, 14, seed=i), tmp_path / "data" / "images" / f"{i}.png", "PNG")
    return tmp_path / "data"


def rows(labels="ab"):
    """Six rows naming the images of ``folder``: two per split, labels taken in turn."""
    return [f"{('TRAIN', 'VALIDATION', 'TEST')[i % 3]},images/{i}.png,{labels[i % len(labels)]}"
            for i in range(6)]


def write(path, lines, encoding="utf-8", newline="\n"):
    """Write ``lines`` as a CSV file (``encoding`` may be "utf-8-sig": Excel's "CSV UTF-8")."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((newline.join(lines) + newline).encode(encoding))
    return path


def convert(csv_path, tmp_path, **options):
    return tfrecorder_lite.convert(csv_path, tmp_path / "out", progress=False, n_jobs=1,
                                   **options)


@pytest.mark.parametrize("header", [[HEADER], []], ids=["header", "no-header"])
def test_excel_csv_utf8_with_byte_order_mark(tmp_path, folder, header):
    csv_path = write(folder / "excel.csv", header + rows(), "utf-8-sig", newline="\r\n")
    result = convert(csv_path, tmp_path)
    assert result.counts == {"TRAIN": 2, "VALIDATION": 2, "TEST": 2}
    assert result.labels == ["a", "b"] and result.rejected.empty


@pytest.mark.parametrize("first", [",images/0.png,a", "UNASSIGNED,images/0.png,a"])
def test_headerless_csv_whose_first_row_has_no_split(tmp_path, folder, first):
    """The row is data wherever it stands: rejected the same way first or last."""
    reason = "empty split" if first.startswith(",") else "unknown split 'UNASSIGNED'"
    results = [convert(write(folder / "t.csv", lines), tmp_path, on_error="skip",
                       overwrite=True)
               for lines in ([first] + rows(), rows() + [first])]
    for result in results:
        assert result.counts == {"TRAIN": 2, "VALIDATION": 2, "TEST": 2}
        assert len(result.rejected) == 1
        assert result.rejected["reason"].iloc[0].startswith(reason)
        assert result.rejected["image_uri"].iloc[0] == "images/0.png"


@pytest.mark.parametrize("first_line,header", [
    ("UNASSIGNED,gs://b/a.jpg,cat", False),
    (",images/a.jpg,cat", False),
    ("train,a.jpg,cat", False),                # a split value
    ("cats,C:\\photos\\a.png,cat", False),       # a Windows path
    ("x,001.JPEG,cat", False),                 # an image file name
    ("set,path,label", True),                  # names a column
    ("set,path,class", True),                  # no data: a header (refused: missing columns)
])
def test_header_detection(first_line, header):
    table = registry.read_csv(f"{first_line}\nTRAIN,b.jpg,dog\n".encode(), "t.csv")
    assert len(table) == (1 if header else 2)
    assert (list(table.columns) == first_line.split(",")) == header


def test_trailing_empty_fields_are_dropped_and_integer_labels_stay_integers(tmp_path, folder):
    lines = [line + ",," for line in rows("02")]
    lines[3] = lines[3][:-2]  # ragged only by its trailing commas
    for header in ([HEADER + ",,"], [HEADER], []):
        table = registry.read_csv(("\n".join(header + lines) + "\n").encode(), "t.csv")
        assert list(table.columns) == HEADER.split(",")
        assert table["label"].tolist() == [0, 2] * 3 and table["label"].dtype == "int64"
    result = convert(write(folder / "t.csv", lines), tmp_path)
    assert sum(result.counts.values()) == 6
    assert result.labels == ["0", "1", "2"]  # integer labels pass through as ids


def test_ragged_rows_are_listed_by_line_when_the_label_is_not_the_last_column(tmp_path,
                                                                             folder):
    lines = [HEADER + ",note"] + [row + ",n" for row in rows()]
    lines[2] = 'TRAIN,"images/a,b.png",a,n'      # a quoted comma: 4 fields
    lines[3] = 'TEST,"images/two\nlines.png",b,n'  # a quoted newline: lines 4 and 5
    lines += ["TRAIN,images/0.png,a,n,b", "TEST,images/1.png,a,n", "TRAIN,images/2.png,a,n,b,c,,"]
    with pytest.raises(SchemaError) as info:
        convert(write(folder / "ragged.csv", lines), tmp_path)
    message = str(info.value)
    assert "ragged.csv: line 9 has 5 fields, expected 4 (split,image_uri,label,note); " \
           "also lines 11 (6 fields)." in message
    assert "multi-label" in message and "last one" in message
    assert "Error tokenizing" not in message


def test_headerless_ragged_row_says_there_is_no_header(tmp_path, folder):
    lines = [row.replace(",a", ",a,x").replace(",b", ",b,y") for row in rows()]
    lines[4] += ",c"
    with pytest.raises(SchemaError, match="line 5 has 5 fields, expected 4 .*no header row"):
        convert(write(folder / "t.csv", lines), tmp_path, label_col=["coarse", "fine"])


def test_quoted_commas_and_short_rows(tmp_path, folder):
    save(photo(12, 14), folder / "images" / "a,b.png", "PNG")
    lines = rows() + ['TRAIN,"images/a,b.png",a', "TEST,images/1.png"]
    result = convert(write(folder / "t.csv", lines), tmp_path, on_error="skip")
    assert result.counts == {"TRAIN": 3, "VALIDATION": 2, "TEST": 2}
    assert result.rejected["reason"].tolist() == ["empty label"]


def test_latin1_csv_is_refused_with_its_line_and_byte_unless_its_encoding_is_given(tmp_path,
                                                                                   folder):
    csv_path = write(folder / "latin.csv", [HEADER] + rows(["café", "thé"]), "latin-1")
    with pytest.raises(SchemaError) as info:
        convert(csv_path, tmp_path)
    message = str(info.value)
    assert "latin.csv: line 2 is not utf-8: byte 0xe9 in 'TRAIN,images/0.png,caf\\xe9'" in message
    assert 'save the file as UTF-8' in message and 'encoding="latin-1"' in message
    result = convert(csv_path, tmp_path, encoding="latin-1")
    assert result.labels == ["café", "thé"]


def test_base_dir_wins_over_the_csv_folder(tmp_path, folder):
    csv_path = write(tmp_path / "tables" / "t.csv", rows())
    with pytest.raises(tfrecorder_lite.InvalidRowError, match="file not found"):
        convert(csv_path, tmp_path)
    result = convert(csv_path, tmp_path, base_dir=folder, overwrite=True)
    assert sum(result.counts.values()) == 6


def test_non_path_source_is_refused():
    with pytest.raises(SchemaError, match="not int"):
        tfrecorder_lite.convert(0, "out")


def test_cli_encoding_and_base_dir(tmp_path, folder, capsys):
    csv_path = write(tmp_path / "tables" / "t.csv", rows(["café", "thé"]), "latin-1")
    out = tmp_path / "out"
    args = ["convert", str(csv_path), str(out), "--no-progress", "--jobs", "1"]
    assert cli.main(args + ["--base-dir", str(folder)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert cli.main(args + ["--base-dir", str(folder), "--encoding", "latin-1"]) == 0
    assert "wrote TRAIN 2, VALIDATION 2, TEST 2" in capsys.readouterr().out
    assert tfrecorder_lite.read_metadata(out)["labels"] == ["café", "thé"]


@pytest.mark.parametrize("lines,message", [
    ([HEADER + ",note", "TRAIN,a.jpg,cat,n,dog"], "line 2 has 5 fields"),
    (["TRAIN,a.jpg,caf\xe9"], "--encoding latin-1"),
    (["set,path,class", "TRAIN,a.jpg,cat"], "missing column"),
])
def test_cli_bad_csv_exits_2_with_one_line(tmp_path, capsys, lines, message):
    csv_path = write(tmp_path / "t.csv", lines, "latin-1")
    assert cli.main(["convert", str(csv_path), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_an_error_naming_a_row_gives_its_csv_line(tmp_path, capsys):
    good = save(photo(8, 8), tmp_path / "good.jpg")
    csv = tmp_path / "table.csv"
    csv.write_text(f'split,image_uri,label,note\n\nTRAIN,{good},cat,"two\nlines"\n'
                   f'TRAIN,{tmp_path}/no.jpg,dog,one\n')
    with pytest.raises(tfrecorder_lite.InvalidRowError) as caught:
        tfrecorder_lite.convert(csv, tmp_path / "out", progress=False)
    assert (caught.value.row, caught.value.line) == (1, 5)  # after a blank line and a 2-line note
    assert cli.main(["convert", str(csv), str(tmp_path / "cli")]) == 2
    assert "row 1 (CSV line 5)" in capsys.readouterr().err
