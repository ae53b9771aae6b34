"""Pre-training on CIFAR-100 files (generated in the official layout): the recipe's examples,
the augmentation of He et al. 2016 §4.2 against a per-image reference, and training through the
CLI's --data-root."""

import json

import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import load_file

from gspdml.cli import main
from gspdml.errors import ConfigError
from gspdml.models.backbones import build_backbone
from gspdml.training.pretrain import load_recipe, pad_crop_flip, recipe_examples
from tests.helpers.cifar_files import write_cifar100


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return str(write_cifar100(tmp_path_factory.mktemp("c100"), per_class=2, test_per_class=1))


def tiny(root):
    return {
        "name": "tiny-cifar",
        "backbone": {"name": "small_cnn", "widths": [4, 8]},
        "data": {"source": "cifar100", "root": root},
        "train": {"epochs": 1, "batch_size": 100, "precision": "fp32"},
    }


def test_pad_crop_flip_equals_a_per_image_reference():
    images = np.random.default_rng(0).integers(0, 256, (40, 3, 6, 5), dtype=np.uint8)
    got = pad_crop_flip(images, np.random.default_rng(7), pad=2)
    rng = np.random.default_rng(7)  # the same draws, in the documented order
    dy, dx = rng.integers(0, 5, size=(2, 40))
    flip = rng.random(40) < 0.5
    for i in range(40):
        canvas = np.zeros((3, 10, 9), dtype=np.uint8)
        canvas[:, 2:8, 2:7] = images[i]
        crop = canvas[:, dy[i] : dy[i] + 6, dx[i] : dx[i] + 5]
        np.testing.assert_array_equal(got[i], crop[:, :, ::-1] if flip[i] else crop)
    assert flip.any() and not flip.all() and (dy != 2).any()


def test_cifar_examples_are_the_official_files_and_training_augments_them(root):
    examples = recipe_examples(load_recipe(tiny(root)))
    train, val = examples("train", 0), examples("val", 0)
    assert train.images.shape == (200, 3, 32, 32) and val.images.shape == (100, 3, 32, 32)
    assert sorted(np.unique(train.labels)) == list(range(100))
    plain = recipe_examples(
        load_recipe({**tiny(root), "data": {**tiny(root)["data"], "augment": False}})
    )
    assert not np.array_equal(train.images, plain("train", 0).images)
    np.testing.assert_array_equal(train.labels, plain("train", 0).labels)


def test_the_shipped_recipe_needs_a_data_root_and_the_cli_gives_it(root, tmp_path, capsys):
    with pytest.raises(ConfigError, match="pretrain.data.root.*--data-root"):
        recipe_examples(load_recipe("resnet20-cifar100"))
    recipe = tiny(None)
    path = tmp_path / "tiny-cifar.yaml"
    path.write_text(yaml.safe_dump(recipe))
    assert main(["pretrain", str(path), "--data-root", root]) == 0
    out = capsys.readouterr().out
    record = json.loads(out[out.index("{\n") :])
    assert record["classes"] == 100 and 0.0 <= record["val_accuracy"] <= 1.0
    backbone = build_backbone({"name": "small_cnn", "widths": [4, 8]}, in_channels=3)
    backbone.load_state_dict(load_file(record["path"]))  # a three-channel backbone
    assert backbone(torch.zeros(1, 3, 32, 32)).shape[1] == 8
