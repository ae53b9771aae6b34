"""Optimal-transport pooling (OTK / OTP; Mialon et al., ICLR 2021)."""

from __future__ import annotations

import math
from typing import Annotated, Optional

import torch
import torch.nn.functional as F
from torch import nn

from gspdml.pooling.base import POOLINGS, Pooled, Pooling, flatten_locations
from gspdml.pooling.functional import full_precision, wide
from gspdml.typecheck import AT_LEAST_1, POSITIVE


def sinkhorn_log(cost: torch.Tensor, eps: float, iters: int) -> torch.Tensor:
    """Entropic OT plan with uniform marginals, ``P = argmin <P, C> - eps H(P)`` over
    ``{P >= 0 : P 1_k = 1_n / n, P^T 1_n = 1_k / k}`` (Psomas thesis Eqs. 3.21-3.22), by ``iters``
    log-domain Sinkhorn rounds (column then row scaling, so rows are exact on return).
    ``cost`` is ``[B, n, k]``; returns ``P`` ``[B, n, k]``."""
    n, k = cost.shape[-2:]
    log_kernel = -cost / eps
    log_a, log_b = -math.log(n), -math.log(k)
    f = torch.zeros_like(cost[..., :, 0])
    g = torch.zeros_like(cost[..., 0, :])
    for _ in range(iters):
        g = log_b - torch.logsumexp(log_kernel + f.unsqueeze(-1), dim=-2)
        f = log_a - torch.logsumexp(log_kernel + g.unsqueeze(-2), dim=-1)
    return torch.exp(log_kernel + f.unsqueeze(-1) + g.unsqueeze(-2))


@POOLINGS.register("otp")
class OTP(Pooling):
    """Optimal-transport kernel embedding (Mialon et al. 2021; Psomas thesis Eqs. 3.21-3.23;
    GSP paper supplement §1.4 "OTP"):

        psi_i = P f_i                      (learned linear projection to ``dim``; Mialon's
                                            Nystrom kernel map is replaced by it, as in the
                                            GSP authors' comparison)
        C_ij = ||psi_i / ||psi_i|| - z_j / ||z_j|| ||^2      (``k = prototypes`` learnable references z)
        T = SINKHORN(exp(-C / eps))        (marginals 1_n/n and 1_k/k)
        u_j = k sum_i T_ij psi_i,   u = [u_1; ...; u_k]   (``prototypes * dim``)

    Costs use unit vectors, so ``eps`` has a fixed scale; the factor ``k`` makes every ``u_j`` a
    convex combination of the local features. Sinkhorn runs in float32, log domain.

    Args:
        prototypes: number ``k`` of learnable references ``z``.
        dim: width of the learned projection ``P`` (null: the input width, no projection).
        eps: the entropic regularisation ``eps`` of Sinkhorn (costs lie in [0, 4]).
        iters: Sinkhorn iterations.
    """

    order_free = True

    def __init__(
        self,
        in_channels: int,
        prototypes: Annotated[int, AT_LEAST_1] = 8,
        dim: Optional[Annotated[int, AT_LEAST_1]] = 16,
        eps: Annotated[float, POSITIVE] = 0.1,
        iters: Annotated[int, AT_LEAST_1] = 10,
    ):
        super().__init__(in_channels)
        self.dim = int(dim) if dim is not None else in_channels
        self.prototypes, self.eps, self.iters = int(prototypes), float(eps), int(iters)
        self.project = (
            nn.Linear(in_channels, self.dim, bias=False)
            if self.dim != in_channels
            else nn.Identity()
        )
        self.references = nn.Parameter(F.normalize(torch.randn(self.prototypes, self.dim), dim=1))

    def out_channels(self) -> int:
        return self.prototypes * self.dim

    def transport_plan(self, psi: torch.Tensor) -> torch.Tensor:
        """The plan ``T`` ``[B, n, k]`` between the projected local features and the references."""
        with full_precision(psi):
            x = F.normalize(wide(psi), dim=-1)
            z = F.normalize(self.references.to(x.dtype), dim=-1)
            cost = (2.0 - 2.0 * x @ z.t()).clamp_min(0)
            return sinkhorn_log(cost, self.eps, self.iters)

    def forward(self, x: torch.Tensor) -> Pooled:
        local, _ = flatten_locations(x)
        psi = self.project(local)
        plan = self.transport_plan(psi)
        with full_precision(psi):
            pooled = self.prototypes * plan.transpose(1, 2) @ wide(psi)  # [B, k, dim]
        return Pooled(pooled.flatten(1))
