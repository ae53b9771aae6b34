"""Message passing over the mini-batch: the network of LIBC (Seidenschwarz, Elezi & Leal-Taixé,
ICML 2021: Fig. 1 and the method section; the layer as the authors' ``net/gnn_base.py`` defines it).

The ``B`` embeddings are the nodes of a fully connected graph (self-loops included). A layer is
a post-norm transformer encoder block over the batch (the authors' ``DotAttentionLayer``)::

    s^h_ij = (W^h_q x_i)^T (W^h_k x_j) / sqrt(d / H)                      head h = 1..H
    a^h_ij = exp(s^h_ij) / (1 + sum_j' exp(s^h_ij'))
    m_i    = W_o [ sum_j a^1_ij W^1_v x_j ; ... ; sum_j a^H_ij W^H_v x_j ]
    x'_i   = LayerNorm( x_i + Dropout(m_i) )
    x''_i  = LayerNorm( x'_i + Dropout(W_2 Dropout(ReLU(W_1 x'_i))) )      W_1: d -> 4d

The ``1 +`` is the authors' soft-max (``net/utils.py``: torch_geometric's ``softmax`` with
``margin = 0``), a null sender with score 0 (found by ``tests/parity/test_libc_step.py``;
docs/paper-vs-code.md). Dropout also acts on ``a``. A layer is permutation equivariant over the
batch. The network maps the embeddings by a linear ``d -> d`` (the authors' ``dim_red``), then
applies ``L`` layers and returns every layer's output.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class BatchAttention(nn.Module):
    """Multi-head scaled dot-product attention of every embedding of the batch to every other
    (and itself): the message ``m_i`` of the module docstring. Query, key, value and output maps
    are biased linear layers with Xavier-uniform weights and zero biases (the authors' init)."""

    def __init__(self, dim: int, num_heads: int, dropout: float = 0.1):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"the width {dim} is not divisible by {num_heads} heads")
        self.num_heads = num_heads
        self.query, self.key, self.value, self.out = (nn.Linear(dim, dim) for _ in range(4))
        for layer in (self.query, self.key, self.value, self.out):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
        self.dropout = nn.Dropout(dropout)

    def heads(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, d] -> [H, B, d / H]``: each head reads its own slice of the channels."""
        return x.view(x.shape[0], self.num_heads, -1).transpose(0, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.heads(self.query(x)), self.heads(self.key(x)), self.heads(self.value(x))
        scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])  # [H, receiver i, sender j]
        # the soft-max with a null sender of score 0 (module docstring)
        null = scores.new_zeros(*scores.shape[:-1], 1)
        weights = self.dropout(torch.softmax(torch.cat([scores, null], dim=-1), dim=-1)[..., :-1])
        messages = (weights @ v).transpose(0, 1).reshape(x.shape)  # heads concatenated
        out: torch.Tensor = self.out(messages)
        return out


class MessagePassingLayer(nn.Module):
    """One layer of the module docstring: attention, residual and LayerNorm, then the MLP
    (``d -> 4d -> d``, ReLU), residual and LayerNorm."""

    def __init__(self, dim: int, num_heads: int, dropout: float = 0.1, hidden_factor: int = 4):
        super().__init__()
        self.attention = BatchAttention(dim, num_heads, dropout)
        self.attention_dropout = nn.Dropout(dropout)
        self.norm1 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, hidden_factor * dim),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden_factor * dim, dim),
            nn.Dropout(dropout),
        )
        self.norm2 = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attention_dropout(self.attention(x)))
        out: torch.Tensor = self.norm2(x + self.mlp(x))
        return out


class MessagePassingNetwork(nn.Module):
    """A linear map ``d -> d`` and ``num_layers`` :class:`MessagePassingLayer`; ``forward``
    returns the output of every layer (``[B, d]`` each), the last one being the refined
    embeddings."""

    def __init__(self, dim: int, num_layers: int = 1, num_heads: int = 2, dropout: float = 0.1):
        super().__init__()
        self.input = nn.Linear(dim, dim)
        self.layers = nn.ModuleList(
            MessagePassingLayer(dim, num_heads, dropout) for _ in range(num_layers)
        )

    def forward(self, embeddings: torch.Tensor) -> list[torch.Tensor]:
        x, outputs = self.input(embeddings), []
        for layer in self.layers:
            x = layer(x)
            outputs.append(x)
        return outputs
