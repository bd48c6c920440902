"""Convert an image CSV (split,image_uri,label) to TFRecord shards, then verify them.

Run: python samples/csv_to_tfrecords.py images.csv out/ [--image-size 224] [--skip-bad-rows]
"""

import argparse
import logging

import tfrecorder_lite


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("output_dir")
    parser.add_argument("--image-size", type=int, help="resize to SIZE x SIZE at write time")
    parser.add_argument("--skip-bad-rows", action="store_true",
                        help="reject bad rows into rejected.csv instead of stopping")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

    # convert() reads the CSV (with or without a header), resolving relative image paths
    # against the CSV's folder, then validates, writes and finishes with metadata.json.
    result = tfrecorder_lite.convert(
        args.csv, args.output_dir, image_size=args.image_size,
        on_error="skip" if args.skip_bad_rows else "raise")
    print(result)
    if len(result.rejected):
        print(result.rejected["reason"].value_counts().to_string())
    print(tfrecorder_lite.verify(result.output_dir))


if __name__ == "__main__":
    main()
