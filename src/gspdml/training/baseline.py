"""The baselines every run reports beside its trained model (practitioner issue 28): the step-0
model and, for a pretrained backbone, its features average-pooled and L2-normalised; the run
warns when training scores below one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

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
    """The test metrics of each baseline by name (``step0``, ``backbone_gap``) and, for each one
    that could not be evaluated, why; taken before step 1 and kept in the checkpoint, so a
    resumed run reports the same. ``test_data``: the content digests of the test split they were
    scored on (:func:`test_split_digests`), so that a resume on changed data (``--allow-data-change``)
    is not compared with them as if on the same queries."""

    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    test_data: dict[str, Any] = field(default_factory=dict)

    def evaluate(
        self,
        model: nn.Module,
        config: ModelConfig,
        score: Callable[[nn.Module], dict[str, float]],
        data_record: Mapping[str, Any],
    ) -> None:
        """The metrics ``score`` gives the model as built (``step0``, unless a module of it
        initialises from training data) and, when ``config`` names a pre-trained backbone, its
        :class:`BackboneGap` (a model that declares no backbone,
        :class:`~gspdml.models.freezable.Freezable`, has that row skipped), on the test data of
        ``data_record`` (the run's data fingerprint). The random state is put back, so training
        is the same with or without."""
        state = rng_state()
        self.test_data = test_split_digests(data_record)
        if any(isinstance(m, LazyInitialised) and not m.is_initialised for m in model.modules()):
            self.skipped["step0"] = LAZY_MODEL
        else:
            self.scores["step0"] = score(model)
        if config.pretrained_backbone and isinstance(model, Freezable):
            self.scores["backbone_gap"] = score(BackboneGap(model.backbone))
        elif config.pretrained_backbone:
            self.skipped["backbone_gap"] = NO_BACKBONE
        set_rng_state(state)

    def unlike(self, test: Mapping[str, Any], data_record: Mapping[str, Any]) -> str:
        """Why the trained model's ``test`` metrics (scored on the data of ``data_record``, the
        run's data fingerprint now) are not comparable with the baselines', naming the queries
        each side rests on; empty when they were scored on the same test data (a checkpoint
        without ``test_data``, from before it was kept, is judged by the query counts)."""
        counts = {name: row.get("num_queries") for name, row in self.scores.items()}
        changed = bool(self.test_data) and self.test_data != test_split_digests(data_record)
        recount = any(count != test.get("num_queries") for count in counts.values())
        if not (changed or recount):
            return ""
        sides = ", ".join(f"{name} on {count} queries" for name, count in counts.items())
        return (
            f"the test data changed since step 0 (a resume with --allow-data-change): the "
            f"baselines were scored before it ({sides}), the trained model on "
            f"{test.get('num_queries')} queries; not a like-for-like comparison"
        )

    def report(self, metric: str, test: Mapping[str, Any], unlike: str = "") -> list[str]:
        """The console lines: the trained model's ``metric`` (of its ``test`` metrics) beside
        each baseline's, a warning for each baseline that scores higher, and each skipped
        baseline with its reason; with ``unlike`` (:meth:`unlike`), each side's query count and
        that note."""

        def side(name: str, row: Mapping[str, Any]) -> str:
            count = f" ({row.get('num_queries')} queries)" if unlike else ""
            return f"{name} {row[metric]:.4f}{count}"

        scores = {name: row[metric] for name, row in self.scores.items()}
        both = ", ".join(side(name, row) for name, row in self.scores.items())
        trained = float(test[metric])
        lines = [f"baseline: test {metric} {side('trained', test)} vs {both}"] if scores else []
        lines += [f"baseline: {unlike}"] if scores and unlike else []
        lines += [
            f"warning: the trained model is worse than the {name} baseline: test {metric} "
            f"{trained:.4f} < {value:.4f}"
            for name, value in scores.items()
            if value > trained
        ]
        return lines + [f"baseline: {name} skipped ({why})" for name, why in self.skipped.items()]


def test_split_digests(data_record: Mapping[str, Any]) -> dict[str, Any]:
    """The content digest of each part of the test split (``test.query``, ``test.gallery``) in a
    run's data fingerprint (:func:`~gspdml.training.data_fingerprint.fingerprint`)."""
    return {
        part: record.get("content")
        for part, record in data_record.items()
        if part.startswith("test.") and isinstance(record, Mapping)
    }
