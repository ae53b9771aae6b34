"""CaiT-style class-attention pooling (Touvron et al., ICCV 2021; Psomas thesis §3.3.2, Eqs. 3.58-3.59)."""

from __future__ import annotations

import math
from typing import Annotated

import torch
from torch import nn

from gspdml.pooling.base import POOLINGS, Pooled, Pooling, flatten_locations, unflatten_weights
from gspdml.pooling.functional import full_precision, require, wide
from gspdml.typecheck import AT_LEAST_1, POSITIVE


class ClassAttentionBlock(nn.Module):
    """One class-attention block of CaiT (Touvron et al. 2021, Sec. 3.2): only the class token
    queries, keys and values come from ``LN([cls; X])``,

        cls <- cls + lambda_1 * W_o MHA(q = W_q LN(cls), K = W_k LN(z), V = W_v LN(z))
        cls <- cls + lambda_2 * MLP(LN(cls))        (GELU, ratio 4; LayerScale lambda)
    """

    def __init__(self, dim: int, heads: int, mlp_ratio: float, layer_scale_init: float):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.wq, self.wk, self.wv = (nn.Linear(dim, dim) for _ in range(3))
        self.proj = nn.Linear(dim, dim)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
        self.scale1 = nn.Parameter(torch.full((dim,), float(layer_scale_init)))
        self.scale2 = nn.Parameter(torch.full((dim,), float(layer_scale_init)))

    def forward(self, cls: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, n, d = tokens.shape
        h = self.heads
        z = self.norm1(torch.cat([cls, tokens], dim=1))  # [B, 1 + n, d]
        q = self.wq(z[:, :1]).reshape(b, 1, h, d // h).transpose(1, 2)  # [B, h, 1, d/h]
        k = self.wk(z).reshape(b, n + 1, h, d // h).transpose(1, 2)
        v = self.wv(z).reshape(b, n + 1, h, d // h).transpose(1, 2)
        with full_precision(tokens):
            scores = wide(q) @ wide(k).transpose(-1, -2) / math.sqrt(d // h)
            attention = torch.softmax(scores, dim=-1)
            mixed = (attention @ wide(v)).transpose(1, 2).reshape(b, 1, d)
        cls = cls + self.scale1 * self.proj(mixed)
        cls = cls + self.scale2 * self.mlp(self.norm2(cls))
        return cls, attention.squeeze(2)  # [B, 1, d], [B, h, 1 + n]


@POOLINGS.register("class_attention")
class ClassAttention(Pooling):
    """Class-attention pooling: a learned class token cross-attends to the fixed local features
    for ``blocks`` CaiT class-attention blocks, then a final LayerNorm (Psomas thesis §3.3.2, group 4; the
    tournament's ``CAPooling``: 4 heads, 1 block, LayerScale 1e-5, MLP ratio 4, Psomas thesis
    §3.4.2). The local features are not updated (``phi_X = id``). ``weights`` = the last block's
    class-token attention on the locations, averaged over heads and renormalised to sum to one
    (the class token also attends to itself).

    Args:
        heads: attention heads of each block (4 in the tournament).
        blocks: class-attention blocks (1 in the tournament).
        mlp_ratio: hidden width of each block's MLP, in multiples of the channels (4).
        layer_scale_init: initial LayerScale of the blocks' residual branches (1e-5).
    """

    order_free = True
    weights_are_distribution = True

    def __init__(
        self,
        in_channels: int,
        heads: int = 4,
        blocks: Annotated[int, AT_LEAST_1] = 1,
        mlp_ratio: Annotated[float, POSITIVE] = 4.0,
        layer_scale_init: float = 1e-5,
    ):
        super().__init__(in_channels)
        require(
            heads >= 1 and in_channels % heads == 0,
            "heads",
            f"must divide the input width {in_channels}, got {heads!r}",
        )
        self.cls = nn.Parameter(torch.empty(1, 1, in_channels))
        nn.init.trunc_normal_(self.cls, std=0.02)
        self.blocks = nn.ModuleList(
            ClassAttentionBlock(in_channels, int(heads), float(mlp_ratio), layer_scale_init)
            for _ in range(int(blocks))
        )
        self.norm = nn.LayerNorm(in_channels, eps=1e-6)

    def forward(self, x: torch.Tensor) -> Pooled:
        tokens, spatial = flatten_locations(x)
        cls = self.cls.expand(tokens.shape[0], -1, -1)
        for block in self.blocks:
            cls, attention = block(cls, tokens)
        on_locations = attention[:, :, 1:].mean(dim=1)
        weights = on_locations / on_locations.sum(dim=1, keepdim=True)
        return Pooled(wide(self.norm(cls.squeeze(1))), weights=unflatten_weights(weights, spatial))
