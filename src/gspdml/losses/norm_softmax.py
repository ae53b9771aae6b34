"""NormSoftmax (Zhai & Wu 2019, "Classification is a strong baseline for deep metric learning",
Eq. 2; compared with ProxyNCA++ in the ProxyNCA++ paper, Tables 12-13)."""

from __future__ import annotations

from typing import Optional

import torch.nn.functional as F
from torch import Tensor

from gspdml.losses.base import LOSSES, Output
from gspdml.losses.proxies import ProxyLoss
from gspdml.losses.reduction import Terms


@LOSSES.register("norm_softmax", "normalized_softmax")
class NormSoftmax(ProxyLoss):
    """``L_i = -log softmax_c( cos(x_i, p_c) / T )[y_i]`` with one proxy (class weight) per class.

    ``T`` = ``temperature`` (0.05 in Zhai & Wu and pytorch-metric-learning's
    ``NormalizedSoftmaxLoss``; 1/2 in the ProxyNCA++ paper's comparison). Reduction: mean over the batch.
    ProxyNCA++ equals NormSoftmax with temperature ``T / 2`` (``-d/T = (2 cos - 2)/T``).

    Args:
        temperature: ``T``, divides the cosine logits (0.05).
    """

    def __init__(
        self,
        num_classes: Optional[int] = None,
        embedding_dim: Optional[int] = None,
        temperature: float = 0.05,
        lr_multiplier: float = 100.0,
    ) -> None:
        super().__init__(num_classes, embedding_dim, 1, lr_multiplier)
        self.temperature = float(temperature)

    def forward(self, embeddings: Tensor, labels: Tensor, output: Output = None) -> Tensor:
        self.check_labels(labels)
        logits = self.cosines(embeddings) / self.temperature
        return self.reduce({"examples": Terms(F.cross_entropy(logits, labels, reduction="none"))})
