"""Poolings built on per-channel order statistics: GAP+GMP, global k-max, WELDON."""

from __future__ import annotations

from typing import Annotated

import torch

from gspdml.pooling.base import POOLINGS, Pooled, Pooling, flatten_locations
from gspdml.pooling.functional import top_k_mean
from gspdml.typecheck import AT_LEAST_1, NON_NEGATIVE


@POOLINGS.register("gap_gmp")
class GapGmp(Pooling):
    """GAP + GMP, ``x_c = (1/n) sum_i f_{i,c} + max_i f_{i,c}`` (Kim et al., 2020, as cited in
    GSP paper supplement §1.4 and main text §5.2.2; Psomas thesis Fig. 3.3 "GAP+max"); 0.5 is
    the ``avgmax`` of the SimPool tournament code (Psomas thesis §3.4.2).

    Args:
        scale: multiplies GAP + GMP (1.0: Proxy-Anchor's sum; 0.5: the tournament's average).
    """

    order_free = True

    def __init__(self, in_channels: int, scale: float = 1.0):
        super().__init__(in_channels)
        self.scale = float(scale)

    def forward(self, x: torch.Tensor) -> Pooled:
        local, _ = flatten_locations(x)
        return Pooled(self.scale * (local.mean(dim=1) + local.amax(dim=1)))


@POOLINGS.register("kmax")
class KMax(Pooling):
    """Global k-max pooling (ProxyNCA++ paper §3.5, Eq. 7): per channel, the mean of the ``k`` largest
    activations, ``max_h (1/k) sum_i h_i g_i`` s.t. ``sum_i h_i = k`` (Fig. 4b: smaller ``k`` is
    better on CUB).

    Args:
        k: the largest activations averaged per channel (1 = GMP, all locations = GAP).
    """

    order_free = True

    def __init__(self, in_channels: int, k: Annotated[int, AT_LEAST_1] = 4):
        super().__init__(in_channels)
        self.k = int(k)

    def forward(self, x: torch.Tensor) -> Pooled:
        local, _ = flatten_locations(x)
        return Pooled(top_k_mean(local, self.k, dim=1))


@POOLINGS.register("weldon")
class Weldon(Pooling):
    """WELDON (Durand et al., CVPR 2016, Eq. 3; GSP paper supplement §1.4): per channel, the mean
    of the ``k_max`` highest plus the mean of the ``k_min`` lowest activations,
    ``s = max_h (1/k+) sum h_i g_i + min_h (1/k-) sum h_i g_i``. WELDON's class-wise 1x1-conv
    score maps are here the local embedding after the embedder's 1x1 head.

    Args:
        k_max: the highest activations averaged per channel (positive evidence).
        k_min: the lowest activations averaged per channel (negative evidence; 0: none).
    """

    order_free = True

    def __init__(
        self,
        in_channels: int,
        k_max: Annotated[int, AT_LEAST_1] = 3,
        k_min: Annotated[int, NON_NEGATIVE] = 3,
    ):
        super().__init__(in_channels)
        self.k_max, self.k_min = int(k_max), int(k_min)

    def forward(self, x: torch.Tensor) -> Pooled:
        local, _ = flatten_locations(x)
        pooled = top_k_mean(local, self.k_max, dim=1)
        if self.k_min:
            pooled = pooled + top_k_mean(local, self.k_min, dim=1, largest=False)
        return Pooled(pooled)
