"""Generalized max pooling (GeMax; Murray & Perronnin, CVPR 2014; Murray et al., TPAMI 2016)."""

from __future__ import annotations

from typing import Annotated

import torch

from gspdml.pooling.base import POOLINGS, Pooled, Pooling, flatten_locations, unflatten_weights
from gspdml.pooling.functional import full_precision, wide
from gspdml.typecheck import POSITIVE


@POOLINGS.register("gemax")
class GeneralizedMax(Pooling):
    """Generalized max pooling: the pooled vector has the same similarity (one) with every local
    feature, so that frequent features do not dominate (Murray & Perronnin 2014, Eq. 7):

        xi = argmin_xi ||Phi^T xi - 1_n||^2 + lambda ||xi||^2 = Phi (Phi^T Phi + lambda I_n)^{-1} 1_n,

    with ``Phi = [f_1 .. f_n]`` (``C x n``): the dual form's location weights ``alpha = (Phi^T Phi
    + lambda I)^{-1} 1_n`` (signed) are returned as ``weights``. ``lam`` is 1.0 in the GSP
    authors' comparison (GSP paper supplement §1.4). Solved in float32 (float64 for float64 input).

    Args:
        lam: the ridge weight ``lambda`` of the least-squares problem (> 0).
    """

    order_free = True

    def __init__(self, in_channels: int, lam: Annotated[float, POSITIVE] = 1.0):
        super().__init__(in_channels)
        self.lam = float(lam)

    def forward(self, x: torch.Tensor) -> Pooled:
        local, spatial = flatten_locations(x)
        with full_precision(local):
            phi = wide(local)  # [B, n, C], rows are the f_i
            n = phi.shape[1]
            eye = torch.eye(n, device=phi.device, dtype=phi.dtype)
            gram = phi @ phi.transpose(1, 2) + self.lam * eye
            ones = torch.ones(phi.shape[0], n, 1, device=phi.device, dtype=phi.dtype)
            # Cholesky (the Gram matrix is SPD for lam > 0); the _ex form returns NaN instead of
            # raising on non-finite features, so a diverging run stops with the trainer's message
            factor, _ = torch.linalg.cholesky_ex(gram)
            alpha = torch.cholesky_solve(ones, factor)  # [B, n, 1]
            pooled = (phi * alpha).sum(dim=1)
        return Pooled(pooled, weights=unflatten_weights(alpha.squeeze(-1), spatial))
