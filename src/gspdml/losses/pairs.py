"""Template for losses defined on (anchor, reference) pairs, with or without a memory bank.

In-batch use compares the batch with itself and drops the diagonal (self-pairs, by index).
Cross-batch use (XBM) passes ``reference``/``reference_labels``; ``reference_self[i]`` is the
column holding anchor ``i``'s own copy (or -1), dropped by index as well.
"""

from __future__ import annotations

from typing import Optional

import torch

from gspdml.losses.base import MetricLoss


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


class PairLoss(MetricLoss):
    """Base for pair losses: subclasses implement :meth:`pair_loss` on ``[B, R]`` masks."""

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
        if reference is None:
            reference, reference_labels = embeddings, labels
            reference_self = torch.arange(len(labels), device=labels.device)
        positive, negative = pair_masks(labels, reference_labels, reference_self)
        return self.pair_loss(embeddings, reference, positive, negative)

    def pair_loss(
        self, anchors: torch.Tensor, reference: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor
    ) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError
