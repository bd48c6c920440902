"""``inspect()``: one self-contained HTML page that shows what an output folder holds.

The page has the summary text (the same as ``tfrecorder-lite info``), counts and shards per
split, the label mapping and a label histogram per split, image sizes, modes and formats, a
contact sheet of decoded images with their label and file name, and the rejected rows. Records
are streamed through the Store (a local folder or any fsspec URL) and parsed in plain Python;
images are decoded and drawn with Pillow, so no TensorFlow is needed. Pictures are embedded as
``data:`` URIs: lossless PNGs in the saved page; in the notebook view, contact sheets are JPEGs
of smaller thumbnails, drawn at the size they are shown, so that a notebook stays small. Every text from the data is
HTML-escaped.
"""

import base64
import functools
import html
import io
import itertools
import math
import time
from collections import Counter
from dataclasses import dataclass

import pandas as pd
from PIL import Image, ImageDraw, ImageFont, ImageOps

from .. import redaction
from ..output.layout import REJECTED
from ..output.manifest import as_of, hxw, read_manifest, summary_text
from ..record import encoding as example
from ..record import keys
from ..record.kinds import features_of
from ..output.splits import pick
from ..storage import Store, human_size, write_file

logger = redaction.logger(__name__)  # its records may name URLs

THUMB = 128  # side of the square box each image is fitted into, in pixels
# In the notebook view: 8 cells of 104 + 2 * PAD fill 896 pixels, inside the 940 of a classic
# notebook's output (a wider picture is scaled down, its extra bytes wasted)
INLINE_THUMB = 104
INLINE_JPEG_QUALITY = 75
COLUMNS = 8  # thumbnails per row of a contact sheet
CAPTION = 34  # room under a thumbnail for two lines of text: label and file name
FONT_SIZE = 12
PAD = 4
CHART_WIDTH = 640  # width of a label histogram
BAR = 16  # height of one bar
MAX_BARS = 60  # labels drawn in a histogram
REJECTED_SHOWN = 50  # rows of rejected.csv shown
SIZES_SHOWN = 10  # most common image sizes shown
# Whatever an output folder holds (a tampered metadata.json, hostile records), the page stays
# small: each of these bounds says on the page what it left out.
MAX_IMAGES = 256  # images on the contact sheets, whatever ``num`` asks
ROWS_SHOWN = 200  # rows of a table (labels, shards, formats)
TEXT_SHOWN = 200  # characters of a text from the data (labels, file names, cells)
REJECTED_BYTES = 1 << 20  # of rejected.csv, only the start is read
REJECTED_COLUMNS = 20  # columns of rejected.csv shown
MAX_DRAWN_PIXELS = 40_000_000  # larger images get a placeholder (decoded, one is 160 MB)

_BACKGROUND = (238, 238, 238)


class Report:
    """An inspection report of an output folder (see :func:`inspect`).

    Attributes:
        summary: the text summary (as ``tfrecorder-lite info`` prints it).
        num_images: how many images the contact sheets show.
    """

    def __init__(self, title, summary, parts, num_images):
        self.title = title
        self.summary = summary
        self.num_images = num_images
        self._parts = parts  # HTML texts, _Pictures and _Sheets, in page order

    @functools.cached_property
    def body(self):
        """The report as an HTML fragment, as a notebook shows it: contact sheets are JPEGs."""
        return _render(self._parts, inline=True)

    @functools.cached_property
    def html(self):
        """The report as a whole, self-contained HTML page, every picture a lossless PNG."""
        body = _render(self._parts, inline=False)
        return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
                f"<title>{_e(self.title)}</title></head>\n<body>\n{body}\n</body></html>\n")

    def _repr_html_(self):
        return self.body

    def save(self, path, storage_options=None):
        """Write the HTML page to the file ``path`` (a local path or any fsspec URL), whole;
        returns ``path``.

        Args:
            path: where to write the page; its folder must exist (object stores need none).
            storage_options: fsspec options for a remote ``path``.
        """
        write_file(path, self.html, storage_options)
        return path

    def __repr__(self):
        return f"Report({self.title!r}, {self.num_images} images)"


