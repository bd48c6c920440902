"""The public conversion calls: check options, validate, plan, write."""

import dataclasses

from .errors import InvalidRowError, SchemaError
from .images import content_hash
from .images.normalize import DEFAULT_MAX_BYTES
from .option_declarations import source_option_names
from .options import (TableOptions, WriteOptions, check_conversion, check_source_options,
                      image_options, leakage_for)
from .storage import Store
from .storage import errors as store_errors
from .sources import registry
from .table.kinds import prepare
from .write.append import already_there, appended_to, check_same_records, written_before
from .write.beam_runner import runner_for
from .write.driver import write_plan
from .write.plan import build_plan


def to_tfrecord(df, output_dir, *, split_col="split", image_col="image_uri", label_col="label",
                num_shards=None, compression=None, image_size=None, image_format="jpeg",
                label_map=None, check="decode", on_error="raise", shuffle=True, seed=0,
                overwrite=False, n_jobs=-1, progress=True, base_dir=None, sha256=False,
                storage_options=None, max_image_bytes=DEFAULT_MAX_BYTES, unassigned="reject",
                split_ratios=None, label_sep=None, features=None, box_units="relative",
                box_columns=None, runner=None, pipeline_options=None, leakage=None,
                append=False, mask_col=None, mask_labels=None, mask_colors=None,
                ignore_value=255, allow_lossy_masks=False):
    """Write the table's images as TFRecord shards per split, with a manifest.

    Args:
        df: a DataFrame with split, image and label columns; other columns become features.
        output_dir: folder for the shards, ``labels.txt``, ``rejected.csv``, ``metadata.json``:
            a local path or any fsspec URL (``gs://bucket/records``, ``s3://...``).
        split_col, image_col, label_col: column names; ``split_col=None`` for a table
            without splits (every row is given one, as with ``unassigned="assign"``);
            ``image_col=None`` for a table without images (records of features and labels);
            ``label_col=["coarse", "fine"]`` for one label per level, each with its own
            vocabulary (``labels-coarse.txt``, ...). A label column of lists holds several
            labels per row (multi-label).
        num_shards: shards per split (int or dict per split); None aims at ~128 MiB shards.
        compression: None, "GZIP" or "ZLIB".
        image_size: (height, width) to resize to at write time, or None to keep originals.
        image_format: encoding of resized images, "jpeg" or "png".
        label_map: dict label -> id, or list of labels (id = position).
        check: "decode" (decode every image now) or "header" (read headers only; faster).
        on_error: "raise" at the first bad row, or "skip" it into ``result.rejected``.
        shuffle: shuffle rows within each split (seeded).
        seed: shuffle seed.
        overwrite: replace what ``output_dir`` holds.
        n_jobs: parallel workers (-1: all cores).
        progress: show a progress bar.
        base_dir: folder (path or URL) that relative image paths resolve against (default:
            the working folder).
        sha256: record each shard's sha256 in metadata.json beside its CRC32C (several times
            the CPU of the CRC32C; see benchmarks/README.md).
        storage_options: fsspec options (credentials, endpoints) for remote images and output:
            one dict for every remote URL, or a dict per protocol when the call uses two,
            e.g. ``{"s3": {...}, "gs": {...}}``.
        max_image_bytes: image files larger than this (default 256 MiB) are rejected without
            being read ("file too large").
        unassigned: rows whose split is UNASSIGNED or empty are rejected ("reject"), or
            "assign"ed a split by a stable hash of their image_uri text, so that an image lands
            in the same split whatever the table's order or run.
        split_ratios: the shares of assigned rows, ``{"TRAIN": 0.8, "VALIDATION": 0.1,
            "TEST": 0.1}`` by default.
        label_sep: the label column's text holds several labels split by this separator,
            e.g. ``"|"`` for ``"cat|dog"`` (multi-label).
        features: ``{column: type}`` declaring extra columns' types instead of inferring them:
            ``"int64"``, ``"float32"``, ``"bytes"``, ``"bool"``, or lists with a shape, e.g.
            ``"float32[None,4]"`` for boxes (see ``tfrecorder_lite.table.columns``).
        runner: None to run the shard tasks through joblib (``n_jobs``, or the backend of
            ``joblib.parallel_config``), or the name of an Apache Beam runner
            (``"DirectRunner"``, ``"DataflowRunner"``, ``"FlinkRunner"``, ``"SparkRunner"``)
            to run them as a Beam pipeline (``pip install 'tfrecorder_lite[beam]'``).
        pipeline_options: the Beam pipeline's options, a dict (``{"project": ...,
            "region": ..., "temp_location": ...}``) or a ``PipelineOptions``.
        leakage: what to do with near-duplicate images across splits (the same photo
            resized, re-encoded, slightly cropped or brightened in TRAIN and TEST), found by
            a perceptual hash of each image taken while it is read (each pair confirmed by
            reading its two images again, see ``near_duplicates.confirmation``): "warn"
            (write them, list each pair in ``result.problems`` and ``near-duplicates.csv``),
            "reject" (reject the later row of each pair, with its reason, whatever
            ``on_error``) or "ignore".
            Default: "warn" when the images are decoded anyway (``check="decode"``, an
            ``image_size``, an append); "ignore" with ``check="header"``, which decodes no
            image (hashing would decode every one).
        append: add the table's rows to the finished output in ``output_dir`` as a new
            generation: rows whose image (the content hash of its file) and label are already
            there are skipped (``result.skipped``); one already there with another label or
            split is rejected naming both; the others are written as new shards
            (``train-g0001-00000-of-00002.tfrecord``). Files of earlier generations are never
            changed; new labels get the next ids. Options that change the bytes of records
            (image_size, image_format, check, compression, the kind of table) must be the
            output's.

        box_units: a table of boxes' coordinates: "relative" (fractions of the image, 0,0
            top left) or "pixels" (divided by the image's size when it is written).
        box_columns: a table of boxes' per-box columns (default: those named is_crowd,
            iscrowd, difficult, truncated, occluded, area, group_of, weight, depiction).
        mask_col: a table of masks' mask column (default: ``mask_uri`` when the table
            has it): one mask file per image, the image's size.
        mask_labels: the label of each class id of the masks (id = position); default: the
            colour table's labels, or the ids themselves.
        mask_colors: ``{(r, g, b): label}`` (or ``"#rrggbb"`` keys) for colour masks; a
            label None marks the ignore value.
        ignore_value: the class id of pixels to ignore (default 255), kept as it is, or None.
        allow_lossy_masks: take JPEG and WebP masks (refused by default: lossy compression
            changes class ids near edges).

    Each kind of table is written its own way (``table/kinds.py``): a table with the columns
    ``xmin, ymin, xmax, ymax`` is a table of boxes, one row per box, written as one record per
    image with the keys object detectors read (``record/boxes.py``); a table with a
    ``mask_uri`` column (or ``mask_col``) is a table of masks, one row per image, written with
    the keys TF Model Garden's models of masks read (``record/kinds.py`` lists the kinds).

    Returns:
        A ConversionResult (``output_dir``, ``counts``, ``labels``, ``rejected``, ``metadata``).

    Raises:
        SchemaError: missing columns, bad options, a label_map that would lose labels, or
            fractional labels (2.73: make the column text), before any file is read.
        InvalidRowError: with ``on_error="raise"``, naming a bad row and its path: the first in
            table order among rows the table alone refuses (bad cell, missing file), before any
            image is read; else the first image that fails, in writing order.
            ``validate()`` lists every problem at once.
        OutputExistsError: ``output_dir`` holds something else and ``overwrite`` is False.
        FileNotFoundError: the bucket of ``output_dir`` does not exist (the message names it).
        UnsupportedURLError, MissingDependencyError: an unusable URL, or a Beam ``runner``
            without apache-beam installed, before anything is written.
    """
    table = TableOptions.of(locals())
    leakage = leakage_for(leakage, check, image_size, append)
    write = WriteOptions.of(locals())
    image = image_options(check, image_size, image_format, max_image_bytes, leakage)
    if image_col is None and image_size is not None:
        raise SchemaError("image_size resizes images, and image_col=None writes none")
    engine = runner_for(runner, pipeline_options)
    prepared = prepare(df, table)
    store = Store(output_dir, storage_options)
    store.check_writable()
    image = None if image_col is None else image
    previous = before = None
    if append:
        previous, prepared = appended_to(df, store, prepared, table, write, image)
        image = dataclasses.replace(  # its generations share one hash of the files' bytes
            image, content_hash=content_hash.of_output(previous.near_duplicates))

    def already_written(draft):  # an append's rows already there, found on the drafted plan
        nonlocal before
        check_same_records(previous, draft, store)
        before = written_before(store, previous)
        return already_there(draft, before, storage_options)

    plan = build_plan(prepared, write, image, storage_options,
                      generation=0 if previous is None else len(previous.generations or [None]),
                      skip=None if previous is None else already_written)
    try:
        return write_plan(plan, df, store, write, runner=engine, previous=previous,
                          before=before)
    except FileNotFoundError as exc:  # a bucket that does not exist: say which
        missing = None if store.is_local else store_errors.missing_bucket(store.url, store.fs)
        if missing is None:
            raise
        raise missing from exc


