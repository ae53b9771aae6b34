"""Where the projection sits relative to pooling, checked on a fixed backbone feature map.

``global`` pools the backbone map and then projects (the papers' baselines); ``local`` projects
every location with a 1x1 convolution and then pools (GSP). Each reference below is written out
with plain tensor operations, independently of the pooling classes.
"""

import pytest
import torch

from gspdml.config import preset_names
from gspdml.models import build_embedder
from gspdml.models.embedder import head_position
from gspdml.pooling import POOLINGS
from tests.presets.loaded import preset

BACKBONE = {"name": "small_cnn", "widths": [8, 16, 16]}


def feature_map(dtype=torch.float32):
    return torch.randn(3, 16, 5, 4, generator=torch.Generator().manual_seed(0), dtype=dtype)


def embedders(pooling, **model):
    """A pool-then-project and a project-then-pool embedder sharing one weight matrix."""
    spec = {
        "backbone": BACKBONE,
        "embedding_dim": 6,
        "pooling": pooling,
        "normalize": False,
        **model,
    }
    torch.manual_seed(0)
    first_pool = build_embedder({**spec, "head": "global"}, in_channels=1)
    first_project = build_embedder({**spec, "head": "local"}, in_channels=1)
    with torch.no_grad():
        first_project.head.weight.copy_(first_pool.projection.weight[:, :, None, None])
        first_project.head.bias.copy_(first_pool.projection.bias)
    return first_pool, first_project


def test_gap_is_the_same_operator_in_both_orders():
    pool_then_project, project_then_pool = embedders("gap")
    maps = feature_map()
    expected = pool_then_project.projection(maps.mean(dim=(2, 3)))
    torch.testing.assert_close(pool_then_project.embed_features(maps).pooled, expected)
    torch.testing.assert_close(project_then_pool.embed_features(maps).pooled, expected)


@pytest.mark.parametrize("pooling", ["gmp", "gap_gmp", "gem", "lse", {"name": "kmax", "k": 3}])
def test_max_like_and_power_poolings_differ_between_the_orders(pooling):
    pool_then_project, project_then_pool = embedders(pooling)
    maps = feature_map().abs()
    a = pool_then_project.embed_features(maps).pooled
    b = project_then_pool.embed_features(maps).pooled
    assert (a - b).abs().max() > 1e-2


def test_gmp_pool_then_project_is_the_projection_of_the_channel_maxima():
    pool_then_project, project_then_pool = embedders("gmp")
    maps = feature_map()
    weight, bias = pool_then_project.projection.weight, pool_then_project.projection.bias
    torch.testing.assert_close(
        pool_then_project.embed_features(maps).pooled, maps.amax(dim=(2, 3)) @ weight.T + bias
    )
    local = torch.einsum("bchw,dc->bdhw", maps, weight) + bias[None, :, None, None]
    torch.testing.assert_close(
        project_then_pool.embed_features(maps).pooled, local.amax(dim=(2, 3))
    )


@pytest.mark.parametrize("name", sorted(POOLINGS.names()))
def test_every_pooling_states_its_placement_and_only_gsp_projects_first(name):
    expected = "local" if name == "gsp" else "global"
    assert head_position({"pooling": name}) == expected
    assert head_position({"pooling": name, "head": "local"}) == "local"


def gsp_embedder(**pooling):
    spec = {"name": "gsp", "num_prototypes": 4, "init": "random", **pooling}
    torch.manual_seed(0)
    return build_embedder(
        {
            "backbone": BACKBONE,
            "embedding_dim": 6,
            "head_bias": False,
            "pooling": spec,
            "normalize": False,
        },
        in_channels=1,
    ).eval()


def test_gsp_add_max_pool_adds_the_projection_of_the_backbone_maximum():
    plain, with_max = gsp_embedder(), gsp_embedder(add_max_pool=True)
    maps = feature_map()
    weight = plain.head.weight.flatten(1)
    gsp = plain.embed_features(maps).pooled
    torch.testing.assert_close(
        with_max.embed_features(maps).pooled, gsp + maps.amax(dim=(2, 3)) @ weight.T
    )
    projected_max = torch.einsum("bchw,dc->bdhw", maps, weight).amax(dim=(2, 3))
    assert (with_max.embed_features(maps).pooled - (gsp + projected_max)).abs().max() > 1e-2


def test_gemean_gsp_weights_the_raw_map_then_gem_then_projects():
    plain, gem = gsp_embedder(), gsp_embedder(gem_p=3.0, learn_gem_p=True)
    maps = feature_map().abs()
    weights = plain.embed_features(maps).weights.flatten(1)  # [B, n], from the projected map
    n = weights.shape[1]
    raw = maps.flatten(2)  # [B, C, n]
    pooled = ((n * weights)[:, None, :] * raw).clamp_min(1e-6).pow(3).mean(dim=2).pow(1 / 3)
    out = gem.embed_features(maps)
    torch.testing.assert_close(out.pooled, pooled @ plain.head.weight.flatten(1).T)
    assert gem.pooling.gem_power.requires_grad and gem.pooling.gem_power.item() == 3.0


def test_float64_model_stays_float64_through_gsp_without_gradients():
    model = gsp_embedder().double()
    maps = feature_map(torch.float64)
    with torch.no_grad():
        inference = model.embed_features(maps).pooled
    training = model.embed_features(maps).pooled
    assert inference.dtype == torch.float64
    torch.testing.assert_close(inference, training.detach(), rtol=0, atol=1e-12)


FULL_PRESETS = [name for name in preset_names() if "/" not in name]


@pytest.mark.parametrize("name", FULL_PRESETS)
def test_each_preset_projects_after_pooling_except_with_gsp_or_xml(name):
    """GSP pools projected locations (its costs live in embedding space); XML's histograms read the
    projected local features (with GAP, the same operator as pooling first); every other preset
    pools the backbone map and then projects."""
    config = preset(name)
    pooling, loss = config["model"]["pooling"]["name"], config["loss"]["name"]
    expected = "local" if pooling == "gsp" or loss == "xml" else "global"
    assert head_position(config["model"]) == expected, (name, pooling, loss)
