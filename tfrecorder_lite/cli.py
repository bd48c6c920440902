"""The ``tfrecorder-lite`` command: convert, verify, info, inspect, export-coco.

Exit status: 0 success, 1 verification failed, 2 bad input or a store's refusal (one line on
stderr, no traceback, no credential), 141 when the reader of the output stopped reading (as
``| head`` does; nothing is printed), 130 when interrupted.
"""

import argparse
import functools
import json
import logging
import os
import sys

from . import option_declarations
from ._version import __version__
from .storage import errors as store_errors
from .sources import registry
from .conversion import convert
from .output.layout import NEAR_DUPLICATES
from .output.manifest import as_of, read_manifest, summary_text
from .read import coco_export
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


def _declared_flag(parser, name, **settings):
    """Add the flag of the declared option ``name`` (``option_declarations``), with its help,
    default and allowed values unless ``settings`` say otherwise."""
    option = option_declarations.BY_NAME[name]
    declared = {"help": option.help, "default": option.default}
    if option.allowed is not None and settings.get("action") != "store_true":
        declared["choices"] = option.allowed
    parser.add_argument(option.flag, **{**declared, **settings})


def _add_storage_options(parser):
    _declared_flag(parser, "storage_options", type=_storage_options, metavar="JSON")


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
                                            "folder or an annotated dataset (see source)")
    c.add_argument("source", help=f"{registry.described()}: a path or a URL (gs://, s3://, "
                                  "http(s)://, ...)")
    c.add_argument("output_dir", help="a folder: a path or a URL (gs://, s3://, ...)")
    flag = functools.partial(_declared_flag, c)
    flag("num_shards", type=int)
    flag("image_size", type=_size, metavar="HxW")
    flag("image_format")
    flag("compression", type=str.upper)
    flag("check")
    flag("on_error")
    flag("leakage")
    flag("append", action="store_true")
    flag("shuffle", action="store_true", default=False, help="keep the input order")
    flag("seed", type=int)
    flag("overwrite", action="store_true")
    flag("sha256", action="store_true")
    flag("n_jobs", type=int, dest="jobs")
    flag("progress", action="store_true", default=False, help="no progress bar")
    flag("split_col")
    flag("image_col")
    flag("label_col", type=_label_columns, metavar="COL[,COL]")
    flag("label_sep", metavar="SEP")
    flag("max_image_bytes", type=_byte_count, metavar="BYTES")
    flag("unassigned")
    flag("split_ratios", type=_ratios, metavar="T,V,T")
    flag("encoding")
    flag("task", choices=registry.TASKS)
    flag("split")
    flag("image_dir")
    flag("include_masks", action="store_true")
    flag("allow_outside_paths", action="store_true")
    flag("box_units")
    flag("mask_col", metavar="COL")
    flag("mask_labels", type=_label_list, metavar="LABEL[,LABEL]")
    flag("mask_colors", type=_json_object('{"#ff0000": "car"}'), metavar="JSON")
    flag("ignore_value", type=_ignore_value, metavar="ID")
    flag("allow_lossy_masks", action="store_true")
    flag("runner", metavar="NAME")
    flag("pipeline_options", type=_json_object('{"project": "my-project"}'), metavar="JSON")
    flag("base_dir")
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

    e = commands.add_parser("export-coco", help=coco_export.COMMAND_HELP)
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
    result = convert(args.source, args.output_dir, **_convert_options(args))
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


def _convert_options(args):
    """``convert()``'s keyword options of the parsed flags: each declared option with a flag
    (a ``--no-`` flag says False)."""
    options = {}
    for option in option_declarations.at("convert"):
        if option.flag is not None:
            value = getattr(args, option.flag[2:].replace("-", "_"))
            options[option.name] = not value if option.flag.startswith("--no-") else value
    options["image_col"] = options["image_col"] or None  # '': a table without images
    return options


def _info(args):
    _print(summary_text(as_of(read_manifest(args.output_dir, args.storage_options)[0],
                              args.generation), args.output_dir))
    return 0


def _export_coco(args):
    exported = to_coco(args.output_dir, args.split, args.path,
                       storage_options=args.storage_options)
    _print(f"wrote {args.path}: {len(exported['images'])} images, "
           f"{len(exported['annotations'])} boxes, {len(exported['categories'])} categories")
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
