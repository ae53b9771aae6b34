"""DeLF attention pooling (Noh et al., ICCV 2017)."""

from __future__ import annotations

from typing import Annotated

import torch
import torch.nn.functional as F
from torch import nn

from gspdml.pooling.base import POOLINGS, Pooled, Pooling, flatten_locations, unflatten_weights
from gspdml.pooling.functional import wide
from gspdml.typecheck import AT_LEAST_1


@POOLINGS.register("delf")
class DeLF(Pooling):
    """Attention-weighted pooling of DeLF (Noh et al. 2017, Eq. 1; GSP paper supplement §1.4):

        alpha_i = softplus(w_2^T relu(W_1 f_i + b_1) + b_2),    u = (1/n) sum_i alpha_i f_i.

    DeLF's final linear map ``W`` of ``W sum_i alpha_i f_i`` is the embedder's 1x1 head; the
    ``1/n`` keeps GAP's scale. ``alpha`` (non-negative, unnormalised) is returned as ``weights``.

    Args:
        hidden: filters of the score function's first 1x1 convolution (512 as in DeLF).
    """

    order_free = True

    def __init__(self, in_channels: int, hidden: Annotated[int, AT_LEAST_1] = 512):
        super().__init__(in_channels)
        self.score = nn.Sequential(
            nn.Linear(in_channels, int(hidden)), nn.ReLU(inplace=True), nn.Linear(int(hidden), 1)
        )

    def forward(self, x: torch.Tensor) -> Pooled:
        local, spatial = flatten_locations(x)
        alpha = F.softplus(wide(self.score(local))).squeeze(-1)  # [B, n]
        pooled = (alpha.unsqueeze(-1) * wide(local)).mean(dim=1)
        return Pooled(pooled, weights=unflatten_weights(alpha, spatial))
