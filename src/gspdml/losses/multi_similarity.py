"""Multi-similarity loss and its miner (Wang et al. 2019, CVPR, Eq. 10 and Eq. 4-5; used with CCP
and as a baseline in seed 004 §3.4, with ``(alpha, beta, lambda) = (scale_pos, scale_neg, base)``)."""

from __future__ import annotations

import torch

from gspdml.losses.base import LOSSES
from gspdml.losses.pairs import PairLoss, log1p_sum_exp


def multi_similarity_mining(
    sim: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor, epsilon: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The MS pair miner (Wang et al. Eq. 4-5), on similarities ``[B, R]``:

    keep positive ``p`` of anchor ``i`` if ``s_ip - epsilon < max_{n in N_i} s_in``;
    keep negative ``n`` if ``s_in + epsilon > min_{p in P_i} s_ip``.

    ``epsilon`` is the official code's ``margin = 0.1``. An anchor without negatives keeps no
    positive and one without positives keeps no negative. Returns the mined ``[B, R]`` masks.
    """
    hardest_neg = sim.masked_fill(~negative, float("-inf")).amax(1, keepdim=True)
    hardest_pos = sim.masked_fill(~positive, float("inf")).amin(1, keepdim=True)
    return positive & (sim - epsilon < hardest_neg), negative & (sim + epsilon > hardest_pos)


@LOSSES.register("ms", "multi_similarity")
class MultiSimilarity(PairLoss):
    """Multi-similarity loss (Wang et al. 2019, Eq. 10), per anchor ``i`` with mined sets P_i, N_i:

    ``L_i = 1/alpha log(1 + sum_{p in P_i} exp(-alpha (s_ip - base)))
    + 1/beta log(1 + sum_{n in N_i} exp(beta (s_in - base)))``

    on cosine similarities ``s``. ``alpha`` = scale_pos, ``beta`` = scale_neg, ``base`` = lambda
    (0.5 in the official code and pytorch-metric-learning). With ``mining: true`` (default) the
    pairs come from :func:`multi_similarity_mining` with ``epsilon`` (0.1, official code);
    ``false`` uses all pairs. An empty set contributes 0. The mined sets of an anchor are either
    both empty or both non-empty (a kept positive implies a kept negative and vice versa), so the
    official code's "skip the anchor if either set is empty" and pytorch-metric-learning agree;
    the official code also drops positives with ``s >= 1 - 1e-5`` (self by value), here the
    anchor's own copy is dropped by index. Reduction: the sum over anchors divided by the number
    of anchors ``B``, empty anchors included (official code; PML's ``MeanReducer``).
    """

    def __init__(
        self,
        alpha: float = 2.0,
        beta: float = 50.0,
        base: float = 0.5,
        epsilon: float = 0.1,
        mining: bool = True,
    ):
        super().__init__()
        self.alpha, self.beta, self.base, self.epsilon = float(alpha), float(beta), float(base), float(epsilon)
        self.mining = bool(mining)

    def pair_loss(self, anchors, reference, positive, negative):
        sim = self.similarities(anchors, reference)
        if self.mining:
            positive, negative = multi_similarity_mining(sim.detach(), positive, negative, self.epsilon)
        pos = log1p_sum_exp(-self.alpha * (sim - self.base), positive) / self.alpha
        neg = log1p_sum_exp(self.beta * (sim - self.base), negative) / self.beta
        return (pos + neg).mean()
