"""Near-duplicate images across splits: the perceptual hash, its search, validate() and
to_tfrecord(leakage=...)."""

import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xxhash
from PIL import Image, ImageEnhance

import tfrecorder_lite
from tfrecorder_lite.images import luminance_grid as grids
from tfrecorder_lite.images.normalize import ImageOptions, prepare_image
from tfrecorder_lite.near_duplicates import confirmation as confirm
from tfrecorder_lite.near_duplicates import perceptual_hash as phash
from tfrecorder_lite.near_duplicates import search
from tfrecorder_lite.near_duplicates.confirmation import CONFIRMATION
from tfrecorder_lite.near_duplicates.pairs import Pairs
from tfrecorder_lite.output import layout

from hostile_http import HostileServer
from imagegen import exif_bytes, one_layout_photo, rich_photo, sideways


def _crop(image, left, top, right, bottom):
    w, h = image.size
    return image.crop((round(w * left), round(h * top), w - round(w * right),
                       h - round(h * bottom)))


# How a copy of a TEST photo may have been made before it landed in TRAIN: (file suffix,
# Pillow format, save options, the copy's pixels from the original's).
COPIES = {
    "resized to 50%": ("jpg", "JPEG", {"quality": 90},
                       lambda im: im.resize((im.width // 2, im.height // 2), Image.LANCZOS)),
    "JPEG quality 50": ("jpg", "JPEG", {"quality": 50}, lambda im: im),
    "saved as PNG": ("png", "PNG", {}, lambda im: im),
    "cropped 5% at a corner": ("jpg", "JPEG", {"quality": 90},
                               lambda im: _crop(im, 0.05, 0.05, 0, 0)),
    "cropped 2.5% all round": ("jpg", "JPEG", {"quality": 90},
                               lambda im: _crop(im, 0.025, 0.025, 0.025, 0.025)),
    "cropped 5% on each side": ("jpg", "JPEG", {"quality": 90},
                                lambda im: _crop(im, 0.05, 0.05, 0.05, 0.05)),
    "10% brighter": ("jpg", "JPEG", {"quality": 90},
                     lambda im: ImageEnhance.Brightness(im).enhance(1.1)),
    "stored sideways with its EXIF rotation": ("jpg", "JPEG", {"quality": 90},
                                               lambda im: im),  # see _leaky_table
}


def _leaky_table(root, distinct=12):
    """Distinct photos in TRAIN and TEST, plus one TRAIN copy of a TEST photo per COPIES entry.

    Returns:
        ``(table, {copy's row: (original's row, how it was made)})``.
    """
    root.mkdir(parents=True, exist_ok=True)
    rows, copies = [], {}
    for i in range(distinct):
        path = root / f"photo{i}.jpg"
        rich_photo(300 + 20 * (i % 4), 400 - 20 * (i % 3), seed=i).save(path, quality=92)
        rows.append(("TRAIN" if i % 2 else "TEST", str(path), "cat" if i % 3 else "dog"))
    originals = [i for i in range(distinct) if rows[i][0] == "TEST"]
    for n, (how, (suffix, fmt, options, make)) in enumerate(COPIES.items()):
        original = originals[n % len(originals)]
        image = make(Image.open(rows[original][1]).convert("RGB"))
        path = root / f"copy{n}.{suffix}"
        if how.startswith("stored sideways"):
            sideways(image, 6).save(path, fmt, exif=exif_bytes(6), **options)
        else:
            image.save(path, fmt, **options)
        copies[len(rows)] = (original, how)
        rows.append(("TRAIN", str(path), rows[original][2]))
    return pd.DataFrame(rows, columns=["split", "image_uri", "label"]), copies


# ----------------------------------------------------------------------------- the hash

@pytest.mark.parametrize("how", list(COPIES))
def test_a_copy_hashes_near_its_original_and_far_from_other_photos(how):
    suffix, fmt, options, make = COPIES[how]
    original = rich_photo(320, 420, seed=3)
    copy = make(original)
    if how.startswith("stored sideways"):
        copy = sideways(copy, 6)
        options = dict(options, exif=exif_bytes(6))
    encoded = io.BytesIO()
    copy.save(encoded, fmt, **options)
    hashes = np.array([phash.hash_encoded(_jpeg(original)), phash.hash_encoded(encoded.getvalue()),
                       phash.hash_encoded(_jpeg(rich_photo(320, 420, seed=4)))], dtype=np.uint64)
    first, second, distance = search.near_pairs(hashes, [0, 1, 2])
    assert list(zip(first, second)) == [(0, 1)]  # the copy, and never the other photo
    assert distance[0] <= phash.MAX_DISTANCE


def _jpeg(image, quality=92):
    out = io.BytesIO()
    image.save(out, "JPEG", quality=quality)
    return out.getvalue()


@pytest.mark.parametrize("mode", ["L", "RGB", "RGBA", "P", "LA", "I;16", "CMYK"])
@pytest.mark.parametrize("size", [(20, 27), (32, 32), (95, 64), (641, 480)])
def test_the_grid_is_what_pillows_own_operations_give(mode, size):
    """luminance_grid calls Pillow's image core directly: it must give the bytes of reduce,
    convert and resize, as Pillow's public Image methods do them."""
    image = rich_photo(size[1], size[0], seed=sum(size)).convert("RGBA")
    image.putalpha(Image.linear_gradient("L").resize(size))
    image = image.convert(mode) if mode != "I;16" else image.convert("L").convert("I;16")
    gray = grids._upright_rgb_or_gray(image)
    draft = grids._draft_scale(*gray.size)  # as a JPEG's draft for the hash
    if draft > 1:
        gray = gray.reduce(draft)
    factor = min(gray.size) // grids.GRID
    if factor > 1:
        gray = gray.reduce(factor)
    gray = gray if gray.mode == "L" else gray.convert("L")
    expected = gray.resize((grids.GRID, grids.GRID), Image.BILINEAR).tobytes()
    assert grids.luminance_grid(image) == expected


def test_one_picture_hashes_alike_however_it_is_decoded():
    """A JPEG is hashed from libjpeg's reduced-scale decode; its pixels saved as PNG, the same
    picture stored sideways with an EXIF orientation, and the source of a resized write are
    decoded whole: each is first shrunk as the JPEG's draft shrinks it."""
    distances = []
    for seed in range(12):
        picture = rich_photo(480, 640, seed=seed)
        jpeg = _jpeg(picture)
        png = io.BytesIO()
        Image.open(io.BytesIO(jpeg)).save(png, "PNG")
        exif = Image.Exif()
        exif[0x0112] = 6  # shown turned a quarter clockwise
        sideways = io.BytesIO()
        picture.transpose(Image.Transpose.ROTATE_90).save(sideways, "JPEG", quality=92,
                                                          exif=exif)
        whole = phash.grid_hashes(prepare_image(jpeg, ImageOptions(phash=True)).luminance)[0]
        for data, size in ((png.getvalue(), None), (sideways.getvalue(), None),
                           (jpeg, (224, 224))):
            grid = prepare_image(data, ImageOptions(phash=True, size=size)).luminance
            distances.append(phash.distance(whole, phash.grid_hashes(grid)[0]))
    assert max(distances) <= 2 and sum(distances) <= 6, distances


def _small_plain_pictures(count):
    """``count`` small JPEGs of a plain field (faint shading, fine noise: a wall, a sky),
    each with its copy resized to half its size."""
    pictures = []
    for seed in range(count):
        rng = np.random.default_rng(seed)
        width, height = int(rng.integers(180, 300)), int(rng.integers(140, 250))
        shading = rng.normal(128, 40, (height // 16 + 1, width // 16 + 1)).clip(0, 255)
        shading = Image.fromarray(shading.astype(np.uint8)).resize((width, height),
                                                                   Image.BICUBIC)
        level = np.asarray(shading) * 0.06 + 180 + rng.normal(0, 6, (height, width))
        picture = Image.fromarray(np.dstack([level, level * 0.95, level * 0.9])
                                  .clip(0, 255).astype(np.uint8))
        pictures.append((_jpeg(picture, 90),
                         _jpeg(picture.resize((width // 2, height // 2), Image.LANCZOS), 90)))
    return pictures


def test_half_size_copies_of_small_plain_pictures_hash_close(monkeypatch):
    """A small JPEG is decoded for the hash at a scale that still gives the grid's 32x32
    pixels (a 16-pixel draft left a 250x190 picture 31x23 and its half-size copy 15x11),
    so its copies' hashes, written or read again, stay closer than that draft kept them."""
    pictures = _small_plain_pictures(40)

    def distances():
        written = [phash.distance(phash.grid_hashes(prepare_image(
            original, ImageOptions(phash=True)).luminance)[0], phash.hash_encoded(copy)[0])
            for original, copy in pictures]
        return written, [phash.distance(phash.hash_encoded(original)[0],
                                        phash.hash_encoded(copy)[0])
                         for original, copy in pictures]

    written, read = distances()
    assert written == read  # the write's grid is the one a read again takes
    monkeypatch.setattr(grids, "DRAFT_SIZE", (16, 16))
    _, smaller_draft = distances()
    found = sum(d <= phash.MAX_DISTANCE for d in read)
    assert found > sum(d <= phash.MAX_DISTANCE for d in smaller_draft)
    assert sum(read) <= 0.9 * sum(smaller_draft), (sum(read), sum(smaller_draft))


def test_the_grid_of_an_image_not_yet_loaded_is_the_loaded_ones():
    data = _jpeg(rich_photo(200, 300, seed=5))
    loaded = Image.open(io.BytesIO(data))
    loaded.load()
    assert grids.luminance_grid(Image.open(io.BytesIO(data))) == grids.luminance_grid(loaded)


def test_distinct_photos_are_never_pairs():
    hashes = [phash.hash_encoded(_jpeg(rich_photo(240 + i % 5 * 16, 320 - i % 3 * 16, seed=i)))
              for i in range(150)]
    first, _, _ = search.near_pairs(hashes, [i % 3 for i in range(150)])
    assert len(first) == 0


def test_the_search_finds_exactly_the_pairs_that_comparing_all_pairs_finds():
    rng = np.random.default_rng(5)
    n = 1500
    hashes = rng.integers(0, 2 ** 63, (n, 3), dtype=np.uint64)
    groups = rng.choice(3, n, p=[0.7, 0.2, 0.1])
    for i in range(150):  # planted near pairs at every distance up to 12, crops included
        bits = rng.choice(63, i % 13, replace=False)
        hashes[n - 1 - i, i % 3] = hashes[i, 0] ^ np.uint64(sum(1 << int(b) for b in bits))
    for max_distance in (0, 3, 8, 12):
        got = set(zip(*(a.tolist() for a in search.near_pairs(hashes, groups, max_distance))))
        whole = hashes[:, 0]
        distances = np.minimum(
            np.bitwise_count(whole[:, None, None] ^ hashes[None, :, :]).min(axis=2),
            np.bitwise_count(hashes[:, None, :] ^ whole[None, :, None]).min(axis=2))
        close = (distances <= max_distance) & (groups[:, None] != groups[None, :])
        want = {(a, b, int(distances[a, b])) for a, b in zip(*np.nonzero(np.triu(close, 1)))}
        assert got == want and len(want) >= 15 * (max_distance >= 8)


def _smallest_distances(hashes):
    """By comparing every image with every other: the distance of each pair of images (the
    smallest between one's whole image and the other's whole image or crops)."""
    whole = hashes[:, 0]
    return np.stack([np.minimum(np.bitwise_count(whole[a] ^ hashes).min(axis=1),
                                np.bitwise_count(hashes[a][None, :] ^ whole[:, None]).min(axis=1))
                     for a in range(len(hashes))])


def _all_pairs(distances, groups, max_distance):
    """The pairs near_pairs must give: ``{(first, second, distance)}`` across groups."""
    close = (distances <= max_distance) & (groups[:, None] != groups[None, :])
    return {(a, b, int(distances[a, b])) for a, b in zip(*np.nonzero(np.triu(close, 1)))}


def _planted(n, bits, seed):
    """``n`` images of 6 random hashes of ``bits`` bits in groups 70/20/10, and a planted
    near copy of every 25th image of the first half at each distance 0..7 (of its whole
    image or of a crop; in another group, or every other one in the same)."""
    rng = np.random.default_rng(seed)
    hashes = rng.integers(0, 2 ** bits - 1, (n, 6), dtype=np.uint64, endpoint=True)
    groups = rng.choice(3, n, p=[0.7, 0.2, 0.1])
    for i in range(0, n // 2, 25):
        copy = n - 1 - i
        flipped = rng.choice(bits, i // 25 % 8, replace=False)
        hashes[copy, i % 6] = hashes[i, 0] ^ np.uint64(sum(1 << int(b) for b in flipped))
        groups[copy] = (groups[i] + 1) % 3 if i % 50 else groups[i]
    return hashes, groups


@pytest.mark.parametrize("bits", [63, 64, 32])
def test_the_bands_find_exactly_the_pairs_that_comparing_all_pairs_finds(bits):
    # 63 bits as perceptual_hashes gives them, all 64, and fewer (bands cover the bits in use)
    n = 3000
    hashes, groups = _planted(n, bits, seed=bits)
    distances = _smallest_distances(hashes)
    asking = int((groups != np.bincount(groups).argmax()).sum())
    for max_distance in (0, 2, 6, 7):
        assert search._bands(n, asking * 6, bits, max_distance) is not None  # not all pairs
        want = _all_pairs(distances, groups, max_distance)
        for chunk in (1 << 17, 100):  # the queries all at once, and a hundred at a time
            got = search.near_pairs(hashes, groups, max_distance, chunk=chunk)
            assert set(zip(*(a.tolist() for a in got))) == want
            assert list(zip(got[1], got[0])) == sorted(zip(got[1], got[0]))
        planted = {(i, n - 1 - i) for i in range(25, n // 2, 50) if i // 25 % 8 <= max_distance}
        assert planted <= {(a, b) for a, b, _ in want}
        assert not {(i, n - 1 - i) for i in range(0, n // 2, 50)} & {(a, b) for a, b, _ in want}


@pytest.mark.parametrize("limit", ["_CANDIDATES", "_INDEX_PART"])
def test_a_search_made_a_piece_at_a_time_gives_the_same_pairs(monkeypatch, limit):
    # hashes that look alike crowd a few buckets: their candidates are compared in pieces;
    # and the largest group's crops are indexed a part of its images at a time
    hashes, groups = _planted(3000, 63, seed=5)
    hashes[::7] &= np.uint64(0xFFFFFF)  # a seventh of them share their high bits
    want = _all_pairs(_smallest_distances(hashes), groups, 6)
    whole = search.near_pairs(hashes, groups, 6)
    monkeypatch.setattr(search, limit, 5 if limit == "_CANDIDATES" else 1000)
    pieces = search.near_pairs(hashes, groups, 6)
    assert set(zip(*(a.tolist() for a in pieces))) == want
    assert all((a == b).all() for a, b in zip(whole, pieces)) and len(want) > 30


@pytest.mark.parametrize("which", ["one", "last 40", "last 400", "every 9th"])
def test_a_search_for_the_pairs_of_some_images_finds_exactly_theirs(monkeypatch, which):
    # an append's search: its new images (in every group) against all the others
    n = 3000
    hashes, groups = _planted(n, 63, seed=len(which))
    hashes[::7] &= np.uint64(0xFFFFFF)  # crowded buckets too
    involving = {"one": np.array([n - 26]), "last 40": np.arange(n - 40, n),
                 "last 400": np.arange(n - 400, n), "every 9th": np.arange(0, n, 9)}[which]
    everything = _all_pairs(_smallest_distances(hashes), groups, 6)
    mine = set(involving.tolist())
    want = {pair for pair in everything if pair[0] in mine or pair[1] in mine}
    monkeypatch.setattr(search, "_INDEX_PART", 2000)  # the others' crops looked up in parts
    got = search.near_pairs(hashes, groups, 6, involving=involving)
    assert set(zip(*(a.tolist() for a in got))) == want
    assert list(zip(got[1], got[0])) == sorted(zip(got[1], got[0]))
    assert len(want) >= 1 and len(everything) > len(want)  # (n - 26 is image 25's copy)


@pytest.mark.parametrize("involving", [None, "last 300"])
def test_copies_in_one_group_are_looked_up_once_and_each_image_paired_once_a_set(involving):
    # 3,000 images: the planted pairs, and three pictures copied 400, 300 and 200 times over
    # the groups (a placeholder, say): every pair across groups would be 67,512 pairs
    n = 3000
    hashes, groups = _planted(n, 63, seed=11)
    rng = np.random.default_rng(11)
    copied = rng.permutation(n)[:900]
    hashes[copied[:400]] = hashes[copied[0]]
    hashes[copied[400:700]] = hashes[copied[400]]
    hashes[copied[700:]] = hashes[copied[700]] ^ np.uint64(0b11)  # 2 bits from no other
    mine = None if involving is None else np.arange(n - 300, n)
    everything = _all_pairs(_smallest_distances(hashes), groups, 6)
    want = everything if mine is None else \
        {pair for pair in everything if pair[0] >= n - 300 or pair[1] >= n - 300}
    first, second, distance = search.near_pairs(hashes, groups, 6, involving=mine)
    got = set(zip(first.tolist(), second.tolist(), distance.tolist()))
    assert got <= want and len(want) > 20 * len(got)  # each a pair of close images
    assert list(zip(second, first)) == sorted(zip(second, first))
    # every image with a close image before it in another group is the later of a pair, and
    # a set of copies pairs with the first image of the other set before it
    assert {b for _, b, _ in got} == {b for _, b, _ in want}
    sets = {}
    for image in range(n):
        sets.setdefault((groups[image], *hashes[image].tolist()), []).append(image)
    set_of = {image: key for key, images in sets.items() for image in images}
    for a, b, _ in got:
        assert a == min(i for i in sets[set_of[a]] if i < b)
    # images without copies: every close pair
    alone = [i for i in range(n) if len(sets[set_of[i]]) == 1]
    assert {p for p in got if p[0] in alone and p[1] in alone} == \
        {p for p in want if p[0] in alone and p[1] in alone}


def test_few_hashes_are_compared_all_pairs_and_give_the_same_pairs():
    hashes, groups = _planted(200, 63, seed=3)
    assert search._bands(200, 60 * 6, 63, 6) is None
    got = search.near_pairs(hashes, groups, 6)
    assert set(zip(*(a.tolist() for a in got))) == \
        _all_pairs(_smallest_distances(hashes), groups, 6)
    assert {(25, 174), (75, 124)} <= set(zip(got[0].tolist(), got[1].tolist()))  # planted


def test_hashes_bad_input_is_refused_with_the_value():
    with pytest.raises(ValueError, match="max_distance must be 0 to 63, not 64"):
        search.near_pairs([1, 2], [0, 1], 64)
    with pytest.raises(ValueError, match="16 hex digits each, not 'xyz'"):
        phash.from_hex("xyz")


# ----------------------------------------------------------------------------- validate()

@pytest.mark.parametrize("check", ["header", "decode"])
def test_validate_reports_every_copy_with_both_rows_and_no_distinct_photo(tmp_path, check):
    df, copies = _leaky_table(tmp_path / "images")
    problems = df.tfrecord.validate(check=check)
    near = problems[problems.problem.str.startswith("near-duplicate across splits")]
    reported = dict(zip(near.row, near.problem))
    assert set(reported) == set(copies), [copies[r][1] for r in set(copies) - set(reported)]
    for row, (original, _) in copies.items():
        assert f"looks like row {original} ({df.image_uri[original]}, TEST)" in reported[row]
        assert " bits)" in reported[row]
    assert df.tfrecord.validate(check=check, leakage="ignore").empty


# ----------------------------------------------------------------------------- to_tfrecord()

def test_to_tfrecord_warns_writes_every_row_and_lists_the_pairs_beside_the_manifest(tmp_path):
    df, copies = _leaky_table(tmp_path / "images")
    result = df.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    assert sum(result.counts.values()) == len(df) and result.rejected.empty
    assert set(result.problems.row) == set(copies)
    assert "problems=8" in repr(result)
    pairs = pd.read_csv(tmp_path / "out" / layout.NEAR_DUPLICATES)
    assert {(r, o) for r, o in zip(pairs.row, pairs.other_row)} == \
        {(row, original) for row, (original, _) in copies.items()}
    assert set(pairs.split) == {"TRAIN"} and set(pairs.other_split) == {"TEST"}
    # shards are written shuffled; the pairs still come in table order of their later row
    assert pairs.row.tolist() == sorted(pairs.row) == result.problems.row.tolist()
    assert (pairs.distance <= phash.MAX_DISTANCE).all()
    near = result.metadata["near_duplicates"]
    assert near["pairs"] == len(copies) and near["file"] == layout.NEAR_DUPLICATES
    assert near["hashes"] == [layout.hashes_name(0)]
    # the hashes file: every written image once, with the XXH3-128 of its file, as
    # metadata.json names it
    assert near["content_hash"] == "xxh3_128"
    hashes = pd.read_csv(tmp_path / "out" / layout.hashes_name(0))
    assert sorted(hashes.row) == list(range(len(df)))
    for row in hashes.itertuples():
        with open(df.image_uri[row.row], "rb") as f:
            assert row.xxh3_128 == xxhash.xxh3_128(f.read()).hexdigest()
        assert len(row.phash) == 16 and len(row.crops) == 16 * len(phash.CROPS)
    # a re-run of the finished output gives the same problems, from the folder
    again = df.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    assert again.problems.equals(result.problems)
    assert tfrecorder_lite.verify(tmp_path / "out").startswith("OK")


def test_a_rerun_names_rows_a_spreadsheet_would_run_as_the_table_does(tmp_path):
    # near-duplicates.csv keeps row "=r0" as "'=r0" (spreadsheet-safe); the problems of a
    # re-run of the finished output, read from it, name the table's rows
    df, _ = _leaky_table(tmp_path / "images", distinct=4)
    df.index = [f"{'=-+@'[i % 4]}r{i}" for i in range(len(df))]
    result = df.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    assert "'=r4" in (tmp_path / "out" / layout.NEAR_DUPLICATES).read_text()
    again = df.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    assert set(again.problems.row) <= set(df.index)
    assert again.problems.equals(result.problems)


def test_a_placeholder_in_many_rows_of_two_splits_is_reported_once_a_row(tmp_path):
    # 1,200 rows of one "no image" file, TRAIN and TEST in turn: each pair of rows would be
    # 360,000 problems; each row after the first of the other split is reported once, and
    # rejecting leaves the picture in the first split only
    (tmp_path / "images").mkdir()
    placeholder = tmp_path / "images" / "missing.jpg"
    rich_photo(160, 120, seed=3).save(placeholder, quality=90)
    df = pd.DataFrame({"split": ["TRAIN", "TEST"] * 600, "image_uri": str(placeholder),
                       "label": ["cat", "dog", "bird"] * 400})
    result = df.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    assert result.counts == {"TRAIN": 600, "TEST": 600}
    assert result.problems.row.tolist() == list(range(1, 1200))
    assert result.problems.problem[0].startswith("near-duplicate across splits: looks like "
                                                 "row 0")  # TEST rows: the first TRAIN row
    assert result.problems.problem[1].startswith("near-duplicate across splits: looks like "
                                                 "row 1")  # later TRAIN rows: the first TEST
    pairs = pd.read_csv(tmp_path / "out" / layout.NEAR_DUPLICATES)
    assert len(pairs) == 1199 and (pairs.distance == 0).all()
    rejected = df.tfrecord.to_tfrecord(tmp_path / "rejected", progress=False,
                                       leakage="reject")
    assert rejected.counts == {"TRAIN": 600, "TEST": 0}
    assert rejected.rejected.index.tolist() == list(range(1, 1200, 2))
    assert tfrecorder_lite.verify(tmp_path / "rejected").startswith("OK")


def test_the_hashes_file_keeps_each_images_hashes_and_neutralizes_the_tables_text(tmp_path):
    df, _ = _leaky_table(tmp_path / "images", distinct=4)
    df["label"] = ["=1+1", "@SUM(A1)", "-2", 'c,"at'] * (len(df) // 4) + ["cat"] * (len(df) % 4)
    df.index = [f"=row{i}" if i % 2 else f"r,{i}" if i % 3 else i for i in range(len(df))]
    df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, check="decode")
    hashes = pd.read_csv(tmp_path / "out" / layout.hashes_name(0), dtype=str,
                         keep_default_na=False)
    assert sorted(hashes.row) == sorted(f"'{i}" if str(i).startswith("=") else str(i)
                                        for i in df.index)
    by_row = hashes.set_index("row")
    for position, (row, cells) in enumerate(df.iterrows()):
        written = by_row.loc[f"'{row}" if str(row).startswith("=") else str(row)]
        assert written.label == {"=1+1": "'=1+1", "@SUM(A1)": "'@SUM(A1)"}.get(
            cells.label, cells.label)
        assert written.split == cells.split and written.image_uri == cells.image_uri
        with open(cells.image_uri, "rb") as f:
            data = f.read()
        # the writer hashes a chunk of images at once; one image alone hashes the same
        alone = phash.hash_grids([prepare_image(data, ImageOptions(phash=True)).luminance])
        assert written.phash + written.crops == "".join(f"{v:016x}" for v in alone[0]), position


def test_reject_rejects_the_later_row_of_each_pair_and_writes_the_rest_as_without_it(tmp_path):
    df, copies = _leaky_table(tmp_path / "images")
    result = df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, leakage="reject",
                                     shuffle=False, num_shards=1)
    assert set(result.rejected.index) == set(copies)
    for row, (original, _) in copies.items():
        assert result.rejected.reason[row].startswith(
            f"near-duplicate across splits: looks like row {original} ")
    rejected_csv = pd.read_csv(tmp_path / "out" / layout.REJECTED)
    assert set(rejected_csv.row) == set(copies)
    assert result.problems.empty and not (tmp_path / "out" / layout.NEAR_DUPLICATES).exists()
    # the shards hold exactly what a conversion of the table without those rows holds
    kept = df.drop(index=list(copies))
    plain = kept.tfrecord.to_tfrecord(tmp_path / "plain", progress=False, leakage="ignore",
                                      shuffle=False, num_shards=1)
    for split, entry in result.metadata["splits"].items():
        for mine, theirs in zip(entry["shards"], plain.metadata["splits"][split]["shards"]):
            assert (tmp_path / "out" / mine["name"]).read_bytes() == \
                (tmp_path / "plain" / theirs["name"]).read_bytes()
            assert (tmp_path / "out" / mine["index"]["name"]).read_bytes() == \
                (tmp_path / "plain" / theirs["index"]["name"]).read_bytes()
    assert result.metadata["splits"] == plain.metadata["splits"]
    assert result.metadata["image"] == plain.metadata["image"]
    assert tfrecorder_lite.verify(tmp_path / "out").startswith("OK")
    hashes = pd.read_csv(tmp_path / "out" / layout.hashes_name(0))
    assert set(hashes.row) == set(kept.index)


def test_ignore_neither_hashes_nor_reports_and_writes_the_same_shards(tmp_path):
    df, copies = _leaky_table(tmp_path / "images")
    ignored = df.tfrecord.to_tfrecord(tmp_path / "ignored", progress=False, leakage="ignore")
    warned = df.tfrecord.to_tfrecord(tmp_path / "warned", progress=False)
    assert ignored.problems.empty and "near_duplicates" not in ignored.metadata
    assert set(warned.problems.row) == set(copies)  # the same table, looked at
    assert not (tmp_path / "ignored" / layout.hashes_name(0)).exists()
    for entry in ignored.metadata["splits"].values():
        for shard in entry["shards"]:
            assert (tmp_path / "ignored" / shard["name"]).read_bytes() == \
                (tmp_path / "warned" / shard["name"]).read_bytes()
    assert sum(ignored.counts.values()) == len(df)


def test_header_check_and_resized_outputs_find_the_copies_too(tmp_path):
    df, copies = _leaky_table(tmp_path / "images")
    header = df.tfrecord.to_tfrecord(tmp_path / "header", progress=False, check="header",
                                     leakage="warn")
    resized = df.tfrecord.to_tfrecord(tmp_path / "resized", progress=False, image_size=64)
    assert set(header.problems.row) == set(resized.problems.row) == set(copies)


def test_a_header_check_write_hashes_only_when_asked(tmp_path):
    # check="header" decodes no image, and hashing would decode every one: by default such a
    # write does not look (validate() still does), and its shards are the hashing write's
    df, copies = _leaky_table(tmp_path / "images")
    plain = df.tfrecord.to_tfrecord(tmp_path / "plain", progress=False, check="header")
    asked = df.tfrecord.to_tfrecord(tmp_path / "asked", progress=False, check="header",
                                    leakage="warn")
    assert plain.problems.empty and set(asked.problems.row) == set(copies)
    assert "near_duplicates" not in plain.metadata
    assert not (tmp_path / "plain" / layout.hashes_name(0)).exists()
    assert (tmp_path / "asked" / layout.hashes_name(0)).exists()
    for entry in plain.metadata["splits"].values():
        for shard in entry["shards"]:
            assert (tmp_path / "plain" / shard["name"]).read_bytes() == \
                (tmp_path / "asked" / shard["name"]).read_bytes()
    assert set(df.tfrecord.validate(check="header").row) >= set(copies)
    with pytest.raises(tfrecorder_lite.SchemaError, match="keeps no hashes of its images"):
        df.tfrecord.to_tfrecord(tmp_path / "plain", progress=False, check="header",
                                append=True)


def test_leakage_is_checked_before_anything_is_written(tmp_path):
    df, _ = _leaky_table(tmp_path / "images", distinct=2)
    with pytest.raises(tfrecorder_lite.SchemaError,
                       match=r"leakage must be one of \('warn', 'reject', 'ignore'\), not 'drop'"):
        df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, leakage="drop")
    assert not (tmp_path / "out").exists()


def test_overwrite_removes_the_hashes_and_pairs_files(tmp_path):
    df, _ = _leaky_table(tmp_path / "images")
    df.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    assert (tmp_path / "out" / layout.NEAR_DUPLICATES).exists()
    df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, overwrite=True, leakage="ignore")
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert layout.NEAR_DUPLICATES not in names and layout.hashes_name(0) not in names
    metadata = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert "near_duplicates" not in metadata


# ------------------------------------------------------------------ a pair confirmed

def _one_layout_table(root, layout=3):
    """TEST: a picture; TRAIN: another picture of its layout, the picture in another colour,
    and the picture saved again at JPEG quality 50 (the only copy)."""
    root.mkdir(parents=True, exist_ok=True)
    made = [("TEST", "picture.jpg", one_layout_photo(layout, 0), 92),
            ("TRAIN", "same_layout.jpg", one_layout_photo(layout, 1), 92),
            ("TRAIN", "other_colour.jpg", one_layout_photo(layout, 0, tint=(25, -20)), 92),
            ("TRAIN", "copy.jpg", one_layout_photo(layout, 0), 50)]
    for _, name, image, quality in made:
        image.save(root / name, quality=quality)
    return pd.DataFrame([(split, str(root / name), "cat") for split, name, _, _ in made],
                        columns=["split", "image_uri", "label"])


def _hash_of(path):
    with open(path, "rb") as f:
        return phash.hash_encoded(f.read())


def test_pictures_of_one_layout_or_in_another_colour_are_told_from_a_copy(tmp_path):
    df = _one_layout_table(tmp_path / "images")
    picture = _hash_of(df.image_uri[0])
    for path in df.image_uri[1:]:  # the 64-bit hash alone would pair all three
        first, _, _ = search.near_pairs(np.array([picture, _hash_of(path)], dtype=np.uint64),
                                       [0, 1])
        assert len(first) == 1, path
    for check in ("header", "decode"):
        problems = df.tfrecord.validate(check=check)
        near = problems[problems.problem.str.startswith(phash.KIND)]
        assert near.row.tolist() == [3] and "row 0" in near.problem.iloc[0], near
    result = df.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    assert result.problems.row.tolist() == [3]
    pairs = pd.read_csv(tmp_path / "out" / layout.NEAR_DUPLICATES)
    assert list(zip(pairs.row, pairs.other_row)) == [(3, 0)]
    near = result.metadata["near_duplicates"]
    assert near["pairs"] == 1 and near["confirmed_by"] == CONFIRMATION
    assert sum(result.counts.values()) == 4  # all written (warn)
    rejecting = df.tfrecord.to_tfrecord(tmp_path / "rejecting", progress=False,
                                        leakage="reject")
    assert rejecting.rejected.index.tolist() == [3] and sum(rejecting.counts.values()) == 3


def test_a_pair_whose_earlier_image_cannot_be_read_again_is_reported_unconfirmed(
        tmp_path, caplog):
    df = _one_layout_table(tmp_path / "images")
    first, later = df.iloc[[0]], df.iloc[[1]]  # the picture, then another of its layout
    for out, keep in (("kept", True), ("gone", False)):
        first.tfrecord.to_tfrecord(tmp_path / out, progress=False)
        if not keep:
            (tmp_path / "images" / "picture.jpg").unlink()
        caplog.clear()
        with caplog.at_level("WARNING", logger="tfrecorder_lite"):
            result = later.tfrecord.to_tfrecord(tmp_path / out, progress=False, append=True)
        assert sum(result.counts.values()) == 1
        if keep:  # read again: two pictures
            assert result.problems.empty and "unconfirmed" not in caplog.text
        else:  # it may be a copy: reported, and the warning says why it was not confirmed
            assert result.problems.row.tolist() == [1]
            assert "1 near-duplicate pair(s) are reported unconfirmed" in caplog.text
            assert "could not be read again" in caplog.text
        assert tfrecorder_lite.verify(tmp_path / out).startswith("OK")


def test_a_pair_whose_earlier_image_changed_is_reported_unconfirmed(tmp_path, caplog):
    df = _one_layout_table(tmp_path / "images")
    df.iloc[[0]].tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    one_layout_photo(3, 2).save(tmp_path / "images" / "picture.jpg", quality=92)  # replaced
    with caplog.at_level("WARNING", logger="tfrecorder_lite"):
        result = df.iloc[[1]].tfrecord.to_tfrecord(tmp_path / "out", progress=False,
                                                   append=True)
    assert result.problems.row.tolist() == [1]
    assert "its file changed since it was written" in caplog.text


def test_fine_hashes_of_copies_are_near_and_of_one_layout_far():
    pictures = [one_layout_photo(seed, detail) for seed in range(4) for detail in (0, 1)]
    fine = phash.fine_hashes([grids.encoded_luminance_grid(_jpeg(p)) for p in pictures])
    assert fine.shape == (8, len(phash.ALIGNED), 32) and phash.ALIGNED[0] == (0, 0, 0, 0)
    bits = np.unpackbits(fine, axis=2)
    assert (bits[:, :, phash.FINE_BITS:] == 0).all()  # 255 bits a hash
    assert (bits.sum(axis=2) == phash.FINE_BITS // 2).all()  # half the terms above the median
    for how, (_, fmt, options, make) in COPIES.items():
        if how.startswith("stored sideways"):
            continue
        for i in range(0, 8, 2):
            encoded = io.BytesIO()
            make(pictures[i]).save(encoded, fmt, **options)
            copy = phash.fine_hashes([grids.encoded_luminance_grid(encoded.getvalue())])[0]
            assert phash.fine_distance(fine[i], copy) <= phash.FINE_MAX_DISTANCE, how
    for i in range(0, 8, 2):
        assert phash.fine_distance(fine[i], fine[i + 1]) > 2 * phash.FINE_MAX_DISTANCE
        assert phash.fine_distance(fine[i], fine[i]) == 0


@pytest.mark.parametrize("cut", [(0.05, 0, 0, 0), (0.05, 0.05, 0, 0.05), (0.05, 0.025, 0, 0.025),
                                 (0.05, 0.05, 0.05, 0), (0.025, 0.05, 0, 0.05)])
def test_a_copy_cropped_by_up_to_5_percent_a_side_any_way_is_confirmed(cut):
    # (left, top, right, bottom) cut off: between the search's crops, 5% apart; the
    # confirmation compares crops 2.5% apart
    for seed in range(10):
        picture = rich_photo(300 + 20 * (seed % 4), 400 - 20 * (seed % 3), seed=500 + seed)
        original, copy = confirm.looks(_jpeg(picture)), confirm.looks(_jpeg(_crop(picture, *cut),
                                                                            quality=90))
        assert confirm.alike(original, copy), seed
    for layout in range(4):  # and pictures of one layout stay apart
        assert not confirm.alike(*(confirm.looks(_jpeg(one_layout_photo(layout, detail)))
                                   for detail in (0, 1)))


def test_pairs_of_images_on_s3_are_confirmed_by_reading_them_there(s3, tmp_path):
    local = tmp_path / "images"
    df = _one_layout_table(local)
    url = s3.upload(str(local), s3.new_bucket() + "/images")
    remote = df.assign(image_uri=[p.replace(str(local), url, 1) for p in df.image_uri])
    problems = remote.tfrecord.validate(check="decode")
    assert problems[problems.problem.str.startswith(phash.KIND)].row.tolist() == [3]
    result = remote.tfrecord.to_tfrecord(s3.new_bucket() + "/out", progress=False)
    assert result.problems.row.tolist() == [3]
    assert result.metadata["near_duplicates"]["pairs"] == 1


# ------------------------------------------------- planted copies, cropped 5% on each side too

# How the planted copies of a photo are made (issue 47): (file suffix, Pillow format, save
# options, the copy's pixels from the original's)
PLANTED = {
    "resized to 50%": COPIES["resized to 50%"],
    "JPEG quality 50": COPIES["JPEG quality 50"],
    "saved as PNG": COPIES["saved as PNG"],
    "cropped 5% on each side": COPIES["cropped 5% on each side"],
    "10% brighter": COPIES["10% brighter"],
}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """12 TEST photos with a TRAIN copy each way of PLANTED (60 copies), and 16 distinct
    photos, TRAIN, VALIDATION and TEST in turn: ``(originals' table, copies' table,
    {copy's row: original's row})``; the copies' rows come after the originals'."""
    root = tmp_path_factory.mktemp("planted")
    rows, copies = [], {}
    for i in range(28):
        path = root / f"photo{i}.jpg"
        rich_photo(300 + 20 * (i % 4), 400 - 20 * (i % 3), seed=100 + i).save(path, quality=92)
        split = "TEST" if i < 12 else ("TRAIN", "VALIDATION", "TEST")[i % 3]
        rows.append((split, str(path), "cat" if i % 3 else "dog"))
    originals = pd.DataFrame(rows, columns=["split", "image_uri", "label"])
    made = []
    for i in range(12):
        for n, (suffix, fmt, options, make) in enumerate(PLANTED.values()):
            path = root / f"copy{i}-{n}.{suffix}"
            make(Image.open(rows[i][1]).convert("RGB")).save(path, fmt, **options)
            copies[len(rows) + len(made)] = i
            made.append(("TRAIN", str(path), rows[i][2]))
    table = pd.DataFrame(made, columns=originals.columns,
                         index=range(len(rows), len(rows) + len(made)))
    return originals, table, copies


def test_every_planted_copy_is_reported_with_its_original_and_no_distinct_photo(
        planted, tmp_path):
    originals, planted_copies, copies = planted
    df = pd.concat([originals, planted_copies])
    result = df.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    pairs = pd.read_csv(tmp_path / "out" / layout.NEAR_DUPLICATES)
    found = dict(zip(pairs.row, pairs.other_row))
    missed = {how for row, how in zip(planted_copies.index, list(PLANTED) * 12)
              if found.get(row) != copies[row]}
    assert not missed, missed
    assert found == copies and len(pairs) == len(copies)  # no pair of distinct photos
    assert result.problems.row.tolist() == sorted(copies)
    problems = df.tfrecord.validate(check="decode")
    near = problems[problems.problem.str.startswith(phash.KIND)]
    assert near.row.tolist() == sorted(copies)
    for row, problem in zip(near.row, near.problem):
        assert f"looks like row {copies[row]} " in problem


def test_reject_cuts_exactly_the_planted_copies(planted, tmp_path):
    originals, planted_copies, copies = planted
    df = pd.concat([originals, planted_copies])
    result = df.tfrecord.to_tfrecord(tmp_path / "out", progress=False, leakage="reject")
    assert sorted(result.rejected.index) == sorted(copies)
    for row, original in copies.items():
        assert result.rejected.reason[row].startswith(
            f"near-duplicate across splits: looks like row {original} ")
    assert sum(result.counts.values()) == len(originals)
    assert tfrecorder_lite.verify(tmp_path / "out").startswith("OK")


def test_an_append_refuses_each_planted_copy_of_an_earlier_image(planted, tmp_path):
    originals, planted_copies, copies = planted
    out = tmp_path / "out"
    originals.iloc[:20].tfrecord.to_tfrecord(out, progress=False)
    new = pd.concat([originals.iloc[20:], planted_copies])  # 8 new photos and the copies
    result = new.tfrecord.to_tfrecord(out, progress=False, append=True, leakage="reject")
    assert sorted(result.rejected.index) == sorted(copies)
    for row, original in copies.items():
        assert result.rejected.reason[row].startswith(
            f"near-duplicate across splits: looks like row '{original}' ("
            f"{originals.image_uri[original]}, TEST, generation 0)")
    assert sum(result.counts.values()) == 8
    warned = tmp_path / "warned"  # and with "warn", each is listed against its original
    originals.iloc[:20].tfrecord.to_tfrecord(warned, progress=False)
    result = new.tfrecord.to_tfrecord(warned, progress=False, append=True)
    pairs = pd.read_csv(warned / layout.near_duplicates_name(1))
    assert dict(zip(pairs.row, pairs.other_row)) == copies
    assert tfrecorder_lite.verify(out).startswith("OK")


def test_pairs_are_confirmed_from_what_the_write_kept_without_reading_images_again(
        planted, tmp_path):
    # the images behind a real HTTP server that counts requests: the write fetches each once,
    # and confirms the pairs it finds from the grids and colours it kept (before, each image
    # of a pair was fetched and decoded again)
    originals, planted_copies, copies = planted
    df = pd.concat([originals, planted_copies])
    server = HostileServer(Path(df.image_uri.iloc[0]).parent)
    try:
        served = df.assign(image_uri=[f"{server.url}/ok/{Path(p).name}" for p in df.image_uri])
        server.reset_counts()
        served.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
        gets = {key: n for key, n in server.counts().items() if key.startswith("GET /ok/")}
    finally:
        server.stop()
    assert gets == {f"GET /ok/{Path(p).name}": 1 for p in df.image_uri}
    pairs = pd.read_csv(tmp_path / "out" / layout.NEAR_DUPLICATES)
    assert dict(zip(pairs.row, pairs.other_row)) == copies


@pytest.mark.parametrize("check", ["decode", "header"])
def test_the_looks_a_write_keeps_are_those_of_the_image_read_again(check):
    # an append confirms its new images (kept by its write) against earlier ones (read again)
    rng = np.random.default_rng(3)
    photo = rich_photo(240, 320, seed=9)
    def saved(image, fmt="JPEG", **options):
        out = io.BytesIO()
        image.save(out, fmt, **options)
        return out.getvalue()

    alpha = rng.integers(0, 256, (240, 320), dtype=np.uint8)
    files = {"jpeg": saved(photo), "gray jpeg": saved(photo.convert("L")),
             "png": saved(photo, "PNG"),
             "rgba png": saved(Image.fromarray(np.dstack([np.asarray(photo), alpha])), "PNG"),
             "palette png": saved(photo.convert("P"), "PNG"),
             "large jpeg": saved(rich_photo(1500, 2000, seed=4), quality=90)}
    for name, data in files.items():  # kept as they are: the very grid and colour
        stored = prepare_image(data, ImageOptions(check=check, phash=True))
        grid, chroma = grids.encoded_grid_and_chroma(data)
        assert (stored.luminance, stored.chroma) == (grid, chroma), name
        assert grid == grids.encoded_luminance_grid(data), name  # the hash's grid, as before
    # decoded whole and stored anew (turned upright, converted from CMYK, resized), where
    # a read again decodes a JPEG at a reduced scale: what confirms a copy
    rotated = saved(sideways(photo, 6), exif=exif_bytes(6))
    for data, options in ((rotated, ImageOptions(check=check, phash=True)),
                          (saved(photo.convert("CMYK")), ImageOptions(check=check, phash=True)),
                          (files["large jpeg"], ImageOptions(size=(224, 224), phash=True))):
        stored = prepare_image(data, options)
        kept = (phash.fine_hashes([stored.luminance])[0], stored.chroma)
        assert phash.fine_distance(kept[0], confirm.looks(data)[0]) <= 8
        assert confirm.alike(kept, confirm.looks(data))


def _pairs_of(tuples):
    """Pairs of ``(later, earlier, distance)`` tuples (an earlier key may be ``(0, row)``)."""
    tuples = list(tuples)
    earlier = [pair[1] for pair in tuples]
    return Pairs([pair[0] for pair in tuples],
                 [key[1] if isinstance(key, tuple) else key for key in earlier],
                 [pair[2] for pair in tuples], [isinstance(key, tuple) for key in earlier])


def test_pairs_hold_their_keys_as_arrays_and_give_them_back_as_tuples():
    tuples = [(3, (0, 7), 2), (3, 1, 4), (5, 1, 0), (9, (0, 2), 6)]
    pairs = _pairs_of(tuples)
    assert list(pairs) == tuples and len(pairs) == 4 and pairs
    assert pairs.later.dtype == np.int64 and pairs.old.tolist() == [True, False, False, True]
    assert list(pairs[1:3]) == tuples[1:3]
    assert list(pairs[np.array([True, False, False, True])]) == [tuples[0], tuples[3]]
    assert not Pairs() and list(Pairs()) == []


def test_comparisons_are_confirmed_a_chunk_at_a_time_each_image_looked_at_once(monkeypatch):
    # image 0 in every comparison, the others in one each: with 3 comparisons a chunk, image
    # 0's looks are kept from chunk to chunk, and every other image's dropped after its own
    rng = np.random.default_rng(8)
    picture = rng.integers(0, 256, 1024, dtype=np.uint8).tobytes()
    other = rng.integers(0, 256, 1024, dtype=np.uint8).tobytes()
    grids_of = {key: (picture if key % 2 else other) for key in range(1, 11)}
    grids_of[0] = picture
    asked, calls = [], []

    def kept(keys):
        asked.extend(keys)
        calls.append(len(keys))
        return {key: (grids_of[key], (128.0, 128.0)) for key in keys}

    pairs = _pairs_of((key, 0, 2) for key in range(1, 11))
    want = [pair for pair in pairs if pair[0] % 2]  # the copies of image 0's picture
    assert list(confirm.confirmed(pairs, None, kept=kept)) == want
    assert sorted(asked) == list(range(11))
    monkeypatch.setattr(confirm, "_COMPARED_AT_ONCE", 3)
    asked.clear(), calls.clear()
    assert list(confirm.confirmed(pairs, None, kept=kept)) == want
    assert sorted(asked) == list(range(11))  # image 0 once, not once a chunk
    assert calls == [4, 3, 3, 1]  # a chunk's images at a time


def test_a_looks_file_serves_only_the_shard_it_was_written_with(tmp_path):
    from tfrecorder_lite.near_duplicates.looks_file import LooksWriter, kept_looks
    from tfrecorder_lite.storage.store import Store

    state = Store(str(tmp_path))
    grid = bytes(range(256)) * 4
    writer = LooksWriter(state, "train-00000-of-00001.tfrecord")
    writer.add(grid, (120.0, 131.0))
    writer.add(None, None)  # an image without a grid
    writer.flush()
    writer.add(grid[::-1], (128.0, 128.0))
    writer.commit("0000abcd")
    name = "train-00000-of-00001.tfrecord"
    assert kept_looks(state, {name: (3, "0000abcd", [0, 1, 2])}) == {
        (name, 0): (grid, (120.0, 131.0)), (name, 2): (grid[::-1], (128.0, 128.0))}
    for wanted in ((3, "0000abce", [0]), (2, "0000abcd", [0]), (4, "0000abcd", [0]),
                   (3, None, [0])):  # another shard's checksum or records: none
        assert kept_looks(state, {name: wanted}) == {}
    assert kept_looks(state, {"test-00000-of-00001.tfrecord": (3, "0000abcd", [0])}) == {}
    path = tmp_path / (name + ".looks")
    path.write_bytes(path.read_bytes()[:-1])  # cut short
    assert kept_looks(state, {name: (3, "0000abcd", [0])}) == {}
    left = LooksWriter(state, "valid-00000-of-00001.tfrecord")
    left.add(grid, (1.0, 2.0))
    left.flush()
    left.discard()  # an abandoned shard leaves no file
    assert sorted(p.name for p in tmp_path.iterdir()) == [name + ".looks"]


# ------------------------------------------------ copies of one picture, in every split

def _one_picture_table(root, rows):
    """``rows`` rows whose files hold one picture's pixels in bytes that differ (a JPEG
    comment naming the row), TRAIN, VALIDATION and TEST in turn."""
    root.mkdir(parents=True, exist_ok=True)
    picture = rich_photo(48, 64, seed=9)
    paths = []
    for i in range(rows):
        path = root / f"placeholder{i}.jpg"
        picture.save(path, quality=90, comment=f"row {i}".encode())
        paths.append(str(path))
    return pd.DataFrame({"split": [("TRAIN", "VALIDATION", "TEST")[i % 3] for i in range(rows)],
                         "image_uri": paths, "label": ["cat", "dog"] * (rows // 2)})


@pytest.mark.parametrize("rows", [90, 360])
def test_copies_of_one_picture_in_three_splits_cost_one_pair_a_row_and_one_comparison_a_split(
        tmp_path, caplog, rows):
    df = _one_picture_table(tmp_path / "images", rows)
    assert len({Path(p).read_bytes() for p in df.image_uri[:3]}) == 3  # the bytes differ
    with caplog.at_level("INFO", logger="tfrecorder_lite"):
        result = df.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    # every row but the first is reported once: a TRAIN row against the first VALIDATION
    # row (the earliest first copy of another split), the others against the first row
    assert result.problems.row.tolist() == list(range(1, rows))
    assert all(p.startswith("near-duplicate across splits: looks like row 0 ") for p in
               result.problems.problem[result.problems.row % 3 != 0])
    assert all(p.startswith("near-duplicate across splits: looks like row 1 ") for p in
               result.problems.problem[result.problems.row % 3 == 0])
    # the rows reported alike share one text (a million copies hold one, not a million),
    # as validate() reports them too
    texts = result.problems.problem[result.problems.row % 3 != 0].tolist()
    assert len({id(text) for text in texts}) == 1 and len(texts) > 1
    validated = df.tfrecord.validate()
    assert validated.row.tolist() == list(range(1, rows))
    texts = validated.problem[validated.row % 3 != 0].tolist()
    assert len({id(text) for text in texts}) == 1 and len(texts) > 1
    assert len(pd.read_csv(tmp_path / "out" / layout.NEAR_DUPLICATES)) == rows - 1
    # the sets of copies are confirmed from their first images: 2 comparisons (VALIDATION's
    # and TEST's first against TRAIN's; TRAIN's against VALIDATION's is the first again) of
    # 3 images, however many rows, from what the write kept of them (none read again)
    confirming = [r.getMessage() for r in caplog.records if "read again)" in r.getMessage()]
    assert len(confirming) == 1 and f"{rows - 1} of {rows - 1} pair(s)" in confirming[0]
    counts = re.search(r"\((\d+) comparison\(s\) of (\d+) image\(s\), (\d+) of them read "
                       r"again\)", confirming[0])
    assert counts and counts.groups() == ("2", "3", "0"), confirming[0]
    rejected = df.tfrecord.to_tfrecord(tmp_path / "rejected", progress=False,
                                       leakage="reject")
    assert rejected.counts == {"TRAIN": rows // 3, "VALIDATION": 0, "TEST": 0}
    assert rejected.rejected.index.tolist() == [i for i in range(rows) if i % 3]


def test_near_duplicate_reports_of_signed_urls_show_no_secret(tmp_path):
    # copies of one picture behind a real HTTP server, at URLs with a password and a
    # signature: the problems (value and text) and the pairs file name them redacted
    df = _one_picture_table(tmp_path / "images", 6)
    server = HostileServer(tmp_path / "images")
    host = server.url.replace("http://", "http://user:S3CR3TPW@")
    try:
        signed = df.assign(image_uri=[f"{host}/ok/{Path(p).name}?X-Amz-Signature=SIGSECRET"
                                      for p in df.image_uri])
        result = signed.tfrecord.to_tfrecord(tmp_path / "out", progress=False)
    finally:
        server.stop()
    assert result.problems.row.tolist() == [1, 2, 3, 4, 5]
    shown = result.problems.to_csv() + (tmp_path / "out" / layout.NEAR_DUPLICATES).read_text()
    assert "S3CR3TPW" not in shown and "SIGSECRET" not in shown
    assert all(value.startswith("http://REDACTED@127.0.0.1") and
               value.endswith("?X-Amz-Signature=REDACTED") for value in result.problems.value)
    assert all("(http://REDACTED@127.0.0.1" in text for text in result.problems.problem)


def _copies_key(group, row):
    """The 64-bit key ``search._copies`` sorts images by (its group, then each hash mixed)."""
    key = np.uint64(group)
    for value in row:
        key = key * np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(value)
    return key


def test_two_images_sharing_a_copies_key_are_not_taken_for_copies():
    # image 2 differs from image 0 yet has its 64-bit key (its last hash made so): the sets
    # of copies are still {0, 1}, {2} and {3}, as with an image 2 of another key
    rng = np.random.default_rng(12)
    row = rng.integers(0, 2 ** 63, 7, dtype=np.uint64)
    other = row.copy()
    other[0] = rng.integers(0, 2 ** 63, dtype=np.uint64)
    with np.errstate(over="ignore"):
        other[6] = row[6] ^ _copies_key(0, row[:6]) * np.uint64(0x9E3779B97F4A7C15) ^ \
            _copies_key(0, other[:6]) * np.uint64(0x9E3779B97F4A7C15)
        assert _copies_key(0, other) == _copies_key(0, row) and (other != row).any()
    apart = rng.integers(0, 2 ** 63, 7, dtype=np.uint64)
    for third in (other, apart):
        hashes = np.stack([row, row, third, row])
        found = search.near_pairs(hashes, [0, 0, 0, 1], stand_ins=True)
        assert [part.tolist() for part in found] == [[0], [3], [0], [0, 0, 2, 3]]


def test_copies_in_three_groups_are_each_paired_once_with_their_stand_ins():
    # 3 groups, each holding copies of one picture (equal hashes), and two images alone,
    # near each other (and far from the picture)
    hashes = np.random.default_rng(4).integers(0, 2 ** 63, (11, 3), dtype=np.uint64)
    hashes[:9] = hashes[0]
    hashes[10] = hashes[9] ^ np.uint64(0b101)
    groups = [0, 1, 2] * 3 + [0, 1]
    first, second, distance, stand_ins = search.near_pairs(hashes, groups, stand_ins=True)
    pairs = list(zip(first.tolist(), second.tolist(), distance.tolist()))
    assert pairs == [(0, 1, 0), (0, 2, 0), (1, 3, 0), (0, 4, 0), (0, 5, 0), (1, 6, 0),
                     (0, 7, 0), (0, 8, 0), (9, 10, 2)]
    assert stand_ins.tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2, 9, 10]
    assert search.near_pairs(hashes, groups)[0].tolist() == first.tolist()


@pytest.mark.parametrize("labels", ["positions", "repeated", "text"])
@pytest.mark.parametrize("values", ["text", "mixed"])
def test_validates_near_duplicates_kept_as_arrays_give_the_frame_tuples_gave(labels, values):
    # validate() keeps its near-duplicate rows (a million copies of one picture: a million)
    # as an array and shared texts; its problems frame must be the one a tuple a row gave:
    # rows in table order, a row's problems in the order found, a near-duplicate after the
    # other problems of its image, values and secrets as before
    from tfrecorder_lite import validation
    from tfrecorder_lite.table import schema
    rng = np.random.default_rng(["positions", "repeated", "text"].index(labels))
    for _ in range(25):
        n = int(rng.integers(4, 40))
        index = {"positions": list(range(n)), "repeated": (rng.integers(0, n // 2 + 1, n)),
                 "text": [f"r{i}" for i in rng.permutation(n)]}[labels]
        uris = [f"/data/{i}.jpg" if i % 7 else f"https://user:secret@host/{i}.jpg?sig=x"
                for i in range(n)]
        df = pd.DataFrame({"image_uri": uris, "label": "a"}, index=pd.Index(index))

        def row(p):
            return df.index[p], "label", (2.5 if values == "mixed" and p % 3 == 0 else
                                          None if p % 4 == 0 else f"cell {p}"), f"problem {p}"

        before = [row(int(p)) for p in rng.integers(0, n, rng.integers(0, 5))]
        image_positions = sorted(int(p) for p in rng.integers(0, n, rng.integers(0, 6)))
        image = [(df.index[p], "image_uri", uris[p], f"unreadable {p}") for p in image_positions]
        after = [row(int(p)) for p in rng.integers(0, n, rng.integers(0, 4))]
        near = rng.integers(0, n, rng.integers(1, 12))  # a row may be in several pairs
        texts = [f"near-duplicate of row {int(p) % 3}" for p in near]
        # the tuples as validate() made them
        image_found = [(p, problem) for p, problem in zip(image_positions, image)]
        image_found += [(int(p), (df.index[p], "image_uri", uris[p], text))
                        for p, text in zip(near, texts)]
        image_found.sort(key=lambda item: item[0])
        tuples = before + [problem for _, problem in image_found] + after
        wanted = {p[0] for p in tuples}
        order = {label: i for i, label in enumerate(df.index) if label in wanted}
        tuples.sort(key=lambda p: order.get(p[0], -1))
        expected = schema.problems_frame(tuples)
        got = validation._problems_frame(df, "image_uri", before + image + after,
                                         validation._NearRows(len(before),
                                                              np.array(image_positions,
                                                                       dtype=np.int64),
                                                              near, texts))
        pd.testing.assert_frame_equal(got, expected)
        assert not got.value.astype(str).str.contains("secret").any()
