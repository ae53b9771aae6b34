import math

import numpy as np
import pytest
import torch
from PIL import Image

from gspdml.data.recipes import NORMALIZATIONS, RECIPES, ImageRecipe, check_recipe, image_transform
from gspdml.data.transforms import (
    CenterCrop,
    Normalize,
    RandomErasing,
    RandomResizedCrop,
    Resize,
    ToTensor,
)
from gspdml.errors import ConfigError


def coordinates(width, height):
    """An image whose red channel is x and green channel is y (sizes <= 256)."""
    x, y = np.meshgrid(np.arange(width), np.arange(height))
    return Image.fromarray(np.stack([x, y, np.zeros_like(x)], -1).astype(np.uint8), "RGB")


def test_resize_shorter_side_and_center_crop():
    assert Resize(256)(Image.new("RGB", (300, 200))).size == (384, 256)
    assert Resize(256)(Image.new("RGB", (200, 301))).size == (256, 385)
    out = np.asarray(CenterCrop(4)(coordinates(11, 8)))
    # offsets round((11-4)/2) = 4 (round half to even of 3.5) and (8-4)/2 = 2
    assert out[0, 0, 0] == round(3.5) and out[0, 0, 1] == 2 and out.shape == (4, 4, 3)
    small = np.asarray(CenterCrop(6)(coordinates(4, 4)))
    assert small.shape == (6, 6, 3) and small[0].max() == 0  # padded with black


def test_random_resized_crop_respects_scale_ratio_and_box():
    crop = RandomResizedCrop(
        50, scale=(0.16, 1.0), ratio=(3 / 4, 4 / 3), interpolation=Image.NEAREST
    )
    g = torch.Generator().manual_seed(0)
    width, height = 200, 150
    image = coordinates(width, height)
    areas = []
    for _ in range(200):
        state = g.get_state()
        top, left, h, w = crop.box(width, height, g)
        assert top >= 0 and top + h <= height and left >= 0 and left + w <= width
        fraction = h * w / (width * height)
        assert 0.16 * 0.97 <= fraction <= 1.0
        assert 3 / 4 * 0.95 <= w / h <= 4 / 3 * 1.05
        areas.append(fraction)
        g.set_state(state)
        out = np.asarray(crop(image, g)).astype(int)
        # nearest-neighbour resize of the box: the corners show the box's first and last pixels
        assert abs(out[0, 0, 0] - left) <= math.ceil(w / 50) and abs(
            out[0, 0, 1] - top
        ) <= math.ceil(h / 50)
        assert abs(out[-1, -1, 0] - (left + w - 1)) <= math.ceil(w / 50)
        assert abs(out[-1, -1, 1] - (top + h - 1)) <= math.ceil(h / 50)
    assert min(areas) < 0.3 and max(areas) > 0.8  # the whole range is used


