"""The ``tfrecorder-lite`` command: convert, verify, info, inspect, export-coco.

Exit status: 0 success, 1 verification failed, 2 bad input or a store's refusal (one line on
stderr, no traceback, no credential), 141 when the reader of the output stopped reading (as
``| head`` does; nothing is printed), 130 when interrupted.
"""

import argparse
import json
import logging
import os
import sys

from . import options
from ._version import __version__
from .storage import errors as store_errors
from .table import sources
from .conversion import convert
from .images.normalize import DEFAULT_MAX_BYTES
from .output.layout import NEAR_DUPLICATES
from .output.manifest import as_of, read_manifest, summary_text
from .read.coco_export import to_coco
from .read.report import inspect
from .read.verification import verify
from .errors import TFRecorderError, VerifyError
from .redaction import redact

_STDOUT_CLOSED = 141  # 128 + SIGPIPE, as the shell reports a command that | head cut short


def _size(text):
    try:
        height, width = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HEIGHTxWIDTH, e.g. 224x224, not {text!r}")
    return height, width


_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def _byte_count(text):
    number, unit = text.strip().upper().rstrip("IB"), ""
    if number and number[-1] in _UNITS:
        number, unit = number[:-1], number[-1]
    try:
        value = int(float(number) * _UNITS[unit])
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a size such as 256M or 2G, not {text!r}")
    return value


def _ratios(text):
    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected three shares, e.g. 0.8,0.1,0.1, not {text!r}")


def _json_object(example):
    """A parser of a JSON object option whose value is never repeated in an error: it may hold
    credentials."""
    def parse(text):
        try:
            options = json.loads(text)
        except json.JSONDecodeError as exc:
            why = f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        else:
            if isinstance(options, dict):
                return options
            why = f"a JSON {type(options).__name__}, not an object"
        raise argparse.ArgumentTypeError(
            f"expected a JSON object, e.g. '{example}'; the value given is {why} "
            "(the value is not shown: it may hold credentials)")
    return parse


_storage_options = _json_object('{"token": "anon"}')


def _add_storage_options(parser):
    parser.add_argument("--storage-options", type=_storage_options, metavar="JSON",
                        help="fsspec options for remote URLs, as a JSON object (one for every "
                             "protocol, or keyed by protocol: '{\"s3\": {...}, \"gs\": {...}}')")


def _add_generation(parser):
    parser.add_argument("--generation", type=_count, metavar="K",
                        help="the output as it was after generation K (0: the first "
                             "conversion; default: as it is, every generation)")


