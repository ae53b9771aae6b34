"""CBAM as a pooling layer (Woo et al., ECCV 2018; Psomas thesis §3.3.2, Eqs. 3.37-3.43)."""

from __future__ import annotations

from typing import Annotated

import torch
from torch import nn

from gspdml.pooling.base import POOLINGS, Pooled, Pooling
from gspdml.pooling.functional import require_map, wide
from gspdml.typecheck import AT_LEAST_1, ODD_SIZE


@POOLINGS.register("cbam")
class CBAM(Pooling):
    """Convolutional block attention followed by GAP (Psomas thesis Eqs. 3.37-3.43):

    * channel attention ``q = sigmoid(MLP(GAP(X)) + MLP(GMP(X)))`` (Woo et al. Eq. 2; the
      shared MLP has a bottleneck ``C / reduction``), ``V = diag(q) X``;
    * spatial attention ``a = sigmoid(conv_k([mean_c V; max_c V]))`` (``k x k``, Eq. 3.41);
    * ``u = (1/n) V a`` (Eq. 3.43).

    Psomas thesis Eq. 3.38 averages the two MLP outputs; the original sums them, as here. ``a``
    (in (0, 1), not a distribution) is returned as ``weights``. Needs a feature map.

    Args:
        reduction: the channel MLP's bottleneck is ``C / reduction`` channels (16, Woo et al.).
        kernel_size: side ``k`` of the spatial attention's convolution (7, Woo et al.).
    """

    order_free = False
    accepts_tokens = False

    def __init__(
        self,
        in_channels: int,
        reduction: Annotated[int, AT_LEAST_1] = 16,
        kernel_size: Annotated[int, ODD_SIZE] = 7,
    ):
        super().__init__(in_channels)
        hidden = max(in_channels // int(reduction), 1)
        self.mlp = nn.Sequential(
            nn.Linear(in_channels, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, in_channels)
        )
        self.spatial = nn.Conv2d(2, 1, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> Pooled:
        require_map(x, "cbam")
        q = torch.sigmoid(self.mlp(x.mean(dim=(2, 3))) + self.mlp(x.amax(dim=(2, 3))))
        v = x * q[:, :, None, None]
        descriptor = torch.stack([v.mean(dim=1), v.amax(dim=1)], dim=1)
        a = torch.sigmoid(wide(self.spatial(descriptor))).squeeze(1)  # [B, H, W]
        pooled = (wide(v) * a.unsqueeze(1)).mean(dim=(2, 3))
        return Pooled(pooled, weights=a)
