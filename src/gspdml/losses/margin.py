"""The generalized contrastive loss of CCP and the margin loss of Wu et al., one formula:

``l_ij = ( iota_ij (d_ij - beta) + alpha )_+``,  ``iota_ij = +1`` same class, ``-1`` otherwise,

with ``d_ij`` the Euclidean distance of the L2-normalised embeddings (Gürbüz thesis Lemma 3.2.1
and Eq. 2.1.3; Wu et al. 2017, "Sampling matters in deep embedding learning", Eq. 3): C2 with
``m_pos = beta - alpha`` and ``m_neg = beta + alpha`` (Gürbüz thesis §2.1.1).
"""

from __future__ import annotations

from typing import Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gspdml.errors import ConfigError
from gspdml.losses.base import LOSSES
from gspdml.losses.pairs import PairLoss
from gspdml.losses.reduction import Parts, Terms


def _signed_margin_terms(
    dist: Tensor, beta: Union[float, Tensor], alpha: float, positive: Tensor, negative: Tensor
) -> Tensor:
    """The per-pair losses ``(iota (d - beta) + alpha)_+`` of the valid pairs, flattened;
    ``beta`` is a number or a column ``[B, 1]`` (one boundary per anchor)."""
    pos = F.relu(dist - beta + alpha)[positive]
    neg = F.relu(beta - dist + alpha)[negative]
    return torch.cat([pos, neg])


@LOSSES.register("generalized_contrastive", "gc")
class GeneralizedContrastive(PairLoss):
    """Generalized contrastive loss of CCP (Gürbüz thesis Lemma 3.2.1, §3.2.4):
    ``l_ij = (iota_ij (d_ij - beta) + alpha)_+`` over all ordered pairs ``i != j``.

    Reduction ``mean`` (default): the mean over all pairs (the batch risk of Gürbüz thesis Eq.
    1.1.1 without the diagonal); ``avg_nonzero``: the sum over the non-zero terms' count.

    Args:
        beta: ``beta``, the distance that separates positives from negatives.
        alpha: ``alpha``, the margin on either side of ``beta``.
        reduction: ``mean`` over all pairs (default) or ``avg_nonzero`` (above).
    """

    reductions = ("avg_nonzero", "mean")

    def __init__(
        self, beta: float = 0.19205, alpha: float = 0.19205, reduction: str = "mean"
    ) -> None:
        super().__init__()
        self.beta: Union[float, Tensor] = float(beta)
        self.alpha = float(alpha)
        self.set_reduction(reduction)

    def pair_terms(
        self, anchors: Tensor, reference: Tensor, positive: Tensor, negative: Tensor
    ) -> Parts:
        dist = self.distances(anchors, reference)
        return {
            "pairs": Terms(_signed_margin_terms(dist, self.beta, self.alpha, positive, negative))
        }


@LOSSES.register("margin")
class MarginLoss(GeneralizedContrastive):
    """Margin loss (Wu et al. 2017, Eq. 3-5; Gürbüz thesis Eq. 2.1.3) on all ordered pairs:

    ``L = sum_{(i,j)} (alpha + iota_ij (d_ij - beta_{y_i}))_+ / #{non-zero terms}
    + nu * mean_i beta_{y_i}``

    ``beta`` is fixed (as in the thesis) or learned (Wu et al.), per class with the anchor's
    class as in Wu et al.'s code. ``avg_nonzero`` is Wu et al.'s and pytorch-metric-learning's
    ``MarginLoss`` reduction; unlike PML, which counts the pair terms once per triplet, each pair
    counts once here (the paper samples pairs; sampling is left to the batch composition).

    Args:
        alpha: the margin ``alpha`` around the boundary ``beta`` (0.2, Wu et al.).
        beta: the (initial) boundary ``beta`` between positive and negative distances (1.2).
        learn_beta: make ``beta`` a learned parameter (Wu et al.) instead of fixed.
        beta_per_class: one ``beta`` per class (the anchor's) instead of one for all.
        nu: weight of the regulariser ``mean_i beta_{y_i}`` (Wu et al. Eq. 5).
        reduction: ``avg_nonzero`` (default) or ``mean`` over all pairs.
        lr_multiplier: learning-rate multiplier of a learned ``beta``.
    """

    def __init__(
        self,
        alpha: float = 0.2,
        beta: float = 1.2,
        learn_beta: bool = False,
        beta_per_class: bool = False,
        nu: float = 0.0,
        reduction: str = "avg_nonzero",
        lr_multiplier: float = 1.0,
        num_classes: Optional[int] = None,
    ) -> None:
        super().__init__(beta=beta, alpha=alpha, reduction=reduction)
        if beta_per_class and not num_classes:
            raise ConfigError(
                "margin.beta_per_class", "needs num_classes, which the trainer supplies"
            )
        size = int(num_classes or 1) if beta_per_class else 1
        init = torch.full((size,), float(beta))
        self.beta = nn.Parameter(init) if learn_beta else init
        self.nu, self.lr_multiplier = float(nu), float(lr_multiplier)

    def anchor_terms(
        self, anchors: Tensor, labels: Tensor, reference: Tensor, positive: Tensor, negative: Tensor
    ) -> Parts:
        dist = self.distances(anchors, reference)
        beta = torch.as_tensor(self.beta).to(dist.device, dist.dtype)
        anchor_beta = beta[labels] if len(beta) > 1 else beta.expand(len(labels))
        pairs = _signed_margin_terms(dist, anchor_beta[:, None], self.alpha, positive, negative)
        return {"pairs": Terms(pairs), "beta": Terms(anchor_beta, weight=self.nu, reduction="mean")}
