"""i-Mix (Lee et al., ICLR 2021, §3), as the Psomas thesis adapts it to deep metric learning
(§2.4.4, Table 2.4: "+i-Mix (anc-neg)", compared with Metrix/input).

i-Mix gives every example a virtual one-hot label, mixes it with a partner from a permutation of
the batch, ``x~ = lambda x_i + (1 - lambda) x_j``, and trains the mixture as a *query* labelled
``lambda v_i + (1 - lambda) v_j``. In the thesis's batch setting each anchor ``a`` is mixed at
the input with one negative ``n`` drawn uniformly (``S(a) x U-(a)``), and the mixture ``v`` is
the anchor of a pair loss over the clean batch, where example ``x`` has the label::

    y(v, x) = lambda [class(x) = class(a)] + (1 - lambda) [class(x) = class(n)]

(Eq. 2.7 with ``v`` as the anchor, unlike Metrix, whose anchors are clean). It enters
``clean + w * mixed`` (Eq. 2.10); ``lambda ~ Beta(alpha, alpha)`` per iteration, ``alpha = 1``
(i-Mix §4).
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import Tensor

from gspdml.losses.base import LOSSES
from gspdml.losses.metrix import Metrix
from gspdml.losses.metrix_pairs import at_most_per_anchor
from gspdml.losses.pairs import WeightedPairLoss


@LOSSES.register("imix", "i_mix")
class IMix(Metrix):
    """Metrix's machinery with i-Mix's pairs, partner draw and mixture-as-query loss.

    Args:
        loss: spec of a pair loss with label weights (default ``contrastive``, Table 2.4).
        level: where the pair is mixed: ``input`` (default; i-Mix mixes inputs), ``feature`` or
            ``embedding``.
        mix_alpha: ``alpha`` of ``Beta(alpha, alpha)`` (1, i-Mix §4).
        mix_weight: ``w`` of Eq. 2.10 (0.4, the thesis's for every mixing method it runs).
    """

    base_kind = (WeightedPairLoss, "a pair loss with label weights (contrastive, c1, ms)")

    def __init__(
        self,
        embedding_dim: int,
        num_classes: int,
        loss: Any = "contrastive",
        level: str = "input",
        mix_alpha: float = 1.0,
        mix_weight: float = 0.4,
    ):
        super().__init__(
            embedding_dim,
            num_classes,
            loss,
            level=level,
            pairs="anc_neg",
            mix_alpha=mix_alpha,
            mix_weight=mix_weight,
            hard_negatives={},
        )

    def _select(self, triples: Tensor) -> Tensor:
        """One negative per anchor, uniformly (i-Mix's single partner)."""
        return at_most_per_anchor(triples, 1)

    def _mixed_term(
        self, e: Tensor, labels: Tensor, mixed: Tensor, triples: Tensor, lam: Tensor
    ) -> Tensor:
        """Each mixture as the anchor of the base pair loss over the clean batch, labelled
        ``lambda`` for the anchor's class and ``1 - lambda`` for the negative's."""
        own = labels[None, :] == labels[triples[:, 1], None]
        other = labels[None, :] == labels[triples[:, 2], None]
        y = lam[:, None] * own.to(lam.dtype) + (1 - lam[:, None]) * other.to(lam.dtype)
        query, key = torch.meshgrid(
            torch.arange(len(mixed), device=e.device),
            torch.arange(len(e), device=e.device),
            indexing="ij",
        )
        base = cast(WeightedPairLoss, self.base)
        return base.labelled(mixed, e, query.flatten(), key.flatten(), y.flatten())
