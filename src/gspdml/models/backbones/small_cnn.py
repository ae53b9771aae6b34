"""A small CNN for the embedded collage data (32x32 inputs -> 8x8 feature map, receptive field 18 px)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch
from torch import nn

from gspdml.models.backbones.base import BACKBONES, Backbone, FreezeBN


def _conv_block(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


@BACKBONES.register("small_cnn")
class SmallCNN(Backbone):
    """Conv3x3-BN-ReLU blocks; a 2x2 max-pool follows every block listed in ``pool_after``.

    With the defaults, a 32x32 image gives a ``[B, 128, 8, 8]`` map (n = 64 local features, each
    seeing 18x18 pixels: a 16x16 collage tile and its border) for about 10 M multiply-adds.
    ``freeze_bn`` freezes the BatchNorm layers (:meth:`Backbone.freeze_batchnorm`); ``weights``
    (a pre-training recipe) and ``frozen``: :meth:`Backbone.finish`.

    Args:
        widths: channels of the Conv3x3-BN-ReLU blocks.
        pool_after: the blocks followed by a 2x2 max-pool (0-based).
    """

    def __init__(
        self,
        in_channels: int = 3,
        widths: Sequence[int] = (32, 64, 128),
        pool_after: Sequence[int] = (0, 1),
        freeze_bn: FreezeBN = False,
        weights: Optional[str] = None,
        frozen: bool = False,
    ):
        super().__init__()
        layers: list[nn.Module] = []
        c_in = in_channels
        for i, width in enumerate(widths):
            layers.append(_conv_block(c_in, width))
            if i in pool_after:
                layers.append(nn.MaxPool2d(2))
            c_in = width
        self.features = nn.Sequential(*layers)
        self.out_channels = c_in
        self.finish(weights, frozen, freeze_bn)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features: torch.Tensor = self.features(images)
        return features
