"""The interchangeable parts of the generic attention-pooling framework (Psomas thesis §3.3.1,
Algorithm 1), as SimPool's ablation (thesis §3.4.4, Table 3.12) swaps them.

Shapes: locations ``X`` as rows ``[B, p, d]``, pooled vectors ``U`` as rows ``[B, k, d]``; with
``m`` heads, keys ``[B, m, p, d/m]`` and queries ``[B, m, k, d/m]``. Notation of the thesis:
``eta_1`` / ``eta_2`` normalise rows / columns to sum 1, ``sigma_i = eta_i o exp`` (softmax), and
the similarity matrix ``S`` is ``p x k`` (locations x pooled vectors).

- Pairwise similarity ``s(x, y)`` (Algorithm 1, line 9): ``dot`` ``x^T y``; ``neg_sq_euclidean``
  ``-||x - y||^2`` (that of k-means, §3.3.2); ``cosine`` ``x^T y / (||x|| ||y||)``.
- Attention ``h(S)`` (Eq. 3.3), on ``S / sqrt(d/m)``: ``softmax`` ``sigma_2`` over the locations
  for each pooled vector (SimPool, Eq. 3.65); ``slot`` ``eta_2(sigma_1(.))``, a softmax over the
  pooled vectors at each location, then each column normalised over the locations (Locatello et
  al. 2020; with ``k = 1`` it attends uniformly).
- Initialisation ``U^0 = INIT(X)`` (Algorithm 1, line 3): ``gap`` ``X 1_p / p`` (Eq. 3.62);
  ``diag`` ``X diag(X^T X) / tr(X^T X)`` (locations weighted by ``||x_i||^2``, Table 3.12);
  ``kmeans`` the ``k`` centroids of Lloyd's k-means (§3.3.2, Eq. 3.61 for ``k = 1``); ``learned``
  a parameter ``U in R^{d x k}``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

SIMILARITIES = ("dot", "neg_sq_euclidean", "cosine")
ATTENTIONS = ("softmax", "slot")
INITIALISATIONS = ("gap", "diag", "kmeans", "learned")


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """``[B, n, d] -> [B, m, n, d/m]``: head ``h`` holds channels ``h d/m .. (h+1) d/m - 1``."""
    b, n, d = x.shape
    return x.reshape(b, n, heads, d // heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``[B, m, n, d/m] -> [B, n, d]``, the inverse of :func:`split_heads`."""
    b, m, n, dh = x.shape
    return x.transpose(1, 2).reshape(b, n, m * dh)


def similarity(keys: torch.Tensor, queries: torch.Tensor, kind: str) -> torch.Tensor:
    """``S [B, m, p, k]`` with ``s_ij = s(k_i, q_j)`` for keys ``[B, m, p, e]`` and queries
    ``[B, m, k, e]`` (module docstring)."""
    if kind == "cosine":
        keys, queries = F.normalize(keys, dim=-1), F.normalize(queries, dim=-1)
    dots = keys @ queries.transpose(-1, -2)
    if kind != "neg_sq_euclidean":
        return dots
    squared_keys = keys.pow(2).sum(-1, keepdim=True)  # [B, m, p, 1]
    squared_queries = queries.pow(2).sum(-1).unsqueeze(-2)  # [B, m, 1, k]
    return 2 * dots - squared_keys - squared_queries


def attention_matrix(scores: torch.Tensor, kind: str) -> torch.Tensor:
    """``A = h(S / sqrt(e))`` ``[B, m, p, k]`` of scores ``S [B, m, p, k]`` already divided by
    ``sqrt(e)``; every column (pooled vector) sums to 1 over the ``p`` locations. Normalised
    along the last dimension of the ``[B, m, k, p]`` view, the layout of the single-vector
    softmax of SimPool's released code (the same kernel, so the same bits)."""
    by_vector = scores.transpose(-1, -2)  # [B, m, k, p]
    if kind == "slot":
        by_vector = torch.softmax(by_vector, dim=2)
        return (by_vector / by_vector.sum(dim=-1, keepdim=True)).transpose(-1, -2)
    return torch.softmax(by_vector, dim=-1).transpose(-1, -2)


def scaled_similarity(keys: torch.Tensor, queries: torch.Tensor, kind: str) -> torch.Tensor:
    """``S / sqrt(e)`` with ``e`` the per-head dimension (Eq. 3.65; ``sqrt(d/m)`` with heads)."""
    return similarity(keys, queries, kind) / math.sqrt(keys.shape[-1])


def squared_norm_average(tokens: torch.Tensor) -> torch.Tensor:
    """``U^0 = X diag(X^T X) / tr(X^T X)`` ``[B, 1, d]``: the locations averaged with weights
    ``||x_i||^2`` (Table 3.12's ``diag(X^T X)`` initialisation)."""
    weights = tokens.pow(2).sum(-1, keepdim=True)  # [B, p, 1]
    return (weights * tokens).sum(1, keepdim=True) / weights.sum(1, keepdim=True)


def kmeans_centroids(tokens: torch.Tensor, k: int, steps: int) -> torch.Tensor:
    """The ``k`` centroids ``[B, k, d]`` of each sample's locations after ``steps`` Lloyd
    iterations (nearest centroid, the first on ties; a centroid without locations stays), from
    the locations ``floor(j p / k)``, ``j = 0..k-1``. The assignments carry no gradient."""
    p = tokens.shape[1]
    if k > p:
        raise ValueError(f"simpool: k={k} pooled vectors need at least k locations, got p={p}")
    centroids = tokens[:, torch.arange(k, device=tokens.device) * p // k]
    for _ in range(steps):
        with torch.no_grad():
            nearest = torch.cdist(tokens, centroids).argmin(dim=-1)  # [B, p]
            members = F.one_hot(nearest, k).to(tokens.dtype)  # [B, p, k]
        counts = members.sum(1).unsqueeze(-1)  # [B, k, 1]
        means = members.transpose(1, 2) @ tokens / counts.clamp(min=1)
        centroids = torch.where(counts > 0, means, centroids)
    return centroids
