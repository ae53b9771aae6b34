"""Backbone pre-training recipes: deterministic, cached by content hash, loadable by name in a
config, and the frozen regime trains nothing in the backbone."""

import json

import pytest
import torch
import yaml
from safetensors.torch import save_file

from gspdml.cli import main
from gspdml.config import load_config
from gspdml.errors import ConfigError, DataError
from gspdml.models import build_embedder
from gspdml.models.embedder import model_section
from gspdml.models.pretrained import WeightsNotFoundError
from gspdml.settings.sections import LrMultipliers
from gspdml.training.optim import parameter_groups
from gspdml.training.parts import build_run
from gspdml.training.pretrain import (
    load_recipe,
    pretrained_state,
    recipe_key,
    recipe_names,
    resolve_recipe_weights,
    train_recipe,
    weights_path,
)

TINY = {
    "backbone": {"name": "small_cnn", "widths": [4, 8]},
    "data": {"source": "digits", "tiles_per_class": 1},
    "train": {"epochs": 1, "batch_size": 50, "precision": "fp32"},
}


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def recipe_file(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


def test_same_recipe_same_weights_and_a_cache_hit(recipe_file):
    first = train_recipe(load_recipe(recipe_file))[0]
    again = train_recipe(load_recipe(recipe_file))[0]
    assert first.keys() == again.keys() and all(torch.equal(first[k], again[k]) for k in first)
    stored, record = pretrained_state(recipe_file, verbose=False)
    path = weights_path(load_recipe(recipe_file))
    assert path.is_file() and path.name == f"tiny-{record['key']}.safetensors"
    assert all(torch.equal(first[k], stored[k]) for k in first)
    stamp = path.stat().st_mtime_ns
    cached, record_again = pretrained_state(recipe_file, verbose=False)
    assert path.stat().st_mtime_ns == stamp and record_again == record
    assert all(torch.equal(stored[k], cached[k]) for k in stored)


def test_a_changed_recipe_gets_a_new_key_and_other_weights():
    base = load_recipe(TINY)
    for section, key, value in (
        ("train", "lr", 1e-2),
        ("train", "seed", 1),
        ("data", "split_seed", 1),
        ("backbone", "widths", [4, 4]),
    ):
        changed = load_recipe({**TINY, section: {**TINY[section], key: value}})
        assert recipe_key(changed) != recipe_key(base), (section, key)
    assert recipe_key(load_recipe({**TINY, "description": "same weights"})) == recipe_key(base)
    other = train_recipe(load_recipe({**TINY, "train": {**TINY["train"], "seed": 1}}))[0]
    first = train_recipe(base)[0]
    assert not torch.equal(other["features.0.0.weight"], first["features.0.0.weight"])


def test_a_config_loads_the_weights_by_recipe_and_the_frozen_regime_trains_nothing(recipe_file):
    state, _ = pretrained_state(recipe_file, verbose=False)
    spec = {"name": "small_cnn", "widths": [4, 8], "weights": str(recipe_file)}
    config = load_config(
        "demo-gap", [f"model.backbone={json.dumps(spec)}", "model.cache_backbone_features=false"]
    )
    model = build_embedder(resolve_recipe_weights(config["model"]), in_channels=1)
    assert all(torch.equal(model.backbone.state_dict()[k], state[k]) for k in state)
    assert any(p.requires_grad for p in model.backbone.parameters())
    frozen = build_embedder(
        resolve_recipe_weights({**config["model"], "backbone": {**spec, "frozen": True}}),
        in_channels=1,
    )
    assert all(torch.equal(frozen.backbone.state_dict()[k], state[k]) for k in state)
    assert not any(p.requires_grad for p in frozen.backbone.parameters())
    frozen.train()
    assert not any(
        m.training for m in frozen.backbone.modules() if isinstance(m, torch.nn.BatchNorm2d)
    )
    names = [g["name"] for g in parameter_groups(frozen, torch.nn.Module(), LrMultipliers(), 1e-3)]
    assert "backbone" not in names and "projection" in names


def test_a_run_starts_alike_whether_its_recipe_is_cached_or_trained_now(recipe_file):
    """Pre-training on a cache miss draws from the global generators; the run seeds them after
    it, so its initial weights do not depend on the state of the cache."""
    spec = {"name": "small_cnn", "widths": [4, 8], "weights": str(recipe_file)}
    config = load_config(
        "demo-gap",
        [
            f"model.backbone={json.dumps(spec)}",
            "model.cache_backbone_features=false",
            "data.dataset.images_per_class=4",
        ],
    )
    cold = build_run(config)  # trains the recipe now
    assert weights_path(load_recipe(recipe_file)).is_file()
    warm = build_run(config)  # loads it from the cache
    for part in ("model", "loss"):
        cold_state, warm_state = (getattr(run, part).state_dict() for run in (cold, warm))
        assert cold_state.keys() == warm_state.keys()
        assert all(torch.equal(cold_state[k], warm_state[k]) for k in cold_state), part


def test_a_cache_miss_trains_the_recipe_and_models_never_train(recipe_file):
    """Resolving a recipe trains it on a cache miss and names the cached file; the model layer
    only reads weight files and says how a recipe is resolved."""
    model = {
        "backbone": {"name": "small_cnn", "widths": [4, 8], "weights": str(recipe_file)},
        "pooling": {"name": "gap"},
    }
    path = weights_path(load_recipe(recipe_file))
    assert not path.is_file()
    with pytest.raises(WeightsNotFoundError, match="resolve_recipe_weights"):
        build_embedder(model, in_channels=1)
    assert not path.is_file()
    resolved = resolve_recipe_weights(model)
    assert (
        path.is_file()
        and resolved.backbone["weights"] == str(path)
        and model["backbone"]["weights"] == str(recipe_file)
    )
    # returned as given, in its typed form
    assert resolve_recipe_weights({"backbone": "small_cnn"}) == model_section(
        {"backbone": "small_cnn"}
    )
    state, _ = pretrained_state(recipe_file, verbose=False)
    built = build_embedder(resolved, in_channels=1)
    assert all(torch.equal(built.backbone.state_dict()[k], state[k]) for k in state)


def test_weights_that_do_not_fit_and_unknown_recipes_are_named(recipe_file):
    with pytest.raises(DataError, match="pre-training recipe"):
        build_embedder(
            resolve_recipe_weights(
                {
                    "backbone": {"name": "small_cnn", "weights": str(recipe_file)},
                    "pooling": {"name": "gap"},
                }
            ),
            in_channels=1,
        )
    with pytest.raises(ConfigError, match="no pre-training recipe 'nope'.*resnet20-digits"):
        load_recipe("nope")
    with pytest.raises(ConfigError, match="pretrain.train"):
        load_recipe({**TINY, "train": {"epochs": 1, "learning_rate": 1}})
    broken = recipe_file.parent / "broken.yaml"
    broken.write_text("backbone: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_recipe(broken)
    broken.write_text("- a list")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_recipe(broken)
    assert {"resnet20-digits", "small_cnn-digits"} <= set(recipe_names())


@pytest.mark.parametrize(
    "section, values, field",
    [
        ("train", {"lr": "fast"}, r"pretrain\.train\.lr: expected a number"),
        ("train", {"epochs": 0}, r"pretrain\.train\.epochs: expected an integer >= 1"),
        ("train", {"precision": "fp8"}, r"pretrain\.train\.precision: unknown precision 'fp8'"),
        ("data", {"source": "mnist"}, r"pretrain\.data\.source: unknown source 'mnist'"),
        ("data", {"tile_size": "16"}, r"pretrain\.data\.tile_size: expected an integer"),
        ("data", {"source": "cifar100"}, r"pretrain\.data\.tiles_per_class: unknown key"),
    ],
)
def test_a_recipe_is_checked_field_by_field_when_it_is_read(section, values, field):
    """A recipe is parsed once into typed sections: a wrong value is refused when the recipe is
    read, naming its field, instead of failing (or training with it) later."""
    with pytest.raises(ConfigError, match=field):
        load_recipe({**TINY, section: {**TINY[section], **values}})


def test_the_typed_recipe_reads_as_its_sections():
    recipe = load_recipe(TINY)
    assert recipe.train.precision == "fp32" and recipe.train.epochs == 1
    assert recipe.train.lr == 2.0e-3 and recipe.data.tiles_per_class == 1
    assert recipe.on_root("/data").data.root == "/data" and recipe.data.root is None


def test_cli_pretrain_prints_the_record_and_reports_bad_recipes(recipe_file, capsys, monkeypatch):
    monkeypatch.setenv("GSPDML_PROGRESS_SECONDS", "0")  # a progress line at every step
    assert main(["pretrain", str(recipe_file)]) == 0
    trained = capsys.readouterr()
    assert trained.out.startswith("pre-training tiny")
    progress = [
        line for line in trained.err.splitlines() if line.startswith("gspdml: pre-training")
    ]
    assert [line.split(": ")[2].split(",")[0] for line in progress] == [
        "1/2 steps (50%)",  # 100 tile classes x 1 tile, batches of 50, one epoch
        "2/2 steps (100%)",
        "2/2 steps (100%)",
    ], trained.err
    assert progress[0].endswith("epoch 1/1") and "done in" in progress[-1]
    assert main(["pretrain", str(recipe_file)]) == 0  # cached: only the record is printed
    printed = json.loads(capsys.readouterr().out)
    assert (
        printed["classes"] == 100
        and printed["path"].endswith(".safetensors")
        and 0 <= printed["val_accuracy"] <= 1
    )
    assert main(["pretrain", "no-such-recipe"]) == 2
    assert "gspdml: error" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["empty", "truncated", "no record"])
def test_a_damaged_cached_recipe_is_trained_again_with_a_warning(recipe_file, damage):
    """The record of a cached pre-training was read unchecked: an empty or truncated file (a
    kill, a full disk) raised a raw safetensors or KeyError on every run (issue 39, sibling of
    #6). It is trained again and replaced, with a warning naming it."""
    stored, record = pretrained_state(recipe_file, verbose=False)
    stored = {k: v.clone() for k, v in stored.items()}  # not a view of the file
    path = weights_path(load_recipe(recipe_file))
    whole, damaged = path.read_bytes(), path.with_name("damaged")
    if damage == "no record":
        save_file({"w": torch.zeros(1)}, str(damaged), metadata={"other": "1"})
    else:
        damaged.write_bytes({"empty": b"", "truncated": whole[: len(whole) // 2]}[damage])
    damaged.replace(path)
    with pytest.warns(RuntimeWarning, match=f"{path}: damaged .*it is trained again"):
        again, record_again = pretrained_state(recipe_file, verbose=False)
    assert record_again["key"] == record["key"] and again.keys() == stored.keys()
    assert all(torch.equal(stored[k], again[k]) for k in stored)
    assert path.read_bytes() != b"" and len(path.read_bytes()) == len(whole)
