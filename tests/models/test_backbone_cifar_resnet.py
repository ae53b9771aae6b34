"""CIFAR ResNets (He et al. 2016, §4.2): shapes and the parameter counts of their Table 6."""

import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.models.backbones import build_backbone


@pytest.mark.parametrize("depth, millions", [(20, 0.27), (32, 0.46), (56, 0.85), (110, 1.7)])
def test_parameter_count_matches_he_et_al_table6(depth, millions):
    # Table 6 counts option-A (zero-padding) shortcuts and the 10-way classifier (64*10 + 10).
    model = build_backbone({"name": "resnet20", "depth": depth, "shortcut": "pad"}, 3)
    total = sum(p.numel() for p in model.parameters()) + 64 * 10 + 10
    digits = 1 if millions >= 1 else 2
    assert round(total / 1e6, digits) == millions


@pytest.mark.parametrize(
    "spec",
    [
        "resnet20",
        {"name": "resnet20", "preact": True},
        {"name": "resnet20", "preact": True, "shortcut": "pad"},
    ],
)
def test_output_map_is_64_channels_at_quarter_resolution(spec):
    model = build_backbone(spec, 3)
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 64, 8, 8)
    assert model(torch.randn(1, 3, 64, 64)).shape == (1, 64, 16, 16)
    assert model.out_channels == 64


def test_pad_shortcut_is_subsampled_input_with_zero_channels():
    block = build_backbone({"name": "resnet20", "shortcut": "pad"}, 3).layer2[0]
    x = torch.randn(1, 16, 8, 8)
    expected = torch.zeros(1, 32, 4, 4)
    expected[:, 8:24] = x[:, :, ::2, ::2]
    assert torch.equal(block._shortcut(x), expected)


def test_bad_options_name_the_field():
    with pytest.raises(ConfigError, match="model.backbone.depth: must be 6n\\+2"):
        build_backbone({"name": "resnet20", "depth": 21}, 3)
    with pytest.raises(
        ConfigError, match="model.backbone.pretrained: resnet20 has no published checkpoint"
    ):
        build_backbone({"name": "resnet20", "pretrained": True}, 3)
