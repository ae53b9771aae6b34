"""What the modules beside the trainer read and set of it (:class:`TrainerView`): the running
:class:`~gspdml.training.trainer.Trainer` as its header (:mod:`~gspdml.training.run_header`),
its checkpoint (:mod:`~gspdml.training.trainer_state`) and its evaluations
(:mod:`~gspdml.training.validation`) see it, declared here so that they need not import it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Protocol

import torch
from torch import nn

from gspdml.data.base import DataSplits, EvalSplit, LabelledDataset
from gspdml.losses.base import MetricLoss
from gspdml.settings.sections import RunConfig
from gspdml.training.baseline import Baselines
from gspdml.training.batches import BatchPlan
from gspdml.training.callbacks import Callback
from gspdml.training.distributed import DistributedContext
from gspdml.training.evaluator import Selection
from gspdml.training.metrics_log import MetricsLog
from gspdml.training.optim import Schedules
from gspdml.training.runtime import Runtime


class TrainerView(Protocol):
    """The trainer's parts, places, settings and counters (see the Trainer for each)."""

    config: RunConfig
    run_dir: Path
    checkpoint_path: Path
    best_path: Path
    runtime: Runtime
    device: torch.device
    dist: Optional[DistributedContext]
    is_main: bool
    precision: str
    tensorboard: bool
    data: DataSplits
    data_record: dict[str, Any]
    train_dataset: LabelledDataset
    eval_split: EvalSplit
    batches: BatchPlan
    selects: bool
    model: nn.Module
    loss: MetricLoss
    optimizer: torch.optim.Optimizer
    schedules: Schedules
    scaler: Optional[torch.amp.GradScaler]
    callbacks: dict[str, Callback]
    selection: Selection
    baselines: Baselines
    step: int
    finished: bool
    timing: dict[str, float]
    log: MetricsLog
    timing_log: MetricsLog

    @property
    def last_loss(self) -> float: ...

    def evaluate_round(
        self, split: EvalSplit, metrics: Optional[tuple[str, ...]] = None
    ) -> dict[str, float]: ...

    def _raise_if_not_finite(self) -> None: ...

    def _save_checkpoint(self) -> None: ...

    def _say(self, line: str) -> None: ...

    def _log(self, record: dict[str, Any]) -> None: ...
