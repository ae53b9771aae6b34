"""Backbones (feature extractors before global pooling), registered in :data:`BACKBONES`."""

from gspdml.models.backbones.base import BACKBONES, Backbone, build_backbone
from gspdml.models.backbones import small_cnn  # noqa: F401  (registers small_cnn)
from gspdml.models.backbones import bn_inception, cifar_resnet, resnet, timm_backbone  # noqa: F401  (register the rest)
from gspdml.models.backbones import efficientnet_lite  # noqa: F401  (registers efficientnet_lite0; timm is imported when built)

__all__ = ["BACKBONES", "Backbone", "build_backbone"]
