"""What a notebook shows of a conversion's result and of read_metadata(): small HTML tables,
every text from the data escaped."""

import pandas as pd

import tfrecorder_lite
from conftest import photo, save


def test_result_and_metadata_render_as_html_tables(tmp_path):
    rows = []
    for i in range(6):
        path = save(photo(16, 16, seed=i), tmp_path / "images" / f"{i}.png")
        rows.append(("TRAIN" if i < 4 else "TEST", path, "<b>cat</b>" if i % 2 else "dog"))
    rows.append(("TRAIN", str(tmp_path / "missing.png"), "dog"))
    table = pd.DataFrame(rows, columns=["split", "image_uri", "label"])
    result = table.tfrecord.to_tfrecord(tmp_path / "out", on_error="skip", progress=False)

    page = result._repr_html_()
    assert "<tr><td>TRAIN</td><td>4</td></tr>" in page and "<tr><td>TEST</td><td>2</td></tr>" in page
    assert "1 rejected row(s):" in page and "file not found" in page
    assert "<b>cat</b>" not in page  # the rejected table escapes the data
    metadata = tfrecorder_lite.read_metadata(tmp_path / "out")
    view = metadata._repr_html_()
    assert "<tr><td>TRAIN</td><td>4</td><td>1</td>" in view
    assert "<td>&lt;b&gt;cat&lt;/b&gt;</td><td>2</td><td>1</td>" in view
    assert "<b>cat</b>" not in view
