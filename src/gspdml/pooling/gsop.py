"""Global second-order pooling attention (GSoP; Gao et al., CVPR 2019)."""

from __future__ import annotations

from typing import Annotated

import torch
from torch import nn

from gspdml.pooling.base import POOLINGS, Pooled, Pooling, flatten_locations
from gspdml.pooling.functional import full_precision, wide
from gspdml.typecheck import Interval


@POOLINGS.register("gsop")
class GSoP(Pooling):
    """GSoP channel attention followed by GAP (Gao et al. 2019, Sec. 3.1 and Fig. 2; GSP paper
    supplement §1.4):

    1. reduce ``Y = relu(BN(W_r X))`` to ``c' = attention_dim`` channels (1x1 conv);
    2. covariance ``Sigma = (1/n) (Y - mean Y)(Y - mean Y)^T`` (``c' x c'``, per image, float32);
    3. row-wise convolution: each row of ``Sigma`` is mapped to 4 values (a grouped
       convolution with one group per row), giving a ``4c'`` vector;
    4. ``q = sigmoid(W_e (.))`` (1x1 conv to ``C``), ``u = (1/n) sum_i q * f_i``.

    The batch norm makes training outputs batch-dependent; in eval mode they are not.

    Args:
        attention_dim: channels ``c'`` of the reduced map whose covariance drives the attention.
    """

    order_free = True

    def __init__(self, in_channels: int, attention_dim: Annotated[int, Interval(2)] = 128):
        super().__init__(in_channels)
        c = int(attention_dim)
        self.reduce = nn.Linear(in_channels, c, bias=False)
        self.bn = nn.BatchNorm1d(c)
        self.row_conv = nn.Conv1d(c, 4 * c, kernel_size=c, groups=c)
        self.expand = nn.Linear(4 * c, in_channels)

    def forward(self, x: torch.Tensor) -> Pooled:
        local, _ = flatten_locations(x)
        y = torch.relu(self.bn(self.reduce(local).transpose(1, 2)))  # [B, c', n]
        with full_precision(y):
            centred = wide(y) - wide(y).mean(dim=2, keepdim=True)
            covariance = centred @ centred.transpose(1, 2) / y.shape[2]  # [B, c', c']
        rows = self.row_conv(covariance).squeeze(-1)  # [B, 4c']
        q = torch.sigmoid(wide(self.expand(rows)))  # [B, C]
        return Pooled(q * wide(local).mean(dim=1))
