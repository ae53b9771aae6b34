"""ResNet-20 and its CIFAR family (depth 6n+2) for 32x32-size inputs.

He et al., "Deep Residual Learning", CVPR 2016, §4.2: a 3x3 convolution with 16 filters, then
3 stages of n basic blocks with 16, 32, 64 filters (stride 2 at the first block of stages 2 and
3). The GSP thesis uses ResNet-20 for CIFAR-Collage and the zero-shot attribute studies (Gürbüz
thesis §5.2.4, §5.3.2-5.3.3) and the pre-activation "ResNetV2-20" for MNIST (§3.2.4; He et al.,
"Identity Mappings in Deep Residual Networks", ECCV 2016: BN-ReLU-conv-BN-ReLU-conv blocks, a
final BN-ReLU). Output: ``[B, 64, H/4, W/4]`` (8x8 at 32 px, 16x16 for the 64x64 collages).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from gspdml.errors import ConfigError
from gspdml.models.backbones.base import BACKBONES, Backbone, FreezeBN
from gspdml.models.pretrained import (
    PretrainedSpec,
    load_weights,
    read_state_dict,
    resolve_weights_path,
)

SHORTCUTS = ("projection", "pad")


class CifarBlock(nn.Module):
    """Basic block ``relu(F(x) + s(x))`` (post-activation) or ``F(x) + s(x)`` with F starting
    by BN-ReLU (pre-activation). ``s`` is the identity, a 1x1 projection (option B) or, for
    ``shortcut="pad"``, stride-2 subsampling with zero-padded channels (option A)."""

    def __init__(self, c_in: int, c_out: int, stride: int, preact: bool, shortcut: str):
        super().__init__()
        self.preact, self.shortcut = preact, shortcut
        self.bn1 = nn.BatchNorm2d(c_in if preact else c_out)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.reshape = stride != 1 or c_in != c_out
        self.stride, self.extra_channels = stride, c_out - c_in
        self.downsample = None
        if self.reshape and shortcut == "projection":
            conv = nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False)
            self.downsample = conv if preact else nn.Sequential(conv, nn.BatchNorm2d(c_out))

    def _shortcut(self, x: torch.Tensor) -> torch.Tensor:
        if not self.reshape:
            return x
        if self.downsample is not None:
            projected: torch.Tensor = self.downsample(x)
            return projected
        x = x[:, :, :: self.stride, :: self.stride]
        half = self.extra_channels // 2
        return F.pad(x, (0, 0, 0, 0, half, self.extra_channels - half))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.preact:
            pre = F.relu(self.bn1(x))
            # He et al. (2016b): the projection reads the pre-activated input.
            shortcut = self._shortcut(pre if self.reshape else x)
            out: torch.Tensor = self.conv2(F.relu(self.bn2(self.conv1(pre))))
            return out + shortcut
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self._shortcut(x))


@BACKBONES.register("resnet20", "cifar_resnet")
class CifarResNet(Backbone):
    """CIFAR ResNet of depth ``6n+2`` (default 20) with widths ``(16, 32, 64)``.

    Args:
        depth: ``6n + 2`` layers (20, 32, 44, 56, ...).
        widths: channels of the three stages.
        preact: pre-activation blocks (ResNetV2).
        shortcut: ``projection`` (1x1 convolution) or ``pad`` (zero-padded identity) where the shape
            changes.
        pretrained: a weights file (there is no published checkpoint to look up).
    """

    layer1: nn.Sequential  # added by add_module
    layer2: nn.Sequential
    layer3: nn.Sequential

    def __init__(
        self,
        in_channels: int = 3,
        depth: int = 20,
        widths: tuple[int, int, int] = (16, 32, 64),
        preact: bool = False,
        shortcut: str = "projection",
        pretrained: PretrainedSpec = False,
        freeze_bn: FreezeBN = False,
        weights: Optional[str] = None,
        frozen: bool = False,
    ):
        super().__init__()
        if depth < 8 or (depth - 2) % 6:
            raise ConfigError(
                "model.backbone.depth",
                f"must be 6n+2 with n >= 1 (20, 32, 44, 56, 110), got {depth}",
            )
        if shortcut not in SHORTCUTS:
            raise ConfigError(
                "model.backbone.shortcut", f"{shortcut!r} is not one of {', '.join(SHORTCUTS)}"
            )
        if len(widths) != 3:
            raise ConfigError(
                "model.backbone.widths", f"expected 3 stage widths, got {list(widths)}"
            )
        if pretrained is True:
            raise ConfigError(
                "model.backbone.pretrained",
                "resnet20 has no published checkpoint; give the path of a weights file",
            )
        checkpoint = resolve_weights_path(
            pretrained, field="model.backbone.pretrained", filenames=()
        )
        self.preact = preact
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, padding=1, bias=False)
        if preact:
            self.bn_final = nn.BatchNorm2d(widths[-1])
        else:
            self.bn1 = nn.BatchNorm2d(widths[0])
        n = (depth - 2) // 6
        c_in = widths[0]
        for stage, width in enumerate(widths):
            blocks = [
                CifarBlock(
                    c_in if b == 0 else width,
                    width,
                    2 if (stage and b == 0) else 1,
                    preact,
                    shortcut,
                )
                for b in range(n)
            ]
            self.add_module(f"layer{stage + 1}", nn.Sequential(*blocks))
            c_in = width
        self.out_channels = c_in
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
        if checkpoint is not None:
            load_weights(
                self,
                read_state_dict(checkpoint),
                source=str(checkpoint),
                ignore_prefixes=("fc.", "linear."),
            )
        self.finish(weights, frozen, freeze_bn)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.conv1(images)
        if not self.preact:
            x = F.relu(self.bn1(x))
        x = self.layer3(self.layer2(self.layer1(x)))
        return F.relu(self.bn_final(x)) if self.preact else x
