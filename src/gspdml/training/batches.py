"""The training batches of a run (``data`` section): their shape, computed once from the config
and the training labels (:class:`BatchPlan`), the sampler of ``(index, epoch)`` items
(augmentation is a function of seed, epoch and index) and the loader over it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional, cast

import numpy as np
from torch.utils.data import DataLoader

from gspdml.data.samplers import ClassBalancedBatchSampler, EpochBatchSampler, RandomBatchSampler
from gspdml.data.seeded import TrainingDataset
from gspdml.models.inference import loader_options
from gspdml.settings.sections import DataConfig, RunConfig
from gspdml.training.distributed import DistributedContext
from gspdml.training.runtime import Runtime


@dataclass(frozen=True)
class BatchPlan:
    """One global training batch: ``classes_per_batch`` x ``samples_per_class`` images (the
    random sampler draws as many random images)."""

    classes_per_batch: int
    samples_per_class: int

    @property
    def size(self) -> int:
        return self.classes_per_batch * self.samples_per_class


def batch_plan(data: DataConfig, labels: np.ndarray) -> BatchPlan:
    """The batches ``data`` describes for a training split with these labels
    (``classes_per_batch: auto`` counts its classes)."""
    return BatchPlan(data.batch_classes(len(np.unique(labels))), data.samples_per_class)


def build_sampler(
    plan: BatchPlan, config: RunConfig, dataset: TrainingDataset, dist: Optional[DistributedContext]
) -> EpochBatchSampler:
    """The batches of ``(index, epoch)`` items (``config.data``, seeded by ``config.seed``);
    data-parallel ranks each keep their slice of the same global batch."""
    data, seed = config.data, config.seed
    rank, world = (dist.rank, dist.world_size) if dist else (0, 1)
    labels = cast(Sequence[int], dataset.labels)  # an int64 array: the samplers read any
    if data.sampler == "random":
        return RandomBatchSampler(
            labels, plan.size, seed=seed, rank=rank, world_size=world, with_epoch=True
        )
    return ClassBalancedBatchSampler(
        labels,
        plan.classes_per_batch,
        plan.samples_per_class,
        halves=data.halves,
        replacement=data.replacement,
        seed=seed,
        rank=rank,
        world_size=world,
        class_names=getattr(dataset, "class_names", None),  # optional (dataset protocol)
        with_epoch=True,
    )


def training_loader(
    dataset: TrainingDataset, sampler: EpochBatchSampler, runtime: Runtime
) -> DataLoader[Any]:
    """The training batches; each pass runs from the sampler's position (the trainer's step) to
    the end of its epoch."""
    return DataLoader(
        dataset,  # type: ignore[arg-type]
        batch_sampler=sampler,
        pin_memory=runtime.device.type == "cuda",
        **loader_options(runtime.num_workers),
    )
