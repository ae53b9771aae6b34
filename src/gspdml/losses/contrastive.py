"""Contrastive losses C1 and C2 as used in the seeds' benchmarks (seed 004 §3.4)."""

from __future__ import annotations

import torch.nn.functional as F

from gspdml.losses.base import LOSSES
from gspdml.losses.pairs import (
    PairLoss,
    check_reduction,
    mean_nonzero,
    mean_or_zero,
)


@LOSSES.register("c1", "contrastive_cosine")
class C1Contrastive(PairLoss):
    """C1, the cosine contrastive loss of XBM (Wang et al. 2020; seed 004 L737):

    ``L = (1/B) [ sum_{(i,j) pos} (1 - s_ij) + sum_{(i,j) neg} (s_ij - margin)_+ ]``

    with ``s_ij`` the cosine similarity of anchor ``i`` and reference ``j``, self-pairs
    excluded by index, summed over ordered pairs and divided by the number of anchors ``B``.
    """

    def __init__(self, margin: float = 0.5):
        super().__init__()
        self.margin = margin

    def pair_loss(self, anchors, reference, positive, negative):
        sim = self.similarities(anchors, reference)
        pos = ((1.0 - sim) * positive).sum()
        neg = (F.relu(sim - self.margin) * negative).sum()
        return (pos + neg) / anchors.shape[0]


@LOSSES.register("c2", "contrastive")
class C2Contrastive(PairLoss):
    """C2, contrastive loss with a positive margin (Hadsell et al. 2006; seed 004 Eq. 2.1.3, §3.4):

    ``l_pos = (d_ij - m_pos)_+``,  ``l_neg = (m_neg - d_ij)_+``,  ``d_ij = ||x_i - x_j||_2``

    on L2-normalised embeddings. Reduction ``avg_nonzero`` (default, the authors' code and
    pytorch-metric-learning's ``ContrastiveLoss``): the mean of the non-zero positive terms plus
    the mean of the non-zero negative terms. ``mean``: each mean over all its pairs.
    Equivalent to the generalized contrastive loss of CCP with ``beta = (m_pos + m_neg) / 2``,
    ``alpha = (m_neg - m_pos) / 2``.
    """

    def __init__(self, pos_margin: float = 0.0, neg_margin: float = 0.3841, reduction: str = "avg_nonzero"):
        super().__init__()
        self.pos_margin, self.neg_margin = pos_margin, neg_margin
        self.reduction = check_reduction("c2", reduction)

    def pair_loss(self, anchors, reference, positive, negative):
        dist = self.distances(anchors, reference)
        pos = F.relu(dist - self.pos_margin)[positive]
        neg = F.relu(self.neg_margin - dist)[negative]
        if self.reduction == "mean":
            return mean_or_zero(pos, dist) + mean_or_zero(neg, dist)
        return mean_nonzero(pos) + mean_nonzero(neg)
