"""The baselines every run reports beside its trained model (practitioner issue 28): the step-0
model (the weights as built, before any update) and, for a pretrained backbone, the backbone's
own features globally average-pooled and L2-normalised. Training that scores below a baseline
made retrieval worse than no training; the run says so instead of leaving it unseen."""

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
    """The backbone of an embedder, its feature map averaged over space and L2-normalised: no
    head, no trained pooling. Shares the backbone's parameters (nothing is copied)."""

    def __init__(self, backbone: nn.Module):
        super().__init__()
        self.backbone = backbone

    def forward(self, images: torch.Tensor) -> EmbedderOutput:
        maps = self.backbone(images)
        pooled = maps.flatten(2).mean(-1) if maps.dim() > 2 else maps
        return EmbedderOutput(embedding=F.normalize(pooled.float(), dim=-1), pooled=pooled)


@dataclass
class Baselines:
    """The test metrics of each baseline by name (``step0``, ``backbone_gap``) and, for each one
    that could not be evaluated, why; taken before step 1 and kept in the checkpoint, so a
    resumed run reports the same."""

    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def evaluate(
        self, model: nn.Module, config: ModelConfig, score: Callable[[nn.Module], dict[str, float]]
    ) -> None:
        """The metrics ``score`` gives the model as built (``step0``, unless a module of it
        initialises from training data) and, when ``config`` names a pre-trained backbone, its
        :class:`BackboneGap` (a model that declares no backbone,
        :class:`~gspdml.models.freezable.Freezable`, has that row skipped). The random state is
        put back, so training is the same with or without."""
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
        """The console lines: the trained model's ``metric`` beside each baseline's, a warning
        for each baseline that scores higher, and each skipped baseline with its reason."""
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
