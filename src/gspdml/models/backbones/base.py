"""The backbone interface: images ``[B, C_in, H, W]`` -> feature map ``[B, C, h, w]``.

Backbones stop *before* global pooling so that any gspdml pooling can follow. Each exposes
``out_channels``. ``in_channels`` (image channels) is supplied by the caller from the dataset.
"""

from __future__ import annotations

from torch import nn

from gspdml.registry import Registry

BACKBONES = Registry("backbone")


class Backbone(nn.Module):
    """Base class; subclasses set ``self.out_channels`` and implement ``forward``."""

    supplied_by_caller = ("in_channels",)
    out_channels: int


def build_backbone(spec, in_channels: int, field: str = "model.backbone") -> Backbone:
    return BACKBONES.build(spec, field, in_channels=in_channels)
