"""Triplet margin loss with optional triplet mining (Gürbüz thesis Eq. 2.1.2).

``l_apn = ( d_ap - d_an + margin )_+`` with ``d`` the Euclidean distance of L2-normalised
embeddings, over triplets (anchor a, positive p != a, negative n) of the batch, or of a batch of
anchors against a reference set (XBM memory, CCP proxies).
"""

from __future__ import annotations

from typing import Annotated

import torch.nn.functional as F
from torch import Tensor

from gspdml.errors import ConfigError
from gspdml.losses.base import LOSSES
from gspdml.losses.pairs import PairLoss
from gspdml.losses.reduction import Parts, Terms
from gspdml.typecheck import OneOf

MININGS = ("all", "semihard", "hard", "batch_hard")


@LOSSES.register("triplet", "triplet_margin")
class TripletMargin(PairLoss):
    """Triplet loss ``(d_ap - d_an + margin)_+`` (Gürbüz thesis Eq. 2.1.2); ``mining`` selects
    the triplets (as pytorch-metric-learning's ``TripletMarginMiner`` and ``BatchHardMiner``):

    * ``all``: every triplet (a, p, n) with ``y_p = y_a``, ``p != a``, ``y_n != y_a``;
    * ``semihard``: triplets with ``0 < d_an - d_ap <= margin`` (negative farther than the
      positive but inside the margin);
    * ``hard``: triplets with ``d_an - d_ap <= min(0, margin)`` (negative closer than the positive);
    * ``batch_hard``: one triplet per anchor, its farthest positive and closest negative
      (Hermans et al. 2017); anchors lacking either are skipped.

    Reduction of the selected triplets' terms: ``avg_nonzero`` (default; pytorch-metric-learning's
    ``AvgNonZeroReducer``) or ``mean``.

    The other modes build masked ``[c, R, R]`` tensors for chunks of ``c`` anchors with
    ``c * R^2 <= max_elements``; ``R^2 > max_elements`` (a large XBM memory) is refused.

    Args:
        margin: the margin of ``(d_ap - d_an + margin)_+``.
        mining: ``all``, ``semihard``, ``hard`` or ``batch_hard`` (above).
        reduction: ``avg_nonzero`` (default) or ``mean`` (above).
        max_elements: the most elements of one masked chunk ``[c, R, R]`` (bounds the memory).
    """

    reductions = ("avg_nonzero", "mean")

    config_field = "triplet"  # built from Python, it names its options triplet.<option>

    def __init__(
        self,
        margin: float = 0.05,
        mining: Annotated[str, OneOf(MININGS, "mining")] = "all",
        reduction: str = "avg_nonzero",
        max_elements: int = 2**26,
    ) -> None:
        super().__init__()
        self.margin, self.mining, self.max_elements = float(margin), mining, int(max_elements)
        self.set_reduction(reduction)

    def pair_terms(
        self, anchors: Tensor, reference: Tensor, positive: Tensor, negative: Tensor
    ) -> Parts:
        """The terms of the selected triplets, one piece per chunk of anchors."""
        dist = self.distances(anchors, reference)
        if self.mining == "batch_hard":
            return {"triplets": Terms(self._batch_hard(dist, positive, negative))}
        chunks = [dist.flatten()[:0]]  # no triplet: 0, keeping the graph
        for rows in self._anchor_chunks(*dist.shape):
            losses, keep = self._triplets(dist[rows], positive[rows], negative[rows])
            chunks.append(losses[keep])
        return {"triplets": Terms(*chunks)}

    def _anchor_chunks(self, num_anchors: int, num_reference: int) -> list[slice]:
        per_anchor = num_reference * num_reference
        if per_anchor > self.max_elements:
            raise ConfigError(
                "triplet.max_elements",
                f"{num_reference} references need {per_anchor} triplet entries per anchor, more than "
                f"max_elements={self.max_elements}; use mining 'batch_hard', a smaller memory, or raise max_elements",
            )
        step = max(1, self.max_elements // per_anchor)
        return [slice(start, start + step) for start in range(0, num_anchors, step)]

    def _triplets(self, dist: Tensor, positive: Tensor, negative: Tensor) -> tuple[Tensor, Tensor]:
        """Losses ``[c, R, R]`` indexed (anchor, positive, negative) and the mask of selected triplets."""
        gap = dist[:, None, :] - dist[:, :, None]  # d_an - d_ap
        keep = positive[:, :, None] & negative[:, None, :]
        if self.mining == "semihard":
            keep = keep & (gap > 0) & (gap <= self.margin)
        elif self.mining == "hard":
            keep = keep & (gap <= min(0.0, self.margin))
        return F.relu(self.margin - gap), keep

    def _batch_hard(self, dist: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        """``[V]`` terms of the valid anchors' hardest triplets."""
        hardest_pos = dist.masked_fill(~positive, float("-inf")).amax(1)
        hardest_neg = dist.masked_fill(~negative, float("inf")).amin(1)
        valid = positive.any(1) & negative.any(1)
        return F.relu(hardest_pos[valid] - hardest_neg[valid] + self.margin)
