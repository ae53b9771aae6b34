import torch

from gspdml.models import build_embedder
from gspdml.models.embedder import LocalHead


def test_local_head_is_the_same_map_on_feature_maps_and_tokens():
    head = LocalHead(6, 4)
    maps = torch.randn(2, 6, 3, 5)
    tokens = maps.flatten(2).transpose(1, 2)
    assert torch.allclose(head(maps).flatten(2).transpose(1, 2), head(tokens), atol=1e-6)


def test_embedder_output_carries_normalised_embedding_weights_and_attributes():
    model = build_embedder(
        {
            "backbone": {"name": "small_cnn", "widths": [8, 16, 16]},
            "embedding_dim": 12,
            "pooling": {"name": "gsp", "num_prototypes": 5, "init": "random"},
        },
        in_channels=1,
    )
    out = model(torch.randn(3, 1, 32, 32))
    assert out.embedding.shape == (3, 12) and torch.allclose(
        out.embedding.norm(dim=1), torch.ones(3), atol=1e-5
    )
    assert (
        out.local.shape == (3, 12, 8, 8)
        and out.weights.shape == (3, 8, 8)
        and out.attributes.shape == (3, 5)
    )
    assert torch.allclose(out.weights.sum(dim=(1, 2)), torch.ones(3), atol=1e-5)
    assert torch.allclose(
        torch.nn.functional.normalize(out.pooled, dim=1), out.embedding, atol=1e-6
    )


def test_global_head_with_layer_norm_is_proxynca_pp_style():
    model = build_embedder(
        {
            "backbone": {"name": "small_cnn", "widths": [8, 16, 16]},
            "embedding_dim": 6,
            "head": "global",
            "pooled_norm": "layer_norm",
            "pooling": "gmp",
        },
        in_channels=1,
    )
    maps = model.backbone(torch.randn(3, 1, 32, 32))
    pooled = maps.amax(dim=(2, 3))
    normed = (pooled - pooled.mean(1, keepdim=True)) / torch.sqrt(
        pooled.var(1, unbiased=False, keepdim=True) + 1e-5
    )
    expected = torch.nn.functional.normalize(model.projection(normed), dim=1)
    out = model.embed_features(maps)
    assert torch.allclose(out.embedding, expected, atol=1e-5)
    assert model.embedding_dim == 6 and not list(model.pooled_norm.parameters())
