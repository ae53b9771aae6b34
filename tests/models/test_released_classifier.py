"""The classifier stored in a released checkpoint (gspdml.models.released_classifier): timm's
``head`` and torchvision's ``fc`` in their wrappers are read as the linear layer they are; a
DINO file, whose ``head.*`` is the projection head, and a file without one have none."""

import argparse

import pytest
import torch

from gspdml.errors import DataError
from gspdml.models.released_classifier import released_classifier


@pytest.mark.parametrize(
    "name, wrapper", [("head", "state_dict"), ("fc", "state_dict"), ("fc", None)]
)
def test_the_stored_classifier_is_read_as_it_is(tmp_path, name, wrapper):
    weight, bias = torch.randn(7, 5), torch.randn(7)
    state = {"blocks.0.norm1.weight": torch.ones(5), f"{name}.weight": weight, f"{name}.bias": bias}
    content = state if wrapper is None else {wrapper: state, "args": argparse.Namespace(lr=0.1)}
    torch.save(content, tmp_path / "model.pth.tar")
    layer = released_classifier(tmp_path / "model.pth.tar")
    assert layer is not None and not layer.training
    assert torch.equal(layer.weight, weight) and torch.equal(layer.bias, bias)
    features = torch.randn(3, 5)
    expected = features.double() @ weight.double().T + bias.double()
    assert torch.allclose(layer(features).double(), expected, atol=1e-5)


def test_a_dino_file_or_a_bare_backbone_has_no_classifier(tmp_path):
    teacher = {
        "backbone.conv1.weight": torch.randn(4, 3, 3, 3),
        "head.mlp.0.weight": torch.randn(8, 4),
    }
    teacher["head.last_layer.weight_g"] = torch.ones(8, 1)
    torch.save({"teacher": teacher, "student": {}}, tmp_path / "dino.pth")
    assert released_classifier(tmp_path / "dino.pth") is None
    torch.save({"conv1.weight": torch.randn(4, 3, 3, 3)}, tmp_path / "bare.pth")
    assert released_classifier(tmp_path / "bare.pth") is None
    (tmp_path / "broken.pth").write_bytes(b"not a checkpoint")
    with pytest.raises(DataError, match="broken.pth"):
        released_classifier(tmp_path / "broken.pth")
