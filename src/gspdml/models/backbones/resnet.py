"""ImageNet ResNets (He et al., "Deep Residual Learning", CVPR 2016, Table 1) without torchvision.

The layout and parameter names are those of ``torchvision.models.resnet`` ("ResNet v1.5":
the stride of a bottleneck stage sits in its 3x3 convolution), so torchvision's ImageNet
checkpoints (``resnet50-0676ba61.pth`` ...) load key for key; ``fc`` is dropped. The output
is the ``layer4`` map before global pooling: ``[B, 2048, h, w]`` (ResNet-50/101/152) or
``[B, 512, h, w]`` (ResNet-18/34), with h = w = 8 at 227 px and 7 at 224 px. The seeds use
ResNet-50 in the conventional protocol (Gürbüz thesis Tab. 3.2b, Tab. 5.2) and in Metrix/ProxyNCA++.
"""

from __future__ import annotations

from typing import ClassVar, Optional, cast

import torch
from torch import nn

from gspdml.models.backbones.base import BACKBONES, Backbone, FreezeBN
from gspdml.models.pretrained import (
    PretrainedSpec,
    load_weights,
    read_state_dict,
    resolve_weights_path,
)

_TORCHVISION_URL = "https://download.pytorch.org/models/"


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with an identity (or 1x1-projection) shortcut: ``relu(F(x) + s(x))``."""

    expansion = 1

    def __init__(self, c_in: int, width: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, width, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _projection(c_in, width * self.expansion, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return cast(torch.Tensor, self.relu(out + shortcut))


class Bottleneck(nn.Module):
    """1x1 reduce -> 3x3 (carries the stride) -> 1x1 expand (x4), plus the shortcut."""

    expansion = 4

    def __init__(self, c_in: int, width: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, width * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(width * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = _projection(c_in, width * self.expansion, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return cast(torch.Tensor, self.relu(out + shortcut))


def _projection(c_in: int, c_out: int, stride: int) -> Optional[nn.Sequential]:
    """1x1 convolution + BN on the shortcut when the shape changes (option B of He et al.)."""
    if stride == 1 and c_in == c_out:
        return None
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out)
    )


class ResNet(Backbone):
    """Stem (7x7/2 conv, BN, ReLU, 3x3/2 max-pool) and four stages of widths 64-512.

    Subclasses fix ``block``, ``depths`` and the torchvision checkpoint names (``pretrained:
    true``). Input: RGB normalised with the ImageNet mean/std."""

    block: ClassVar[type[BasicBlock] | type[Bottleneck]]
    depths: ClassVar[tuple[int, int, int, int]]
    weight_files: ClassVar[tuple[str, ...]]
    layer1: nn.Sequential  # added by add_module
    layer2: nn.Sequential
    layer3: nn.Sequential
    layer4: nn.Sequential

    def __init__(
        self, in_channels: int = 3, pretrained: PretrainedSpec = False, freeze_bn: FreezeBN = False
    ):
        super().__init__()
        weights = resolve_weights_path(  # first, so that a missing file fails before any work
            pretrained,
            field="model.backbone.pretrained",
            filenames=self.weight_files,
            url=_TORCHVISION_URL + self.weight_files[0],
            what=type(self).__name__,
        )
        self.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        c_in = 64
        for index, (depth, width) in enumerate(zip(self.depths, (64, 128, 256, 512))):
            stride = 1 if index == 0 else 2
            blocks = []
            for b in range(depth):
                blocks.append(self.block(c_in, width, stride if b == 0 else 1))
                c_in = width * self.block.expansion
            self.add_module(f"layer{index + 1}", nn.Sequential(*blocks))
        self.out_channels = c_in
        self._init_weights()
        if weights is not None:
            load_weights(
                self, read_state_dict(weights), source=str(weights), ignore_prefixes=("fc.",)
            )
        if freeze_bn:
            self.freeze_batchnorm(freeze_bn)

    def _init_weights(self) -> None:
        """He-normal (fan-out) convolutions as torchvision does (BN starts at weight 1, bias 0)."""
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(images))))
        return cast(torch.Tensor, self.layer4(self.layer3(self.layer2(self.layer1(x)))))


@BACKBONES.register("resnet18")
class ResNet18(ResNet):
    block, depths, weight_files = BasicBlock, (2, 2, 2, 2), ("resnet18-f37072fd.pth",)


@BACKBONES.register("resnet34")
class ResNet34(ResNet):
    block, depths, weight_files = BasicBlock, (3, 4, 6, 3), ("resnet34-b627a593.pth",)


@BACKBONES.register("resnet50")
class ResNet50(ResNet):
    block, depths, weight_files = (
        Bottleneck,
        (3, 4, 6, 3),
        ("resnet50-0676ba61.pth", "resnet50-11ad3fa6.pth"),
    )


@BACKBONES.register("resnet101")
class ResNet101(ResNet):
    block, depths, weight_files = (
        Bottleneck,
        (3, 4, 23, 3),
        ("resnet101-63fe2227.pth", "resnet101-cd907fc2.pth"),
    )
