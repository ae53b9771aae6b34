"""Base class of proxy losses: the proxies are an ``nn.Parameter`` of the loss, put by the trainer
into an optimiser group with the loss's ``lr_multiplier`` (100 for the proxy baselines of
Gürbüz thesis §3.3.2.1; ProxyNCA++'s "fast proxies", ProxyNCA++ paper §3.6, are this multiplier).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gspdml.errors import ConfigError
from gspdml.losses.base import MetricLoss


class ProxyLoss(MetricLoss):
    """``proxies`` ``[num_classes * proxies_per_class, embedding_dim]``; rows
    ``c * K .. c * K + K - 1`` belong to class ``c``. Subclasses set the initialisation in
    :meth:`reset_proxies` and implement ``forward(embeddings, labels, output=None)``.

    Args:
        lr_multiplier: learning-rate multiplier of the proxies (100: Gürbüz thesis §3.3.2.1,
            proxy-loss hyper-parameters).
    """

    def __init__(
        self,
        num_classes: Optional[int],
        embedding_dim: Optional[int],
        proxies_per_class: int = 1,
        lr_multiplier: float = 100.0,
    ) -> None:
        super().__init__()
        self.num_classes = self._supplied("num_classes", num_classes)
        dim = self._supplied("embedding_dim", embedding_dim)
        if int(proxies_per_class) < 1:
            raise ConfigError(
                f"{type(self).__name__}.proxies_per_class",
                f"must be >= 1, got {proxies_per_class!r}",
            )
        self.proxies_per_class = int(proxies_per_class)
        self.lr_multiplier = float(lr_multiplier)
        self.proxies = nn.Parameter(torch.empty(self.num_classes * self.proxies_per_class, dim))
        self.reset_proxies()

    def _supplied(self, field: str, value: Optional[int]) -> int:
        """``value`` of an argument the trainer supplies: a positive integer."""
        if not isinstance(value, int) or value < 1:
            raise ConfigError(
                f"{type(self).__name__}.{field}",
                f"must be a positive integer supplied by the trainer, got {value!r}",
            )
        return value

    def reset_proxies(self) -> None:
        """Standard normal initialisation (pytorch-metric-learning's ``ProxyNCALoss``)."""
        nn.init.normal_(self.proxies)

    def cosines(self, embeddings: Tensor) -> Tensor:
        """Cosine similarities ``[B, num_classes * proxies_per_class]`` of embeddings and proxies
        (inner products with the embeddings as given when ``normalize_inputs`` is off)."""
        if self.normalize_inputs:
            embeddings = F.normalize(embeddings, dim=1)
        return embeddings @ F.normalize(self.proxies.to(embeddings.dtype), dim=1).T

    def check_labels(self, labels: Tensor) -> None:
        if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= self.num_classes):
            raise ValueError(
                f"{type(self).__name__}: labels must lie in [0, {self.num_classes}), got "
                f"[{int(labels.min())}, {int(labels.max())}]"
            )
