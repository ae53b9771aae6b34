"""SoftTriple loss (Qian et al. 2019, ICCV, Eq. 8-12; baseline of Gürbüz thesis §3.3.2.1)."""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gspdml.losses.base import LOSSES, Output
from gspdml.losses.proxies import ProxyLoss
from gspdml.losses.reduction import Terms

#: keeps the gradient of the centre regulariser finite when two centres coincide (Qian et al.'s code)
_REGULARIZER_EPS = 1e-5


@LOSSES.register("soft_triple", "softtriple")
class SoftTriple(ProxyLoss):
    """SoftTriple (Qian et al. 2019) with ``K = centers_per_class`` centres ``w_c^k`` per class:

    ``S_ic = sum_k softmax_k( x_i . w_c^k / gamma ) x_i . w_c^k``                (Eq. 8)

    ``L_i = -log softmax_c( lambda (S_ic - delta [c = y_i]) )[y_i]``              (Eq. 9-10)

    ``R = sum_c sum_{k < k'} sqrt(2 + eps - 2 w_c^k . w_c^k') / (C K (K - 1))`` (Eq. 12)

    ``L = mean_i L_i + tau R``, with L2-normalised embeddings and centres. Parameters follow
    pytorch-metric-learning's ``SoftTripleLoss`` plus ``tau`` (its ``weight_reg_weight``); Gürbüz
    thesis §3.3.2.1 gives ``(lambda, gamma, tau, delta)``, e.g. ``(20, 0.1, 0.2, 0.01)`` on CUB.
    ``R = 0`` for ``K = 1`` (a normalised softmax with margin). Centres initialised
    Kaiming-uniform (``a = sqrt(5)``), as in the official code.

    Args:
        centers_per_class: ``K`` centres per class.
        la: ``lambda``, the scale of the class logits (20).
        gamma: ``gamma``, divides the logits of the centres' softmax (0.1).
        tau: ``tau``, weight of the centres' regulariser ``R`` (0.2).
        margin: ``delta``, subtracted from the true class's similarity (0.01).
    """

    def __init__(
        self,
        num_classes: Optional[int] = None,
        embedding_dim: Optional[int] = None,
        centers_per_class: int = 10,
        la: float = 20.0,
        gamma: float = 0.1,
        tau: float = 0.2,
        margin: float = 0.01,
        lr_multiplier: float = 100.0,
    ) -> None:
        super().__init__(num_classes, embedding_dim, centers_per_class, lr_multiplier)
        self.la, self.gamma = float(la), float(gamma)
        self.tau, self.margin = float(tau), float(margin)

    def reset_proxies(self) -> None:
        nn.init.kaiming_uniform_(self.proxies, a=math.sqrt(5))

    def class_similarities(self, embeddings: Tensor) -> Tensor:
        """``S_ic`` ``[B, C]`` (Eq. 8)."""
        shape = (len(embeddings), self.num_classes, self.proxies_per_class)
        sim = self.cosines(embeddings).view(shape)
        return (F.softmax(sim / self.gamma, dim=2) * sim).sum(2)

    def center_regularizer(self) -> Tensor:
        """``R`` (Eq. 12): spread of the centres within each class."""
        k = self.proxies_per_class
        if k == 1:
            return self.proxies.sum() * 0.0
        centers = F.normalize(self.proxies, dim=1).view(self.num_classes, k, -1)
        sim = centers @ centers.transpose(1, 2)  # [C, K, K]
        upper = torch.triu(torch.ones(k, k, dtype=torch.bool, device=sim.device), diagonal=1)
        dist = torch.sqrt((2.0 + _REGULARIZER_EPS - 2.0 * sim[:, upper]).clamp(min=0.0))
        return dist.sum() / (self.num_classes * k * (k - 1))

    def forward(self, embeddings: Tensor, labels: Tensor, output: Output = None) -> Tensor:
        self.check_labels(labels)
        logits = self.class_similarities(embeddings)
        logits = logits - self.margin * F.one_hot(labels, self.num_classes).to(logits.dtype)
        return self.reduce(
            {
                "examples": Terms(F.cross_entropy(self.la * logits, labels, reduction="none")),
                "centres": Terms(self.center_regularizer().to(logits.dtype), weight=self.tau),
            }
        )
