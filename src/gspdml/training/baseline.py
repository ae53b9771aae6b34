"""The baselines every run reports beside its trained model (practitioner issue 28): the step-0
model (the weights as built, before any update) and, for a pretrained backbone, the backbone's
own features globally average-pooled and L2-normalised. Training that scores below a baseline
made retrieval worse than no training; the run says so instead of leaving it unseen."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from gspdml.models.output import EmbedderOutput


def backbone_is_pretrained(backbone_spec: Mapping[str, Any]) -> bool:
    """Whether the backbone spec loads pre-trained weights (``pretrained`` or ``weights`` set):
    only then are its raw pooled features a baseline worth the extra embedding pass."""
    return bool(backbone_spec.get("pretrained")) or bool(backbone_spec.get("weights"))


class BackboneGap(nn.Module):
    """The backbone of an embedder, its feature map averaged over space and L2-normalised: no
    head, no trained pooling. Shares the backbone's parameters (nothing is copied)."""

    def __init__(self, backbone: nn.Module):
        super().__init__()
        self.backbone = backbone

    def forward(self, images: torch.Tensor) -> EmbedderOutput:
        maps = self.backbone(images)
        pooled = maps.flatten(2).mean(-1) if maps.dim() > 2 else maps
        return EmbedderOutput(embedding=F.normalize(pooled.float(), dim=-1), pooled=pooled)


def comparison(metric: str, trained: float, baselines: Mapping[str, Mapping[str, float]]) -> str:
    """One console line: the trained model's ``metric`` beside each baseline's."""
    parts = ", ".join(f"{name} {scores[metric]:.4f}" for name, scores in baselines.items())
    return f"baseline: test {metric} {trained:.4f} trained vs {parts}"


def worse_than(
    metric: str, trained: float, baselines: Mapping[str, Mapping[str, float]]
) -> list[str]:
    """A warning for each baseline that scores above the trained model on ``metric``."""
    return [
        f"the trained model is worse than the {name} baseline: test {metric} {trained:.4f} "
        f"< {scores[metric]:.4f}"
        for name, scores in baselines.items()
        if scores[metric] > trained
    ]