def _parser():
    parser = argparse.ArgumentParser(
        prog="tfrecorder-lite",
        description="Turn a table of labelled images into TFRecord shards, and check them.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    commands = parser.add_subparsers(dest="command", required=True)

    c = commands.add_parser("convert", help="write TFRecord shards from a CSV, an image "
                                            "folder, a COCO .json file, a Pascal VOC folder, "
                                            "a Vertex AI import file or a YOLO folder")
    c.add_argument("source", help="CSV file (split,image_uri,label, or AutoML's detection CSV), "
                                  "folder SPLIT/LABEL/FILE, COCO instances_*.json, Pascal VOC "
                                  "folder (Annotations/, JPEGImages/), Vertex AI import file "
                                  "(.jsonl or .csv) or YOLO folder (data.yaml, images/, "
                                  "labels/): a path or a URL (gs://, s3://, http(s)://, ...)")
    c.add_argument("output_dir", help="a folder: a path or a URL (gs://, s3://, ...)")
    c.add_argument("--num-shards", type=int, help="shards per split (default: ~128 MiB each)")
    c.add_argument("--image-size", type=_size, metavar="HxW", help="resize at write time")
    c.add_argument("--image-format", choices=options.IMAGE_FORMATS, default="jpeg",
                   help="encoding of resized images")
    c.add_argument("--compression", type=str.upper, choices=options.COMPRESSIONS)
    c.add_argument("--check", choices=options.CHECKS, default="decode")
    c.add_argument("--on-error", choices=options.ON_ERROR, default="raise",
                   help="stop at the first bad row, or skip it into rejected.csv")
    c.add_argument("--leakage", choices=options.LEAKAGE,
                   help="near-duplicate images across splits: list them (beside the "
                        "manifest, in near-duplicates.csv), reject the later row of each "
                        "pair, or do not look for them (default: warn, or ignore with "
                        "--check header, which decodes no image)")
    c.add_argument("--append", action="store_true",
                   help="add the rows to the finished output in OUTPUT_DIR as a new generation")
    c.add_argument("--no-shuffle", action="store_true", help="keep the input order")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--overwrite", action="store_true", help="replace what OUTPUT_DIR holds")
    c.add_argument("--sha256", action="store_true",
                   help="also record each shard's sha256 (CRC32C is always recorded)")
    c.add_argument("--jobs", type=int, default=-1, help="parallel workers (default: all cores)")
    c.add_argument("--no-progress", action="store_true")
    c.add_argument("--split-col", default="split")
    c.add_argument("--image-col", default="image_uri",
                   help="the image column; '' for a table without images")
    c.add_argument("--label-col", default="label", type=_label_columns, metavar="COL[,COL]",
                   help="the label column, or one column per label level: coarse,fine")
    c.add_argument("--label-sep", metavar="SEP",
                   help="labels are split by SEP in the label column (multi-label), e.g. '|'; "
                        "a CSV whose rows hold more fields than columns is read as multi-label "
                        "without it")
    c.add_argument("--max-image-bytes", type=_byte_count, default=DEFAULT_MAX_BYTES,
                   metavar="BYTES", help="reject larger image files unread, e.g. 512M "
                                         "(default: 256M)")
    c.add_argument("--unassigned", choices=options.UNASSIGNED, default="reject",
                   help="rows whose split is UNASSIGNED or empty: reject them, or assign a split "
                        "by a stable hash of the image URI")
    c.add_argument("--split-ratios", type=_ratios, metavar="T,V,T",
                   help="shares of TRAIN, VALIDATION, TEST for assigned rows (default 0.8,0.1,0.1)")
    c.add_argument("--encoding", default="utf-8",
                   help="text encoding of the CSV or Vertex AI file, e.g. latin-1 (default: "
                        "utf-8, with or without a byte order mark)")
    c.add_argument("--task", choices=sources.TASKS,
                   help="read the CSV as an AutoML detection CSV or as a classification CSV "
                        "(default: told by its shape)")
    c.add_argument("--split", help="the split of a COCO .json file: train, validation or test "
                                   "(default: from its name, e.g. instances_val2017.json)")
    c.add_argument("--image-dir", help="the images of a COCO .json file, a path or a URL "
                                       "(default: the file's folder)")
    c.add_argument("--include-masks", action="store_true",
                   help="a COCO .json file's instance masks too (image/object/mask)")
    c.add_argument("--allow-outside-paths", action="store_true",
                   help="read images an annotation file (COCO, VOC, Vertex AI, YOLO) names "
                        "outside the folder given (../, absolute paths, URLs, symbolic links "
                        "out of it), and an image folder's links out of it; by default they "
                        "are refused")
    c.add_argument("--box-units", choices=options.BOX_UNITS, default="relative",
                   help="a detection table's coordinates: fractions of the image, or pixels")
    c.add_argument("--mask-col", metavar="COL",
                   help="a table of masks' mask column (default: mask_uri when present)")
    c.add_argument("--mask-labels", type=_label_list, metavar="LABEL[,LABEL]",
                   help="the label of each class id of the masks (id = position)")
    c.add_argument("--mask-colors", type=_json_object('{"#ff0000": "car"}'), metavar="JSON",
                   help="colour masks' colour table: '#rrggbb' -> label (null: ignored)")
    c.add_argument("--ignore-value", type=_ignore_value, default=255, metavar="ID",
                   help="class id of ignored mask pixels (default 255; 'none': no such id)")
    c.add_argument("--allow-lossy-masks", action="store_true",
                   help="take JPEG and WebP masks (refused by default)")
    c.add_argument("--runner", metavar="NAME",
                   help="run the shard tasks as an Apache Beam pipeline on this runner, e.g. "
                        "DirectRunner, DataflowRunner, FlinkRunner (needs "
                        "tfrecorder_lite[beam]; default: joblib on this machine)")
    c.add_argument("--pipeline-options", type=_json_object('{"project": "my-project"}'),
                   metavar="JSON", help="the Beam pipeline's options, as a JSON object, e.g. "
                                        "'{\"project\": \"my-project\", \"region\": "
                                        "\"us-central1\"}'")
    c.add_argument("--base-dir", help="folder (path or URL) that relative image paths resolve "
                                      "against (default: the CSV's folder)")
    _add_storage_options(c)

    v = commands.add_parser("verify", help="check every shard against metadata.json")
    v.add_argument("output_dir")
    v.add_argument("--decode", action="store_true", help="also decode every image")
    _add_storage_options(v)
    _add_generation(v)

    i = commands.add_parser("info", help="counts per split and label")
    i.add_argument("output_dir")
    _add_storage_options(i)
    _add_generation(i)

    e = commands.add_parser("export-coco", help="write COCO instances JSON of one split of a "
                                                "detection output (for pycocotools' COCOeval)")
    e.add_argument("output_dir")
    e.add_argument("split", help="TRAIN, VALIDATION or TEST")
    e.add_argument("path", help="the JSON file to write: a path or a URL")
    _add_storage_options(e)

    r = commands.add_parser("inspect", help="write an HTML report: images with their labels, "
                                            "label histograms, sizes, formats, rejected rows")
    r.add_argument("output_dir")
    r.add_argument("--split", help="only this split (default: all)")
    r.add_argument("--num", type=_count, default=64, help="images shown (default: 64)")
    r.add_argument("--out", default="report.html",
                   help="where to save the report: a path or any fsspec URL (default: report.html)")
    _add_storage_options(r)
    _add_generation(r)
    return parser


def _count(text):
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a count (0 or more), not {text!r}")
    return value


def _label_columns(text):
    """``--label-col``: one column, or several (label levels) separated by commas."""
    columns = [c.strip() for c in text.split(",")]
    return columns[0] if len(columns) == 1 else columns


def _label_list(text):
    """``--mask-labels``: labels separated by commas."""
    return [label.strip() for label in text.split(",")]


def _ignore_value(text):
    """``--ignore-value``: a class id, or ``none``."""
    if text.strip().lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a class id (0 to 255) or none, not "
                                         f"{text!r}") from None


