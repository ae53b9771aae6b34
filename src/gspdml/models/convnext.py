"""ConvNeXt (Liu et al., "A ConvNet for the 2020s", CVPR 2022, §2 and Fig. 4), untrained, as the
count of Psomas thesis Table 3.10 needs it: ConvNeXt-S, channels (96, 192, 384, 768) and
(3, 3, 27, 3) blocks per stage.

The stem is a ``4 x 4`` convolution of stride 4 and a LayerNorm; each later stage starts with a
LayerNorm and a ``2 x 2`` convolution of stride 2; a block is::

    y = x + gamma * W2 GELU(W1 LN(DWConv7x7(x)))    (W1: d -> 4d, W2: 4d -> d, per location)

with the layer scale ``gamma`` (initialised to 1e-6) and LayerNorms of eps 1e-6 over the
channels. The output is the last stage's map ``[B, 768, H/32, W/32]``; the pooling and the
classifier come after it (:mod:`gspdml.models.resources`).
"""

from __future__ import annotations

import torch
from torch import nn

from gspdml.models.backbones.base import Backbone

#: ConvNeXt-S: the channels and the blocks of the four stages
CONVNEXT_S = ((96, 192, 384, 768), (3, 3, 27, 3))


class ChannelNorm(nn.LayerNorm):
    """LayerNorm over the channels of a ``[B, C, H, W]`` map."""

    def forward(self, maps: torch.Tensor) -> torch.Tensor:
        return super().forward(maps.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    """One block (module doc) of ``width`` channels."""

    def __init__(self, width: int):
        super().__init__()
        self.dwconv = nn.Conv2d(width, width, kernel_size=7, padding=3, groups=width)
        self.norm = nn.LayerNorm(width, eps=1e-6)
        self.pwconv1, self.pwconv2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.act = nn.GELU()
        self.gamma = nn.Parameter(torch.full((width,), 1e-6))

    def forward(self, maps: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.dwconv(maps).permute(0, 2, 3, 1))
        y = self.gamma * self.pwconv2(self.act(self.pwconv1(y)))
        out: torch.Tensor = maps + y.permute(0, 3, 1, 2)
        return out


class ConvNeXt(Backbone):
    """The stem, the four stages and their downsampling layers (module doc)."""

    def __init__(self, widths: tuple[int, ...], depths: tuple[int, ...]):
        super().__init__()
        layers: list[nn.Module] = []
        for i, (width, depth) in enumerate(zip(widths, depths)):
            if i == 0:
                layers += [nn.Conv2d(3, width, 4, stride=4), ChannelNorm(width, eps=1e-6)]
            else:
                previous = widths[i - 1]
                layers += [ChannelNorm(previous, eps=1e-6), nn.Conv2d(previous, width, 2, stride=2)]
            layers += [ConvNeXtBlock(width) for _ in range(depth)]
        self.layers = nn.Sequential(*layers)
        self.out_channels = widths[-1]

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        maps: torch.Tensor = self.layers(images)
        return maps