def inspect(output_dir, split=None, num=64, out=None, storage_options=None, generation=None):
    """Build an HTML report of an output folder: a look at what was written, before training.

    Args:
        output_dir: the output folder: a path or any fsspec URL.
        split: one split ("TRAIN", case-insensitive), or None for all.
        num: how many images the contact sheets show (at most ``MAX_IMAGES``): the first
            records of the split(s), spread evenly over splits and shards.
        out: when given, the report is also saved to this file (a path or any fsspec URL).
        storage_options: fsspec options for a remote folder and a remote ``out``.
        generation: the output as it was after this generation (0: the first conversion;
            None: as it is, every generation).

    Returns:
        A :class:`Report` (shown inline in a notebook; ``.html``, ``.save(path)``,
        ``.summary``).

    Raises:
        ManifestError: ``output_dir`` holds no finished output, or no such generation.
        SchemaError: ``split`` is not in the output.
    """
    if num < 0:
        raise ValueError(f"num must be 0 or more, not {num}")
    started = time.perf_counter()
    store = Store(output_dir, storage_options)
    manifest = as_of(read_manifest(store)[0], generation)
    splits = list(manifest.splits) if split is None else [pick(split, manifest.splits)]
    infos = [manifest.splits[name] for name in splits]
    summary = summary_text(manifest, store.url, max_labels=ROWS_SHOWN, max_text=TEXT_SHOWN)
    samples, problems, sections = [], [], []
    available = sum(i.num_examples for i in infos) if manifest.image is not None else 0
    if min(num, available) > MAX_IMAGES:
        problems.append(f"the contact sheets show {MAX_IMAGES} images, not the {num} asked "
                        "for (a page stays small)")
    for name, info, share in zip(splits, infos,
                                 _spread(min(num, MAX_IMAGES),
                                         [i.num_examples for i in infos])):
        if manifest.image is None:  # records without images: nothing to show
            share = 0
        found, trouble = _read_samples(store, info.shards, share, manifest,
                                       features_of(manifest).labels)
        samples += found
        problems += trouble
        sections.append(_split_section(manifest, name, info, found, len(sections)))
    parts = [
        f'<div class="tfrl-report">\n<style>{_STYLE}</style>',
        f"<h1>{_e(store.url)}</h1>",
        f"<pre>{_e(summary)}</pre>",
        *(f'<p class="problem">{_e(p)}</p>' for p in problems[:ROWS_SHOWN]),
        _splits_table(manifest, splits),
        _labels_table(manifest, splits),
        _images_section(manifest, samples) if manifest.image is not None else "",
        *(part for section in sections for part in section),
        _rejected_section(store, REJECTED, manifest.rejected),
        *(_rejected_section(store, g["rejected_file"], g.get("rejected", 0), g["generation"])
          for g in manifest.generations or () if g.get("rejected_file")),
        "</div>"]
    report = Report(store.url, summary, parts, len(samples))
    if out is not None:
        report.save(out, storage_options)
    logger.info("report of %s: %d images in %.2f s", store.url, len(samples),
                time.perf_counter() - started)
    return report


# ------------------------------------------------------------------ reading sampled records

@dataclass
class _Sample:
    """One sampled record: its label, file name and the decoded image (or why not)."""

    label: str
    filename: str
    size: tuple = None  # (height, width) of the stored image
    mode: str = None
    thumbnail: Image.Image = None
    error: str = None


