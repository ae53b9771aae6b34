"""Reduced-size JPEG decoding for a transform that first resizes the shorter side
(:func:`gspdml.data.images.load_image` with ``shorter_side``): the same image size as the full
decode's resize, pixels within the stated tolerance on real photographs, EXIF orientation kept,
and other images decoded exactly as before."""

import numpy as np
import pytest
from PIL import Image
from sklearn.datasets import load_sample_image

from gspdml.data.files import ImageFileDataset
from gspdml.data.images import load_image
from gspdml.data.recipes import image_transform
from gspdml.data.transforms import Resize


def _photo(tmp_path, name, factor, orientation=None):
    """A real photograph (scikit-learn's samples, 640 x 427) enlarged ``factor`` times, as JPEG."""
    pixels = load_sample_image(name)
    image = Image.fromarray(pixels).resize(
        (pixels.shape[1] * factor, pixels.shape[0] * factor), Image.Resampling.LANCZOS
    )
    path = tmp_path / f"{name}-{factor}.jpg"
    exif = Image.Exif()
    if orientation is not None:
        exif[0x0112] = orientation
    image.save(path, "JPEG", quality=90, exif=exif)
    return path


@pytest.mark.parametrize("name", ["china.jpg", "flower.jpg"])
@pytest.mark.parametrize("factor", [2, 3, 4])
def test_a_large_jpeg_decodes_at_reduced_size_within_the_tolerance(tmp_path, name, factor):
    path = _photo(tmp_path, name, factor)
    full = Resize(256)(load_image(path))
    reduced = load_image(path, shorter_side=256)
    assert reduced.size == full.size and Resize(256)(reduced) is reduced
    diff = np.abs(np.asarray(full, dtype=float) - np.asarray(reduced, dtype=float))
    assert 0 < diff.mean() <= 1.5 and np.percentile(diff, 99) <= 10.0


def test_the_exif_orientation_is_applied_before_the_size_is_matched(tmp_path):
    path = _photo(tmp_path, "china.jpg", 3, orientation=6)  # rotated by 90 degrees
    full = Resize(256)(load_image(path))
    reduced = load_image(path, shorter_side=256)
    assert full.size == reduced.size and full.size[0] == 256 < full.size[1]


def test_small_jpegs_and_other_formats_decode_as_before(tmp_path):
    small = _photo(tmp_path, "china.jpg", 1)  # 427 px: less than twice 256, no reduction
    png = tmp_path / "big.png"
    Image.open(_photo(tmp_path, "flower.jpg", 3)).save(png)
    for path in (small, png):
        assert np.array_equal(np.asarray(load_image(path, 256)), np.asarray(load_image(path)))


def test_datasets_decode_for_the_recipes_first_resize(tmp_path):
    path = str(_photo(tmp_path, "china.jpg", 3))
    train = image_transform("mlrc", train=True)
    evaluation = image_transform("mlrc", train=False)
    libc = image_transform("libc", train=True)  # crops the original first: no reduced decode
    assert (train.decode_shorter_side, evaluation.decode_shorter_side) == (256, 256)
    assert getattr(libc, "decode_shorter_side", None) is None
    dataset = ImageFileDataset([path], np.array([0]), evaluation)
    image, _ = dataset[0]
    assert image.shape == (3, 227, 227)
    assert np.array_equal(image.numpy(), evaluation(load_image(path, 256)).numpy())
