"""Corrupt, empty and huge (decompression-bomb) images in an image-folder dataset.

Expected: ``on_error: raise`` -> a DataError naming the file (at construction with
``check: header``, at first read with ``check: exists``); ``on_error: skip`` -> the file is
dropped or replaced by another image of its class, with a warning, and training runs.
"""

import pytest
from PIL import Image

from gspdml.config import load_config
from gspdml.data import build_data
from gspdml.errors import DataError
from gspdml.training import train
from tests.helpers.images import folder_config, image_folder, png_header


def _plant(root, kind):
    """Replace the second image of training class 'b' by a faulty file; returns its path."""
    target = root / "train" / "b" / "img01.png"
    if kind == "corrupt":
        target.write_bytes(target.read_bytes()[:40])  # truncated in the middle of the data
    elif kind == "garbage":
        target.write_bytes(b"this is not an image at all" * 10)
    elif kind == "empty":
        target.write_bytes(b"")
    elif kind == "huge":
        png_header(target, 20000, 20000)  # 4e8 pixels > 2 x PIL's MAX_IMAGE_PIXELS
    return target


@pytest.fixture
def root(tmp_path):
    return image_folder(tmp_path / "images", train={"a": 3, "b": 3, "c": 3}, test={"d": 2, "e": 2})


def _dataset(root, **options):
    spec = {
        "name": "image_folder",
        "root": str(root),
        "val_fraction": 0.0,
        "resize": 18,
        "crop": 16,
        **options,
    }
    return build_data(spec, seed=0).train


@pytest.mark.parametrize("kind", ["garbage", "empty", "huge"])
def test_header_check_names_the_file(root, kind):
    bad = _plant(root, kind)
    with pytest.raises(DataError, match=str(bad)):
        _dataset(root, check="header")


@pytest.mark.parametrize("kind", ["corrupt", "garbage", "empty", "huge"])
def test_reading_names_the_file(root, kind):
    bad = _plant(root, kind)
    dataset = _dataset(root, check="exists")
    index = dataset.paths.index(str(bad))
    with pytest.raises(DataError, match=f"{bad}: cannot decode image"):
        dataset[index]


def test_decompression_bomb_guard_between_one_and_two_times_the_limit(root):
    """PIL only warns between MAX_IMAGE_PIXELS and twice that; gspdml refuses those too."""
    side = int((Image.MAX_IMAGE_PIXELS * 1.5) ** 0.5)
    bad = png_header(root / "train" / "b" / "img01.png", side, side)
    with pytest.raises(DataError, match=f"{bad}.*DecompressionBomb"):
        _dataset(root, check="header")
    dataset = _dataset(root, check="exists")
    with pytest.raises(DataError, match=f"{bad}.*DecompressionBomb"):
        dataset[dataset.paths.index(str(bad))]


@pytest.mark.parametrize("kind", ["garbage", "huge"])
def test_skip_drops_bad_files_at_construction(root, kind):
    bad = _plant(root, kind)
    with pytest.warns(UserWarning, match="skipped 1 unusable image"):
        dataset = _dataset(root, check="header", on_error="skip")
    assert [path for path, _ in dataset.skipped] == [str(bad)]
    assert str(bad) not in dataset.paths and len(dataset) == 8


def test_skip_replaces_a_file_that_fails_to_decode_and_training_runs(root, tmp_path):
    bad = _plant(root, "corrupt")
    dataset = _dataset(root, check="exists", on_error="skip")
    index = dataset.paths.index(str(bad))
    with pytest.warns(UserWarning, match=f"{bad}.*instead"):
        image, label = dataset[index]
    replacement, _ = dataset[index + 1]  # the next image of class b
    assert label == dataset.labels[index] and image.shape == replacement.shape

    config = load_config(folder_config(root, tmp_path / "runs", check="exists", on_error="skip"))
    with pytest.warns(UserWarning, match=str(bad)):
        results = train(config)
    assert results["steps"] == 2 and 0.0 <= results["test"]["precision_at_1"] <= 1.0


def test_training_with_raise_stops_with_the_file_name(root, tmp_path):
    bad = _plant(root, "empty")
    config = load_config(folder_config(root, tmp_path / "runs", check="header"))
    with pytest.raises(DataError, match=str(bad)):
        train(config)
