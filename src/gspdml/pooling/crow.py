"""CroW: cross-dimensional weighting (Kalantidis, Mellina & Osindero, ECCV-W 2016)."""

from __future__ import annotations

from typing import Annotated

import torch

from gspdml.pooling.base import POOLINGS, Pooled, Pooling, flatten_locations, unflatten_weights
from gspdml.pooling.functional import full_precision, wide
from gspdml.typecheck import POSITIVE


@POOLINGS.register("crow")
class CroW(Pooling):
    """CroW, a parameter-free, magnitude-based saliency pooling (GSP paper supplement §1.4).

    For non-negative features ``X`` (``C x n``), Kalantidis et al. (Eqs. 3-5):

    * spatial weights ``S = (S' / ||S'||_a)^(1/b)`` with ``S'_i = sum_c X_{c,i}`` (``a = b = 2``);
    * channel weights ``Omega_c = log(sum_h Q_h / (eps + Q_c))``, ``Q_c`` the fraction of
      non-zero entries of channel ``c`` (sparser channels weigh more; not differentiable);
    * ``u_c = Omega_c sum_i S_i X_{c,i}``.

    CroW assumes post-ReLU features; the local embedding after the 1x1 head is signed, so
    ``rectify: true`` (default) applies ``max(X, 0)`` first. ``S`` is returned as ``weights``
    (not a distribution).

    Args:
        a: the norm ``||.||_a`` that normalises the spatial weights (2).
        b: the power ``1/b`` of the normalised spatial weights (2).
        rectify: apply ``max(X, 0)`` first (CroW assumes post-ReLU features).
        eps: the ``eps`` of the channel weights' denominator.
    """

    order_free = True

    def __init__(
        self,
        in_channels: int,
        a: Annotated[float, POSITIVE] = 2.0,
        b: Annotated[float, POSITIVE] = 2.0,
        rectify: bool = True,
        eps: float = 1e-6,
    ):
        super().__init__(in_channels)
        self.a, self.b, self.rectify, self.eps = float(a), float(b), bool(rectify), float(eps)

    def forward(self, x: torch.Tensor) -> Pooled:
        local, spatial = flatten_locations(x)
        with full_precision(local):
            feats = wide(local).relu() if self.rectify else wide(local)
            if not self.rectify and bool((feats < 0).any()):
                raise ValueError("crow pooling needs non-negative features; set rectify: true")
            aggregated = feats.sum(dim=2)  # S' [B, n]
            norm = aggregated.norm(p=self.a, dim=1, keepdim=True).clamp_min(self.eps)
            # clamped above 0: the root (b = 2) has an infinite derivative at a location whose
            # features are all zero, which made training diverge
            spatial_w = (aggregated / norm).clamp_min(self.eps**2).pow(1.0 / self.b)
            nonzero = (feats > 0).to(feats.dtype).mean(dim=1)  # Q [B, C]
            total = nonzero.sum(dim=1, keepdim=True)
            channel_w = torch.log((total + self.eps) / (nonzero + self.eps))
            pooled = channel_w * (feats * spatial_w.unsqueeze(-1)).sum(dim=1)
        return Pooled(pooled, weights=unflatten_weights(spatial_w, spatial))
