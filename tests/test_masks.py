"""images/mask_pixels.py: semantic masks checked against their image and labels, stored as a
single-channel PNG of class ids, pixel for pixel."""

import io

import numpy as np
import pytest
from PIL import Image

from imagegen import grey_png, png_chunk
from tfrecorder_lite.images.mask_pixels import (MaskOptions, MaskRejected, decode_ids, encode_ids,
                                          prepare_mask)


def _ids(height=12, width=16, seed=0, classes=3):
    """Class ids in blocks, with a few ignore (255) pixels."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, classes, (height, width), dtype=np.uint8)
    ids[0, :3] = 255
    return ids


def _file(image, fmt="PNG", **params):
    buffer = io.BytesIO()
    image.save(buffer, fmt, **params)
    return buffer.getvalue()


def _counts(ids, ignore=255):
    values, counts = np.unique(ids, return_counts=True)
    return {int(v): int(n) for v, n in zip(values, counts) if v != ignore}


def test_a_single_channel_png_of_known_ids_is_kept_byte_for_byte():
    ids = _ids()
    data = _file(Image.fromarray(ids, "L"))
    mask = prepare_mask(data, ids.shape, MaskOptions(num_labels=3))
    assert mask.encoded == data
    assert dict(zip(mask.ids, mask.pixels)) == _counts(ids)
    assert mask.ignored == 3


def test_a_palette_mask_becomes_its_indexes():
    ids = _ids(seed=1)
    image = Image.fromarray(ids, "P")
    image.putpalette([v for i in range(256) for v in ((i * 40) % 256, 255 - i, (i * 7) % 256)])
    mask = prepare_mask(_file(image), ids.shape, MaskOptions(num_labels=3))
    assert np.array_equal(decode_ids(mask.encoded), ids)
    assert Image.open(io.BytesIO(mask.encoded)).mode == "L"


def test_an_rgb_mask_is_mapped_through_the_colour_table():
    ids = _ids(seed=2)
    colours = {0: (0, 0, 0), 1: (200, 10, 10), 2: (10, 200, 10), 255: (255, 255, 255)}
    rgb = np.zeros((*ids.shape, 3), np.uint8)
    for i, colour in colours.items():
        rgb[ids == i] = colour
    table = ((colours[0], 0), (colours[1], 1), (colours[2], 2), (colours[255], None))
    options = MaskOptions(num_labels=3, colors=table)
    mask = prepare_mask(_file(Image.fromarray(rgb, "RGB")), ids.shape, options)
    assert np.array_equal(decode_ids(mask.encoded), ids)  # white -> the ignore value
    assert dict(zip(mask.ids, mask.pixels)) == _counts(ids)

    rgb[5, 5:9] = (1, 2, 3)  # four pixels of a colour the table lacks
    with pytest.raises(MaskRejected, match=r"colour \(1, 2, 3\) \(4 pixels\) not in mask_colors"):
        prepare_mask(_file(Image.fromarray(rgb, "RGB")), ids.shape, options)


def test_an_unknown_id_is_named_with_its_pixel_count():
    ids = _ids()
    ids[4:6, 4:7] = 9  # six pixels
    with pytest.raises(MaskRejected, match=r"class id 9 \(6 pixels\) is not a label "
                                           r"\(ids 0 to 2 or the ignore value 255\)"):
        prepare_mask(_file(Image.fromarray(ids, "L")), ids.shape, MaskOptions(num_labels=3))
    # without a label count, every id is taken
    mask = prepare_mask(_file(Image.fromarray(ids, "L")), ids.shape, MaskOptions())
    assert 9 in mask.ids and mask.pixels[mask.ids.index(9)] == 6


def test_a_mask_of_another_size_than_its_image_is_refused():
    ids = _ids(12, 16)
    with pytest.raises(MaskRejected, match=r"mask is 12x16 pixels \(height x width\), its "
                                           r"image 16x12"):
        prepare_mask(_file(Image.fromarray(ids, "L")), (16, 12), MaskOptions(num_labels=3))


def test_a_jpeg_mask_is_refused_unless_lossy_masks_are_allowed():
    ids = np.zeros((16, 16), np.uint8)
    ids[:, 8:] = 1
    data = _file(Image.fromarray(ids, "L"), "JPEG", quality=95)
    with pytest.raises(MaskRejected, match="JPEG file, which is lossy.*allow_lossy_masks=True"):
        prepare_mask(data, ids.shape, MaskOptions(num_labels=2))
    mask = prepare_mask(data, ids.shape, MaskOptions(num_labels=2, allow_lossy=True))
    stored = decode_ids(mask.encoded)
    assert stored.shape == ids.shape and set(np.unique(stored)) <= {0, 1}


@pytest.mark.parametrize("image, reason", [
    (Image.fromarray(np.zeros((4, 4, 3), np.uint8), "RGB"), "RGB image.*needs mask_colors"),
    (Image.fromarray(np.full((4, 4), 300, np.uint16)),
     r"class id 300 \(16 pixels\) is outside 0 to 255"),
])
def test_masks_that_hold_no_class_ids_are_refused(image, reason):
    with pytest.raises(MaskRejected, match=reason):
        prepare_mask(_file(image), (4, 4), MaskOptions(num_labels=3))


def test_a_translucent_colour_mask_and_a_broken_file_are_refused():
    rgba = np.zeros((4, 4, 4), np.uint8)
    rgba[..., 3] = 255
    rgba[0, 0, 3] = 10
    with pytest.raises(MaskRejected, match="1 transparent pixels"):
        prepare_mask(_file(Image.fromarray(rgba, "RGBA")), (4, 4),
                     MaskOptions(colors=(((0, 0, 0), 0),)))
    with pytest.raises(MaskRejected, match="mask cannot be read"):
        prepare_mask(b"not a png", (4, 4))


def test_stored_masks_decode_only_as_single_channel_pngs():
    ids = _ids()
    assert np.array_equal(decode_ids(encode_ids(ids)), ids)
    with pytest.raises(ValueError, match="not a single-channel 8-bit PNG"):
        decode_ids(_file(Image.fromarray(np.zeros((4, 4, 3), np.uint8), "RGB")))


@pytest.mark.parametrize("bits", [1, 2, 4, 8, 16])
def test_the_samples_of_a_greyscale_png_are_its_class_ids_whatever_its_bit_depth(bits):
    # a 2-bit sample 3 is id 3 (not 255, the ignore value); 4-bit 0..4 stay 0..4 (not 0, 17..)
    classes = min(2 ** bits, 5)
    ids = (np.arange(7 * 9).reshape(7, 9) % classes).astype(np.uint16)
    if bits == 16:
        ids[0, 0] = 255  # the ignore value, in range
    mask = prepare_mask(grey_png(ids, bits), ids.shape, MaskOptions(num_labels=classes))
    stored = Image.open(io.BytesIO(mask.encoded))
    assert (stored.format, stored.mode) == ("PNG", "L")
    assert mask.encoded[24] == 8  # stored as 8 bits a sample, which every decoder reads as is
    assert np.array_equal(decode_ids(mask.encoded), ids)
    assert dict(zip(mask.ids, mask.pixels)) == _counts(ids)


def test_a_low_bit_greyscale_mask_stored_as_it_is_is_named_by_decode_ids():
    # what an output written before the samples were read as ids holds: TensorFlow's
    # decode_png reads its id 1 as 17
    with pytest.raises(ValueError, match=r"4-bit greyscale PNG.*class id 1 reads as 17"):
        decode_ids(grey_png(np.array([[0, 1], [2, 3]]), 4))


def test_a_mask_whose_exif_data_cannot_be_read_is_refused_saying_so():
    # which way up it is displayed (its EXIF orientation) is unknown, as for an image
    data = grey_png(np.zeros((4, 5), np.uint8), 8)
    at = data.index(b"IDAT") - 4
    data = data[:at] + png_chunk(b"eXIf", b"garbage") + data[at:]
    with pytest.raises(MaskRejected, match="mask's EXIF data cannot be read .*which way up"):
        prepare_mask(data, (4, 5), MaskOptions(num_labels=2))
