"""The trainer's evaluations (:class:`RunEvaluator`, scored by the evaluation service) and model
selection over validation rounds (:class:`Selection`)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch import nn
from torch.utils.data import Dataset

from gspdml.data.base import DataSplits, EvalSplit
from gspdml.errors import ConfigError
from gspdml.evaluation.service import EvalSpec, evaluate_embeddings
from gspdml.models.inference import embed, split_embeddings
from gspdml.settings.sections import DataConfig, EvaluationConfig
from gspdml.training import distributed as ddp
from gspdml.training.runtime import Runtime

Embeddings = tuple[torch.Tensor, torch.Tensor]


def evaluation_split(data: DataSplits, split: str) -> EvalSplit:
    """The split validation rounds score (``evaluation.split``)."""
    chosen = data.val if split == "val" else data.test
    if chosen is None:
        raise ConfigError("evaluation.split", f"the data has no {split} split")
    return chosen


class RunEvaluator:
    """Embeds and scores splits as the run's ``evaluation`` section says, on the run's device and
    precision; data-parallel, rank 0 scores and every rank gets the metrics."""

    def __init__(
        self,
        evaluation: EvaluationConfig,
        data: DataConfig,
        runtime: Runtime,
        train_dataset: Dataset[Any],
    ):
        self.evaluation, self.runtime, self.train_dataset = evaluation, runtime, train_dataset
        self.options: dict[str, Any] = {
            "batch_size": data.eval_batch_size,
            "device": runtime.device,
            "precision": runtime.precision,
            "num_workers": runtime.num_workers,
        }
        #: the split scored last and its query embeddings and labels (rank 0): the end-of-run
        #: projector (:mod:`gspdml.training.tensorboard_extras`), logged right after the test
        #: round, reads them instead of embedding the test queries a second time
        self.last_scored: Optional[tuple[EvalSplit, torch.Tensor, torch.Tensor]] = None

    def embedder(self, model: nn.Module) -> Callable[..., Embeddings]:
        """``embed`` on one process; on several, the sharded one (after giving every rank rank
        0's batch-norm statistics)."""
        dist = self.runtime.dist
        if dist is None:
            return embed
        ddp.broadcast_buffers(model)
        return functools.partial(ddp.embed_sharded, dist)

    def embed(self, model: nn.Module, dataset: Dataset[Any]) -> Embeddings:
        """Embeddings and labels of ``dataset`` (eval mode), the whole of it on every rank."""
        return self.embedder(model)(model, dataset, **self.options)

    def score(
        self,
        model: nn.Module,
        split: EvalSplit,
        spec: EvalSpec,
        train: Optional[torch.Tensor] = None,
    ) -> dict[str, float]:
        """The metrics of ``spec`` on ``split`` (computed by rank 0, shared with every rank)."""
        on_device = not spec.postprocess  # re-ranking's sparse algebra is scipy's, on the host
        query, query_labels, gallery, gallery_labels = split_embeddings(
            model, split, self.embedder(model), **self.options, on_device=on_device
        )
        dist = self.runtime.dist
        if self.runtime.is_main:
            self.last_scored = (split, query, query_labels)
        metrics = (
            evaluate_embeddings(
                query,
                query_labels,
                gallery,
                gallery_labels,
                spec=spec,
                train=train,
                precision=self.runtime.precision,
            ).metrics
            if self.runtime.is_main
            else None
        )
        return dist.broadcast_object(metrics) if dist else metrics  # type: ignore[return-value]

    def evaluate(self, model: nn.Module, split: EvalSplit) -> dict[str, float]:
        """The default retrieval metrics of ``split``."""
        return self.score(model, split, EvalSpec(recall_at=self.evaluation.recall_at))

    def round(
        self, model: nn.Module, split: EvalSplit, metrics: Optional[tuple[str, ...]] = None
    ) -> dict[str, float]:
        """The report of the run's ``evaluation`` section on ``split``; the training split is
        embedded only for steps that learn on it (PCA-whitening). ``metrics``: the per-query
        metrics (None: all)."""
        spec = EvalSpec.from_evaluation(self.evaluation, metrics=metrics)
        train = self.embed(model, self.train_dataset)[0] if spec.needs_training_embeddings else None
        return self.score(model, split, spec, train)


@dataclass
class Selection:
    """Model selection over validation rounds: the best value and its step, the rounds without
    improvement, early stopping. Without selection (``selects`` false) the latest round stands."""

    selects: bool
    patience: Optional[int]
    best_metric: float = -math.inf
    best_step: int = 0
    bad_rounds: int = 0
    stopped_early: bool = False

    #: what a checkpoint keeps, with its type
    STATE = {"best_metric": float, "best_step": int, "bad_rounds": int, "stopped_early": bool}

    def record(self, value: float, step: int) -> bool:
        """Count a round's ``value`` at ``step``; True when its weights are the new best."""
        improved = self.selects and value > self.best_metric
        if improved or not self.selects:
            self.best_metric, self.best_step = value, step
        if improved:
            self.bad_rounds = 0
        elif self.selects:
            self.bad_rounds += 1
        self.stopped_early = bool(self.patience) and self.bad_rounds >= (self.patience or 0)
        return improved

    def state_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.STATE}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, kind in self.STATE.items():
            setattr(self, key, kind(state[key]))
