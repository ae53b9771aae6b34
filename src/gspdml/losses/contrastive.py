"""Contrastive losses C1 and C2 as used in the papers' benchmarks (Gürbüz thesis §3.3.2.1), and the
similarity contrastive loss of the Metrix thesis (Psomas thesis Eq. 2.1).

Each is a :class:`~gspdml.losses.pairs.WeightedPairLoss`: one ``weighted_terms`` on pair
weights, which hard labels give as 0/1 and Metrix's mixed examples as ``(lambda, 1 - lambda)``.
"""

from __future__ import annotations

from typing import Literal

import torch.nn.functional as F
from torch import Tensor

from gspdml.losses.base import LOSSES
from gspdml.losses.pairs import WeightedPairLoss
from gspdml.losses.reduction import Parts, Terms, pair_anchors


@LOSSES.register("c1", "contrastive_cosine")
class C1Contrastive(WeightedPairLoss):
    """C1, the cosine contrastive loss of XBM (Wang et al. 2020; Gürbüz thesis §3.3.2.1, C1 hyper-parameters):

    ``L = (1/B) [ sum_{(i,j) pos} (1 - s_ij) + sum_{(i,j) neg} (s_ij - margin)_+ ]``

    with ``s_ij`` the cosine similarity of anchor ``i`` and reference ``j`` over ordered pairs,
    divided by the anchors that have pairs. With label weights ``y`` (Metrix) a pair contributes
    ``y (1 - s) + (1 - y) (s - margin)_+``.

    Args:
        margin: negatives count while their cosine similarity exceeds ``margin`` (0.5).
    """

    #: the positive term is ``positive_offset - s``
    positive_offset = 1.0
    reductions = ("anchor_mean",)
    reduction = "anchor_mean"

    def __init__(self, margin: float = 0.5) -> None:
        super().__init__()
        self.margin = margin

    def weighted_terms(
        self, values: Tensor, positive_weights: Tensor, negative_weights: Tensor
    ) -> Parts:
        pos = positive_weights * (self.positive_offset - values)
        neg = negative_weights * F.relu(values - self.margin)
        return {"pairs": Terms(pos, neg, anchors=pair_anchors(positive_weights, negative_weights))}


@LOSSES.register("contrastive_similarity")
class SimilarityContrastive(C1Contrastive):
    """The similarity contrastive loss of the Metrix thesis (Psomas thesis Eq. 2.1; with
    label weights Eq. 2.12), C1 with the positive term ``-s`` instead of ``1 - s``::

        l(a) = sum_v -y s(a, v) + sum_v (1 - y) [s(a, v) - margin]_+

    summed per anchor, mean over the anchors that have pairs. It differs from C1 by a constant
    (the positive weight mass over the anchors), so its gradients are C1's.

    Args:
        margin: negatives count while their similarity exceeds ``margin``.
    """

    positive_offset = 0.0


@LOSSES.register("c2", "contrastive")
class C2Contrastive(WeightedPairLoss):
    """C2, contrastive loss with a positive margin (Hadsell et al. 2006; Gürbüz thesis Eq. 2.1.3, §3.3.2.1):

    ``l_pos = (d_ij - m_pos)_+``,  ``l_neg = (m_neg - d_ij)_+``,  ``d_ij = ||x_i - x_j||_2``

    on L2-normalised embeddings. With label weights ``y`` (Metrix, Psomas thesis Eq. 2.12 in the form
    of the authors' code; the thesis gives no margin) a pair contributes ``y l_pos`` and ``(1 - y) l_neg``.
    Reduction ``avg_nonzero`` (default, the authors' code and pytorch-metric-learning's
    ``ContrastiveLoss``): the means of the non-zero positive and negative terms, added;
    ``mean``: each part over its total weight; ``anchor_mean`` (Psomas thesis Eq. 2.3/2.10): the
    sum per anchor, mean over the anchors. The generalized contrastive loss of CCP with
    ``beta = (m_pos + m_neg) / 2``, ``alpha = (m_neg - m_pos) / 2``.

    Args:
        pos_margin: ``m_pos``: positives count while farther apart than this.
        neg_margin: ``m_neg``: negatives count while closer than this.
        reduction: ``avg_nonzero``, ``mean`` or ``anchor_mean`` (above).
    """

    measure = "distance"
    reductions = ("avg_nonzero", "mean", "anchor_mean")

    def __init__(
        self,
        pos_margin: float = 0.0,
        neg_margin: float = 0.3841,
        reduction: Literal["avg_nonzero", "mean", "anchor_mean"] = "avg_nonzero",
    ) -> None:
        super().__init__()
        self.pos_margin, self.neg_margin = pos_margin, neg_margin
        self.set_reduction(reduction)

    def weighted_terms(
        self, values: Tensor, positive_weights: Tensor, negative_weights: Tensor
    ) -> Parts:
        anchors = pair_anchors(positive_weights, negative_weights)
        pos = positive_weights * F.relu(values - self.pos_margin)
        neg = negative_weights * F.relu(self.neg_margin - values)
        return {
            "positive": Terms(pos, weights=positive_weights, anchors=anchors),
            "negative": Terms(neg, weights=negative_weights, anchors=anchors),
        }