def convert(source, output_dir, **options):
    """Convert a DataFrame, a CSV file, an image folder (``SPLIT/LABEL/FILE``) or a file or
    folder of any other source format ``sources.registry`` reads (the annotation formats of
    boxes and masks, each a module of ``sources/``).

    ``source`` and ``output_dir`` are local paths or fsspec URLs. Relative image paths in a CSV
    resolve against the CSV's folder (a URL for a remote CSV) unless ``base_dir`` is given. Takes
    the options of :func:`to_tfrecord`, and of ``sources.registry.read_source``: ``encoding``
    (default ``"utf-8"``) of a CSV file, ``task`` (one of ``sources.registry.TASKS``: how to read
    a CSV that its shape does not tell), the options of one source format (``split``,
    ``image_dir`` and ``include_masks``, see ``option_declarations``), ``allow_outside_paths``
    (read images an annotation file names outside the folder given: refused rows or an error
    otherwise) and ``max_annotation_bytes`` (default 1 GiB: a larger annotation file is
    refused, see ``sources.annotation_files``).
    """
    columns = {k: options[k] for k in ("split_col", "image_col", "label_col") if k in options}
    reading = {k: options.pop(k) for k in source_option_names() if k in options}
    check_source_options(**reading)  # every option, before the source is read
    check_conversion(**options)
    Store(output_dir, options.get("storage_options")).check_writable()
    df, base_dir = registry.read_source(source, storage_options=options.get("storage_options"),
                                       **reading, **columns)
    if options.get("base_dir") is None:
        options["base_dir"] = base_dir
    try:
        return to_tfrecord(df, output_dir, **options)
    except InvalidRowError as exc:  # say where the row is in the CSV file
        lines = df.attrs.get("csv_lines")
        if lines is None or not isinstance(exc.row, int) or not 0 <= exc.row < len(lines):
            raise
        raise InvalidRowError(exc.row, exc.path, exc.reason, lines[exc.row]) from None
