"""Recipe weights shipped in the package: used, after their SHA-256 is checked, for the recipe
that made them (on any device), never for another; re-made by ``scripts/ship_pretrained.py``."""

import hashlib
import json

import pytest
import torch

from gspdml.errors import ConfigError, DataError
from gspdml.models.backbones import build_backbone
from gspdml.training import pretrain
from gspdml.training.pretrain import (
    load_recipe,
    pretrained_state,
    pretrained_weights_file,
    resolve_recipe_weights,
    shipped_manifest,
    shipped_weights_file,
    weights_path,
)
from gspdml.training.shipped import ship_recipe_weights

TINY = {
    "name": "tiny",
    "backbone": {"name": "small_cnn", "widths": [4, 8]},
    "data": {"source": "digits", "tiles_per_class": 1},
    "train": {"epochs": 1, "batch_size": 50, "precision": "fp32"},
}


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def shipped_tiny(tmp_path, monkeypatch):
    """TINY shipped into a private folder that the package reads as its shipped weights."""
    folder = tmp_path / "shipped"
    folder.mkdir()
    entry = ship_recipe_weights(TINY, folder)
    monkeypatch.setattr(pretrain, "SHIPPED_DIR", folder)
    return folder, entry


def _no_training(*args, **kwargs):
    raise AssertionError("a shipped recipe was trained")


def test_the_package_ships_the_demo_recipe_and_it_matches_its_hash(monkeypatch):
    """The demo's backbone comes with the package: resolving it trains nothing (empty cache),
    the file's SHA-256 is the manifest's, and the weights load into the recipe's backbone."""
    monkeypatch.setattr(pretrain, "train_recipe", _no_training)
    entry = shipped_manifest()["resnet20-digits"]
    path = pretrained_weights_file("resnet20-digits", verbose=False, device="cpu")
    assert path == pretrain.SHIPPED_DIR / entry["file"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]
    assert (
        path.stat().st_size < 5 * 2**20
        and not weights_path(load_recipe("resnet20-digits")).exists()
    )
    state, record = pretrained_state("resnet20-digits", verbose=False)
    backbone = build_backbone({"name": "resnet20"}, in_channels=1)
    backbone.load_state_dict(state)
    assert record["val_accuracy"] == entry["val_accuracy"] > 0.9


def test_shipped_weights_serve_their_recipe_on_any_device_and_no_other(shipped_tiny, monkeypatch):
    folder, entry = shipped_tiny
    assert json.loads((folder / "shipped.json").read_text()) == {"tiny": entry}
    monkeypatch.setattr(pretrain, "train_recipe", _no_training)
    recipe = load_recipe(TINY)
    assert shipped_weights_file(recipe) == folder / "tiny.safetensors"
    resolved = resolve_recipe_weights({"backbone": {**TINY["backbone"], "weights": TINY}}, "cuda")
    assert resolved.backbone["weights"] == str(folder / "tiny.safetensors")
    for section, key, value in (("train", "epochs", 2), ("data", "tiles_per_class", 2)):
        changed = load_recipe({**TINY, section: {**TINY[section], key: value}})
        assert shipped_weights_file(changed) is None, (section, key)
    as_auto = load_recipe({**TINY, "train": {**TINY["train"], "precision": "auto"}})
    assert shipped_weights_file(as_auto) is None
    with pytest.raises(AssertionError, match="was trained"):
        pretrained_weights_file({**TINY, "train": {**TINY["train"], "seed": 3}}, verbose=False)


def test_damaged_shipped_weights_are_refused_naming_the_file_and_the_fix(shipped_tiny):
    folder, entry = shipped_tiny
    path = folder / entry["file"]
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))  # checked again: the file changed (no cache to clear)
    with pytest.raises(DataError, match=r"tiny\.safetensors: SHA-256 .*ship_pretrained\.py"):
        shipped_weights_file(load_recipe(TINY))


def test_shipping_needs_a_precision_that_does_not_depend_on_the_machine(tmp_path):
    with pytest.raises(ConfigError, match="pretrain.train.precision"):
        ship_recipe_weights({**TINY, "train": {**TINY["train"], "precision": "auto"}}, tmp_path)


def test_pre_training_honours_the_device_it_is_given(monkeypatch):
    """A cache miss trains on the run's device (``trainer.device``), keyed by it."""
    seen = []

    def fake_train(recipe, *, verbose=False, device="auto", precision=None):
        seen.append(torch.device(device).type)
        return {"w": torch.zeros(1)}, {"val_accuracy": 0.0, "seconds": 0.0}

    monkeypatch.setattr(pretrain, "train_recipe", fake_train)
    path = pretrained_weights_file(TINY, verbose=False, device="cpu")
    assert seen == ["cpu"] and path == weights_path(load_recipe(TINY), "cpu")
