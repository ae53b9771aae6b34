"""MoCHi, hard negative mixing (Kalantidis et al., NeurIPS 2020, §4), as the Psomas thesis adapts
it to deep metric learning (§2.4.4, Table 2.4: "MoCHi (neg-neg)" and "MoCHi (anc-neg)",
compared with Metrix/embed).

For a query (anchor) ``q`` with its ``N`` hardest negatives ``n``, MoCHi synthesises negatives
from embeddings, labels never interpolated::

    h  = normalise(alpha n_i + (1 - alpha) n_j),   alpha ~ U(0, 1)     (mixing two negatives)
    h' = normalise(beta q + (1 - beta) n_j),        beta ~ U(0, 0.5)    (mixing in the query)

both negatives of ``q`` (label 0). In the thesis's batch setting the anchor is clean, the pairs
are ``U-(a)^2`` (``neg_neg``) or ``S(a) x U-(a)`` (``anc_neg``) over the ``k = 100`` hardest
negatives, and the mixtures enter ``clean + w * mixed`` (Eq. 2.10) with label 0. ``synthetic``:
the ``s`` synthetic points kept per query, drawn uniformly (``null``: every pair).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Optional, Union

import torch
from torch import Tensor

from gspdml.losses.base import LOSSES
from gspdml.losses.metrix import Metrix
from gspdml.losses.metrix_pairs import at_most_per_anchor
from gspdml.typecheck import AT_LEAST_1

MOCHI_KINDS = ("neg_neg", "anc_neg")


@LOSSES.register("mochi")
class MoCHi(Metrix):
    """Metrix's machinery at the embedding level with MoCHi's pairs, factors and labels.

    Args:
        loss: spec of the base loss with label weights (default ``contrastive``, Table 2.4).
        pairs: ``neg_neg`` (default) or ``anc_neg``, or a list of both (one drawn per iteration).
        hard_negatives: ``N``, the hardest negatives per anchor (100, §2.4.4).
        synthetic: ``s``, mixtures kept per anchor (uniform without replacement); ``null``: all.
        mix_weight: ``w`` of Eq. 2.10 (0.4, the thesis's for every mixing method it runs).
    """

    def __init__(
        self,
        embedding_dim: int,
        num_classes: int,
        loss: Any = "contrastive",
        pairs: Union[str, Sequence[str]] = "neg_neg",
        hard_negatives: int = 100,
        synthetic: Optional[Annotated[int, AT_LEAST_1]] = None,
        mix_weight: float = 0.4,
    ):
        super().__init__(
            embedding_dim,
            num_classes,
            loss,
            level="embedding",
            pairs=pairs,
            mix_weight=mix_weight,
            hard_negatives={"embedding": hard_negatives},
        )
        for kind in self.kinds:
            self.require_choice("pairs", kind, MOCHI_KINDS)
        self.require(
            not getattr(self.base, "anchorless", False),
            "loss",
            "must be a pair loss (MoCHi's synthetic points are negatives of an anchor example)",
        )
        self.synthetic = synthetic

    def _select(self, triples: Tensor) -> Tensor:
        """At most ``synthetic`` triples per anchor, uniformly without replacement."""
        return triples if self.synthetic is None else at_most_per_anchor(triples, self.synthetic)

    def _labels(self, labels: Tensor, triples: Tensor, lam: Tensor) -> Tensor:
        """Every synthetic point is a negative of its anchor (label 0)."""
        return torch.zeros_like(lam)

    def _draw_lambda(self, count: int, like: Tensor, kind: str) -> Tensor:
        """One factor per synthetic point: ``alpha ~ U(0, 1)`` for two negatives, the anchor's
        ``beta ~ U(0, 0.5)`` for anchor-negative."""
        high = 0.5 if kind == "anc_neg" else 1.0
        return torch.rand(count, dtype=like.dtype, device=like.device) * high
