"""The last two steps of every image transform, :class:`ToTensor` and :class:`Normalize`, give
exactly the values of their formulas, ``x = pixels / 255`` channels first and
``(x * value_range - mean) / std`` (BGR first for the Caffe convention), computed here the
plain way: the same operations in the same order, so equal to the last bit. They make one
contiguous ``[C, H, W]`` copy and one new tensor (``benchmarks/data_pipeline.py``: 72% -> 96%
of a plain PIL loader for the ``center`` recipe on CUB-sized photos), never writing into the
tensor they are given; and decoding a user's image never turns the user's object."""

import numpy as np
import pytest
import torch
from PIL import Image

from gspdml.data.images import decode_image, load_image
from gspdml.data.recipes import NORMALIZATIONS
from gspdml.data.transforms import Normalize, ToTensor


def _pixels(mode, seed=0):
    rng = np.random.default_rng(seed)
    shape = (37, 53, 3) if mode == "RGB" else (37, 53)
    return Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode)


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_to_tensor_is_the_pixels_over_255_channels_first_and_contiguous(mode):
    image = _pixels(mode)
    array = np.asarray(image, dtype=np.uint8).reshape(37, 53, -1)
    expected = torch.from_numpy(array.copy()).permute(2, 0, 1).float() / 255.0
    got = ToTensor()(image)
    assert got.is_contiguous() and got.dtype == torch.float32
    assert torch.equal(got, expected)


@pytest.mark.parametrize("name", sorted(NORMALIZATIONS))
def test_normalize_is_its_formula_to_the_last_bit_and_leaves_its_input(name):
    spec = NORMALIZATIONS[name]
    x = ToTensor()(_pixels("RGB", seed=1))
    before = x.clone()
    mean = torch.tensor(spec["mean"], dtype=torch.float32)[:, None, None]
    std = torch.tensor(spec["std"], dtype=torch.float32)[:, None, None]
    source = x.flip(0) if spec.get("bgr", False) else x
    expected = (source * float(spec.get("value_range", 1.0)) - mean) / std
    assert torch.equal(Normalize(**spec)(x), expected)
    assert torch.equal(x, before)  # the input is not written into


def test_decoding_a_users_image_leaves_it_unturned(tmp_path):
    pixels = np.zeros((10, 20, 3), dtype=np.uint8)
    image = Image.fromarray(pixels)
    exif = image.getexif()
    exif[0x0112] = 6  # "rotate 90° clockwise to display"
    image.save(tmp_path / "e.png", exif=exif.tobytes())
    users = Image.open(tmp_path / "e.png")
    assert decode_image(users).size == (10, 20)
    assert users.size == (20, 10) and users.getexif().get(0x0112) == 6
    assert load_image(tmp_path / "e.png").size == (10, 20)  # its own copy, turned in place
