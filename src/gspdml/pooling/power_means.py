"""Power-mean poolings with a learnable exponent: GeM (GeMean) and log-sum-exp."""

from __future__ import annotations

import math
from typing import Annotated

import torch
from torch import nn

from gspdml.pooling.base import POOLINGS, Pooled, Pooling, flatten_locations
from gspdml.pooling.functional import full_precision, generalized_mean, wide
from gspdml.typecheck import POSITIVE


@POOLINGS.register("gem")
class GeM(Pooling):
    """Generalized-mean pooling (GeMean; Radenovic et al., TPAMI 2018; Psomas thesis Eq. 3.13):
    ``u_c = ((1/n) sum_i max(f_{i,c}, eps)^p)^(1/p)``. ``p = 1`` is GAP (on non-negative
    features) and ``p -> inf`` tends to GMP (Eq. 3.12). Follows Eq. 3.13 with the ``1/n`` factor
    (the released code's ``LPPool2d`` omits it).

    Args:
        p: the initial power ``p`` (3, Radenovic et al.; 1 = GAP).
        learn_p: train ``p`` with the network (false: keep it fixed).
        eps: activations are clamped to at least ``eps`` before the power.
    """

    order_free = True

    def __init__(
        self,
        in_channels: int,
        p: Annotated[float, POSITIVE] = 3.0,
        learn_p: bool = True,
        eps: float = 1e-6,
    ):
        super().__init__(in_channels)
        self.p = nn.Parameter(torch.tensor(float(p)), requires_grad=bool(learn_p))
        self.eps = float(eps)

    def forward(self, x: torch.Tensor) -> Pooled:
        local, _ = flatten_locations(x)
        return Pooled(generalized_mean(local, self.p, dim=1, eps=self.eps))


@POOLINGS.register("lse")
class LSE(Pooling):
    """Log-sum-exp pooling (Psomas thesis Eq. 3.15): ``u_c = (1/r) log((1/n) sum_i exp(r f_{i,c}))``
    with a learnable scalar ``r`` (initial 10, Psomas thesis §3.3.2), computed stably as
    ``(logsumexp(r f) - log n) / r`` in float32 (float64 for float64 input).

    Args:
        r: the initial sharpness ``r`` (10; r -> 0 is GAP, r -> inf GMP).
        learn_r: train ``r`` with the network (false: keep it fixed).
    """

    order_free = True

    def __init__(
        self, in_channels: int, r: Annotated[float, POSITIVE] = 10.0, learn_r: bool = True
    ):
        super().__init__(in_channels)
        self.r = nn.Parameter(torch.tensor(float(r)), requires_grad=bool(learn_r))

    def forward(self, x: torch.Tensor) -> Pooled:
        local, _ = flatten_locations(x)
        with full_precision(local):
            values = wide(local)
            r = self.r.to(values.dtype)
            pooled = (torch.logsumexp(r * values, dim=1) - math.log(local.shape[1])) / r
        return Pooled(pooled)
