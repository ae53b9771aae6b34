"""Running a model over a dataset: embeddings ``[N, D]`` of ``(image, label)`` items, in order.

:func:`embed` is the one embedding loop of the package (trainer evaluation, ``gspdml evaluate``,
protocols, retrieval): batches of :func:`stack_batch` in eval mode, at the run's resolved
precision (:func:`autocast_context`; ``auto`` is resolved once by the run's entry with
:func:`gspdml.compat.hardware.resolve_precision`), in the layout of :func:`memory_format`.
:func:`split_embeddings` embeds the query and gallery sets of an
:class:`~gspdml.data.base.EvalSplit`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence, Sized
from typing import Any, Optional, cast

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from gspdml.compat.hardware import Precision, precision_name
from gspdml.data.base import EvalSplit
from gspdml.errors import DataError
from gspdml.progress import Progress


def resolve_device(name: str) -> torch.device:
    """``auto``: the GPU when there is one, else the CPU; any other name as torch reads it."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def memory_format(precision: Precision, device: torch.device) -> torch.memory_format:
    """``channels_last`` where convolutions at ``precision`` run faster in it (bf16 or fp16 on CUDA
    tensor cores, bf16 on a CPU's oneDNN kernels), else NCHW; the one place of this rule."""
    precision = precision_name(precision)
    if (device.type == "cuda" and precision in ("bf16", "fp16")) or (
        device.type == "cpu" and precision == "bf16"
    ):
        return torch.channels_last
    return torch.contiguous_format


def placed(model: nn.Module, device: torch.device, precision: Precision) -> nn.Module:
    """``model`` on ``device`` in the layout of ``precision`` (:func:`memory_format`)."""
    layout = memory_format(precision, device)
    moved: nn.Module = model.to(device, memory_format=layout)  # type: ignore[call-overload]  # torch's stubs lack it
    return moved


#: the most loader processes ``data.num_workers: auto`` starts for one GPU
MAX_AUTO_WORKERS = 16


def resolve_num_workers(value: int | str, device: torch.device | str) -> int:
    """``data.num_workers``: a number as given; ``auto``: on a GPU, this process's share of the
    usable CPU cores (``LOCAL_WORLD_SIZE`` processes under torchrun) less the one driving the GPU, at
    most :data:`MAX_AUTO_WORKERS`; on a CPU 0 (a worker would only move decoding between the cores).
    """
    if value != "auto":
        return int(value)
    if torch.device(device).type != "cuda":
        return 0
    cores = len(os.sched_getaffinity(0)) // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    return max(1, min(MAX_AUTO_WORKERS, cores - 1))


def loader_options(workers: int) -> dict[str, Any]:
    """DataLoader options for ``workers`` processes: kept alive between epochs and reading
    ahead four batches each (none without workers)."""
    if workers == 0:
        return {"num_workers": 0}
    return {"num_workers": workers, "persistent_workers": True, "prefetch_factor": 4}


def autocast_context(
    precision: Precision, device: torch.device
) -> contextlib.AbstractContextManager[object]:
    """bf16 autocast (CPU or GPU), fp16 AMP (GPU), or nothing for fp32, for a resolved
    ``precision``."""
    precision = precision_name(precision)
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    if precision == "fp16":
        return torch.autocast(device.type, dtype=torch.float16)
    return contextlib.nullcontext()


def stack_batch(batch: Sequence[tuple[Any, Any]]) -> Optional[tuple[torch.Tensor, torch.Tensor]]:
    """Collate ``(image, label)`` items into images ``[B, C, H, W]`` and int64 labels ``[B]``;
    images of different sizes get an error that says how to fix the config. Items whose image is
    None (skipped files, see gspdml.retrieval.embedding) are left out; a batch of only those is None."""
    batch = [item for item in batch if item[0] is not None]
    if not batch:
        return None
    images = [item[0] for item in batch]
    shapes = sorted({tuple(image.shape) for image in images})
    if len(shapes) > 1:
        raise DataError(
            f"images of different sizes {shapes} in one batch; give the run's config.yaml a "
            "'data.eval_transform' with 'resize' and 'center_crop' (see gspdml.data.eval_transform)"
        )
    return torch.stack(images), torch.as_tensor([int(item[1]) for item in batch], dtype=torch.int64)


@torch.no_grad()
def embed(
    model: nn.Module,
    dataset: Dataset[Any],
    batch_size: int = 256,
    device: torch.device | str = "cpu",
    precision: Precision = "fp32",
    num_workers: int | str = 0,
    progress: bool | Progress = False,
    on_device: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Embeddings ``[N, D]`` (float32, on the CPU unless ``on_device``, in dataset order) and labels
    ``[N]`` (int64) of ``(image, label)`` items, in eval mode (the model's mode is restored after).
    ``progress``: True prints progress lines, a caller's ``Progress`` is counted on;
    ``precision`` is resolved by the caller; ``num_workers`` may be ``auto``."""
    device = torch.device(device)
    keep = device if on_device else torch.device("cpu")
    precision = precision_name(precision)
    was_training = model.training
    model.eval()
    workers = resolve_num_workers(num_workers, device)
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=False,
        num_workers=workers,
        pin_memory=device.type == "cuda",
        collate_fn=stack_batch,
        prefetch_factor=4 if workers else None,
    )
    layout = memory_format(precision, device)
    total = len(cast(Sized, dataset))
    meter = (
        progress
        if isinstance(progress, Progress)
        else Progress(f"embedding {total} images", total, "images", enabled=progress)
    )
    chunks, labels = [], []
    try:
        for batch in loader:
            if batch is None:
                continue
            images, targets = batch
            images = images.to(device, non_blocking=True).contiguous(memory_format=layout)
            with autocast_context(precision, device):
                chunks.append(model(images).embedding.float().to(keep))
            labels.append(targets)
            meter.update(len(targets))
    finally:
        model.train(was_training)
    if meter is not progress:
        meter.close()
    if not chunks:
        raise ValueError("cannot embed an empty dataset")
    return torch.cat(chunks), torch.cat(labels)


#: ``(query, query labels, gallery, gallery labels)``; the gallery is None for leave-one-out
SplitEmbeddings = tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]


def split_embeddings(
    model: nn.Module,
    split: EvalSplit,
    embed_fn: Callable[..., tuple[torch.Tensor, torch.Tensor]] = embed,
    **kwargs: Any,
) -> SplitEmbeddings:
    """``(query, query_labels, gallery, gallery_labels)`` of a split (gallery ``None`` for
    leave-one-out); ``embed_fn(model, dataset, **kwargs)`` embeds one dataset."""
    query, query_labels = embed_fn(model, split.query, **kwargs)
    if split.gallery is None:
        return query, query_labels, None, None
    return (query, query_labels, *embed_fn(model, split.gallery, **kwargs))
