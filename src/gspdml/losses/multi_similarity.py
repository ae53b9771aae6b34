"""Multi-similarity loss and its miner (Wang et al. 2019, CVPR, Eq. 10 and Eq. 4-5; used with CCP
and as a baseline in Gürbüz thesis §3.3.2.1, with ``(alpha, beta, lambda) = (scale_pos, scale_neg, base)``;
with label weights, Psomas thesis Eq. 2.13)."""

from __future__ import annotations

from typing import Optional

from torch import Tensor

from gspdml.losses.base import LOSSES, LabelWeightedLoss
from gspdml.losses.pairs import WeightedPairLoss, log1p_sum_exp
from gspdml.losses.reduction import Parts, Terms, pair_anchors


def multi_similarity_mining(
    sim: Tensor, positive: Tensor, negative: Tensor, epsilon: float
) -> tuple[Tensor, Tensor]:
    """The MS pair miner (Wang et al. Eq. 4-5), on similarities ``[B, R]``:

    keep positive ``p`` of anchor ``i`` if ``s_ip - epsilon < max_{n in N_i} s_in``;
    keep negative ``n`` if ``s_in + epsilon > min_{p in P_i} s_ip``.

    ``epsilon`` is the official code's ``margin = 0.1``. An anchor without negatives keeps no
    positive and one without positives keeps no negative. Returns the mined ``[B, R]`` masks."""
    hardest_neg = sim.masked_fill(~negative, float("-inf")).amax(1, keepdim=True)
    hardest_pos = sim.masked_fill(~positive, float("inf")).amin(1, keepdim=True)
    return positive & (sim - epsilon < hardest_neg), negative & (sim + epsilon > hardest_pos)


@LOSSES.register("ms", "multi_similarity")
class MultiSimilarity(WeightedPairLoss):
    """Multi-similarity loss (Wang et al. 2019, Eq. 10), per anchor ``i`` with mined sets P_i, N_i:

    ``L_i = 1/alpha log(1 + sum_{p in P_i} exp(-alpha (s_ip - base)))
    + 1/beta log(1 + sum_{n in N_i} exp(beta (s_in - base)))``

    on cosine similarities ``s``; ``base`` 0.5 and the miner's ``epsilon`` 0.1 are the official
    code's and pytorch-metric-learning's. An empty set contributes 0. The mined sets of an anchor
    are both empty or both non-empty, so the official code's "skip the anchor if either set is
    empty" and PML agree; the official code drops positives with ``s >= 1 - 1e-5`` (self by
    value), here the anchor's own copy is dropped by index. Reduction ``anchor_mean``: the sum
    over anchors divided by the anchors with pairs before mining (official code; PML's
    ``MeanReducer``).

    With label weights ``y`` (Metrix, Psomas thesis Eq. 2.2 and Eq. 2.13)::

        l(a) = (1/alpha) log(1 + sum y e^{-alpha (s - base)}) + (1/beta) log(1 + sum (1-y) e^{beta (s - base)})

    (the thesis's beta, gamma, m are alpha, beta, base here); mixed embeddings are never mined.

    Args:
        alpha: scale of the positive term (``scale_pos``).
        beta: scale of the negative term (``scale_neg``).
        base: the similarity offset ``lambda`` (0.5).
        epsilon: the mining margin (0.1; null: no mining).
        mining: mine the pairs (:func:`multi_similarity_mining`); false: every pair.
    """

    reductions = ("anchor_mean",)
    reduction = "anchor_mean"

    def __init__(
        self,
        alpha: float = 2.0,
        beta: float = 50.0,
        base: float = 0.5,
        epsilon: Optional[float] = 0.1,
        mining: bool = True,
    ) -> None:
        super().__init__()
        self.alpha, self.beta, self.base = float(alpha), float(beta), float(base)
        self.epsilon = None if epsilon is None else float(epsilon)
        self.mining = bool(mining) and epsilon is not None

    #: the forward's loss: the in-batch pairs the miner keeps (no row-by-row measure needed)
    clean = LabelWeightedLoss.clean

    def pair_terms(
        self, anchors: Tensor, reference: Tensor, positive: Tensor, negative: Tensor
    ) -> Parts:
        sim = self.pair_values(anchors, reference)
        return self.weighted_terms(
            sim, positive.to(sim.dtype), negative.to(sim.dtype), mine=self.mining
        )

    def weighted_terms(
        self, values: Tensor, positive_weights: Tensor, negative_weights: Tensor, mine: bool = False
    ) -> Parts:
        """Per anchor ``L_i`` ``[A]``; the anchors are those with pairs before mining."""
        anchors = pair_anchors(positive_weights, negative_weights)
        if mine and self.epsilon is not None:
            kept_pos, kept_neg = multi_similarity_mining(
                values.detach(), positive_weights > 0, negative_weights > 0, self.epsilon
            )
            positive_weights = positive_weights * kept_pos
            negative_weights = negative_weights * kept_neg
        pos = log1p_sum_exp(-self.alpha * (values - self.base), positive_weights) / self.alpha
        neg = log1p_sum_exp(self.beta * (values - self.base), negative_weights) / self.beta
        return {"anchors": Terms(pos + neg, anchors=anchors)}
