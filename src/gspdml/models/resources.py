"""What a model costs: its parameters and the multiply-adds of one forward pass (Psomas thesis
Table 3.10 counts both for ImageNet-1k classifiers at 224 x 224).

:func:`imagenet_classifier` builds such a classifier from the library's own parts: a backbone
(``resnet18``, ``resnet50``), a global pooling (``gap``, ``simpool``) and a linear layer to the
1000 classes. :func:`count_resources` counts its parameters and the multiply-adds of one image
(``FlopCounterMode`` flops / 2: convolutions, linear layers and matrix products, not
normalisations, activations or pooling of single tensors).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from gspdml.models.backbones import build_backbone
from gspdml.pooling.base import Pooling, build_pooling

#: the backbones and poolings an ImageNet classifier here is built from
NETWORKS = ("resnet18", "resnet50")
POOLINGS = ("gap", "simpool")
IMAGENET_CLASSES = 1000


@dataclass(frozen=True)
class Resources:
    """``params``: trainable and frozen parameters; ``macs``: multiply-adds of one image."""

    params: int
    macs: int


class ImageNetClassifier(nn.Module):
    """``backbone`` -> ``pooling`` (its pooled vector) -> ``classifier`` (1000 logits)."""

    def __init__(self, backbone: nn.Module, pooling: Pooling, classifier: nn.Linear):
        super().__init__()
        self.backbone, self.pooling, self.classifier = backbone, pooling, classifier

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.classifier(self.pooling(self.backbone(images)).vector)
        return logits


def imagenet_classifier(network: str, pooling: str) -> ImageNetClassifier:
    """``network`` (untrained) -> ``pooling`` -> ``Linear(C, 1000)``: the ImageNet-1k
    classifier of Psomas thesis Table 3.10 (Baseline: GAP; SimPool: its default, gamma 2 for
    convolutional networks, §3.4.4)."""
    if network not in NETWORKS or pooling not in POOLINGS:
        raise ValueError(f"a classifier of {NETWORKS} with {POOLINGS}, not {network}+{pooling}")
    backbone = build_backbone({"name": network, "pretrained": False}, 3)
    channels = backbone.out_channels
    pool = build_pooling({"name": pooling}, channels)
    return ImageNetClassifier(backbone, pool, nn.Linear(channels, IMAGENET_CLASSES))


def count_resources(model: nn.Module, image_size: int = 224) -> Resources:
    """The parameters of ``model`` and the multiply-adds of one ``3 x image_size x image_size``
    image through it (module doc: what is counted)."""
    params = sum(p.numel() for p in model.parameters())
    counter = FlopCounterMode(display=False)
    model.eval()
    with counter, torch.no_grad():
        model(torch.zeros(1, 3, image_size, image_size))
    return Resources(params, counter.get_total_flops() // 2)
