"""Proxy Synthesis (Gu, Ko and Kim, AAAI 2021, §3), the proxy-loss competitor of Metrix (Psomas
thesis §2.4.1, Table 2.4: "ProxyAnchor+PS", the official code adapted to Proxy Anchor).

With ``lambda ~ Beta(alpha, alpha)`` once per iteration, example ``i`` and its neighbour
``i - 1`` make a synthetic class, an embedding and a proxy mixed with the same ``lambda``::

    e~_i = normalise(lambda e_i + (1 - lambda) e_{i-1})
    p~_i = normalise(lambda p_{y_i} + (1 - lambda) p_{y_{i-1}})          (e, p L2-normalised first)

The first ``floor(mu B)`` synthetic classes join the batch and the proxies as classes
``C, C + 1, ...``, and the base proxy loss runs once over the enlarged sets (labels are never
interpolated). Synthetic classes mix two classes (the thesis); the official code asks its
sampler for neighbours of different classes, so here ``i - 1`` is ``i``'s nearest preceding
example of another class, cyclically: the same pairs under that sampler, and two-class pairs
under balanced batches too (docs/paper-vs-code.md). ``alpha = 0.4``, ``mu = 1`` (official runs).
"""

from __future__ import annotations

from typing import Annotated, Any, Optional, cast

import torch
import torch.nn.functional as F
from torch import Tensor

from gspdml.losses.base import LOSSES, Output
from gspdml.losses.proxies import ProxyLoss
from gspdml.losses.wrapper import LossWrapper
from gspdml.typecheck import POSITIVE, UNIT


@LOSSES.register("proxy_synthesis", "ps")
class ProxySynthesis(LossWrapper):
    """Proxy Synthesis around a proxy loss with one proxy per class (``proxy_anchor``,
    ``proxy_nca``, ``proxynca_pp``).

    Args:
        loss: spec of the proxy loss (default ``proxy_anchor``, as in Psomas thesis Table 2.4).
        alpha: ``alpha`` of ``Beta(alpha, alpha)``.
        mu: synthetic classes per batch example, in ``[0, 1]`` (0: the base loss alone).
    """

    base_option = "loss"
    nested = {"loss": LOSSES}

    def __init__(
        self,
        embedding_dim: int,
        num_classes: int,
        loss: Any = "proxy_anchor",
        alpha: Annotated[float, POSITIVE] = 0.4,
        mu: Annotated[float, UNIT] = 1.0,
    ):
        super().__init__(loss, embedding_dim, num_classes)
        self.require(
            isinstance(self.base, ProxyLoss)
            and hasattr(self.base, "loss_from_cosines")
            and self.base.proxies_per_class == 1,
            "loss",
            "must be a proxy loss with one proxy per class (proxy_anchor, proxy_nca, proxynca_pp), "
            f"got {type(self.base).__name__}",
        )
        self.alpha, self.mu = float(alpha), float(mu)
        self.lr_multiplier = self.proxy_loss.lr_multiplier

    @property
    def proxy_loss(self) -> Any:
        """``base``, checked to be a proxy loss with ``loss_from_cosines``."""
        return cast(Any, self.base)

    def forward(
        self,
        embeddings: Tensor,
        labels: Tensor,
        output: Output = None,
        *,
        lam: Optional[float] = None,
    ) -> Tensor:
        """The base loss over the batch and its synthetic classes; ``lam`` overrides the draw."""
        base = self.proxy_loss
        base.check_labels(labels)
        e = F.normalize(embeddings, dim=1)
        proxies = F.normalize(base.proxies.to(e.dtype), dim=1)
        count = int(len(e) * self.mu)
        if count > 0 and bool((labels != labels[0]).any()):
            if lam is None:
                lam = float(torch.distributions.Beta(self.alpha, self.alpha).sample())
            own = torch.arange(count, device=e.device)
            previous = _previous_of_another_class(labels)[own]
            mixed = F.normalize(lam * e[own] + (1 - lam) * e[previous], dim=1)
            synthetic = F.normalize(
                lam * proxies[labels[own]] + (1 - lam) * proxies[labels[previous]], dim=1
            )
            e = torch.cat([e, mixed])
            proxies = torch.cat([proxies, synthetic])
            new = torch.arange(count, device=labels.device) + base.num_classes
            labels = torch.cat([labels, new])
        return cast(torch.Tensor, base.loss_from_cosines(e @ proxies.T, labels))


def _previous_of_another_class(labels: Tensor) -> Tensor:
    """``[B]``: for each ``i`` the first of ``i - 1, i - 2, ...`` (cyclically) whose label differs
    (the batch has two classes at least)."""
    n = len(labels)
    offsets = torch.arange(1, n, device=labels.device)
    candidates = (torch.arange(n, device=labels.device)[:, None] - offsets[None, :]) % n
    differs = labels[candidates] != labels[:, None]
    return candidates.gather(1, differs.int().argmax(dim=1, keepdim=True)).squeeze(1)
