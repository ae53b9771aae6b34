"""Proxy-Anchor loss (Kim et al. 2020, CVPR, Eq. 4; baseline of seed 004 §3.4 with
``(delta, alpha) = (0.1, 32)``)."""

from __future__ import annotations

from typing import Optional

from torch import nn

from gspdml.losses.base import LOSSES
from gspdml.losses.pairs import log1p_sum_exp
from gspdml.losses.proxies import ProxyLoss


@LOSSES.register("proxy_anchor", "proxyanchor")
class ProxyAnchor(ProxyLoss):
    """Proxy-Anchor (Kim et al. 2020, Eq. 4), with ``s(x, p)`` the cosine similarity:

    ``L = 1/|P+| sum_{p in P+} log(1 + sum_{x in X_p+} exp(-alpha (s(x,p) - delta)))
    + 1/|P| sum_{p in P} log(1 + sum_{x in X_p-} exp(alpha (s(x,p) + delta)))``

    ``P+`` = proxies of the classes present in the batch, ``P`` = all proxies, ``X_p+`` / ``X_p-``
    the batch samples of / not of the proxy's class. ``delta`` = margin (0.1), ``alpha`` = scale
    (32). Reduction: as written (the two sums divided by ``|P+|`` and ``|P|``), as in the official
    code and pytorch-metric-learning's ``ProxyAnchorLoss``. Proxies initialised with Kaiming
    normal (fan-out) as in the official code.
    """

    def __init__(
        self,
        num_classes: Optional[int] = None,
        embedding_dim: Optional[int] = None,
        delta: float = 0.1,
        alpha: float = 32.0,
        lr_multiplier: float = 100.0,
    ):
        super().__init__(num_classes, embedding_dim, 1, lr_multiplier)
        self.delta, self.alpha = float(delta), float(alpha)

    def reset_proxies(self) -> None:
        nn.init.kaiming_normal_(self.proxies, mode="fan_out")

    def forward(self, embeddings, labels, output=None):
        self.check_labels(labels)
        cos = self.cosines(embeddings)  # [B, C]
        same = labels[:, None] == self.proxy_classes(labels.device)[None, :]
        present = same.any(0)
        pos = log1p_sum_exp(-self.alpha * (cos - self.delta), same, dim=0)
        neg = log1p_sum_exp(self.alpha * (cos + self.delta), ~same, dim=0)
        return pos[present].sum() / present.sum().clamp(min=1) + neg.sum() / self.num_classes