def _convert(args):
    result = convert(
        args.source, args.output_dir, split_col=args.split_col, image_col=args.image_col or None,
        label_sep=args.label_sep,
        label_col=args.label_col, num_shards=args.num_shards, compression=args.compression,
        image_size=args.image_size, image_format=args.image_format, check=args.check,
        on_error=args.on_error, shuffle=not args.no_shuffle, seed=args.seed,
        overwrite=args.overwrite, n_jobs=args.jobs, progress=not args.no_progress,
        sha256=args.sha256, encoding=args.encoding, base_dir=args.base_dir, task=args.task,
        split=args.split, image_dir=args.image_dir, allow_outside_paths=args.allow_outside_paths,
        **({"include_masks": True} if args.include_masks else {}),
        max_image_bytes=args.max_image_bytes, unassigned=args.unassigned,
        split_ratios=args.split_ratios, box_units=args.box_units, runner=args.runner,
        pipeline_options=args.pipeline_options, mask_col=args.mask_col,
        mask_labels=args.mask_labels, mask_colors=args.mask_colors,
        ignore_value=args.ignore_value, allow_lossy_masks=args.allow_lossy_masks,
        storage_options=args.storage_options, leakage=args.leakage, append=args.append)
    counts = ", ".join(f"{split} {n}" for split, n in result.counts.items())
    _print(f"wrote {counts} to {result.output_dir}")
    if len(result.rejected):
        _print(f"rejected {len(result.rejected)} row(s): see {result.output_dir}/rejected.csv")
    if result.skipped:
        _print(f"skipped {result.skipped} row(s) already in the output")
    if len(result.problems):
        _print(f"{len(result.problems)} near-duplicate image(s) across splits: see "
               f"{result.output_dir}/{NEAR_DUPLICATES}")
    return 0


def _info(args):
    _print(summary_text(as_of(read_manifest(args.output_dir, args.storage_options)[0],
                              args.generation), args.output_dir))
    return 0


def _export_coco(args):
    coco = to_coco(args.output_dir, args.split, args.path, storage_options=args.storage_options)
    _print(f"wrote {args.path}: {len(coco['images'])} images, {len(coco['annotations'])} "
           f"boxes, {len(coco['categories'])} categories")
    return 0


def _inspect(args):
    report = inspect(args.output_dir, split=args.split, num=args.num, out=args.out,
                     storage_options=args.storage_options, generation=args.generation)
    _print(f"wrote {args.out}: {report.num_images} images from {args.output_dir}")
    return 0


class _StdoutClosed(Exception):
    """Whoever reads our output stopped reading (``| head``)."""


def _print(text):
    """Print ``text`` (redacted) to stdout now; _StdoutClosed when nobody reads it any more."""
    try:
        print(redact(text), flush=True)
    except BrokenPipeError:
        raise _StdoutClosed() from None


def _stdout_to_devnull():
    """Send what is left in stdout's buffer nowhere, so that exiting prints no error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _error(message, one_line=True):
    """Print ``message`` on stderr, redacted; its line breaks joined unless not ``one_line``."""
    text = redact(str(message))
    try:
        print(f"tfrecorder-lite: {' '.join(text.split()) if one_line else text}",
              file=sys.stderr)
    except OSError:  # no stderr to complain to
        pass


def main(argv=None):
    """Entry point of ``tfrecorder-lite``; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    urls = [getattr(args, "source", ""), getattr(args, "path", ""), args.output_dir]
    try:
        if args.command == "convert":
            return _convert(args)
        if args.command == "info":
            return _info(args)
        if args.command == "inspect":
            return _inspect(args)
        if args.command == "export-coco":
            return _export_coco(args)
        _print(verify(args.output_dir, decode=args.decode, storage_options=args.storage_options,
                      generation=args.generation))
        return 0
    except _StdoutClosed:
        _stdout_to_devnull()
        return _STDOUT_CLOSED
    except VerifyError as exc:
        _error(exc, one_line=False)  # one problem per line
        return 1
    except (TFRecorderError, ValueError, ImportError) as exc:
        _error(f"error: {exc}")
        return 2
    except KeyboardInterrupt:
        _error("interrupted; re-run the same command to resume")
        return 130
    except Exception as exc:  # a store's error (credentials, access, a missing bucket)
        line = store_errors.one_line(exc, urls)
        if line is None:
            raise
        _error(f"error: {line}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
