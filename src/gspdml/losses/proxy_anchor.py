"""Proxy-Anchor loss (Kim et al. 2020, CVPR, Eq. 4; baseline of Gürbüz thesis §3.3.2.1 with
``(delta, alpha) = (0.1, 32)``; with label weights, the Metrix proxy anchors, Psomas thesis
§2.3.1, Table 2.1)."""

from __future__ import annotations

from typing import Annotated, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gspdml.losses.base import LOSSES, LabelWeightedLoss, Output
from gspdml.losses.pairs import log1p_sum_exp
from gspdml.losses.proxies import ProxyLoss
from gspdml.losses.reduction import Parts, Terms
from gspdml.typecheck import OneOf

#: the values of ``variant`` (:class:`ProxyAnchor`), checked by the registry from a config and
#: when the loss is built from Python
VARIANTS = ("original", "thesis_generic")


@LOSSES.register("proxy_anchor", "proxyanchor")
class ProxyAnchor(LabelWeightedLoss, ProxyLoss):
    """Proxy-Anchor (Kim et al. 2020, Eq. 4), with ``s(x, p)`` the cosine similarity:

    ``L = 1/|P+| sum_{p in P+} log(1 + sum_{x in X_p+} exp(-alpha (s(x,p) - delta)))
    + 1/|P| sum_{p in P} log(1 + sum_{x in X_p-} exp(alpha (s(x,p) + delta)))``

    ``P+`` = proxies of the classes present in the batch, ``P`` = all proxies, ``X_p+`` / ``X_p-``
    the batch samples of / not of the proxy's class. ``delta`` = margin (0.1), ``alpha`` = scale
    (32). Reduction: as written (the two sums divided by ``|P+|`` and ``|P|``), as in the official
    code and pytorch-metric-learning's ``ProxyAnchorLoss``. Proxies initialised with Kaiming
    normal (fan-out) as in the official code.

    With label weights (Metrix, Psomas thesis §2.3.1, Table 2.1) ``[x in X_p+]`` becomes ``y_p(x)``
    and ``[x in X_p-]`` a negative weight. A mixed embedding ``v = mix_lambda(x, x')`` of classes
    ``c, c'`` has ``y_q = lambda [c = q] + (1 - lambda) [c' = q]`` and negative weight ``1 - y_q``
    for ``q in {c, c'}`` (Eq. 2.8 with the proxy as the anchor); for every other proxy both parents
    are negatives, a pair Eq. 2.8 does not mix, so ``v`` has weight 0 there. ``P+``: the proxies
    with positive mass.

    ``variant: original`` (default; the formula above, Kim et al. 2020; the thesis writes PA in MS form).
    ``variant: thesis_generic``: the MS form of the thesis's Table 2.1,
    ``(1/alpha) log(1 + sum y e^{-alpha (s - delta)}) + (1/alpha) log(1 + sum (1 - y) e^{alpha (s - delta)})``
    averaged over all proxies (thesis beta = gamma = alpha = 32, m = delta = 0.1; Psomas thesis §2.4.1).

    Args:
        delta: the margin ``delta`` (0.1).
        alpha: the scale ``alpha`` (32).
        variant: ``original`` (Kim et al.) or ``thesis_generic`` (the thesis's MS form, above).
    """

    #: Metrix: mixed examples are pairs of batch examples; their anchor is every proxy
    anchorless = True

    def __init__(
        self,
        num_classes: Optional[int] = None,
        embedding_dim: Optional[int] = None,
        delta: float = 0.1,
        alpha: float = 32.0,
        lr_multiplier: float = 100.0,
        variant: Annotated[str, OneOf(VARIANTS, "variant")] = "original",
    ) -> None:
        super().__init__(num_classes, embedding_dim, 1, lr_multiplier)
        self.delta, self.alpha, self.variant = float(delta), float(alpha), variant

    def reset_proxies(self) -> None:
        nn.init.kaiming_normal_(self.proxies, mode="fan_out")

    def forward(self, embeddings: Tensor, labels: Tensor, output: Output = None) -> Tensor:
        self.check_labels(labels)
        return self.loss_from_cosines(self.cosines(embeddings), labels)

    def loss_from_cosines(self, cos: Tensor, labels: Tensor) -> Tensor:
        """The loss from cosines ``[B, P]`` to ``P`` proxies of classes ``0 .. P - 1`` (one per
        class; Proxy Synthesis appends synthetic ones)."""
        same = labels[:, None] == torch.arange(cos.shape[1], device=labels.device)[None, :]
        return self.weighted_loss(cos, same.to(cos.dtype), (~same).to(cos.dtype))

    def weighted_terms(
        self, values: Tensor, positive_weights: Tensor, negative_weights: Tensor
    ) -> Parts:
        """Per proxy terms ``[C]``, averaged over the proxies with positives and over all."""
        pos = log1p_sum_exp(-self.alpha * (values - self.delta), positive_weights, dim=0)
        if self.variant == "original":
            neg = log1p_sum_exp(self.alpha * (values + self.delta), negative_weights, dim=0)
            present = (positive_weights > 0).any(0)
            return {"positive": Terms(pos[present]), "negative": Terms(neg)}
        neg = log1p_sum_exp(self.alpha * (values - self.delta), negative_weights, dim=0)
        return {"proxies": Terms(pos + neg, weight=1.0 / self.alpha)}

    def mixed(
        self, embeddings: Tensor, labels: Tensor, mixed: Tensor, triples: Tensor, lam: Tensor
    ) -> Tensor:
        """Each mixed embedding against every proxy, with the soft labels of its two parents."""
        lam = lam.to(mixed.dtype)[:, None]
        first = F.one_hot(labels[triples[:, 1]], self.num_classes).to(mixed.dtype)
        second = F.one_hot(labels[triples[:, 2]], self.num_classes).to(mixed.dtype)
        y = lam * first + (1 - lam) * second
        return self.weighted_loss(self.cosines(mixed), y, (first + second) * (1 - y))
