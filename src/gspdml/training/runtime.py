"""Where a run computes: its processes, device, precision and data-loading workers (the
``trainer`` section and ``data.num_workers``), resolved once before anything is built, and the
forms of the model the training step runs (data-parallel, compiled)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from gspdml.compat.hardware import PrecisionChoice, resolve_precision
from gspdml.models.inference import memory_format, resolve_device, resolve_num_workers
from gspdml.settings.sections import RunConfig
from gspdml.training import distributed as ddp
from gspdml.training.host_memory import keep_freed_host_memory


@dataclass(frozen=True)
class Runtime:
    """The resolved ``trainer`` section: everything a run passes to what it calls."""

    device: torch.device
    dist: Optional[ddp.DistributedContext]
    precision_choice: PrecisionChoice
    layout: torch.memory_format
    num_workers: int

    @property
    def is_main(self) -> bool:
        """Whether this process writes the run directory (rank 0, or the only process)."""
        return self.dist is None or self.dist.is_main

    @property
    def precision(self) -> str:
        """The resolved precision (``fp32``, ``bf16`` or ``fp16``), never ``auto``."""
        return self.precision_choice.precision


def start_runtime(config: RunConfig) -> Runtime:
    """Join the process group (``trainer.distributed``), pick the device and resolve the
    precision (:func:`~gspdml.compat.hardware.resolve_precision`, once per run)."""
    trainer = config.trainer
    dist, device = ddp.setup_distributed(trainer.distributed, resolve_device(trainer.device))
    if device.type == "cpu" and trainer.keep_freed_memory:
        keep_freed_host_memory()  # no fresh pages to fault in at every step (glibc)
    choice = resolve_precision(trainer.precision, device)
    if device.type == "cuda":  # training batches have one shape: tune the kernels once
        torch.backends.cudnn.benchmark = True
    workers = resolve_num_workers(config.data.num_workers, device)
    return Runtime(device, dist, choice, memory_format(choice.precision, device), workers)


def data_parallel(model: nn.Module, device: torch.device) -> tuple[nn.Module, nn.Module]:
    """``(model, DDP around it)``; on a GPU the batch norms become SyncBatchNorm (a new module).
    Unused parameters (optional pooling parts) are allowed."""
    if device.type == "cuda":
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    ids = [device.index] if device.type == "cuda" else None
    return model, DistributedDataParallel(model, device_ids=ids, find_unused_parameters=True)


def compiled(model: nn.Module, compile: bool | str) -> nn.Module:
    """``trainer.compile``: the model the training step runs (evaluation uses the eager one)."""
    if not compile:
        return model
    return torch.compile(model, backend="inductor" if compile is True else compile)  # type: ignore[return-value]
