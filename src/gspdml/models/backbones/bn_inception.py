"""BN-Inception (Inception-v2 with batch normalisation), the backbone of the DML benchmarks.

Architecture: Ioffe & Szegedy, "Batch Normalization", ICML 2015, Fig. 5 / Table 1, as the Caffe
model converted by the ``pretrainedmodels`` package (Cadene) that the DML literature uses
(powerful-benchmarker, Proxy-Anchor, ProxyNCA; Gürbüz thesis §3.2.4). Layer names follow that
conversion, so ``bn_inception-52deb4733.pth`` loads key for key (``last_linear`` is dropped).

Every unit is conv (with bias, as in Caffe) -> BatchNorm -> ReLU. A block concatenates four
branches: 1x1; 1x1 -> 3x3; 1x1 -> 3x3 -> 3x3; 3x3 pool -> 1x1. The reduction blocks (3c, 4e)
have no 1x1 branch, stride 2 in each branch's last 3x3 and a stride-2 max-pool without
projection. At 224 or 227 px block 5b outputs ``[B, 1024, 7, 7]``.

Input: the Caffe weights expect BGR in [0, 255] minus the mean (104, 117, 128) (GSP's TF code:
"Caffe-style BGR input x255", github.com/yetigurbuz/generalized-sum-pooling).
``input_space="imagenet"`` (default) converts gspdml's ImageNet-normalised RGB exactly:
``bgr255_c = 255 * (x_{2-c} * std_{2-c} + mean_{2-c}) - caffe_mean_c``; ``"rgb01"`` takes RGB
in [0, 1], ``"caffe"`` converted input. The forward pass is the converted module's; its
BatchNorm ``momentum=0.9`` (a Caffe-vs-PyTorch slip) is PyTorch's default 0.1 here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gspdml.data.recipes import CAFFE_BGR_MEAN, IMAGENET_MEAN, IMAGENET_STD
from gspdml.errors import ConfigError
from gspdml.models.backbones.base import BACKBONES, Backbone, FreezeBN
from gspdml.models.pretrained import (
    PretrainedSpec,
    load_weights,
    read_state_dict,
    resolve_weights_path,
)

WEIGHTS_FILENAMES = ("bn_inception-52deb4733.pth", "bn_inception-239d2248.pth")
WEIGHTS_URL = "http://data.lip6.fr/cadene/pretrainedmodels/bn_inception-52deb4733.pth"

# (block, in, 1x1, 3x3 reduce, 3x3, double 3x3 reduce, double 3x3, pool, pool projection)
# from Ioffe & Szegedy (2015) Table 1; 1x1 = 0 marks a stride-2 reduction block.
_BLOCKS = (
    ("3a", 192, 64, 64, 64, 64, 96, "avg", 32),
    ("3b", 256, 64, 64, 96, 64, 96, "avg", 64),
    ("3c", 320, 0, 128, 160, 64, 96, "max", 0),
    ("4a", 576, 224, 64, 96, 96, 128, "avg", 128),
    ("4b", 576, 192, 96, 128, 96, 128, "avg", 128),
    ("4c", 576, 160, 128, 160, 128, 160, "avg", 128),
    ("4d", 608, 96, 128, 192, 160, 192, "avg", 128),
    ("4e", 608, 0, 128, 192, 192, 256, "max", 0),
    ("5a", 1056, 352, 192, 320, 160, 224, "avg", 128),
    ("5b", 1024, 352, 192, 320, 192, 224, "max", 128),
)
INPUT_SPACES = ("imagenet", "rgb01", "caffe")


@BACKBONES.register("bn_inception", "bninception")
class BNInception(Backbone):
    """BN-Inception up to block 5b (before its global 7x7 average pool): ``[B, 1024, h, w]``;
    ``pretrained: true`` reads ``$TORCH_HOME/hub/checkpoints/bn_inception-52deb4733.pth``.

    Args:
        input_space: what the input images are: ``imagenet`` (the datasets' ImageNet normalisation),
            ``rgb01`` or ``caffe``; the backbone converts to Caffe BGR x255 itself.
    """

    input_scale: torch.Tensor  # buffers (_input_conversion)
    input_shift: torch.Tensor

    def __init__(
        self,
        in_channels: int = 3,
        pretrained: PretrainedSpec = False,
        freeze_bn: FreezeBN = False,
        input_space: str = "imagenet",
    ):
        super().__init__()
        if input_space not in INPUT_SPACES:
            raise ConfigError(
                "model.backbone.input_space",
                f"{input_space!r} is not one of {', '.join(INPUT_SPACES)}",
            )
        if input_space != "caffe" and in_channels != 3:
            raise ConfigError(
                "model.backbone.input_space",
                f"{input_space!r} needs RGB images, got {in_channels} channels; use 'caffe'",
            )
        self.input_space = input_space
        weights = resolve_weights_path(  # first, so that a missing file fails before any work
            pretrained,
            field="model.backbone.pretrained",
            filenames=WEIGHTS_FILENAMES,
            url=WEIGHTS_URL,
            what="BN-Inception",
        )
        self._blocks: list[tuple[int, list[list[str]]]] = []  # (stride, branches of unit names)
        self._add_unit("conv1_7x7_s2", in_channels, 64, 7, stride=2)
        self._add_unit("conv2_3x3_reduce", 64, 64, 1)
        self._add_unit("conv2_3x3", 64, 192, 3)
        for name, c_in, n1, n3r, n3, nd_r, nd, pool, proj in _BLOCKS:
            self._add_block(name, c_in, n1, n3r, n3, nd_r, nd, pool, proj)
        self.out_channels = 1024
        scale, shift = _input_conversion(input_space)
        self.register_buffer("input_scale", scale, persistent=False)
        self.register_buffer("input_shift", shift, persistent=False)
        if weights is not None:
            load_weights(
                self,
                read_state_dict(weights),
                source=str(weights),
                ignore_prefixes=("last_linear.",),
            )
        if freeze_bn:
            self.freeze_batchnorm(freeze_bn)

    def _add_unit(self, name: str, c_in: int, c_out: int, kernel: int, stride: int = 1) -> str:
        self.add_module(name, nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2))
        self.add_module(f"{name}_bn", nn.BatchNorm2d(c_out))
        return name

    def _add_block(
        self,
        block: str,
        c_in: int,
        n1: int,
        n3r: int,
        n3: int,
        nd_r: int,
        nd: int,
        pool: str,
        proj: int,
    ) -> None:
        p = f"inception_{block}"
        stride = 1 if n1 else 2
        branches = []
        if n1:
            branches.append([self._add_unit(f"{p}_1x1", c_in, n1, 1)])
        branches.append(
            [
                self._add_unit(f"{p}_3x3_reduce", c_in, n3r, 1),
                self._add_unit(f"{p}_3x3", n3r, n3, 3, stride),
            ]
        )
        branches.append(
            [
                self._add_unit(f"{p}_double_3x3_reduce", c_in, nd_r, 1),
                self._add_unit(f"{p}_double_3x3_1", nd_r, nd, 3),
                self._add_unit(f"{p}_double_3x3_2", nd, nd, 3, stride),
            ]
        )
        branches.append(
            [f"{pool}_pool"] + ([self._add_unit(f"{p}_pool_proj", c_in, proj, 1)] if proj else [])
        )
        self._blocks.append((stride, branches))

    def _unit(self, name: str, x: torch.Tensor) -> torch.Tensor:
        return F.relu(getattr(self, f"{name}_bn")(getattr(self, name)(x)), inplace=True)

    def _block(self, stride: int, branches: list[list[str]], x: torch.Tensor) -> torch.Tensor:
        outputs = []
        for branch in branches:
            y = x
            for name in branch:
                if name == "avg_pool":
                    y = F.avg_pool2d(
                        y, 3, stride=1, padding=1, ceil_mode=True, count_include_pad=True
                    )
                elif name == "max_pool":
                    y = F.max_pool2d(
                        y, 3, stride=stride, padding=1 if stride == 1 else 0, ceil_mode=True
                    )
                else:
                    y = self._unit(name, y)
            outputs.append(y)
        return torch.cat(outputs, dim=1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images
        if self.input_space != "caffe":
            x = x.flip(1) * self.input_scale + self.input_shift
        x = self._unit("conv1_7x7_s2", x)
        x = F.max_pool2d(x, 3, stride=2, ceil_mode=True)
        x = self._unit("conv2_3x3", self._unit("conv2_3x3_reduce", x))
        x = F.max_pool2d(x, 3, stride=2, ceil_mode=True)
        for stride, branches in self._blocks:
            x = self._block(stride, branches, x)
        return x


def _input_conversion(input_space: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel ``(scale, shift)`` mapping BGR-ordered input to Caffe BGR x255 minus mean:
    ``caffe = scale * x_bgr + shift`` (identity for ``caffe``)."""
    caffe_mean = torch.tensor(CAFFE_BGR_MEAN)
    if input_space == "imagenet":
        mean_bgr, std_bgr = torch.tensor(IMAGENET_MEAN).flip(0), torch.tensor(IMAGENET_STD).flip(0)
        scale, shift = 255.0 * std_bgr, 255.0 * mean_bgr - caffe_mean
    elif input_space == "rgb01":
        scale, shift = torch.full((3,), 255.0), -caffe_mean
    else:
        scale, shift = torch.ones(1), torch.zeros(1)
    return scale.view(1, -1, 1, 1), shift.view(1, -1, 1, 1)