def _spread(num, capacities):
    """``num`` split into shares, one per capacity and none above it, as even as they allow
    (earlier ones take the remainder)."""
    shares = [0] * len(capacities)
    left = min(num, sum(capacities))
    while left:
        open_ = [i for i, cap in enumerate(capacities) if shares[i] < cap]
        each = max(1, left // len(open_))
        for i in open_:
            give = min(each, capacities[i] - shares[i], left)
            shares[i] += give
            left -= give
    return shares


def _level_counts(manifest, counts):
    """A split's ``label_counts`` as ``{label: count}``; with levels, labels are "level: text"."""
    if not isinstance(manifest.labels, dict):
        return counts
    return {f"{level}: {label}": n for level, level_counts in counts.items()
            for label, n in level_counts.items()}


def _read_samples(store, shards, num, manifest, label_features):
    """``num`` records from the front of ``shards``, spread over them.

    Returns:
        ``(samples, problems)``: a _Sample per record read, and a message per shard that could
        not be read to the end of its share.
    """
    samples, problems = [], []
    for shard, share in zip(shards, _spread(num, [s.num_examples for s in shards])):
        if not share:
            continue
        try:
            with store.open_read(shard.name) as f:
                records = manifest.format.records(f, manifest.compression)
                for data in itertools.islice(records, share):
                    samples.append(_sample(example.decode_example(data), label_features))
        except (OSError, ValueError) as exc:
            problems.append(f"{store.path(shard.name)}: {exc}; run tfrecorder-lite verify "
                            f"{store.url}")
            logger.warning("%s", problems[-1])
    return samples, problems


def _sample(features, label_features):
    """A _Sample of a record's parsed ``features``: its label texts (one per label feature),
    file name and thumbnail, with what each label feature draws on it."""
    text_keys = [label.keys[1] for label in label_features]

    def text(key):  # several labels (multi-label) are joined by ", "
        values = features.get(key, (None, [b""]))[1]
        return ", ".join(v[:TEXT_SHOWN].decode("utf-8", "replace")
                         for v in values[:TEXT_SHOWN])

    sample = _Sample(_clip(" / ".join(text(key) for key in text_keys)),
                     _clip(text(keys.FILENAME)))
    try:
        with Image.open(io.BytesIO(features[keys.ENCODED][1][0])) as image:
            sample.size, sample.mode = (image.height, image.width), image.mode
            image.draft("RGB", (THUMB, THUMB))  # JPEG: decode at 1/2 to 1/8 scale
            if image.width * image.height > MAX_DRAWN_PIXELS:
                raise ValueError(f"{hxw(sample.size)} is larger than inspect draws "
                                 f"({MAX_DRAWN_PIXELS / 1e6:.0f} Mpx)")
            flat = _flatten(image)
        flat.thumbnail((THUMB, THUMB), reducing_gap=2.0)  # fast for large images
        sample.thumbnail = ImageOps.contain(flat, (THUMB, THUMB))  # small ones grow
        for label in label_features:
            label.draw(sample.thumbnail, features, _font())
    except Exception as exc:  # any image Pillow cannot show is a placeholder, not a failure
        sample.error = f"cannot decode: {exc}"
        logger.warning("%s: %s", sample.filename, sample.error)
    return sample


def _flatten(image):
    """``image`` as RGB, transparent parts over a light grey background."""
    if image.mode in ("RGB", "L"):
        return image.convert("RGB")
    rgba = image.convert("RGBA")
    flat = Image.new("RGB", rgba.size, _BACKGROUND)
    flat.paste(rgba, mask=rgba.getchannel("A"))
    return flat


# ------------------------------------------------------------------------------ pictures

def _font():
    """Pillow's default font (FONT_SIZE with FreeType; its small bitmap font without)."""
    try:
        return ImageFont.load_default(FONT_SIZE)
    except (ImportError, OSError):  # Pillow built without FreeType
        return ImageFont.load_default()


def _fit(text, font, width):
    """``text`` shortened with "..." to fit ``width`` pixels in ``font``."""
    text = text[:max(width, 0) + 1]  # glyphs are a pixel wide at least: the rest never shows
    if not isinstance(font, ImageFont.FreeTypeFont):  # the bitmap fallback knows Latin-1 only
        text = text.encode("latin-1", "replace").decode("latin-1")
    if font.getlength(text) <= width:
        return text
    while text and font.getlength(text + "...") > width:
        text = text[:-1]
    return text + "..."


def contact_sheet_size(count, thumb=THUMB):
    """``(width, height)`` in pixels of the contact sheet of ``count`` images, each fitted into
    a ``thumb`` pixels square (``INLINE_THUMB`` in the notebook view)."""
    columns = min(COLUMNS, count)
    rows = math.ceil(count / columns)
    return columns * (thumb + 2 * PAD), rows * (thumb + CAPTION + 2 * PAD)


def _cell(index, thumb):
    """Top-left corner of the ``index``-th cell of a contact sheet."""
    return (index % COLUMNS * (thumb + 2 * PAD) + PAD,
            index // COLUMNS * (thumb + CAPTION + 2 * PAD) + PAD)


def _contact_sheet(samples, thumb):
    """Each sample's thumbnail, fitted into ``thumb`` pixels, with its label and file name
    under it."""
    sheet = Image.new("RGB", contact_sheet_size(len(samples), thumb), "white")
    draw, font = ImageDraw.Draw(sheet), _font()
    for index, sample in enumerate(samples):
        x, y = _cell(index, thumb)
        if sample.thumbnail is None:
            draw.rectangle((x, y, x + thumb - 1, y + thumb - 1), fill=_BACKGROUND)
            draw.text((x + 4, y + thumb // 2), _fit(sample.error, font, thumb - 8), font=font,
                      fill=(170, 0, 0))
        else:
            image = sample.thumbnail
            if max(image.size) > thumb:
                image = ImageOps.contain(image, (thumb, thumb), Image.Resampling.LANCZOS)
            w, h = image.size
            sheet.paste(image, (x + (thumb - w) // 2, y + (thumb - h) // 2))
        draw.text((x, y + thumb + 3), _fit(sample.label, font, thumb), font=font, fill="black")
        draw.text((x, y + thumb + 18), _fit(sample.filename, font, thumb), font=font,
                  fill=(100, 100, 100))
    return sheet


def label_histogram_size(num_labels):
    """``(width, height)`` in pixels of the histogram of ``num_labels`` labels."""
    return CHART_WIDTH, min(num_labels, MAX_BARS) * BAR + 2 * PAD


def _label_histogram(label_counts):
    """A horizontal bar chart of ``{label: count}`` (the first MAX_BARS labels)."""
    items = list(label_counts.items())[:MAX_BARS]
    chart = Image.new("RGB", label_histogram_size(len(items)), "white")
    draw, font = ImageDraw.Draw(chart), _font()
    name_width, count_width = 160, 60
    scale = (CHART_WIDTH - name_width - count_width - 2 * PAD) / max(max(label_counts.values()), 1)
    for row, (label, count) in enumerate(items):
        y = PAD + row * BAR
        draw.text((PAD, y + 2), _fit(label, font, name_width - 2 * PAD), font=font, fill="black")
        end = name_width + max(1, round(count * scale)) if count else name_width
        draw.rectangle((name_width, y + 2, end, y + BAR - 3), fill=(66, 133, 244))
        draw.text((end + 4, y + 2), str(count), font=font, fill="black")
    return chart


def _img(image, alt, kind="png", usemap=None):
    """An ``<img>`` holding ``image`` embedded as a ``kind`` ("png" or "jpeg") file."""
    buffer = io.BytesIO()
    if kind == "jpeg":
        image.save(buffer, "JPEG", quality=INLINE_JPEG_QUALITY)
    else:
        image.save(buffer, "PNG", compress_level=3)  # 1/4 of the default's time, 10% larger
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    usemap = f' usemap="#{usemap}"' if usemap else ""
    return (f'<img src="data:image/{kind};base64,{data}" width="{image.width}" '
            f'height="{image.height}" alt="{_e(alt)}"{usemap}>')


@dataclass
class _Picture:
    """A chart: the same PNG in both views."""

    image: Image.Image
    alt: str

    def html(self, inline):
        return _img(self.image, self.alt)


@dataclass
class _Sheet:
    """A contact sheet with its image map (a tooltip per image): drawn for the view it is in,
    a PNG of ``THUMB`` pixel thumbnails in the saved page, a JPEG of ``INLINE_THUMB`` pixel
    ones in the notebook view."""

    samples: list
    alt: str
    map_name: str

    def html(self, inline):
        thumb = INLINE_THUMB if inline else THUMB
        areas = []
        for index, sample in enumerate(self.samples):
            x, y = _cell(index, thumb)
            title = _e(f"{sample.label}: {sample.filename}" +
                       (f" ({sample.error})" if sample.error else ""))
            areas.append(f'<area shape="rect" coords="{x},{y},{x + thumb},{y + thumb + CAPTION}"'
                         f' title="{title}" alt="{title}">')
        picture = _img(_contact_sheet(self.samples, thumb), self.alt,
                       "jpeg" if inline else "png", self.map_name)
        return f'{picture}\n<map name="{self.map_name}">{"".join(areas)}</map>'


def _render(parts, inline):
    """The HTML of ``parts`` (texts, _Pictures and _Sheets), for the notebook view (``inline``)
    or the saved page."""
    return "\n".join(part if isinstance(part, str) else part.html(inline) for part in parts)


# ---------------------------------------------------------------------------- HTML parts

_STYLE = """
.tfrl-report { font-family: sans-serif; font-size: 14px; color: #222; }
.tfrl-report h1 { font-size: 20px; } .tfrl-report h2 { font-size: 17px; margin-top: 1.5em; }
.tfrl-report table { border-collapse: collapse; margin: 0.5em 0; }
.tfrl-report th, .tfrl-report td { border: 1px solid #ccc; padding: 2px 8px; text-align: left; }
.tfrl-report td.n { text-align: right; }
.tfrl-report pre { background: #f4f4f4; padding: 8px; }
.tfrl-report .problem { color: #a00; }
.tfrl-report caption { text-align: left; font-weight: bold; padding: 2px 0;
  white-space: nowrap; }
.tfrl-report .row { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
.tfrl-report img { display: block; margin: 0.5em 0; }
"""


def _e(text):
    return html.escape(str(text), quote=True)


def _clip(text, limit=TEXT_SHOWN):
    """``text`` cut to ``limit`` characters, with "..." when it was longer."""
    text = str(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _table(header, rows, caption=None, what="rows", total=None):
    """An HTML table of the first ROWS_SHOWN ``rows`` (a line says how many more ``what``
    there are, of ``total`` when given); every cell is clipped and escaped, and numbers are
    right-aligned."""
    def cell(value):
        kind = ' class="n"' if isinstance(value, int) else ""
        return f"<td{kind}>{_e(_clip(value))}</td>"

    rows = iter(rows)
    shown = list(itertools.islice(rows, ROWS_SHOWN))
    left = total - len(shown) if total is not None else sum(1 for _ in rows)
    head = "".join(f"<th>{_e(_clip(h))}</th>" for h in header)
    body = "\n".join(f"<tr>{''.join(map(cell, row))}</tr>" for row in shown)
    caption = f"<caption>{_e(caption)}</caption>" if caption else ""
    more = f"\n<p>and {left} more {what}, not shown</p>" if left else ""
    return f"<table>{caption}<tr>{head}</tr>\n{body}</table>{more}"


def _splits_table(manifest, splits):
    rows = []
    for name in splits:
        shards = manifest.splits[name].shards
        rows.append((name, manifest.splits[name].num_examples, len(shards),
                     human_size(sum(s.bytes for s in shards))))
    return "<h2>Splits</h2>\n" + _table(("split", "examples", "shards", "size"), rows)


def _labels_table(manifest, splits):
    """Label id, text and count per split: the label mapping at a glance."""
    counts = [_level_counts(manifest, manifest.splits[name].label_counts) for name in splits]
    labels = manifest.labels
    levels = labels.items() if isinstance(labels, dict) else [(None, labels)]
    named = ((i, f"{level}: {label}" if level else label) for level, texts in levels
             for i, label in enumerate(texts))
    rows = ((i, label, *(c.get(label, 0) for c in counts)) for i, label in named)
    return "<h2>Labels</h2>\n" + _table(("id", "label", *splits), rows,
                                        what="labels (labels.txt lists them all)",
                                        total=sum(len(texts) for _, texts in levels))


def _images_section(manifest, samples):
    image = manifest.image
    stored = [("stored", image.stored),
              ("size (height x width)", hxw(image.size) if image.size else "various"),
              ("max height x max width", hxw(image.max_size or []) or "?"),
              ("channels", image.channels or "various")]
    formats = list(image.formats.items())
    decoded = [s for s in samples if s.size]
    sizes = Counter(hxw(s.size) for s in decoded).most_common()
    if len(sizes) > SIZES_SHOWN:
        sizes = sizes[:SIZES_SHOWN - 1] + [("other", sum(n for _, n in sizes[SIZES_SHOWN - 1:]))]
    modes = Counter(s.mode for s in decoded).most_common()
    sampled = f"of the {len(decoded)} images decoded for the contact sheets"
    return "\n".join([
        '<h2>Images</h2>\n<div class="row">',
        _table(("", "value"), stored, "all images (metadata.json)"),
        _table(("format", "images"), formats, "formats of all images", "formats"),
        _table(("height x width", "images"), sizes, "sizes"),
        _table(("Pillow mode", "images"), modes, "modes"),
        f"</div>\n<p>Sizes and modes are those {sampled}.</p>"])


def _split_section(manifest, name, info, samples, number):
    """Shards, label histogram and contact sheet of one split, as a list of HTML texts,
    a _Picture and a _Sheet; ``number`` makes ids unique."""
    parts = [f"<h2>{_e(name)}</h2>",
             _table(("shard", "examples", "size", "crc32c"),
                    ((s.name, s.num_examples, human_size(s.bytes), s.crc32c or "")
                     for s in info.shards), what="shards")]
    counts = _level_counts(manifest, info.label_counts or {})
    if counts:
        shown = "" if len(counts) <= MAX_BARS else f" (the first {MAX_BARS} labels)"
        parts += [f"<p>Labels{shown}:</p>", _Picture(_label_histogram(counts),
                                                     f"label histogram of {name}")]
    if samples:
        parts += [f"<p>The first {len(samples)} of {info.num_examples} images:</p>",
                  _Sheet(samples, f"images of {name}", f"tfrl-sheet-{number}")]
    elif not info.num_examples:
        parts.append("<p>No examples.</p>")
    return parts


def _rejected_section(store, name, count, generation=0):
    """The rows of a rejected rows' file (``rejected.csv``, an append's
    ``rejected-g0001.csv``)."""
    head = f"<h2>Rejected rows{f' of generation {generation}' if generation else ''}: " \
        f"{count}</h2>"
    if not count:
        return head
    try:
        with store.open_read(name) as f:
            start = f.read(REJECTED_BYTES + 1)
        if len(start) > REJECTED_BYTES:  # whole lines only
            start = start[:start.rfind(b"\n", 0, REJECTED_BYTES) + 1]
            if not start:
                raise ValueError(f"its first line is longer than {human_size(REJECTED_BYTES)}")
        table = pd.read_csv(io.BytesIO(start), dtype=str, keep_default_na=False,
                            nrows=REJECTED_SHOWN)
    except (OSError, ValueError) as exc:
        return f'{head}\n<p class="problem">cannot read {_e(store.path(name))}: ' \
               f"{_e(_clip(exc))}</p>"
    columns = ""
    if len(table.columns) > REJECTED_COLUMNS:
        columns = (f"<p>(its first {REJECTED_COLUMNS} of {len(table.columns)} "
                   "columns)</p>\n")
        table = table.iloc[:, :REJECTED_COLUMNS]
    shown = f"<p>The first {len(table)}:</p>\n" if len(table) < count else ""
    return f"{head}\n{shown}{columns}" + _table(table.columns, table.itertuples(index=False))
