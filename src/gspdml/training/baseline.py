"""The baselines every run reports beside its trained model (practitioner issue 28): the step-0
model and, for a pretrained backbone, its features average-pooled and L2-normalised; the run
warns when training scores below one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from gspdml.models.freezable import Freezable
from gspdml.models.output import EmbedderOutput
from gspdml.pooling.base import LazyInitialised
from gspdml.settings.sections import ModelConfig
from gspdml.training.rng import rng_state, set_rng_state

#: why a baseline was not evaluated
LAZY_MODEL = "the model initialises from training data"
NO_BACKBONE = (
    "model.backbone names pre-trained weights, but the model declares no backbone "
    "(gspdml.models.freezable.Freezable)"
)


class BackboneGap(nn.Module):
    """The backbone's feature map averaged over space and L2-normalised (parameters shared)."""

    def __init__(self, backbone: nn.Module):
        super().__init__()
        self.backbone = backbone

    def forward(self, images: torch.Tensor) -> EmbedderOutput:
        maps = self.backbone(images)
        pooled = maps.flatten(2).mean(-1) if maps.dim() > 2 else maps
        return EmbedderOutput(embedding=F.normalize(pooled.float(), dim=-1), pooled=pooled)


@dataclass
class Baselines:
    """The test metrics of each baseline by name (``step0``, ``backbone_gap``), and why any was
    skipped; taken before step 1 and checkpointed."""

    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def evaluate(
        self, model: nn.Module, config: ModelConfig, score: Callable[[nn.Module], dict[str, float]]
    ) -> None:
        """Score the model as built (unless it initialises from training data) and, for a
        pre-trained backbone of a :class:`~gspdml.models.freezable.Freezable` model, its
        :class:`BackboneGap`; the random state is put back."""
        state = rng_state()
        if any(isinstance(m, LazyInitialised) and not m.is_initialised for m in model.modules()):
            self.skipped["step0"] = LAZY_MODEL
        else:
            self.scores["step0"] = score(model)
        if config.pretrained_backbone and isinstance(model, Freezable):
            self.scores["backbone_gap"] = score(BackboneGap(model.backbone))
        elif config.pretrained_backbone:
            self.skipped["backbone_gap"] = NO_BACKBONE
        set_rng_state(state)

    def report(self, metric: str, trained: float) -> list[str]:
        """The console lines: ``metric`` beside each baseline's, warnings, skipped baselines."""
        scores = {name: row[metric] for name, row in self.scores.items()}
        both = ", ".join(f"{name} {value:.4f}" for name, value in scores.items())
        lines = [f"baseline: test {metric} {trained:.4f} trained vs {both}"] if scores else []
        lines += [
            f"warning: the trained model is worse than the {name} baseline: test {metric} "
            f"{trained:.4f} < {value:.4f}"
            for name, value in scores.items()
            if value > trained
        ]
        return lines + [f"baseline: {name} skipped ({why})" for name, why in self.skipped.items()]
