"""A received run or bundle is data: loading its weights never trains the pre-training recipe its
metadata names (nor writes where that recipe's name points). Before, ``load_run`` and
``from_pretrained`` trained the recipe on a cache miss, and an absolute recipe name became the
output path."""

import torch

from gspdml.config import dump_config, load_config
from gspdml.models import build_embedder
from gspdml.training import load_run
from gspdml.training.run_dir import save_weights


def test_loading_a_run_naming_an_uncached_recipe_trains_nothing(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("GSPDML_CACHE", str(cache))
    config = load_config(
        {"model": {"backbone": {"name": "small_cnn", "widths": [8, 16]}, "embedding_dim": 8}}
    )
    model = build_embedder(config.model.to_dict(), in_channels=1)
    run = tmp_path / "received"
    run.mkdir()
    (run / "config.yaml").write_text(dump_config(config))
    # a crafted run: its weights' metadata names a recipe at an absolute path outside the cache
    outside = tmp_path / "outside" / "evil"
    crafted = config.model.to_dict()
    crafted["backbone"] = {**crafted["backbone"], "weights": str(outside)}
    from gspdml.training.checkpoint import save_state

    save_state(run / "model.safetensors", model.state_dict(), {"in_channels": 1, "model": crafted})
    _, loaded = load_run(run)
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name
    assert not cache.exists() or not any(cache.rglob("*.safetensors"))
    assert not outside.parent.exists()


def test_a_run_loads_with_its_own_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path / "cache"))
    config = load_config({"model": {"backbone": {"name": "small_cnn"}, "embedding_dim": 8}})
    model = build_embedder(config.model.to_dict(), in_channels=1)
    save_weights(tmp_path / "model.safetensors", model, 1, config)
    (tmp_path / "config.yaml").write_text(dump_config(config))
    _, loaded = load_run(tmp_path)
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in model.state_dict().items())
