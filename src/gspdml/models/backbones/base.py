"""The backbone interface: images ``[B, C_in, H, W]`` -> feature map ``[B, C, h, w]``.

Backbones stop *before* global pooling so that any gspdml pooling can follow. Each exposes
``out_channels``. ``in_channels`` (image channels) is supplied by the caller from the dataset.
Token backbones (ViT) return ``[B, N, C]`` patch tokens instead of a map.
"""

from __future__ import annotations

import os
from typing import Any, Literal, Union

from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from gspdml.registry import Registry

BACKBONES = Registry("backbone")

#: the ``freeze_bn`` option: ``true`` freezes BatchNorm statistics and affine parameters,
#: ``statistics`` the running statistics only (the layers stay in eval mode, their affine
#: parameters train like the rest of the backbone)
FreezeBN = Union[bool, Literal["statistics"]]


class Backbone(nn.Module):
    """Base class; subclasses set ``self.out_channels`` and implement ``forward``.

    :meth:`freeze_batchnorm` implements ``freeze_bn`` of the DML recipes (powerful-benchmarker's
    ``freeze_trunk_batchnorm``, Proxy-Anchor's ``--bn-freeze``; ``statistics``: as the Metrix
    code's ``--bn_freeze 1`` leaves BatchNorm after its warm-up re-enables every gradient).

    Args:
        pretrained: ImageNet weights: ``true`` (the published file in
            ``$TORCH_HOME/hub/checkpoints``), ``false`` (random initialisation) or a file path.
        freeze_bn: ``true``: BatchNorm statistics and affine parameters frozen; ``statistics``: the
            running statistics only; ``false``: BatchNorm trains.
        weights: a pre-training recipe (e.g. ``resnet20-digits``) whose cached weights start the
            backbone (trained on first use).
        frozen: no parameter of the backbone trains (:meth:`freeze`; BatchNorm frozen too).
    """

    supplied_by_caller = ("in_channels",)
    out_channels: int
    batchnorm_frozen: bool = False
    is_frozen: bool = False  # the frozen regime (:meth:`freeze`): nothing of it ever trains

    def freeze_batchnorm(self, mode: FreezeBN = True) -> None:
        """Freeze every BatchNorm layer: the layers stay in eval mode (also after ``train()``)
        and, unless ``mode`` is ``statistics``, ``weight``/``bias`` become buffers that no
        optimiser can change. State-dict keys are unchanged."""
        if mode not in (True, "statistics"):
            raise ValueError(f"freeze_bn must be true, false or statistics, got {mode!r}")
        for module in self.modules():
            if isinstance(module, _BatchNorm):
                for name in ("weight", "bias") if mode is True else ():
                    param = module._parameters.pop(name, None)
                    if param is not None:
                        module.register_buffer(name, param.detach())
                module.train(False)
        self.batchnorm_frozen = True

    def freeze(self) -> None:
        """The *frozen* regime: no parameter is trained (``requires_grad`` off, so the optimiser
        skips them and no gradient flows into the backbone) and BatchNorm is frozen too."""
        for param in self.parameters():
            param.requires_grad_(False)
        self.freeze_batchnorm()
        self.is_frozen = True

    def finish(
        self,
        weights: Union[str, os.PathLike[str], None] = None,
        frozen: bool = False,
        freeze_bn: FreezeBN = False,
    ) -> None:
        """The options every backbone shares, applied after its layers exist: ``weights`` (the
        file of a pre-training recipe's weights, from
        :func:`gspdml.training.pretrain.resolve_recipe_weights`), ``frozen`` and ``freeze_bn``."""
        if weights is not None:
            from gspdml.models.pretrained import load_weights, read_recipe_weights

            source = f"pre-training recipe weights {weights}"
            load_weights(self, read_recipe_weights(weights), source=source)
        if frozen:
            self.freeze()
        elif freeze_bn:
            self.freeze_batchnorm(freeze_bn)

    def train(self, mode: bool = True) -> Backbone:
        super().train(mode)
        if self.batchnorm_frozen:
            for module in self.modules():
                if isinstance(module, _BatchNorm):
                    module.train(False)
        return self


def build_backbone(spec: Any, in_channels: int, field: str = "model.backbone") -> Backbone:
    backbone: Backbone = BACKBONES.build(spec, field, in_channels=in_channels)
    return backbone
