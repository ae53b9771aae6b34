"""ConvNeXt (gspdml.models.convnext) against timm's: a small one computes timm's feature map
with the same weights (the same parameters in the same order and shapes); ConvNeXt-S has
``convnext_small``'s parameters (which adds the LayerNorm of the pooled vector) and Psomas
thesis Table 3.10's printed counts."""

import pytest
import torch

from gspdml.models.backbones.timm_backbone import import_timm
from gspdml.models.convnext import CONVNEXT_S, ConvNeXt
from gspdml.models.resources import count_resources, imagenet_classifier


def _body(model):
    return [p for n, p in model.named_parameters() if not n.startswith("head.")]


def test_a_small_convnext_computes_timms_feature_map():
    widths, depths = (8, 16, 24, 32), (1, 2, 1, 1)
    torch.manual_seed(0)
    reference = import_timm().models.convnext.ConvNeXt(depths=depths, dims=widths).eval()
    ours = ConvNeXt(widths, depths).eval()
    theirs = _body(reference)
    assert [p.shape for p in theirs] == [p.shape for p in ours.parameters()]
    with torch.no_grad():
        for source, target in zip(theirs, ours.parameters()):
            target.copy_(source + 0.1 * torch.randn_like(source))  # layer scale away from 1e-6
            source.copy_(target)
        images = torch.randn(2, 3, 64, 64)
        assert torch.allclose(ours(images), reference.forward_features(images), atol=1e-5)


@pytest.mark.slow
def test_convnext_s_has_timms_parameters_and_the_printed_counts():
    reference = import_timm().create_model("convnext_small", pretrained=False)
    ours = ConvNeXt(*CONVNEXT_S)
    assert [p.shape for p in _body(reference)] == [p.shape for p in ours.parameters()]
    printed = {"gap": (50.2, 8.68), "simpool": (51.4, 8.71)}  # Table 3.10, ConvNeXt-S
    for pooling, (millions, gflops) in printed.items():
        counted = count_resources(imagenet_classifier("convnext-s", pooling))
        assert (round(counted.params / 1e6, 1), round(counted.macs / 1e9, 2)) == (millions, gflops)
    classifier = sum(p.numel() for p in imagenet_classifier("convnext-s", "gap").parameters())
    assert sum(p.numel() for p in reference.parameters()) == classifier + 2 * 768
