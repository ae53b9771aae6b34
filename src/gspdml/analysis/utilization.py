"""Utilisation of the training set by the test set (Psomas thesis §2.4.5, Eq. 2.24)::

    u(Q, X) = (1/|Q|) sum_{q in Q} min_{x in X} || f(q) - f(x) ||^2

the mean over test queries of the squared Euclidean distance to the nearest training embedding
(lower: the training set, clean or mixed, comes nearer the test examples). With mixup it is
measured as ``u(Q, X^)``, ``X^`` the training set with the mixed examples of some epochs, ``f``
fixed; since ``X`` is in ``X^``, ``u(Q, X^) <= u(Q, X)`` (the thesis: 0.41 to 0.32 with
contrastive + Metrix on CUB200). :func:`augmented_training_set` yields ``X^`` in batches from a
trained model and its :class:`~gspdml.losses.metrix.Metrix` loss; :func:`utilization` takes the
references in blocks, so ``X^`` never has to fit in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Union

import torch
import torch.nn.functional as F
from torch import nn

from gspdml.losses.metrix import Metrix


def nearest_squared_distances(
    queries: torch.Tensor, references: Union[torch.Tensor, Iterable[torch.Tensor]]
) -> torch.Tensor:
    """``[Q]`` float64 squared distances of each query to its nearest reference; ``references``
    is one ``[N, D]`` tensor or an iterable of ``[N_i, D]`` blocks (a running minimum)."""
    blocks = [references] if isinstance(references, torch.Tensor) else references
    q = queries.detach().double()
    best = torch.full((len(q),), float("inf"), dtype=torch.float64, device=q.device)
    seen = False
    for block in blocks:
        if block.shape[-1] != q.shape[1]:
            raise ValueError(
                f"references have dimension {block.shape[-1]}, the queries {q.shape[1]}"
            )
        if len(block) == 0:
            continue
        x = block.detach().to(device=q.device, dtype=torch.float64)
        squared = (q * q).sum(1)[:, None] + (x * x).sum(1)[None, :] - 2.0 * q @ x.T
        best = torch.minimum(best, squared.clamp(min=0.0).amin(dim=1))
        seen = True
    if not seen:
        raise ValueError("utilisation needs at least one reference embedding")
    return best


def utilization(
    queries: torch.Tensor, references: Union[torch.Tensor, Iterable[torch.Tensor]]
) -> float:
    """Eq. 2.24: the mean over ``queries`` ``[Q, D]`` of the squared distance to the nearest of
    ``references`` (a tensor or blocks, :func:`nearest_squared_distances`)."""
    if len(queries) == 0:
        raise ValueError("utilisation needs at least one query")
    return float(nearest_squared_distances(queries, references).mean())


@torch.no_grad()
def augmented_training_set(
    model: nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    loss: Metrix,
    epochs: int = 1,
    mixed: bool = True,
) -> Iterator[torch.Tensor]:
    """Blocks of ``X^``: for ``epochs`` passes over ``batches`` (``(images, labels)``, re-iterated
    per epoch), each batch's clean embeddings and, with ``mixed``, the mixed embeddings ``loss``
    forms from it (:meth:`~gspdml.losses.metrix.Metrix.mixed_embeddings`: its level, pairs and
    ``lambda`` draws), ``f`` fixed in eval mode. ``mixed=False`` gives the clean ``X`` alone."""
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    was_training = model.training
    model.eval()
    try:
        for _ in range(epochs):
            for images, labels in batches:
                if not mixed:
                    yield F.normalize(model(images).embedding, dim=1)
                    continue
                clean, extra = loss.mixed_embeddings(model, images, labels)
                yield clean
                if len(extra):
                    yield extra
    finally:
        model.train(was_training)
