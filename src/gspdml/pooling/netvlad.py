"""NetVLAD (Arandjelovic et al., CVPR 2016)."""

from __future__ import annotations

from typing import Annotated, Optional

import torch
import torch.nn.functional as F
from torch import nn

from gspdml.pooling.base import POOLINGS, Pooled, Pooling, flatten_locations
from gspdml.pooling.functional import full_precision, wide
from gspdml.typecheck import AT_LEAST_1


@POOLINGS.register("netvlad")
class NetVLAD(Pooling):
    """NetVLAD (Arandjelovic et al. 2016, Eqs. 1-4): soft-assignment VLAD with learnable centres.

        x_i = normalize(P f_i)                                  (projection to ``dim``, optional)
        a_k(x_i) = softmax_k(w_k^T x_i + b_k)                   (Eq. 3)
        V_k = sum_i a_k(x_i) (x_i - c_k),  V_k <- V_k / ||V_k||  (Eq. 4 + intra-normalisation)
        u = [V_1; ...; V_K]                                     (``clusters * dim``)

    Output size ``clusters x dim`` (GSP paper supplement §1.4: 8x16 and 64x128). The final
    L2-normalisation is the embedder's. Centres start as random unit vectors (NetVLAD's k-means
    centres are unavailable at construction), the assignment as NetVLAD's, ``w_k = 2 alpha c_k``,
    ``b_k = -alpha ||c_k||^2``.

    Args:
        clusters: number ``K`` of learnable centres.
        dim: width of the projected local features (null: the input width, no projection).
        alpha: the soft-assignment sharpness of the initial ``w_k``, ``b_k``.
        normalize_input: L2-normalise each (projected) local feature before the assignment.
    """

    order_free = True

    def __init__(
        self,
        in_channels: int,
        clusters: Annotated[int, AT_LEAST_1] = 8,
        dim: Optional[Annotated[int, AT_LEAST_1]] = 16,
        alpha: float = 10.0,
        normalize_input: bool = True,
    ):
        super().__init__(in_channels)
        self.dim = int(dim) if dim is not None else in_channels
        self.clusters = int(clusters)
        self.normalize_input = bool(normalize_input)
        self.project = (
            nn.Linear(in_channels, self.dim, bias=False)
            if self.dim != in_channels
            else nn.Identity()
        )
        centres = F.normalize(torch.randn(self.clusters, self.dim), dim=1)
        self.centres = nn.Parameter(centres)
        self.assign = nn.Linear(self.dim, self.clusters)
        with torch.no_grad():
            self.assign.weight.copy_(2.0 * alpha * centres)
            self.assign.bias.copy_(-alpha * centres.pow(2).sum(dim=1))

    def out_channels(self) -> int:
        return self.clusters * self.dim

    def forward(self, x: torch.Tensor) -> Pooled:
        local, _ = flatten_locations(x)
        feats = self.project(local)
        with full_precision(feats):
            feats = wide(feats)
            if self.normalize_input:
                feats = F.normalize(feats, dim=-1)
            weight, bias = self.assign.weight.to(feats.dtype), self.assign.bias.to(feats.dtype)
            soft = torch.softmax(F.linear(feats, weight, bias), dim=-1)  # [B, n, K]
            mass = soft.sum(dim=1).unsqueeze(-1) * self.centres.to(feats.dtype)
            residual_sum = soft.transpose(1, 2) @ feats - mass
            vlad = F.normalize(residual_sum, dim=-1)  # [B, K, dim]
        return Pooled(vlad.flatten(1))
