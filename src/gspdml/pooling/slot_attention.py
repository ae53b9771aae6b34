"""Slot-attention pooling (Locatello et al., NeurIPS 2020; Psomas thesis Eqs. 3.29-3.32)."""

from __future__ import annotations

import math
from typing import Annotated

import torch
from torch import nn

from gspdml.pooling.base import POOLINGS, Pooled, Pooling, flatten_locations, unflatten_weights
from gspdml.pooling.functional import full_precision, wide
from gspdml.typecheck import AT_LEAST_1


@POOLINGS.register("slot")
class SlotAttention(Pooling):
    """Slot attention as a pooling (Psomas thesis §3.3.2, group 2; Locatello et al. Algorithm 1):

        K = W_K LN(X),  V = W_V LN(X)
        repeat ``iters`` times:
            Q = W_Q LN(U)
            A = eta_2(softmax over slots of K^T Q / sqrt(d) + 1e-8)   (3.29, as in the original;
                                                                        Eq. 3.29 misprinted)
            U <- GRU(V A, U);  U <- U + MLP(LN(U))                    (3.30-3.32)
        u = max over the k slots                                      (the SimPool tournament)

    The original draws the initial slots from a learned Gaussian; a retrieval embedding must be
    deterministic, so each slot has its own learned initial vector. ``weights``: the last
    iteration's attention averaged over slots (a distribution over locations).

    Args:
        slots: number ``k`` of slots (each with its own learned initial vector).
        iters: rounds of the attention-GRU update.
        hidden: hidden width of the slots' MLP.
    """

    order_free = True
    weights_are_distribution = True

    def __init__(
        self,
        in_channels: int,
        slots: Annotated[int, AT_LEAST_1] = 3,
        iters: Annotated[int, AT_LEAST_1] = 3,
        hidden: Annotated[int, AT_LEAST_1] = 128,
    ):
        super().__init__(in_channels)
        d, hidden = in_channels, max(int(hidden), in_channels)
        self.iters = int(iters)
        self.initial = nn.Parameter(torch.randn(int(slots), d) / math.sqrt(d))
        self.norm_input, self.norm_slots, self.norm_mlp = (nn.LayerNorm(d) for _ in range(3))
        self.wq, self.wk, self.wv = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.gru = nn.GRUCell(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, d))

    def forward(self, x: torch.Tensor) -> Pooled:
        tokens, spatial = flatten_locations(x)
        b, _, d = tokens.shape
        inputs = self.norm_input(tokens)
        keys, values = self.wk(inputs), self.wv(inputs)
        slots = self.initial.unsqueeze(0).expand(b, -1, -1)
        for _ in range(self.iters):
            query = self.wq(self.norm_slots(slots))
            with full_precision(tokens):
                logits = wide(keys) @ wide(query).transpose(1, 2) / math.sqrt(d)  # [B, n, k]
                attention = torch.softmax(logits, dim=-1) + 1e-8
                attention = attention / attention.sum(dim=1, keepdim=True)
                updates = attention.transpose(1, 2) @ wide(values)  # [B, k, d]
            slots = self.gru(updates.reshape(-1, d), slots.reshape(-1, d)).reshape(b, -1, d)
            slots = slots + self.mlp(self.norm_mlp(slots))
        weights = unflatten_weights(attention.mean(dim=-1), spatial)
        return Pooled(wide(slots).amax(dim=1), weights=weights)
