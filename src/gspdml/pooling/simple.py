"""Global average and global max pooling, the two baselines every paper compares with."""

from __future__ import annotations

import torch

from gspdml.pooling.base import POOLINGS, Pooled, Pooling, flatten_locations


@POOLINGS.register("gap")
class GAP(Pooling):
    """Global average pooling, ``x = (1/n) sum_i f_i`` (Gürbüz thesis Eq. 5.1.2)."""

    order_free = True

    def forward(self, x: torch.Tensor) -> Pooled:
        local, _ = flatten_locations(x)
        return Pooled(local.mean(dim=1))


@POOLINGS.register("gmp")
class GMP(Pooling):
    """Global max pooling, ``x_c = max_i f_{i,c}`` per channel."""

    order_free = True

    def forward(self, x: torch.Tensor) -> Pooled:
        local, _ = flatten_locations(x)
        return Pooled(local.amax(dim=1))
