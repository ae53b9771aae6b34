"""Data-parallel training over several processes (``torchrun``), equal to one process on the global batch.

Launch ``torchrun --nproc_per_node N -m gspdml train run.yaml``; with ``trainer.distributed:
auto`` the trainer joins the process group when ``WORLD_SIZE > 1`` (gloo on CPU, nccl on GPU:
``cuda:LOCAL_RANK``). The semantics are those of one process seeing the global batch:

* **Batches.** Every rank draws the same global batch and keeps its contiguous slice, so the
  slices in rank order restore the global order (ZSR/XML halves).
* **One objective.** The loss's ``training_objective`` gets :func:`global_batch`: a
  :class:`GlobalBatchModel` returning the global batch's outputs, and the gathered labels. A
  loss that runs the model on other inputs or parts (Metrix mixup) stops with a ConfigError.
* **Pair losses on the global batch.** :func:`gather_with_grad` all-gathers every tensor of the
  output; other ranks' rows are constants, the local rows keep their graph
  (pytorch-metric-learning's ``DistributedLossWrapper``, PML issue #10). Every rank computes the
  same loss ``L``, so rank ``r`` gets ``dL/de_r`` for its own rows only; DDP *averages* over
  ranks, hence the local rows' gradient is multiplied by ``world_size`` (PML#363) in the
  gather's backward, and the reported loss stays the global loss.
* **Loss parameters** (proxies) get the full gradient on every rank; :func:`average_gradients`
  all-reduces them so they stay bit-identical across ranks (PML#710).
* **Cross-batch memory** (XBM) receives the gathered global batch.
* **Evaluation** (:func:`embed_sharded`): each rank embeds a contiguous shard, the shards are
  all-gathered in order, and rank 0's metrics are broadcast.
* **Batch norm**: ``SyncBatchNorm`` on GPU; on CPU (no kernel) each rank uses its own slice's
  statistics and rank 0's buffers are used everywhere.

Only rank 0 writes files; all ranks read the checkpoint on ``--resume``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sized
from dataclasses import dataclass
from typing import Any, NoReturn, Optional, cast

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import Dataset, Subset

from gspdml.errors import ConfigError
from gspdml.models.inference import embed
from gspdml.models.output import EmbedderOutput


@dataclass(frozen=True)
class DistributedContext:
    """This process's place in the process group."""

    rank: int
    world_size: int
    local_rank: int
    owns_group: bool  # whether this module initialised the group (and must destroy it)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        dist.barrier()

    def broadcast_object(self, obj: Any) -> Any:
        """``obj`` of rank 0 on every rank."""
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def close(self) -> None:
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()


def launched_world_size() -> int:
    """``WORLD_SIZE`` as set by ``torchrun`` (default 1)."""
    return _launched("WORLD_SIZE", 1)


def launched_rank() -> int:
    """``RANK`` as set by ``torchrun`` (0 when not launched by it)."""
    return _launched("RANK", 0)


def _launched(variable: str, default: int) -> int:
    value = os.environ.get(variable, str(default))
    try:
        return int(value)
    except ValueError:
        raise ConfigError(
            "trainer.distributed", f"environment variable {variable}={value!r} is not an integer"
        ) from None


def setup_distributed(
    mode: str, device: torch.device
) -> tuple[Optional[DistributedContext], torch.device]:
    """Join the process group when ``mode`` is ``auto`` and ``WORLD_SIZE > 1``; returns
    ``(context or None, device)`` (on CUDA ``cuda:LOCAL_RANK``)."""
    if mode == "off" or launched_world_size() <= 1:
        return None, device
    local_rank = _launched("LOCAL_RANK", 0)
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    owns = not dist.is_initialized()
    if owns:
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistributedContext(dist.get_rank(), dist.get_world_size(), local_rank, owns), device


class _ScaleGradient(torch.autograd.Function):
    """Identity forward; multiplies the incoming gradient by ``factor`` (undoes DDP's averaging)."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, factor: float) -> torch.Tensor:
        ctx.factor = factor
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad * ctx.factor, None


def gather_with_grad(tensor: torch.Tensor, context: DistributedContext) -> torch.Tensor:
    """All-gather along dim 0 in rank order; this rank's rows keep their graph (gradient scaled
    by ``world_size``, see the module docstring), the other ranks' rows are constants."""
    parts = [torch.empty_like(tensor) for _ in range(context.world_size)]
    dist.all_gather(parts, tensor.detach().contiguous())
    # torch leaves ``Function.apply`` unannotated; the forward gives its result's type
    scaled = cast(Callable[[torch.Tensor, float], torch.Tensor], _ScaleGradient.apply)
    parts[context.rank] = (
        scaled(tensor, float(context.world_size)) if tensor.requires_grad else tensor
    )
    return torch.cat(parts)