def test_random_resized_crop_falls_back_to_a_centre_crop():
    crop = RandomResizedCrop(8, scale=(0.99, 1.0), ratio=(3 / 4, 4 / 3))
    # a 10:1 image never fits a 4:3 box of 99 % of its area: centre crop with the ratio clamped
    top, left, h, w = crop.box(1000, 100, torch.Generator().manual_seed(0))
    assert (h, w) == (100, 133) and (top, left) == (0, (1000 - 133) // 2)


def test_normalizations_by_hand():
    red = ToTensor()(Image.new("RGB", (2, 2), (255, 0, 0)))
    bgr = Normalize(**NORMALIZATIONS["bn_inception"])(red)
    assert bgr[:, 0, 0].tolist() == [0 - 104, 0 - 117, 255 - 128]
    rgb = Normalize(**NORMALIZATIONS["imagenet"])(red)
    expected = [(1 - 0.485) / 0.229, (0 - 0.456) / 0.224, (0 - 0.406) / 0.225]
    assert torch.allclose(rgb[:, 1, 1], torch.tensor(expected))


@pytest.mark.parametrize(
    "recipe, size", [("mlrc", 227), ("proxynca", 256), ("libc", 227), ("center", 227)]
)
def test_recipes_give_their_sizes_and_are_seeded(recipe, size):
    image = coordinates(256, 200)
    train, evaluation = image_transform(recipe, True), image_transform(recipe, False)
    a = train(image, torch.Generator().manual_seed(3))
    assert a.shape == (3, size, size) and a.dtype == torch.float32
    assert torch.equal(a, train(image, torch.Generator().manual_seed(3)))
    e = evaluation(image, torch.Generator().manual_seed(1))
    assert torch.equal(e, evaluation(image, torch.Generator().manual_seed(2)))  # no randomness
    draws = {train(image, torch.Generator().manual_seed(s)).sum().item() for s in range(6)}
    assert (len(draws) > 1) == (recipe != "center")


def test_flip_probability_and_overrides():
    image = coordinates(40, 30)
    tf = image_transform("mlrc", True, normalization="none", resize=32, crop=24)
    flips = 0
    for seed in range(200):
        out = tf(image, torch.Generator().manual_seed(seed))
        assert out.shape == (3, 24, 24)
        flips += bool(out[0, 0, 0] > out[0, 0, -1])  # x decreases from left to right
    assert 70 < flips < 130
    with pytest.raises(ConfigError, match="transform"):
        image_transform("nope")
    with pytest.raises(ConfigError, match="normalization"):
        image_transform("mlrc", normalization="caffe")


def erased_box(before, after):
    """``(top, left, height, width)`` of the changed pixels, checked to form one rectangle."""
    changed = (before != after).any(dim=0)
    rows, cols = changed.any(dim=1).nonzero()[:, 0], changed.any(dim=0).nonzero()[:, 0]
    top, left = int(rows.min()), int(cols.min())
    h, w = int(rows.max()) - top + 1, int(cols.max()) - left + 1
    assert int(changed.sum()) == h * w  # a full rectangle
    return top, left, h, w


def test_random_erasing_sets_one_rectangle_of_the_drawn_area_and_shape():
    image = torch.rand(3, 60, 40, generator=torch.Generator().manual_seed(0)) + 5  # never 0..1
    erase = RandomErasing(p=1.0, area=(0.02, 0.4), min_aspect=0.3, value=(0.1, 0.2, 0.3))
    fitted = 0
    for seed in range(50):
        out = erase(image, torch.Generator().manual_seed(seed))
        if torch.equal(out, image):  # no draw fitted in 100 attempts (rare)
            continue
        fitted += 1
        top, left, h, w = erased_box(image, out)
        box = out[:, top : top + h, left : left + w]
        assert torch.equal(box, torch.tensor([0.1, 0.2, 0.3])[:, None, None].expand_as(box))
        # the rounded sqrt(S r) x sqrt(S / r): area and aspect within the drawn ranges
        area = h * w / (60 * 40)
        assert 0.02 * 0.8 <= area <= 0.4 * 1.2, (h, w)
        assert 0.3 * 0.8 <= h / w <= (1 / 0.3) * 1.25, (h, w)
        assert h < 60 and w < 40
    assert fitted >= 45
    assert torch.all(image >= 5)  # the input is not modified in place


def test_random_erasing_probability_and_seeding():
    image = torch.full((3, 32, 32), 7.0)
    erase = RandomErasing(p=0.5)
    erased = sum(
        not torch.equal(erase(image, torch.Generator().manual_seed(s)), image) for s in range(400)
    )
    assert 150 < erased < 250  # Binomial(400, 0.5): 200 +- 10
    a = erase(image, torch.Generator().manual_seed(11))
    assert torch.equal(a, erase(image, torch.Generator().manual_seed(11)))
    assert torch.equal(RandomErasing(p=0.0)(image, torch.Generator().manual_seed(1)), image)
    with pytest.raises(ValueError, match="min_aspect"):
        RandomErasing(min_aspect=2.0)


def test_libc_recipe_erases_after_normalising():
    train = image_transform("libc", True, normalization="none")
    assert isinstance(train.transforms[-1], RandomErasing)
    assert isinstance(train.transforms[-2], Normalize)
    assert not any(isinstance(t, Resize) for t in train.transforms)  # crops the raw image


def test_an_image_recipe_is_read_from_a_dataset_spec():
    """The recipe options of a ``data.dataset`` spec, typed; the reader's other options are not
    its; a spec without ``transform`` (arrays) has none; ``size`` is the crop, else the
    recipe's."""
    spec = {"name": "cub", "root": "/data", "transform": "proxynca", "resize": 73}
    recipe = ImageRecipe.of_spec(spec)
    assert recipe == ImageRecipe("proxynca", "imagenet", 73, None)
    assert recipe.size == RECIPES["proxynca"][1] == 256
    assert ImageRecipe.of_spec({**spec, "crop": 64}).size == 64
    assert ImageRecipe.of_spec({"name": "collage_digits", "crop": 5}) is None
    check_recipe({"name": "collage_digits", "crop": [1, 2]})  # not an image recipe: not checked
    with pytest.raises(ConfigError, match=r"data.dataset.normalization.*unknown normalization"):
        check_recipe({**spec, "normalization": "imagenet21k"})
