"""HOW / trainable SMK aggregation (Tolias, Jenicek & Chum, ECCV 2020)."""

from __future__ import annotations

from typing import Annotated, Optional

import torch
import torch.nn.functional as F
from torch import nn

from gspdml.pooling.base import POOLINGS, Pooled, Pooling
from gspdml.pooling.functional import full_precision, require_map, wide
from gspdml.typecheck import AT_LEAST_1, ODD_SIZE


@POOLINGS.register("how", "t_smk")
class HOW(Pooling):
    """HOW's training-time aggregation (Psomas thesis Eqs. 3.17-3.20; Tolias et al. 2020,
    the "trainable SMK" (T-SMK) of the GSP paper supplement §1.4):

        a_j = ||x_j||_2                          (attention = feature norm; Eq. 3.17 prints squared norms)
        V = FC(avg_3(X))                         (3x3 local average, stride 1, no padding counted)
        z = V a = sum_j a_j v_j,   u = z / ||z|| (Eq. 3.20, l2 normalisation)

    HOW fits ``FC`` (centring, PCA, whitening) on training features; here it is a learned 1x1
    convolution (with bias), trained end to end. ``weights`` = ``a / sum(a)``. Needs a feature map.

    Args:
        dim: output channels of the learned 1x1 projection (null: the input width).
        kernel_size: side of the local average before the projection (3 in HOW).
    """

    order_free = False
    accepts_tokens = False
    weights_are_distribution = True

    def __init__(
        self,
        in_channels: int,
        dim: Optional[Annotated[int, AT_LEAST_1]] = None,
        kernel_size: Annotated[int, ODD_SIZE] = 3,
    ):
        super().__init__(in_channels)
        self.dim = int(dim) if dim is not None else in_channels
        self.kernel_size = int(kernel_size)
        self.fc = nn.Conv2d(in_channels, self.dim, kernel_size=1)

    def out_channels(self) -> int:
        return self.dim

    def forward(self, x: torch.Tensor) -> Pooled:
        require_map(x, "how")
        k = self.kernel_size
        smoothed = F.avg_pool2d(x, k, stride=1, padding=k // 2, count_include_pad=False)
        values = self.fc(smoothed)
        with full_precision(x):
            attention = wide(x).pow(2).sum(dim=1).add(1e-10).sqrt()  # [B, H, W]
            z = (wide(values) * attention.unsqueeze(1)).sum(dim=(2, 3))
            pooled = F.normalize(z, dim=1, eps=1e-6)
            weights = attention / attention.sum(dim=(1, 2), keepdim=True)
        return Pooled(pooled, weights=weights)
