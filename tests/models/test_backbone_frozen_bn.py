"""freeze_bn: BatchNorm statistics and affine parameters stay fixed through train() and optimiser steps."""

import pytest
import torch
from torch import nn

from gspdml.errors import ConfigError
from gspdml.models import build_embedder
from gspdml.models.backbones import build_backbone


def batchnorm_names(model):
    return {name for name, m in model.named_modules() if isinstance(m, nn.BatchNorm2d)}


@pytest.mark.parametrize(
    "spec", [{"name": "resnet20", "freeze_bn": True}, {"name": "small_cnn", "freeze_bn": True}]
)
def test_frozen_batchnorm_survives_train_mode_and_adam_with_weight_decay(spec):
    torch.manual_seed(0)
    model = build_embedder({"backbone": spec, "embedding_dim": 16, "pooling": "gap"}, in_channels=3)
    backbone = model.backbone
    bn_names = batchnorm_names(backbone)
    with torch.no_grad():  # non-trivial statistics, so that a train-mode pass would change them
        for name in bn_names:
            backbone.get_submodule(name).running_mean.normal_()
            backbone.get_submodule(name).running_var.uniform_(0.5, 2)
    before = {k: v.clone() for k, v in backbone.state_dict().items()}
    first_conv, first_weight = next(iter(backbone.named_parameters()))
    first_weight = first_weight.detach().clone()

    model.train()
    model.requires_grad_(True)  # e.g. the end of a warm-up that froze the backbone
    assert bn_names and not any(backbone.get_submodule(name).training for name in bn_names)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1, weight_decay=1e-2)
    for _ in range(2):
        loss = model(torch.randn(4, 3, 32, 32)).embedding[:, 0].sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    after = backbone.state_dict()
    bn_keys = [k for k in before if k.rsplit(".", 1)[0] in bn_names]
    assert len(bn_keys) == 5 * len(bn_names)  # weight, bias, running mean and variance, batch count
    for key in bn_keys:
        assert torch.equal(after[key], before[key]), key
    assert not torch.equal(after[first_conv], first_weight)  # the rest of the backbone trains


def test_unfrozen_batchnorm_trains_and_checkpoints_move_between_frozen_and_plain():
    frozen = build_backbone({"name": "resnet20", "freeze_bn": True}, 3)
    plain = build_backbone("resnet20", 3)
    assert set(frozen.state_dict()) == set(plain.state_dict())
    frozen.load_state_dict(plain.state_dict())
    assert torch.equal(frozen.bn1.weight, plain.bn1.weight)
    plain.train()
    mean = plain.bn1.running_mean.clone()
    plain(torch.randn(2, 3, 32, 32) + 3)
    assert all(plain.get_submodule(name).training for name in batchnorm_names(plain))
    assert not torch.equal(plain.bn1.running_mean, mean)
    assert plain.bn1.weight.requires_grad


def test_statistics_only_keeps_the_running_statistics_and_trains_the_affine_weights():
    """``freeze_bn: statistics`` (the Metrix code's --bn_freeze 1 after its warm-up): eval mode
    through train(), running statistics fixed, weight and bias trained by the optimiser."""
    torch.manual_seed(0)
    model = build_embedder(
        {
            "backbone": {"name": "resnet20", "freeze_bn": "statistics"},
            "embedding_dim": 8,
            "pooling": "gap",
        },
        in_channels=3,
    )
    backbone = model.backbone
    model.train()
    assert not any(backbone.get_submodule(n).training for n in batchnorm_names(backbone))
    mean, weight = backbone.bn1.running_mean.clone(), backbone.bn1.weight.detach().clone()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    loss = model(torch.randn(4, 3, 32, 32) + 3).embedding[:, 0].sum()
    loss.backward()
    optimizer.step()
    assert torch.equal(backbone.bn1.running_mean, mean)
    assert not torch.equal(backbone.bn1.weight, weight)


def test_freeze_bn_refuses_other_values():
    with pytest.raises(Exception, match="freeze_bn"):
        build_backbone({"name": "resnet20", "freeze_bn": "affine"}, 3)


def test_freeze_bn_built_from_python_refuses_other_values_as_a_config_does():
    from gspdml.models.backbones.small_cnn import SmallCNN

    with pytest.raises(
        ConfigError, match=r"freeze_bn: unknown value 'affine'; allowed: statistics$"
    ):
        SmallCNN(3, freeze_bn="affine")
    assert SmallCNN(3, freeze_bn="statistics") is not None and SmallCNN(3, freeze_bn=True)
