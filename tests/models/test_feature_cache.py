"""The frozen-backbone feature cache: same embeddings, computed once, never stale."""

import pytest
import torch

from gspdml.config import load_config
from gspdml.errors import ConfigError
from gspdml.models import feature_cache
from gspdml.models.embedder import build_embedder
from gspdml.models.feature_cache import FeatureCache, image_keys
from gspdml.training.trainer import Trainer

MODEL = {
    "backbone": {"name": "small_cnn", "widths": [4, 8], "frozen": True},
    "pooling": {"name": "gmp"},
    "embedding_dim": 16,
}


def test_cached_maps_equal_the_backbone_and_are_computed_once():
    torch.manual_seed(0)
    model = build_embedder(MODEL, in_channels=1).eval()
    cache = FeatureCache()
    images = torch.randn(6, 1, 16, 16)
    direct = model.backbone(images)
    first = cache(model.backbone, images)
    assert cache.misses == 6 and cache.hits == 0 and torch.allclose(first, direct, atol=1e-6)
    mixed = torch.cat([images[[4, 1]], torch.randn(1, 1, 16, 16)])
    again = cache(model.backbone, mixed)  # two seen images, one new
    assert (cache.hits, cache.misses) == (2, 7)
    assert torch.allclose(again, model.backbone(mixed), atol=1e-6)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # another precision is another entry
        half = cache(model.backbone, images[:2])
    assert half.dtype == torch.bfloat16 and cache.misses == 9


def test_computing_maps_prints_progress_and_a_pass_over_cached_maps_does_not(monkeypatch, capsys):
    monkeypatch.setenv("GSPDML_PROGRESS_SECONDS", "0")  # a line at every batch with new maps
    model = build_embedder(MODEL, in_channels=1).eval()
    cache = FeatureCache()
    images = torch.randn(4, 1, 16, 16)
    cache(model.backbone, images[:3])
    cache(model.backbone, images)  # one new map
    cache(model.backbone, images)  # all cached: quiet
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and all(
        line.startswith("gspdml: feature cache (each backbone map is computed once): ")
        for line in lines
    )
    assert " 3 maps, " in lines[0] and " 4 maps, " in lines[1], lines
    FeatureCache(progress=False)(model.backbone, images)
    assert capsys.readouterr().err == ""


def test_changed_weights_are_never_read_from_the_cache():
    model = build_embedder(MODEL, in_channels=1).eval()
    cache = FeatureCache()
    images = torch.randn(3, 1, 16, 16)
    cache(model.backbone, images)
    with torch.no_grad():
        next(model.backbone.parameters()).add_(1.0)  # in place: the tensor's version moves
    changed = cache(model.backbone, images)
    assert cache.misses == 6 and torch.allclose(changed, model.backbone(images), atol=1e-6)
    state = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    other = build_embedder(MODEL, in_channels=1).eval()
    other.backbone.load_state_dict(state)  # same weights in another module: shared entries
    cache(other.backbone, images)
    assert cache.hits == 3


def test_the_budget_bounds_what_is_stored():
    model = build_embedder(MODEL, in_channels=1).eval()
    per_map = model.backbone(torch.zeros(1, 1, 16, 16))[0].numel() * 4
    cache = FeatureCache(max_bytes=2 * per_map)
    images = torch.randn(5, 1, 16, 16)
    out = cache(model.backbone, images)
    assert cache.stored_bytes == 2 * per_map and out.shape[0] == 5
    cache(model.backbone, images)
    assert cache.hits == 2


def test_only_a_frozen_backbone_may_be_cached():
    with pytest.raises(ConfigError, match="model.cache_backbone_features: needs a frozen backbone"):
        load_config(
            "demo-gap", ["model.backbone={name: small_cnn}", "model.cache_backbone_features=true"]
        )
    with pytest.raises(ConfigError, match="needs a frozen backbone"):
        build_embedder(
            {**MODEL, "backbone": {"name": "small_cnn"}, "cache_backbone_features": True},
            in_channels=1,
        )


def test_training_with_the_cache_matches_training_without(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(
        "GSPDML_PROGRESS_SECONDS", "0"
    )  # trainer.progress=false must still silence it
    overrides = [
        "trainer.progress=false",
        "trainer.precision=fp32",
        "data.dataset.images_per_class=6",
        "schedule.max_steps=4",
        "evaluation.every=2",
        "model.backbone={name: small_cnn, widths: [8, 16], weights: smoke-small_cnn-digits, frozen: true}",
    ]
    plain = Trainer.from_config(load_config("demo-gmp", overrides), tmp_path / "plain").fit()
    cached_config = load_config("demo-gmp", [*overrides, "model.cache_backbone_features=true"])
    cached_trainer = Trainer.from_config(cached_config, tmp_path / "cached")
    cached = cached_trainer.fit()
    assert cached_trainer.model.feature_cache.hits > 0
    assert "feature cache" not in capsys.readouterr().err
    assert cached["test"]["map_at_r"] == pytest.approx(plain["test"]["map_at_r"], abs=1e-6)
    assert cached["steps"] == plain["steps"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.uint8])
def test_image_keys_tell_apart_images_one_bit_or_one_swap_apart(dtype, monkeypatch):
    """The keys are computed where the images are (image_keys); equal images share a key, an
    image with one value's lowest bit flipped, or two of its values swapped, gets another."""
    generator = torch.Generator().manual_seed(0)
    images = (torch.rand(3, 3, 8, 8, generator=generator) * 200).to(dtype)
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[images.element_size()]
    flipped = images.clone()
    flipped.view(bits)[0, 1, 2, 3] ^= 1
    swapped = images.clone()
    swapped[0, 0, 0, :2] = images[0, 0, 0, :2].flip(0)
    assert not swapped.equal(images)
    keys = image_keys(torch.cat([images, images[:1], flipped[:1], swapped[:1]]))
    assert len(set(keys[:3])) == 3 and keys[3] == keys[0]
    assert keys[4] != keys[0] and keys[5] != keys[0] and keys[4] != keys[5]
    monkeypatch.setattr(feature_cache, "_KEY_ELEMENTS", 200)  # one image per part
    assert image_keys(images) == keys[:3]


def test_an_image_one_bit_away_is_never_read_from_the_cache():
    model = build_embedder(MODEL, in_channels=1).eval()
    cache = FeatureCache(progress=False)
    images = torch.randn(2, 1, 16, 16, generator=torch.Generator().manual_seed(1))
    cache(model.backbone, images)
    near = images.clone()
    near.view(torch.int32)[1, 0, 5, 5] ^= 1
    out = cache(model.backbone, near)
    assert (cache.hits, cache.misses) == (1, 3)
    torch.testing.assert_close(out, model.backbone(near), rtol=0, atol=1e-6)
