"""timm backbones: CNN feature maps and ViT patch tokens (no CLS token)."""

import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.models.backbones import build_backbone
from gspdml.models.backbones.timm_backbone import import_timm


def test_vit_returns_patch_tokens_without_the_cls_token():
    torch.manual_seed(0)
    backbone = build_backbone(
        {"name": "vit", "model": "vit_tiny_patch16_224", "img_size": 64}, 3
    ).eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        tokens = backbone(x)
        everything = backbone.model.forward_features(x)
    assert tokens.shape == (2, 16, 192) and backbone.out_channels == 192
    assert everything.shape == (2, 17, 192)  # CLS first, then 4x4 patches
    torch.testing.assert_close(tokens, everything[:, 1:])

    backbone.output = "map"
    with torch.no_grad():
        grid = backbone(x)
    assert grid.shape == (2, 192, 4, 4)
    torch.testing.assert_close(grid[:, :, 1, 2], tokens[:, 1 * 4 + 2])  # row-major patch order


def test_timm_cnn_returns_the_map_before_pooling():
    backbone = build_backbone({"name": "timm", "model": "efficientnet_lite0"}, 3).eval()
    with torch.no_grad():
        out = backbone(torch.randn(1, 3, 64, 64))
    assert out.shape == (1, 1280, 2, 2) and backbone.out_channels == 1280
    assert import_timm().__name__ == "timm"


def test_bad_timm_options_name_the_field():
    with pytest.raises(ConfigError, match="model.backbone.model: timm has no model 'no_such_net'"):
        build_backbone({"name": "timm", "model": "no_such_net"}, 3)
    with pytest.raises(
        ConfigError, match="model.backbone.output: 'grid' is not one of auto, tokens, map"
    ):
        build_backbone({"name": "timm", "model": "resnet18", "output": "grid"}, 3)


def test_vit_without_class_token_has_no_cls_in_the_encoder():
    """SimPool's ViT: the encoder itself has no CLS token (not only the output)."""
    backbone = build_backbone(
        {"name": "vit", "model": "vit_tiny_patch16_224", "img_size": 64, "class_token": False}, 3
    )
    assert backbone.model.cls_token is None and backbone.prefix_tokens == 0
    with torch.no_grad():
        tokens = backbone.eval()(torch.randn(2, 3, 64, 64))
    assert tokens.shape == (2, 16, 192)
    with_cls = build_backbone({"name": "vit", "model": "vit_tiny_patch16_224", "img_size": 64}, 3)
    assert with_cls.model.cls_token is not None and with_cls.prefix_tokens == 1
