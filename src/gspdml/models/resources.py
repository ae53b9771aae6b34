"""What a model costs: its parameters and the multiply-adds of one forward pass (Psomas thesis
Table 3.10 counts both for ImageNet-1k classifiers at 224 x 224).

:func:`imagenet_classifier` builds such a classifier from the library's own parts: a backbone
(``resnet18``, ``resnet50``; ``convnext-s``, :mod:`gspdml.models.convnext`, without the
LayerNorm of its pooled vector (1,536 parameters); ``vit-s``, ViT-S/16 at 224 x 224 with
``depth`` blocks, :mod:`gspdml.models.released_vit`, with a [CLS] token unless it pools with
SimPool), a global pooling (``gap``, ``simpool``; on the ViT also ``cls``) and a linear layer to
the 1000 classes. :func:`count_resources` counts its parameters and the multiply-adds of one
image (``FlopCounterMode`` flops / 2: convolutions, linear layers and matrix products, not
normalisations, activations or pooling of single tensors, nor the ViT's attention, which the
counter does not count on a CPU: ``2 N^2 d`` per block, 0.30 G on ViT-S/16; Psomas thesis Table
3.10's 4.24 GFLOPs of ViT-S is the count without it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from gspdml.models.backbones import build_backbone
from gspdml.models.backbones.base import Backbone
from gspdml.pooling.base import Pooling, build_pooling

#: the backbones and poolings an ImageNet classifier here is built from
NETWORKS = ("resnet18", "resnet50", "convnext-s", "vit-s")
POOLINGS = ("gap", "simpool", "cls")
IMAGENET_CLASSES = 1000
#: ViT-S/16 (Dosovitskiy et al., ICLR 2021; Touvron et al., DeiT, ICML 2021): 384 channels,
#: 12 blocks, 16 x 16 patches on the 14 x 14 grid of a 224 x 224 image
VIT_S = {"width": 384, "depth": 12, "patch": 16, "grid": 14}
#: SimPool's gamma on transformers (Psomas thesis §3.4.4), 2 on convolutional networks
GAMMA = {"vit-s": 1.25}


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


def _backbone(network: str, pooling: str, depth: Optional[int]) -> Backbone:
    """The untrained backbone of ``network`` (``depth``: a ViT's blocks, default 12)."""
    if network == "convnext-s":
        from gspdml.models.convnext import CONVNEXT_S, ConvNeXt

        return ConvNeXt(*CONVNEXT_S)
    if network != "vit-s":
        return build_backbone({"name": network, "pretrained": False}, 3)
    from gspdml.models.released_vit import ReleasedViT, ViTShape

    blocks = VIT_S["depth"] if depth is None else depth
    shape = ViTShape(VIT_S["width"], blocks, VIT_S["patch"], VIT_S["grid"], pooling != "simpool")
    return ReleasedViT(shape, "cls" if pooling == "cls" else "tokens", final_norm=True)


def imagenet_classifier(
    network: str, pooling: str, depth: Optional[int] = None
) -> ImageNetClassifier:
    """``network`` (untrained; ``depth``: a ViT's blocks) -> ``pooling`` -> ``Linear(C, 1000)``:
    the ImageNet-1k classifier of Psomas thesis Tables 3.10 and 3.11 (Baseline: GAP, or [CLS]
    on the ViT; SimPool: its default, gamma 2 for convolutional networks and 1.25 for the ViT,
    §3.4.4)."""
    if (
        network not in NETWORKS
        or pooling not in POOLINGS
        or (pooling == "cls" and network != "vit-s")  # only a ViT has a [CLS] token
    ):
        raise ValueError(f"a classifier of {NETWORKS} with {POOLINGS}, not {network}+{pooling}")
    if depth is not None and network != "vit-s":
        raise ValueError(f"depth is a ViT's number of blocks; {network} has none")
    backbone = _backbone(network, pooling, depth)
    channels = backbone.out_channels
    options = {"gamma": GAMMA[network]} if pooling == "simpool" and network in GAMMA else {}
    # GAP of the [CLS] token alone ([B, 1, C]) passes it unchanged
    pool = build_pooling({"name": "gap" if pooling == "cls" else pooling, **options}, channels)
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