def gather_output(output: EmbedderOutput, context: DistributedContext) -> EmbedderOutput:
    """:func:`gather_with_grad` applied to every tensor of an embedder output."""
    values = [(f.name, getattr(output, f.name)) for f in dataclasses.fields(output)]
    tensors = {name: value for name, value in values if isinstance(value, torch.Tensor)}
    gathered = {name: gather_with_grad(value, context) for name, value in tensors.items()}
    return dataclasses.replace(output, **gathered)


class GlobalBatchModel:
    """The model a loss's ``training_objective`` sees in a data-parallel step: called on the
    step's images, it returns the gathered output of the global batch; any other input or a part
    of the model is refused (it would run on this rank's slice alone)."""

    def __init__(self, model: nn.Module, images: torch.Tensor, context: DistributedContext):
        self._model, self._images, self._context = model, images, context

    def __call__(self, images: torch.Tensor) -> EmbedderOutput:
        if images is not self._images:
            raise self._refusal("runs the model on inputs it builds itself")
        return gather_output(self._model(images), self._context)

    def __getattr__(self, name: str) -> NoReturn:
        raise self._refusal(f"uses model.{name}")

    @staticmethod
    def _refusal(what: str) -> ConfigError:
        return ConfigError(
            "trainer.distributed",
            f"the loss {what} (e.g. Metrix mixup at the input or feature level); "
            "data-parallel training gathers only the model's output on the step's batch",
        )


def global_batch(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, context: DistributedContext
) -> tuple[GlobalBatchModel, torch.Tensor]:
    """``(model, labels)`` of the global batch for the loss's ``training_objective``."""
    return GlobalBatchModel(model, images, context), gather_with_grad(labels, context)


def average_gradients(module: nn.Module) -> None:
    """All-reduce (mean) the gradients of ``module``'s parameters (the loss's proxies)."""
    for param in module.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)
            param.grad.div_(dist.get_world_size())


def broadcast_buffers(module: nn.Module) -> None:
    """Give every rank rank 0's buffers (batch-norm running statistics)."""
    for buffer in module.buffers():
        dist.broadcast(buffer, src=0)


def embed_sharded(
    context: DistributedContext,
    model: nn.Module,
    dataset: Dataset[Any],
    batch_size: int = 256,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`~gspdml.models.inference.embed` of ``dataset`` split over the ranks (rank ``r``:
    ``[r n / W, (r + 1) n / W)``), all-gathered in order on every rank. A rank with an empty
    shard learns the width from the others."""
    n, world = len(cast(Sized, dataset)), context.world_size
    bounds = [r * n // world for r in range(world + 1)]
    sizes = [bounds[r + 1] - bounds[r] for r in range(world)]
    start, size = bounds[context.rank], sizes[context.rank]
    device = (
        torch.device("cuda", torch.cuda.current_device())
        if dist.get_backend() == "nccl"
        else torch.device("cpu")
    )
    if size:
        emb, labels = embed(
            model, Subset(dataset, range(start, start + size)), batch_size, **kwargs
        )
    widest = torch.tensor(emb.shape[1] if size else 0, device=device)
    dist.all_reduce(widest, op=dist.ReduceOp.MAX)
    width = int(widest)
    if not size:
        emb, labels = torch.zeros(0, width), torch.zeros(0, dtype=torch.int64)
    longest = max(sizes)
    padded_emb = torch.zeros(longest, width, device=device)
    padded_labels = torch.zeros(longest, dtype=torch.int64, device=device)
    padded_emb[:size], padded_labels[:size] = emb.to(device), labels.to(device)
    all_emb = [torch.empty_like(padded_emb) for _ in range(world)]
    all_labels = [torch.empty_like(padded_labels) for _ in range(world)]
    dist.all_gather(all_emb, padded_emb)
    dist.all_gather(all_labels, padded_labels)
    return (
        torch.cat([e[:s] for e, s in zip(all_emb, sizes)]).cpu(),
        torch.cat([y[:s] for y, s in zip(all_labels, sizes)]).cpu(),
    )
