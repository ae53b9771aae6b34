"""SOLAR: second-order attention before GeM pooling (Ng et al., ECCV 2020)."""

from __future__ import annotations

import math
from typing import Annotated

import torch
from torch import nn

from gspdml.pooling.base import POOLINGS, Pooled, Pooling, flatten_locations, unflatten_weights
from gspdml.pooling.functional import full_precision, generalized_mean, wide
from gspdml.typecheck import AT_LEAST_1, POSITIVE


@POOLINGS.register("solar")
class SOLAR(Pooling):
    """Second-order (non-local) attention block followed by GeM (Ng et al. 2020, Sec. 3.1 and
    Eqs. 1-2; GSP paper supplement §1.4):

        q_i = relu(W_q f_i),  k_j = relu(W_k f_j),  v_j = W_v f_j      (1x1 convs to C/reduction)
        A = softmax_j(q_i^T k_j / sqrt(c')),   z_i = sum_j A_ij v_j,   f'_i = f_i + W_o z_i,
        u = GeM(f')   (learnable p, initial 3).

    ``weights`` = ``(1/n) sum_i A_ij``, the mean attention location ``j`` receives (a
    distribution over locations).

    Args:
        reduction: queries, keys and values have ``C / reduction`` channels.
        p: the initial power of the learnable GeM that pools the enhanced map (3).
    """

    order_free = True
    weights_are_distribution = True

    def __init__(
        self,
        in_channels: int,
        reduction: Annotated[int, AT_LEAST_1] = 2,
        p: Annotated[float, POSITIVE] = 3.0,
    ):
        super().__init__(in_channels)
        c = max(in_channels // int(reduction), 1)
        self.query, self.key, self.value = (nn.Linear(in_channels, c) for _ in range(3))
        self.out = nn.Linear(c, in_channels)
        self.p = nn.Parameter(torch.tensor(float(p)))

    def forward(self, x: torch.Tensor) -> Pooled:
        local, spatial = flatten_locations(x)
        q, k, v = torch.relu(self.query(local)), torch.relu(self.key(local)), self.value(local)
        with full_precision(q):
            scores = wide(q) @ wide(k).transpose(1, 2) / math.sqrt(q.shape[-1])
            attention = torch.softmax(scores, dim=-1)
            z = attention @ wide(v)
        enhanced = local + self.out(z)
        pooled = generalized_mean(enhanced, self.p, dim=1)
        return Pooled(pooled, weights=unflatten_weights(attention.mean(dim=1), spatial))
