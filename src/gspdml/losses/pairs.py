"""Template for losses defined on (anchor, reference) pairs, with or without a memory bank.

In-batch use compares the batch with itself and drops the diagonal (self-pairs, by index).
Cross-batch use (XBM) passes ``reference``/``reference_labels``; ``reference_self[i]`` is the
column holding anchor ``i``'s own copy (or -1), dropped by index as well.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError
from gspdml.losses.base import MetricLoss

#: reductions shared by the pair losses (each loss's docstring says what it averages over)
REDUCTIONS = ("avg_nonzero", "mean")


def check_reduction(loss_name: str, reduction: str) -> str:
    """Return ``reduction`` or raise a :class:`ConfigError` naming ``<loss>.reduction``."""
    if reduction not in REDUCTIONS:
        raise ConfigError(
            f"{loss_name}.reduction", f"unknown reduction {reduction!r}; allowed: {', '.join(REDUCTIONS)}"
        )
    return reduction


def euclidean_distances(a: torch.Tensor, b: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    """Pairwise L2 distances ``[A, B]`` of L2-normalised rows (the default distance of
    pytorch-metric-learning's ``LpDistance``), with a gradient that stays finite at zero distance;
    ``normalize=False`` measures the rows as given (``LpDistance(normalize_embeddings=False)``)."""
    if normalize:
        a, b = F.normalize(a, dim=1), F.normalize(b, dim=1)
    squared = (a.pow(2).sum(1, keepdim=True) + b.pow(2).sum(1)[None, :] - 2.0 * a @ b.T).clamp(min=0.0)
    return torch.sqrt(squared + 1e-12)


def cosine_similarities(a: torch.Tensor, b: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    """Pairwise cosine similarities ``[A, B]``; ``normalize=False``: inner products of the rows as given."""
    if normalize:
        a, b = F.normalize(a, dim=1), F.normalize(b, dim=1)
    return a @ b.T


def log1p_sum_exp(logits: torch.Tensor, mask: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """``log(1 + sum_{mask} exp(logits))`` along ``dim``, stably; 0 where the mask is empty."""
    masked = logits.masked_fill(~mask, float("-inf"))
    zero = torch.zeros_like(masked.narrow(dim, 0, 1))
    return torch.logsumexp(torch.cat([zero, masked], dim=dim), dim=dim)


def pair_masks(
    labels: torch.Tensor, reference_labels: torch.Tensor, self_columns: Optional[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean ``[B, R]`` masks of positive and negative pairs; ``self_columns[i]`` (or -1) is excluded."""
    same = labels[:, None] == reference_labels[None, :]
    valid = torch.ones_like(same)
    if self_columns is not None:
        rows = torch.nonzero(self_columns >= 0).squeeze(1)
        valid[rows, self_columns[rows]] = False
    return same & valid, ~same & valid


def mean_nonzero(values: torch.Tensor) -> torch.Tensor:
    """Mean over strictly positive entries; 0 (keeping the graph) when there are none.

    Same rule as pytorch-metric-learning's ``AvgNonZeroReducer``.
    """
    count = (values > 0).sum()
    return values.sum() / count.clamp(min=1)


def mean_or_zero(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Mean of ``values``; 0 (keeping the graph of ``like``) when ``values`` is empty."""
    return values.mean() if values.numel() else like.sum() * 0.0


def resolve_reference(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    reference: Optional[torch.Tensor],
    reference_labels: Optional[torch.Tensor],
    reference_self: Optional[torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """``(reference, reference_labels, reference_self)``; the batch itself (diagonal excluded) by default."""
    if reference is None:
        return embeddings, labels, torch.arange(len(labels), device=labels.device)
    if reference_labels is None or len(reference_labels) != len(reference):
        raise ValueError("reference_labels must be given with one label per reference row")
    return reference.to(embeddings.dtype), reference_labels, reference_self


class PairLoss(MetricLoss):
    """Base for pair losses: subclasses implement :meth:`pair_loss` on ``[B, R]`` masks.

    ``forward(embeddings, labels)`` compares the batch with itself (self-pairs dropped by index);
    ``forward(embeddings, labels, reference=R, reference_labels=y_R, reference_self=s)`` compares
    the batch (anchors) with another set, e.g. XBM's memory or CCP's proxies; ``s[i]`` is the
    column of anchor ``i``'s own copy in ``R`` (or -1), dropped by index.

    Subclasses measure pairs with :meth:`distances` and :meth:`similarities`, which L2-normalise
    the rows first; a wrapper that normalises its inputs differently (CCP's clip normalisation)
    sets ``normalize_inputs = False`` on its base loss.
    """

    normalize_inputs = True

    def distances(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return euclidean_distances(a, b, self.normalize_inputs)

    def similarities(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return cosine_similarities(a, b, self.normalize_inputs)

    def forward(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor,
        output=None,
        *,
        reference: Optional[torch.Tensor] = None,
        reference_labels: Optional[torch.Tensor] = None,
        reference_self: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        reference, reference_labels, reference_self = resolve_reference(
            embeddings, labels, reference, reference_labels, reference_self
        )
        positive, negative = pair_masks(labels, reference_labels, reference_self)
        return self.pair_loss(embeddings, reference, positive, negative)

    def pair_loss(
        self, anchors: torch.Tensor, reference: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor
    ) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError
