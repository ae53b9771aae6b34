"""Lifted structured loss (Song et al. 2016, CVPR, "Deep metric learning via lifted structured
feature embedding", Eq. 4)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from gspdml.losses.base import LOSSES
from gspdml.losses.pairs import PairLoss
from gspdml.losses.reduction import Parts, Terms


def _masked_logsumexp(values: Tensor, mask: Tensor, dim: int) -> Tensor:
    """``log sum_{mask} exp(values)`` along ``dim``; a huge negative number where the mask is empty
    (so that the term vanishes after ``relu`` without NaN gradients)."""
    return torch.logsumexp(
        values.masked_fill(~mask, torch.finfo(values.dtype).min), dim=dim, keepdim=True
    )


@LOSSES.register("lifted", "lifted_structure")
class LiftedStructure(PairLoss):
    """Lifted structured loss (Song et al. 2016, Eq. 4), for every positive pair ``(i, j)``:

    ``J_ij = log( sum_{k in N(i)} exp(m - D_ik) + sum_{l in N(j)} exp(m - D_jl) ) + D_ij - pos_margin``

    ``L = 1 / (2 |P|) sum_{(i,j) in P} (J_ij)_+^2``

    with ``D`` the Euclidean distance of L2-normalised embeddings (pytorch-metric-learning's
    ``LiftedStructureLoss`` parameterisation). ``P`` holds ordered pairs (``J`` is symmetric:
    the paper's mean). Against a reference set (XBM), ``N(i)`` are the references of another
    class than anchor ``i`` and ``N(j)`` the anchors of another class than reference ``j``.

    Args:
        neg_margin: ``m``, the margin of the negatives (1 in the paper).
        pos_margin: subtracted from every ``J_ij`` (0 in the paper).
    """

    def __init__(self, neg_margin: float = 1.0, pos_margin: float = 0.0) -> None:
        super().__init__()
        self.neg_margin, self.pos_margin = float(neg_margin), float(pos_margin)

    def pair_terms(
        self, anchors: Tensor, reference: Tensor, positive: Tensor, negative: Tensor
    ) -> Parts:
        dist = self.distances(anchors, reference)
        slack = self.neg_margin - dist
        rows = _masked_logsumexp(slack, negative, dim=1)  # [B, 1]: negatives of anchor i
        cols = _masked_logsumexp(slack, negative, dim=0)  # [1, R]: negatives of reference j
        lifted = torch.logaddexp(rows, cols) + dist - self.pos_margin
        return {"positive": Terms(F.relu(lifted)[positive].pow(2) / 2.0)}
