"""Backbones (feature extractors before global pooling), registered in :data:`BACKBONES`."""

from gspdml.models.backbones import (  # noqa: F401  (register the rest)
    bn_inception,
    cifar_resnet,
    efficientnet_lite,  # noqa: F401  (registers efficientnet_lite0; timm is imported when built)
    resnet,
    small_cnn,  # noqa: F401  (registers small_cnn)
    timm_backbone,
)
from gspdml.models.backbones.base import BACKBONES, Backbone, build_backbone

__all__ = ["BACKBONES", "Backbone", "build_backbone"]
